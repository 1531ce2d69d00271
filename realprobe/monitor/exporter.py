"""The exporter's HTTP server: `/metrics`, `/probe?tool=NAME`, `/status`, `/-/healthy`.

It runs on realprobe's one server base (`realprobe.serving`): the same Host/Origin checks,
optional bearer token, header/idle timeouts and body limits as the sandbox and MCP. Requests
are parsed on one event loop, so half-sent requests hold sockets, never threads; the database
reads of a scrape run in a small worker pool, and each scrape only folds the rows added since
the previous one (see `aggregate`).
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any

import h11
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from realprobe.errors import RealprobeError
from realprobe.monitor.aggregate import Aggregator
from realprobe.monitor.blackbox import BlackboxProber
from realprobe.monitor.metrics import ProbeCollector, exposition
from realprobe.monitor.status import render_status, statuses
from realprobe.serving import Guard, H11Server, Limits, Request, ServerThread, send_simple
from realprobe.store import Database

DEFAULT_PORT = 9469
#: /probe calls served at once (each waits at most its deadline; the host gates decide
#: whether it calls)
PROBE_WORKERS = 16


class Exporter:
    """What the handler serves; usable without the server (tests, embedding)."""

    def __init__(
        self,
        db: Database,
        *,
        prober: BlackboxProber | None = None,
        window_s: float = 3600.0,
        budgets: dict[str, int] | None = None,
    ) -> None:
        self.aggregator = Aggregator(db)
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = ProbeCollector(self.aggregator, window_s=window_s, budgets=budgets)
        self.registry.register(self.collector)
        self.prober = prober

    def metrics(self) -> bytes:
        return exposition(self.registry.collect())

    def status_html(self) -> str:
        return render_status(statuses(self.aggregator), title="realprobe status")

    def status_json(self) -> list[dict[str, Any]]:
        return [asdict(s) for s in statuses(self.aggregator)]


Answer = tuple[int, bytes, str, dict[str, str]]
_TEXT = "text/plain"


def _probe(exporter: Exporter, query: dict[str, list[str]], headers: dict[str, str]) -> Answer:
    prober = exporter.prober
    if prober is None:
        return 404, b"/probe is off: start the exporter with a target\n", _TEXT, {}
    names = query.get("tool") or query.get("target")
    if not names or not names[0]:
        return 400, b"/probe needs ?tool=NAME\n", _TEXT, {}
    scrape_timeout = None
    header = headers.get("x-prometheus-scrape-timeout-seconds")
    if header:
        try:
            scrape_timeout = float(header)
        except ValueError:
            scrape_timeout = None
    try:
        answer = prober.probe(names[0], scrape_timeout)
    except RealprobeError as exc:
        return 400, f"{exc}\n".encode(), _TEXT, {}
    extra = {"X-Realprobe-Cached": answer.cached} if answer.cached else {}
    return 200, generate_latest(answer.registry), CONTENT_TYPE_LATEST, extra


def answer(exporter: Exporter, target: str, headers: dict[str, str]) -> Answer:
    """The answer to one GET (blocking: database reads, a /probe call)."""
    url = urllib.parse.urlsplit(target)
    html = "text/html; charset=utf-8"
    try:
        if url.path == "/metrics":
            return 200, exporter.metrics(), CONTENT_TYPE_LATEST, {}
        if url.path == "/probe":
            return _probe(exporter, urllib.parse.parse_qs(url.query), headers)
        if url.path == "/status":
            return 200, exporter.status_html().encode(), html, {}
        if url.path == "/status.json":
            body = json.dumps(exporter.status_json(), indent=1).encode()
            return 200, body, "application/json", {}
        if url.path in ("/-/healthy", "/-/ready"):
            return 200, b"OK\n", _TEXT, {}
        if url.path == "/":
            return 200, _INDEX, html, {}
        return 404, b"not found: try /metrics, /probe?tool=NAME or /status\n", _TEXT, {}
    except Exception as exc:  # a scrape never takes the exporter down
        return 500, f"error: {type(exc).__name__}: {exc}\n".encode(), _TEXT, {}


_INDEX = b"""<!doctype html><title>realprobe exporter</title>
<h1>realprobe exporter</h1>
<ul><li><a href="/metrics">/metrics</a></li>
<li><a href="/status">/status</a> (last 24 h per tool)</li>
<li>/probe?tool=NAME (one polite call, blackbox_exporter conventions)</li></ul>
"""


class ExporterHttp(H11Server):
    """The exporter's routes on the server base; blocking work runs in the worker pool."""

    server_name = "exporter"

    def __init__(self, exporter: Exporter, host: str, port: int, guard: Guard,
                 limits: Limits) -> None:
        super().__init__(host, port, guard=guard, limits=limits)
        self.exporter = exporter
        # /probe calls may take their whole deadline: they get their own workers, so a
        # scrape of /metrics never waits behind them
        self.reads = ThreadPoolExecutor(4, thread_name_prefix="realprobe-exporter-read")
        self.probes = ThreadPoolExecutor(PROBE_WORKERS, thread_name_prefix="realprobe-probe")

    async def handle(
        self, conn: h11.Connection, request: Request,
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
    ) -> bool:
        if request.method not in ("GET", "HEAD"):
            return await send_simple(conn, writer, 405, b"use GET\n",
                                     [("Content-Type", _TEXT), ("Allow", "GET, HEAD")])
        pool = self.probes if request.path == "/probe" else self.reads
        status, body, ctype, extra = await asyncio.get_running_loop().run_in_executor(
            pool, answer, self.exporter, request.target, request.headers
        )
        if request.method == "HEAD":
            body = b""
        return await send_simple(conn, writer, status, body,
                                 [("Content-Type", ctype), *extra.items()])


class ExporterServer:
    """Runs an `Exporter` on host:port in a background thread (`start`) or the foreground
    (`serve_forever`, until SIGINT/SIGTERM); either way `stop` finishes the /probe run."""

    def __init__(
        self, exporter: Exporter, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *,
        allowed_hosts: tuple[str, ...] = (), auth_token: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.exporter = exporter
        self.http = ExporterHttp(exporter, host, port, Guard(host, allowed_hosts, auth_token),
                                 limits or Limits())
        self._thread = ServerThread(self.http, name="realprobe-exporter")
        try:
            self._thread.start()  # bound now: a busy port is a one-line error
        except OSError as exc:
            raise RealprobeError(f"cannot listen on {host}:{port} ({exc.strerror})") from exc
        self._stopped = False

    @property
    def url(self) -> str:
        return self.http.url

    def start(self) -> str:
        return self.url

    def serve_forever(self) -> None:
        """Serve until SIGINT or SIGTERM, then stop (the /probe run is marked finished)."""
        from realprobe.probes.session import on_signals

        async def until_signal() -> None:
            done = asyncio.Event()
            with on_signals(done.set):
                await done.wait()

        try:
            asyncio.run(until_signal())
        finally:
            self.stop()

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._thread.stop()
        for pool in (self.http.reads, self.http.probes):
            pool.shutdown(wait=False, cancel_futures=True)
        if self.exporter.prober is not None:
            self.exporter.prober.close()
