"""A caller cannot take the sandbox's slots: a hundred-odd connections from one address, each
telling a budget of 86,000 s to a hanging tool, hold at most that address's share (another
address is still answered, the attacker's own `/_admin` and `/_journal` too), each held call
is capped like a hang (300 s), and every slot is free again as soon as the attacker closes
its sockets, not when the budget would run out. The share holds on every server built on the
same base (the sandbox and the exporter).

Addresses are told apart by the socket's peer address: the attacker binds 127.0.0.2, the
other client 127.0.0.3 (every 127.x address is loopback on Linux). No assertion reads a
clock: held calls are identified by their request ids in the journal."""

from __future__ import annotations

import contextlib
import json
import selectors
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from peer_sockets import ask, connect, wait_for

from realprobe import Catalog, Sandbox, Store, load_profile, open_db
from realprobe.http.simulate import routes_from_catalog
from realprobe.monitor.exporter import Exporter, ExporterServer
from realprobe.sandbox.server import running
from realprobe.sandbox.wire import HANG_LIMIT_S
from realprobe.serving import Limits

ATTACKER, OTHER = "127.0.0.2", "127.0.0.3"
CAP = 120
SHARE = Limits(max_connections=CAP).per_client  # what one address may hold
ATTACKS = 200
#: connections past its share an address may hold for control paths (the sandbox has them)
RESERVED = Limits(max_connections=CAP).reserved_per_client


def refused_until_closed(socks: list[socket.socket], want: int) -> int:
    """Read every socket until `want` of them have been answered 503 and closed; the number
    closed otherwise meanwhile."""
    sel = selectors.DefaultSelector()
    got: dict[int, bytes] = {}
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    closed = other = 0
    for _ in range(100_000):
        if closed >= want:
            break
        for key, _ in sel.select(timeout=30):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                chunk = s.recv(65536)
            except OSError:
                chunk = b""
            got[s.fileno()] = got.get(s.fileno(), b"") + chunk
            if not chunk:
                sel.unregister(s)
                if got[s.fileno()].startswith(b"HTTP/1.1 503"):
                    closed += 1
                else:
                    other += 1
    sel.close()
    assert closed == want
    return other


def journal(port: int) -> list[dict[str, object]]:
    status, body = ask(port, OTHER, "/_journal")
    assert status == 200
    rows = json.loads(body)
    return list(rows["entries"] if isinstance(rows, dict) else rows)


@pytest.fixture
def sandbox_port(catalog: Catalog) -> Iterator[int]:
    sb = Sandbox(routes_from_catalog(catalog), load_profile("calm"), latency_scale=0.0,
                 max_connections=CAP)
    with running(sb) as url:
        yield int(url.rsplit(":", 1)[1])


def test_budget_holders_keep_their_share_and_free_it_when_they_go(sandbox_port: int) -> None:
    port = sandbox_port
    socks = []
    with contextlib.ExitStack() as stack:
        for i in range(ATTACKS):
            s = stack.enter_context(connect(port, ATTACKER))
            s.sendall(f"GET /_fault/hang/catfact/fact HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      f"X-Realprobe-Budget: 86000\r\nX-Request-Id: atk-{i}\r\n\r\n".encode())
            socks.append(s)
        # every connection past the attacker's share is answered 503 at once
        assert refused_until_closed(socks, ATTACKS - SHARE) == 0

        def held() -> list[dict[str, object]]:
            return [e for e in journal(port) if str(e["request_id"]).startswith("atk-")]

        wait_for(lambda: len(held()) == SHARE)
        assert {e["delay_ms"] for e in held()} == {HANG_LIMIT_S * 1000}  # capped like a hang
        assert all(e["total_ms"] is None for e in held())  # still held

        # another address is served; the attacker's own runtime API answers, its calls not
        assert ask(port, OTHER, "/catfact/fact")[0] == 200
        assert ask(port, ATTACKER, "/_journal")[0] == 200
        assert ask(port, ATTACKER, "/_admin")[0] == 200
        assert ask(port, ATTACKER, "/_health")[0] == 200
        assert ask(port, ATTACKER, "/catfact/fact")[0] == 503
        # labelled as the sandbox's own answer: a client never counts it against the API
        with connect(port, ATTACKER) as sock:
            sock.sendall(b"GET /catfact/fact HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            head = sock.recv(65536).split(b"\r\n\r\n")[0].lower()
        assert head.startswith(b"http/1.1 503") and b"x-realprobe-error: busy" in head
    # the attacker's sockets are closed: every held call ends now, not in 300 s
    wait_for(lambda: all(e["ended"] == "client-closed" for e in held()))
    assert len(held()) == SHARE
    assert ask(port, ATTACKER, "/catfact/fact")[0] == 200  # its share is free again


def _sandbox(tmp: Path, catalog: Catalog) -> contextlib.AbstractContextManager[str]:
    sb = Sandbox(routes_from_catalog(catalog), load_profile("calm"), latency_scale=0.0,
                 max_connections=CAP)
    return running(sb)


@contextlib.contextmanager
def _exporter(tmp: Path, catalog: Catalog) -> Iterator[str]:
    db = tmp / "p.db"
    Store(db).close()
    server = ExporterServer(Exporter(open_db(db)), port=0, limits=Limits(max_connections=CAP))
    try:
        yield server.url
    finally:
        server.stop()


SERVERS: dict[str, tuple[Callable[[Path, Catalog], contextlib.AbstractContextManager[str]],
                         str, int]] = {
    "sandbox": (_sandbox, "/catfact/fact", RESERVED),
    "exporter": (_exporter, "/metrics", 0),  # no control paths: no reserved connections
}


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_idle_connections_from_one_address_leave_room_for_another(
    server: str, tmp_path: Path, catalog: Catalog,
) -> None:
    start, path, reserved = SERVERS[server]
    with start(tmp_path, catalog) as url, contextlib.ExitStack() as stack:
        port = int(url.rsplit(":", 1)[1])
        socks = [stack.enter_context(connect(port, ATTACKER)) for _ in range(CAP + 20)]
        # nothing is sent: each connection within the share (and a reserved few) waits for
        # a request; every other one is answered 503 at once
        assert refused_until_closed(socks, CAP + 20 - SHARE - reserved) == 0
        assert ask(port, OTHER, path)[0] == 200
        assert ask(port, OTHER, "/_health" if reserved else path)[0] == 200
