"""Raw loopback sockets for server tests: connections from a chosen source address (every
127.x address is loopback on Linux, so one test can be several clients), one-shot GETs, a
scripted listener, and a bounded poll for a state a server reaches by itself."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    """A connection to 127.0.0.1:`port` from `source`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    return sock


def ask(port: int, source: str, path: str) -> tuple[int, bytes]:
    """(status, body) of one GET from `source`, the connection closed after it."""
    with connect(port, source) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                     .encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def wait_for(check: Callable[[], bool], what: str = "the expected state") -> None:
    """Poll a condition the other side reaches by itself (bounded; no timing is asserted)."""
    for _ in range(600):
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"never reached {what}")


@contextmanager
def listener(on_connection: Callable[[socket.socket], None] = lambda conn: None,
             ) -> Iterator[str]:
    """A loopback server that hands each accepted connection to `on_connection` (by
    default: holds it, answering nothing) and closes them all at the end; yields its URL."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)
            on_connection(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        srv.close()
