"""A tiny loopback HTTP server for tests: serves fixed bodies by path, records what was asked."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Served:
    #: path (no query) -> (status, content type, body[, extra headers])
    routes: dict[str, tuple[Any, ...]]
    requests: list[str] = field(default_factory=list)  # full request targets
    url: str = ""


@contextmanager
def serving(routes: dict[str, tuple[Any, ...]]) -> Iterator[Served]:
    served = Served(routes)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.requests.append(self.path)
            path = self.path.split("?", 1)[0]
            status, ctype, body, *extra = served.routes.get(
                path, (404, "text/plain", b"Not Found")
            )
            self.send_response(status)
            for name, value in (extra[0] if extra else {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
