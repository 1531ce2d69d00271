"""The exporter's HTTP server: `/metrics`, `/probe?tool=NAME`, `/status`, `/-/healthy`.

A `ThreadingHTTPServer` from the standard library: scrapes are few and short, and each one
only folds the rows added since the previous scrape (see `aggregate`).
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
from dataclasses import asdict
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from realprobe.errors import RealprobeError
from realprobe.monitor.aggregate import Aggregator
from realprobe.monitor.blackbox import BlackboxProber
from realprobe.monitor.metrics import ProbeCollector
from realprobe.monitor.status import render_status, statuses

DEFAULT_PORT = 9469


class Exporter:
    """What the handler serves; usable without the server (tests, embedding)."""

    def __init__(
        self,
        db_path: str | Path,
        *,
        prober: BlackboxProber | None = None,
        window_s: float = 3600.0,
        budgets: dict[str, int] | None = None,
    ) -> None:
        self.db_path = Path(db_path)
        self.aggregator = Aggregator(self.db_path)
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = ProbeCollector(self.aggregator, window_s=window_s, budgets=budgets)
        self.registry.register(self.collector)
        self.prober = prober

    def metrics(self) -> bytes:
        return generate_latest(self.registry)

    def status_html(self) -> str:
        return render_status(statuses(self.aggregator), title="realprobe status")

    def status_json(self) -> list[dict[str, Any]]:
        return [asdict(s) for s in statuses(self.aggregator)]


class _Handler(http.server.BaseHTTPRequestHandler):
    exporter: Exporter  # set on the subclass made per server
    server_version = "realprobe-exporter"

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        try:
            if url.path == "/metrics":
                self._send(200, self.exporter.metrics(), CONTENT_TYPE_LATEST)
            elif url.path == "/probe":
                self._probe(query)
            elif url.path == "/status":
                self._send(200, self.exporter.status_html().encode(), "text/html; charset=utf-8")
            elif url.path == "/status.json":
                body = json.dumps(self.exporter.status_json(), indent=1).encode()
                self._send(200, body, "application/json")
            elif url.path in ("/-/healthy", "/-/ready"):
                self._send(200, b"OK\n", "text/plain")
            elif url.path == "/":
                self._send(200, _INDEX, "text/html; charset=utf-8")
            else:
                self._send(404, b"not found: try /metrics, /probe?tool=NAME or /status\n",
                           "text/plain")
        except Exception as exc:  # a scrape never takes the exporter down
            self._send(500, f"error: {type(exc).__name__}: {exc}\n".encode(), "text/plain")

    def _probe(self, query: dict[str, list[str]]) -> None:
        prober = self.exporter.prober
        if prober is None:
            self._send(404, b"/probe is off: start the exporter with a target\n", "text/plain")
            return
        names = query.get("tool") or query.get("target")
        if not names or not names[0]:
            self._send(400, b"/probe needs ?tool=NAME\n", "text/plain")
            return
        scrape_timeout = None
        header = self.headers.get("X-Prometheus-Scrape-Timeout-Seconds")
        if header:
            try:
                scrape_timeout = float(header)
            except ValueError:
                scrape_timeout = None
        try:
            answer = prober.probe(names[0], scrape_timeout)
        except RealprobeError as exc:
            self._send(400, f"{exc}\n".encode(), "text/plain")
            return
        extra = {"X-Realprobe-Cached": answer.cached} if answer.cached else {}
        self._send(200, generate_latest(answer.registry), CONTENT_TYPE_LATEST, extra)

    def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None
              ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


_INDEX = b"""<!doctype html><title>realprobe exporter</title>
<h1>realprobe exporter</h1>
<ul><li><a href="/metrics">/metrics</a></li>
<li><a href="/status">/status</a> (last 24 h per tool)</li>
<li>/probe?tool=NAME (one polite call, blackbox_exporter conventions)</li></ul>
"""


class ExporterServer:
    """Runs an `Exporter` on host:port in a background thread (or the foreground)."""

    def __init__(self, exporter: Exporter, host: str = "127.0.0.1", port: int = DEFAULT_PORT
                 ) -> None:
        handler = type("Handler", (_Handler,), {"exporter": exporter})
        try:
            self.httpd = http.server.ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise RealprobeError(f"cannot listen on {host}:{port} ({exc.strerror})") from exc
        self.httpd.daemon_threads = True
        self.exporter = exporter
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        text = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{text}:{port}"

    def start(self) -> str:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self.url

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self.exporter.prober is not None:
            self.exporter.prober.close()
