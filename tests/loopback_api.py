"""A catalogue API moved onto a loopback server that records when each call arrives, for
tests of per-host politeness on live-mode calls (nothing leaves 127.0.0.1)."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from realprobe import ApiSpec, Catalog
from realprobe.adapters.catalog import builtin_specs


@dataclass
class LoopbackApi:
    catalog: Catalog  # the built-in catalogue with the API on loopback
    api: ApiSpec  # the moved API
    starts: list[float] = field(default_factory=list)  # time.monotonic() of each call


@contextmanager
def catfact_on_loopback(
    min_interval_s: float, answers: list[tuple[int, str | None]] | None = None
) -> Iterator[LoopbackApi]:
    """catfact served on 127.0.0.1 with its real fixture body, one call in flight and starts
    `min_interval_s` apart; the server is stopped on the way out. `answers` (status,
    Retry-After header or None), when given, are served in turn, cycling; a non-200 answer
    has a small JSON error body."""
    catfact = next(s for s in builtin_specs() if s.id == "catfact")
    body = catfact.tools[0].fixtures[0].body.encode()
    starts: list[float] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, wait = answers[len(starts) % len(answers)] if answers else (200, None)
            starts.append(time.monotonic())
            out = body if status == 200 else b'{"error": "Too Many Requests"}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            if wait is not None:
                self.send_header("Retry-After", wait)
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a: object) -> None:
            pass  # quiet: the test reads `starts`, not the log

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    local = ApiSpec.model_validate({
        **catfact.model_dump(),
        "base_url": f"http://127.0.0.1:{server.server_address[1]}",
        "politeness": {"min_interval_s": min_interval_s, "jitter_s": 0, "max_in_flight": 1},
    })
    try:
        yield LoopbackApi(
            Catalog([s if s.id != "catfact" else local for s in builtin_specs()]), local, starts
        )
    finally:
        server.shutdown()
        server.server_close()
