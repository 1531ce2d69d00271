"""`--sandbox URL` that is not a realprobe sandbox: the client waits for a sandbox's word
past the caller's deadline only once the server there has said it is one. Against a silent
loopback server, `call --timeout 2`, the async client and the synchronous client end at
their deadline with TIMEOUT (the stored latency bounded by it); a real sandbox identifies
itself (its `/_health`, its marks) and its callers keep the grace.

For the clients the grace and the read timeout are made 600 s, so a call that wrongly waits
the grace is told apart from one that does not by minutes, never by a margin on a loaded
machine: each call runs on a thread given 120 s."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cli_runner import invoke
from peer_sockets import listener

import realprobe
from realprobe.adapters.http import Fetched, FetchFailure
from realprobe.http import client as http_client
from realprobe.http.transports import IDENTITIES

GRACE = 600.0
DEADLINE = 2.0


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A loopback server that accepts and never answers."""
    with listener() as url:
        yield url


def _cli(url: str) -> dict[str, Any]:
    res = invoke(["call", "catfact_fact", "--sandbox", url,
                  "--timeout", f"{DEADLINE:g}", "--json"])
    out: dict[str, Any] = json.loads(res.output)
    return {"code": out["error"]["code"] if out["error"] else "ok",
            "latency_s": out["latency_ms"] / 1000.0}


#: a client that would wait the whole grace if it were granted (no read timeout cuts it)
PATIENT = realprobe.ClientConfig(read_timeout_s=GRACE, deadline_s=DEADLINE)
FACT = "https://catfact.ninja/fact"


def _outcome(got: Fetched | FetchFailure) -> dict[str, Any]:
    if isinstance(got, FetchFailure):
        return {"code": got.code.value, "latency_s": got.elapsed_s}
    return {"code": "ok" if got.status == 200 else got.status, "latency_s": got.elapsed_s}


def _async(url: str) -> dict[str, Any]:
    async def go() -> Fetched | FetchFailure:
        opts = realprobe.TransportOptions(sandbox=url)
        async with realprobe.make_client(realprobe.default_catalog(), opts,
                                         config=PATIENT) as client:
            try:
                return await client.fetch("GET", FACT, timeout_s=DEADLINE)
            except FetchFailure as exc:
                return exc

    return _outcome(asyncio.run(go()))


def _sync(url: str) -> dict[str, Any]:
    opts = realprobe.TransportOptions(sandbox=url)
    with realprobe.make_sync_client(realprobe.default_catalog(), opts,
                                    config=PATIENT) as client:
        try:
            return _outcome(client.fetch("GET", FACT, timeout_s=DEADLINE))
        except FetchFailure as exc:
            return _outcome(exc)


SURFACES: dict[str, Callable[[str], dict[str, Any]]] = {
    "call command": _cli, "async client": _async, "sync client": _sync}


def _within(fn: Callable[[str], dict[str, Any]], url: str) -> dict[str, Any]:
    """`fn(url)` on a thread; it must end long before the grace would."""
    out: list[dict[str, Any]] = []
    thread = threading.Thread(target=lambda: out.append(fn(url)), daemon=True)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "the call waited the grace of a server that never said " \
                                  "it is a sandbox"
    return out[0]


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_a_silent_server_gets_no_grace(surface: str, silent_url: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_client, "SANDBOX_GRACE_S", GRACE)
    got = _within(SURFACES[surface], silent_url)
    assert got["code"] == "TIMEOUT"
    assert got["latency_s"] <= DEADLINE  # the stored latency is bounded by the deadline
    assert not IDENTITIES.identified(silent_url)


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_a_real_sandbox_identifies_itself_and_keeps_its_grace(
    surface: str, calm_sandbox: str,
) -> None:
    got = SURFACES[surface](calm_sandbox)
    assert got["code"] in ("ok", 200)
    assert IDENTITIES.identified(calm_sandbox)
    # a call drawn to miss is settled by the sandbox's word, at the deadline exactly
    missed = SURFACES[surface](f"{calm_sandbox}/_fault/hang")
    assert missed == {"code": "TIMEOUT", "latency_s": DEADLINE}
