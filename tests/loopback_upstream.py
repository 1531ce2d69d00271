"""A loopback HTTP server standing in for a real API behind the sandbox's proxy mode.

Every answer is distinct (a counter), so a test can tell the upstream's bytes from fixtures;
`/big/<n>` answers n bytes. It records what it was asked and what it sent.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Upstream:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.sent: list[bytes] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                with owner._lock:
                    n = len(owner.requests)
                    owner.requests.append(("GET", self.path))
                    if self.path.startswith("/big/"):
                        size = int(self.path.split("/")[2])
                        body = (b"x" * size)[:size]
                    else:
                        body = json.dumps({"n": n, "path": self.path, "name": "upstream"}).encode()
                    owner.sent.append(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Upstream", "loopback")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Upstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
