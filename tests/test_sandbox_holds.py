"""The sandbox holds against misbehaving clients: malformed request lines get a 400 and the
server keeps serving; slowloris connections are answered 408 and closed; idle keep-alive
connections are closed."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import pytest

from realprobe import Catalog, Sandbox, load_profile
from realprobe.http.simulate import routes_from_catalog
from realprobe.sandbox.server import running

HEALTH = b"GET /_health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


@pytest.fixture
def port(catalog: Catalog) -> Iterator[int]:
    sb = Sandbox(routes_from_catalog(catalog), load_profile("calm"),
                 header_timeout_s=1.0, idle_timeout_s=1.0)
    with running(sb) as url:
        yield int(url.rsplit(":", 1)[1])


def exchange(port: int, data: bytes, wait: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                return out + b"<no close>"
            if not chunk:
                return out
            out += chunk


@pytest.mark.parametrize("request_bytes", [
    b"OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET catfact/fact HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET http://evil.example/catfact/fact HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"garbage\r\n\r\n",
    b"GET / HTTP/9.9\r\n\r\n",
    b"GET /_health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",  # a TLS hello on the plain port
    b"GET /_health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n",
])
def test_malformed_requests_get_a_4xx_and_the_server_keeps_serving(
    port: int, request_bytes: bytes
) -> None:
    answer = exchange(port, request_bytes)
    status_line = answer.split(b"\r\n", 1)[0]
    assert status_line.startswith(b"HTTP/1.1 4"), answer[:200]
    assert b"<no close>" not in answer  # and the connection was closed
    assert exchange(port, HEALTH).startswith(b"HTTP/1.1 200")


def test_slowloris_is_answered_408_and_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        started = time.monotonic()
        s.sendall(b"GET /_health HTTP/1.1\r\n")
        answer = b""
        for i in range(40):  # one header line every 0.1 s: each byte is "activity"
            try:
                s.sendall(f"X-Drip-{i}: a\r\n".encode())
            except OSError:
                break
            time.sleep(0.1)
        with contextlib.suppress(OSError):
            answer = s.recv(4096)
        assert time.monotonic() - started < 4.0  # 40 lines would take 4 s: it was cut
    assert answer.startswith(b"HTTP/1.1 408") or answer == b""
    assert exchange(port, HEALTH).startswith(b"HTTP/1.1 200")


def test_a_slow_body_is_cut_too(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"POST /_health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nab")
        answer = s.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408")


def test_idle_connections_are_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        started = time.monotonic()
        assert s.recv(10) == b""  # the server closed it
        assert time.monotonic() - started < 4.0
    # a kept-alive connection after one answer is closed when idle as well
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /_health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        data = b""
        while b"}" not in data:
            data += s.recv(4096)
        assert data.startswith(b"HTTP/1.1 200")
        assert s.recv(10) == b""


def test_many_half_open_connections_do_not_block_others(port: int) -> None:
    held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(50)]
    try:
        for s in held:
            s.sendall(b"GET /_health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
        assert exchange(port, HEALTH).startswith(b"HTTP/1.1 200")
    finally:
        for s in held:
            s.close()
