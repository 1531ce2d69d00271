"""Shared fixtures: the catalogue, and loopback sandboxes the tests start and stop."""

from __future__ import annotations

import errno
import ipaddress
import os
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

# Every Ray node the tests start is local: Ray reads its switch once, when first imported, so a
# test that joins a running node first must not leave a Ray that would listen beyond loopback.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

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


def _beyond_loopback(address: object) -> bool:
    """Whether a connect address is an IP or name other than this machine's loopback (a
    Unix socket path is not)."""
    if not isinstance(address, tuple) or not address or not isinstance(address[0], str):
        return False
    host = address[0].split("%")[0]
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a name that was not resolved first


@pytest.fixture(autouse=True)
def _loopback_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Every test talks to loopback servers it starts itself: a connection anywhere else
    (in this process) is refused at once as an unreachable network, as on CI, and fails the
    test at teardown, naming the address."""
    tried: list[object] = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self: socket.socket, address: object) -> object:
        if _beyond_loopback(address):
            tried.append(address)
            raise OSError(errno.ENETUNREACH, f"tests stay on loopback: {address!r}")
        return real_connect(self, address)  # type: ignore[arg-type]

    def connect_ex(self: socket.socket, address: object) -> int:
        if _beyond_loopback(address):
            tried.append(address)
            return errno.ENETUNREACH
        return real_connect_ex(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield tried
    assert not tried, f"the test reached beyond loopback: {tried[:3]}"


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
