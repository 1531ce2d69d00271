"""Shared fixtures: the catalogue, and loopback sandboxes the tests start and stop."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import mcp.client.stdio  # noqa: F401  (see below)
import pytest

from realprobe import Catalog, Profile, default_catalog, sandbox_running

# The SDK's stdio client takes `errlog=sys.stderr` as a default bound when its module first
# loads. Loaded here, before any test swaps sys.stderr (click's CliRunner puts a stream without
# a file descriptor there), it keeps the real one; loaded first inside such a test, every later
# stdio server in this worker would fail to start (`fileno`).

#: sample projects run by tests in a subprocess, never collected here
collect_ignore = ["data"]


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return default_catalog()


SandboxFactory = Callable[..., str]


@pytest.fixture
def sandbox_factory(catalog: Catalog) -> Iterator[SandboxFactory]:
    """`start(profile="calm", seed=0, latency_scale=0.0) -> url`; all stopped at teardown."""
    with ExitStack() as stack:

        def start(
            profile: str | Profile = "calm", seed: int = 0, latency_scale: float = 0.0
        ) -> str:
            running = sandbox_running(profile, seed=seed, latency_scale=latency_scale,
                                      catalog=catalog)
            return stack.enter_context(running)

        yield start


@pytest.fixture
def calm_sandbox(sandbox_factory: SandboxFactory) -> str:
    return sandbox_factory("calm")


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any connection beyond loopback (documentation examples run offline)."""
    real_connect = socket.socket.connect

    def guard(self: socket.socket, address: object) -> object:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"an offline example tried to reach {address!r}")
        return real_connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", guard)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any attempt to open a socket (for replay and simulate tests)."""

    def guard(*args: object, **kwargs: object) -> None:
        raise AssertionError("a socket was opened in a test that must stay offline")

    monkeypatch.setattr(socket.socket, "connect", guard)
    monkeypatch.setattr(socket.socket, "connect_ex", guard)
    monkeypatch.setattr(socket, "create_connection", guard)
