"""An attacker's pass over the sandbox hold, the sandbox identification and the writer:
a client that pipelines its next request while its first is held still gets both answers; a
held client that floods the socket is dropped (its slot freed); a server that answers the
"are you a sandbox?" question with a ten-gigabyte body is identified from its headers alone,
its body never read; a FIFO whose reader goes away mid-write is one line, not a traceback."""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from peer_sockets import listener, wait_for

from realprobe import Catalog, Sandbox, load_profile
from realprobe.http.simulate import routes_from_catalog
from realprobe.http.transports import IDENTITIES
from realprobe.outputs import OutputError, write_output
from realprobe.sandbox.server import running

FACT = b"GET /catfact/fact HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Realprobe-Budget: 30\r\n\r\n"


@pytest.fixture
def sandbox_url(catalog: Catalog) -> Iterator[str]:
    sb = Sandbox(routes_from_catalog(catalog), load_profile("calm"), latency_scale=0.0)
    with running(sb) as url:
        yield url


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_a_request_pipelined_behind_a_held_one_is_answered_in_its_turn(
    sandbox_url: str,
) -> None:
    put = httpx.put(f"{sandbox_url}/_admin/toxics/*/slow",
                    json={"type": "latency", "latency_ms": 300}, timeout=10)
    assert put.status_code == 200, put.text
    with socket.create_connection(("127.0.0.1", _port(sandbox_url)), timeout=30) as sock:
        sock.sendall(FACT + FACT)  # the second arrives while the first is held
        data = b""
        while data.count(b"HTTP/1.1 200") < 2:
            chunk = sock.recv(65536)
            assert chunk, data[-300:]
            data += chunk
    journal = httpx.get(f"{sandbox_url}/_journal", timeout=10).json()
    rows = journal["entries"] if isinstance(journal, dict) else journal
    assert [r["ended"] for r in rows] == ["complete", "complete"]


def test_a_held_client_that_floods_its_socket_is_dropped(sandbox_url: str) -> None:
    with socket.create_connection(("127.0.0.1", _port(sandbox_url)), timeout=30) as sock:
        sock.sendall(b"GET /_fault/hang/catfact/fact HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"X-Realprobe-Budget: 86000\r\nX-Request-Id: flood-1\r\n\r\n")

        def rows() -> list[dict[str, object]]:
            got = httpx.get(f"{sandbox_url}/_journal", timeout=10).json()
            return [r for r in (got["entries"] if isinstance(got, dict) else got)
                    if r["request_id"] == "flood-1"]

        wait_for(lambda: len(rows()) == 1)  # held
        with pytest.raises(OSError):
            for _ in range(64):  # 4 MiB; the server stops reading and closes
                sock.sendall(b"x" * 65536)
            while sock.recv(65536):
                pass
            raise ConnectionResetError("closed by the server")
    wait_for(lambda: rows()[0]["ended"] == "client-closed")


def _says_sandbox_promises_10_gb(conn: socket.socket) -> None:
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 200 OK\r\nServer: realprobe-sandbox\r\n"
                 b"Content-Length: 10000000000\r\n\r\n" + b"{" * 65536)


@pytest.fixture
def huge_health() -> Iterator[str]:
    """A server whose every answer says it is a realprobe sandbox and promises 10 GB."""
    with listener(_says_sandbox_promises_10_gb) as url:
        yield url


def test_identification_reads_headers_never_a_body(huge_health: str) -> None:
    """Its body is neither awaited nor read: identified from the status and `Server`."""
    assert not IDENTITIES.identified(huge_health)
    IDENTITIES.ask(IDENTITIES.key(huge_health))
    wait_for(lambda: IDENTITIES.identified(huge_health))


def test_a_fifo_whose_reader_goes_away_mid_write_is_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    opened = threading.Event()

    def read_a_little() -> None:
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        opened.set()
        for _ in range(2000):
            try:
                if os.read(fd, 10):
                    break
            except BlockingIOError:
                pass
            time.sleep(0.005)
        os.close(fd)  # gone, with most of the payload unwritten

    reader = threading.Thread(target=read_a_little, daemon=True)
    reader.start()
    assert opened.wait(10)
    with pytest.raises(OutputError, match="cannot write") as err:
        write_output(fifo, "x" * 4_000_000)
    assert "\n" not in str(err.value)
    reader.join(30)
    assert stat.S_ISFIFO(fifo.stat(follow_symlinks=False).st_mode)


def test_credentials_reach_neither_the_journal_nor_the_runtime_api() -> None:
    """A key a caller puts in its query, and the password and token of the upstream the
    operator gave, are replaced in `/_journal` and `/_admin` (a side channel any local
    process can read)."""
    from realprobe import api

    up = "https://ops:hunter2-upstream-pw@127.0.0.1:9/{api}?token=tok-upstream-123456"
    sb = api.make_sandbox(upstream=up, latency_scale=0.0)
    with running(sb) as url:
        with socket.create_connection(("127.0.0.1", _port(url)), timeout=30) as sock:
            sock.sendall(b"GET /open-meteo/v1/elevation?latitude=52.5&apikey=caller-key-98765 "
                         b"HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            while sock.recv(65536):
                pass
        journal = httpx.get(f"{url}/_journal", timeout=10).text
        admin = httpx.get(f"{url}/_admin", timeout=10).text
    assert "latitude=52.5" in journal and "apikey=REDACTED" in journal
    assert "caller-key-98765" not in journal
    assert "hunter2-upstream-pw" not in admin and "tok-upstream-123456" not in admin
    assert "127.0.0.1:9" in admin  # the upstream itself is still said


def test_a_slow_close_ends_when_its_client_goes(sandbox_url: str) -> None:
    """An hour's `slow_close` holds the connection after the answer only while the client
    stays: one that reads its answer and leaves frees the slot at once."""
    put = httpx.put(f"{sandbox_url}/_admin/toxics/*/slow_close",
                    json={"type": "slow_close", "delay_ms": 3_600_000}, timeout=10)
    assert put.status_code == 200, put.text
    with socket.create_connection(("127.0.0.1", _port(sandbox_url)), timeout=30) as sock:
        sock.sendall(b"GET /catfact/fact HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"X-Request-Id: slow-close-1\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")

    def finished() -> bool:
        got = httpx.get(f"{sandbox_url}/_journal", timeout=10).json()
        rows = [r for r in (got["entries"] if isinstance(got, dict) else got)
                if r["request_id"] == "slow-close-1"]
        return len(rows) == 1 and rows[0]["total_ms"] is not None

    wait_for(finished, "the slow close ended")
