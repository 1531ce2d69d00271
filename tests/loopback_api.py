"""A catalogue API moved onto a loopback server that records when each call arrives, for
tests of per-host politeness on live-mode calls (nothing leaves 127.0.0.1)."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

from realprobe import ApiSpec, Catalog
from realprobe.adapters.catalog import builtin_specs


@dataclass
class LoopbackApi:
    catalog: Catalog  # the built-in catalogue with the API on loopback
    api: ApiSpec  # the moved API
    starts: list[float] = field(default_factory=list)  # time.monotonic() of each call


@contextmanager
def fixtures_on_loopback(specs: list[ApiSpec]) -> Iterator[list[ApiSpec]]:
    """`specs` moved onto one loopback server (each under `/<api id>`) that answers every
    tool's path with the tool's first real fixture body, with no politeness of their own:
    the APIs a task calls beside the one under test, kept off the network and quick."""
    bodies = {f"/{s.id}{t.path}": t.fixtures[0] for s in specs for t in s.tools
              if t.fixtures}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fixture = bodies.get(self.path.split("?", 1)[0])
            out = fixture.body.encode() if fixture else b'{"error": "no such path"}'
            self.send_response(fixture.status if fixture else 404)
            self.send_header("Content-Type", fixture.content_type if fixture else
                             "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a: object) -> None:
            """Quiet: the tests read no access log."""

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    free = {"min_interval_s": 0, "jitter_s": 0, "max_in_flight": 64}
    try:
        yield [ApiSpec.model_validate({**s.model_dump(), "base_url": f"{base}/{s.id}",
                                       "politeness": free}) for s in specs]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def catfact_on_loopback(
    min_interval_s: float, answers: list[tuple[int, str | None]] | None = None,
    others_on_loopback: bool = False,
) -> Iterator[LoopbackApi]:
    """catfact served on 127.0.0.1 with its real fixture body, one call in flight and starts
    `min_interval_s` apart; the server is stopped on the way out. `answers` (status,
    Retry-After header or None), when given, are served in turn, cycling; a non-200 answer
    has a small JSON error body. `others_on_loopback`: every other API of the catalogue is
    answered from its fixtures on a second loopback server (`fixtures_on_loopback`), so a
    task calling them beside catfact reaches no real host."""
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
            """Quiet: the test reads `starts`, not the log."""

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    local = ApiSpec.model_validate({
        **catfact.model_dump(),
        "base_url": f"http://127.0.0.1:{server.server_address[1]}",
        "politeness": {"min_interval_s": min_interval_s, "jitter_s": 0, "max_in_flight": 1},
    })
    others = [s for s in builtin_specs() if s.id != "catfact"]
    try:
        with (fixtures_on_loopback(others) if others_on_loopback else nullcontext(others)
              ) as moved:
            by_id = {s.id: s for s in [local, *moved]}
            yield LoopbackApi(Catalog([by_id[s.id] for s in builtin_specs()]), local, starts)
    finally:
        server.shutdown()
        server.server_close()
