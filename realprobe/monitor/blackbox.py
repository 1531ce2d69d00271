"""`/probe?tool=NAME`: one polite call on demand, answered in blackbox_exporter's terms.

Prometheus' multi-target pattern scrapes `/probe?target=...` (here `tool=`; `target=` is
accepted as an alias) and reads `probe_success`, `probe_duration_seconds`,
`probe_http_status_code`, `probe_http_duration_seconds{phase=resolve|connect|tls|
processing|transfer}` and `probe_ssl_earliest_cert_expiry`. Every call made here is stored
like any probe row (source `probe`).

Politeness holds however often Prometheus scrapes: a scrape that comes sooner than the API's
minimum interval, or after its daily budget of live calls is spent, makes no call. It is
answered from the last stored call of that tool, with `realprobe_probe_cached 1`, the
reason as a label, the stored call's age, and an `X-Realprobe-Cached` response header.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from realprobe.adapters import ToolResult, call_tool
from realprobe.adapters.catalog import Catalog
from realprobe.adapters.tool import Tool
from realprobe.clients import TransportOptions, make_client
from realprobe.dbfacts import PHASE_COLUMNS
from realprobe.errors import RealprobeError
from realprobe.hosts import host_key
from realprobe.probes.politeness import PolitenessConfig
from realprobe.store import RUN_RUNNING, Store, default_vantage, iso_utc, probe_row
from realprobe.target import Target
from realprobe.version import __version__

#: blackbox_exporter's phase names, from realprobe's phase columns
PHASES = dict(zip(("resolve", "connect", "tls", "processing", "transfer"), PHASE_COLUMNS,
                  strict=True))


@dataclass
class ProbeAnswer:
    registry: CollectorRegistry
    cached: str | None = None  # why no call was made, if none was


@dataclass
class BlackboxProber:
    """Makes (or refuses, politely) one call per scrape and stores it."""

    catalog: Catalog
    opts: TransportOptions
    db_path: Path
    timeout_s: float = 10.0
    vantage: str = field(default_factory=default_vantage)
    #: the catalogue's politeness, as for `realprobe probe` (overridable per API)
    politeness: PolitenessConfig = field(default_factory=PolitenessConfig)
    _last_start: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _run_id: str | None = None

    @property
    def target(self) -> Target:
        return Target.from_options(self.opts)

    @property
    def live(self) -> bool:
        """Budgets count only calls that reach the real APIs."""
        return self.target.reaches_network

    def tool(self, name: str) -> Tool:
        try:
            return self.catalog.get(name)
        except (KeyError, RealprobeError) as exc:
            raise RealprobeError(f"unknown tool {name!r}") from exc

    def probe(self, name: str, scrape_timeout_s: float | None = None) -> ProbeAnswer:
        tool = self.tool(name)
        reason = self._claim(tool)
        if reason is not None:
            return ProbeAnswer(self._from_store(tool, reason), cached=reason)
        timeout = self.timeout_s
        if scrape_timeout_s is not None and scrape_timeout_s > 0:
            timeout = min(timeout, max(0.1, scrape_timeout_s - 0.5))
        started_wall = time.time()
        result, target = asyncio.run(self._call(tool, timeout))
        self._store(tool, result, started_wall, timeout, target)
        return ProbeAnswer(_registry_for(result, cached=None, age_s=0.0))

    def _claim(self, tool: Tool) -> str | None:
        """None when a call may start now (and claims the slot), else why not."""
        key = host_key(tool.api)
        policy = self.politeness.for_api(tool.api)
        with self._lock:
            now = time.monotonic()
            last = self._last_start.get(key)
            if last is not None and now - last < policy.min_interval_s:
                return "politeness"
            if self.live:
                day = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
                with Store(self.db_path) as store:
                    if not store.budget_take(day, tool.api.id, "live", policy.daily_budget):
                        return "budget"
            self._last_start[key] = now
        return None

    async def _call(self, tool: Tool, timeout_s: float) -> tuple[ToolResult, Target]:
        args = dict(tool.examples[0]) if tool.examples else {}
        async with make_client(self.catalog, self.opts) as client:
            return await call_tool(tool, args, client, timeout_s=timeout_s), client.target

    def _ensure_run(self, store: Store, target: Target) -> str:
        if self._run_id is None:
            self._run_id = f"exporter-{uuid.uuid4().hex[:12]}"
            now = time.time()
            store.start_run({
                "id": self._run_id, "started_at": iso_utc(now), "started_ts": now,
                "vantage": self.vantage, "mode": self.opts.mode.value,
                "target": target.label, "target_kind": target.kind.value, "source": "probe",
                "tools": [], "rounds": 0,
                "status": RUN_RUNNING, "version": __version__,
                "detail": "on-demand calls from the exporter's /probe endpoint",
            })
        return self._run_id

    def _store(self, tool: Tool, result: ToolResult, started_wall: float, timeout: float,
               target: Target) -> None:
        args = dict(tool.examples[0]) if tool.examples else {}
        with Store(self.db_path) as store:
            run_id = self._ensure_run(store, target)
            store.insert_probe(probe_row(
                result, run_id=run_id, tool=tool.name, api=tool.api.id, round_no=0,
                started_wall=started_wall, timeout_s=timeout, vantage=self.vantage, args=args,
                target=target, source="probe",
            ))

    def _from_store(self, tool: Tool, reason: str) -> CollectorRegistry:
        with Store(self.db_path) as store:
            row = store.conn.execute(
                "SELECT * FROM probes WHERE tool = ? AND COALESCE(excluded, 0) = 0 "
                "AND target_kind = ? ORDER BY started_ts DESC, id DESC LIMIT 1",
                [tool.name, self.target.kind.value],
            ).fetchone()
            names = [d[0] for d in store.conn.execute("SELECT * FROM probes LIMIT 0").description]
        if row is None:
            return _registry_for(None, cached=reason, age_s=None)
        stored = dict(zip(names, row, strict=True))
        return _registry_for(_result_of(tool, stored), cached=reason,
                             age_s=max(0.0, time.time() - float(stored["started_ts"] or 0)))

    def close(self) -> None:
        if self._run_id is None:
            return
        with Store(self.db_path) as store:
            now = time.time()
            n = store.conn.execute(
                "SELECT COUNT(*) FROM probes WHERE run_id = ?", [self._run_id]
            ).fetchone()[0]
            store.finish_run(self._run_id, {
                "status": "done", "ended_at": iso_utc(now), "ended_ts": now, "n_calls": n,
            })


def _result_of(tool: Tool, row: dict[str, Any]) -> ToolResult:
    phases = {v: row.get(v) or 0.0 for v in PHASES.values()}
    phases["tls_expires_ts"] = row.get("tls_expires_ts")
    ok = row.get("outcome") == "ok"
    return ToolResult.model_validate({
        "tool": tool.name, "ok": ok, "latency_ms": row.get("latency_ms") or 0.0,
        "http_status": row.get("http_status"), "bytes": row.get("bytes") or 0,
        "phases": phases,
        "redirects": json.loads(row["redirects"]) if row.get("redirects") else [],
        "error": None if ok else {
            "code": row.get("error_code") or "OPERATION_FAILED",
            "message": row.get("detail") or "",
        },
    })


def _registry_for(result: ToolResult | None, *, cached: str | None, age_s: float | None
                  ) -> CollectorRegistry:
    reg = CollectorRegistry()
    Gauge("probe_success", "Whether the call succeeded", registry=reg).set(
        1 if result is not None and result.ok else 0
    )
    Gauge("probe_duration_seconds", "How long the call took", registry=reg).set(
        (result.latency_ms if result else 0.0) / 1000.0
    )
    Gauge("probe_http_status_code", "Response HTTP status code", registry=reg).set(
        (result.http_status or 0) if result else 0
    )
    Gauge("probe_http_content_length", "Length of the decoded body", registry=reg).set(
        result.bytes if result else 0
    )
    Gauge("probe_http_redirects", "Redirects followed", registry=reg).set(
        len(result.redirects) if result else 0
    )
    phases_g = Gauge("probe_http_duration_seconds", "Duration of each phase of the call",
                     ["phase"], registry=reg)
    phases = (result.phases if result else None) or {}
    for phase, column in PHASES.items():
        phases_g.labels(phase).set(float(phases.get(column) or 0.0) / 1000.0)
    expiry = phases.get("tls_expires_ts")
    if expiry:
        Gauge("probe_ssl_earliest_cert_expiry", "Certificate expiry (unix time)",
              registry=reg).set(float(expiry))
    err = Gauge("realprobe_probe_error", "The call's error code (1 for the code seen)",
                ["code"], registry=reg)
    if result is not None and result.error is not None:
        err.labels(result.error.code.value).set(1)
    cache = Gauge("realprobe_probe_cached",
                  "1 when no call was made (politeness, budget) and the last stored call "
                  "answers", ["reason"], registry=reg)
    cache.labels(cached or "").set(1 if cached else 0)
    if cached and age_s is not None:
        Gauge("realprobe_probe_cached_age_seconds", "Age of the stored call answering",
              registry=reg).set(age_s)
    return reg
