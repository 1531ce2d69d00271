"""`/probe?tool=NAME`: one polite call on demand, answered in blackbox_exporter's terms.

Prometheus' multi-target pattern scrapes `/probe?target=...` (here `tool=`; `target=` is
accepted as an alias) and reads `probe_success`, `probe_duration_seconds`,
`probe_http_status_code`, `probe_http_duration_seconds{phase=resolve|connect|tls|
processing|transfer}` and `probe_ssl_earliest_cert_expiry`. Every call made here is stored
like any probe row (source `probe`).

Politeness holds however often Prometheus scrapes, through the same per-host gate as
`realprobe probe` (`hosts.HostGates`): a scrape makes no call while the host's calls are in
flight up to its limit (`in-flight`), sooner than its minimum interval (`politeness`), while
an API's Retry-After pause runs (`retry-after`), or once the exporter's share of the API's
daily budget of live calls is spent (`budget`). `reserve_for_schedule` (default half) of each
budget is left to scheduled probe runs, so scrapes can never starve the nightly probe. A
scrape held back is answered from the last stored call of that tool, with
`realprobe_probe_cached 1`, the reason as a label, the stored call's age, and an
`X-Realprobe-Cached` response header.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Gauge
from pydantic import ValidationError

from realprobe.adapters import ToolResult, call_tool
from realprobe.adapters.catalog import Catalog
from realprobe.adapters.tool import Tool
from realprobe.clients import TransportOptions, make_client
from realprobe.clock import Clock, WallClock
from realprobe.dbfacts import PHASE_COLUMNS
from realprobe.errors import RealprobeError
from realprobe.hosts import HostGates, host_key
from realprobe.limits import json_or_none
from realprobe.probes.loading import conditions, probe_columns
from realprobe.probes.politeness import Budget, PolitenessConfig
from realprobe.store import (
    KNOWN_CODES,
    RUN_RUNNING,
    Database,
    Store,
    default_vantage,
    iso_utc,
    probe_row,
)
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
    db: Database
    timeout_s: float = 10.0
    vantage: str = field(default_factory=default_vantage)
    #: the catalogue's politeness, as for `realprobe probe` (overridable per API)
    politeness: PolitenessConfig = field(default_factory=PolitenessConfig)
    #: the share of each API's daily budget left to scheduled probe runs
    reserve_for_schedule: float = 0.5
    #: whose wall time says which day's budget a call counts against
    clock: Clock = field(default_factory=WallClock)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _run_id: str | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _gates: HostGates | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.reserve_for_schedule < 1.0:
            raise RealprobeError(
                f"reserve_for_schedule {self.reserve_for_schedule:g}: give a share in [0, 1)",
                param="reserve_for_schedule",
            )

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
        timeout = self.timeout_s
        if scrape_timeout_s is not None and scrape_timeout_s > 0:
            timeout = min(timeout, max(0.1, scrape_timeout_s - 0.5))
        started_wall = time.time()
        got = asyncio.run_coroutine_threadsafe(self._gated(tool, timeout), self._gate_loop())
        outcome = got.result()
        if isinstance(outcome, str):
            return ProbeAnswer(self._from_store(tool, outcome), cached=outcome)
        result, target = outcome
        self._store(tool, result, started_wall, timeout, target)
        return ProbeAnswer(_registry_for(result, cached=None, age_s=0.0))

    def _gate_loop(self) -> asyncio.AbstractEventLoop:
        """The one loop the host gates live on (their in-flight slots belong to a loop)."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="realprobe-probe-gates",
                                 daemon=True).start()
                self._loop = loop
                self._gates = HostGates(backoff=self.politeness.backoff())
            return self._loop

    async def _gated(self, tool: Tool, timeout_s: float) -> tuple[ToolResult, Target] | str:
        """The call through the host's gate, or why it was held back (nothing sent)."""
        assert self._gates is not None
        policy = self.politeness.for_api(tool.api)
        lim = self._gates.limiter(host_key(tool.api), policy)
        if lim.slots.locked():
            return "in-flight"
        wait = lim.ready_at() - lim.clock.now()
        if wait > 0:
            return "retry-after" if lim.pause_until >= lim.next_start else "politeness"
        if self.live and not self._take_budget(tool, policy.daily_budget):
            return "budget"
        lim.reserve(0.0)  # claims this start; the next one is min_interval_s away
        async with lim.slots:
            result, target = await self._call(tool, timeout_s)
        # an answer with Retry-After (or a bare 429) pauses the host for later scrapes
        lim.note(result.code, result.error.retry_after_s if result.error else None)
        return result, target

    def _take_budget(self, tool: Tool, daily_budget: int) -> bool:
        """One call of the exporter's share of today's budget (the rest is reserved)."""
        share = int(daily_budget * (1.0 - self.reserve_for_schedule))
        with self.db.write() as store:
            return share > 0 and Budget(store, "live", self.clock, True).take(tool.api.id, share)

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
        with self.db.write() as store:
            run_id = self._ensure_run(store, target)
            store.insert_probe(probe_row(
                result, run_id=run_id, tool=tool.name, api=tool.api.id, round_no=0,
                started_wall=started_wall, timeout_s=timeout, vantage=self.vantage, args=args,
                target=target, source="probe",
            ))

    def _from_store(self, tool: Tool, reason: str) -> CollectorRegistry:
        """The last stored call of `tool` (of this target kind, selected like every reader
        selects rows: a row whose start is not a time never answers)."""
        conn = self.db.read()
        try:
            where, params = conditions(probe_columns(conn), None, None, [tool.name],
                                       [self.target.kind.value], None)
            cur = conn.execute(
                f"SELECT * FROM probes WHERE {where} ORDER BY started_ts DESC, id DESC LIMIT 1",
                params,
            )
            row, names = cur.fetchone(), [d[0] for d in cur.description]
        finally:
            conn.close()
        if row is None:
            return _registry_for(None, cached=reason, age_s=None)
        stored = dict(zip(names, row, strict=True))
        try:
            result = _result_of(tool, stored)
        except ValidationError:  # a row no call could have made: answered as no call
            return _registry_for(None, cached=reason, age_s=None)
        return _registry_for(result, cached=reason,
                             age_s=max(0.0, time.time() - float(stored["started_ts"] or 0)))

    def close(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._run_id is None:
            return
        with self.db.write() as store:
            now = time.time()
            n = store.conn.execute(
                "SELECT COUNT(*) FROM probes WHERE run_id = ?", [self._run_id]
            ).fetchone()[0]
            store.finish_run(self._run_id, {
                "status": "done", "ended_at": iso_utc(now), "ended_ts": now, "n_calls": n,
            })


def _result_of(tool: Tool, row: dict[str, Any]) -> ToolResult:
    """A stored row as the result it recorded; a cell that is not what the column holds
    (a row written around the store's checks) reads as missing, never as a failed scrape."""
    phases: dict[str, Any] = {v: _num(row.get(v)) or 0.0 for v in PHASES.values()}
    phases["tls_expires_ts"] = _num(row.get("tls_expires_ts"))
    ok = row.get("outcome") == "ok"
    code = row.get("error_code")
    redirects = json_or_none(row.get("redirects"))
    status = row.get("http_status")
    return ToolResult.model_validate({
        "tool": tool.name, "ok": ok, "latency_ms": _num(row.get("latency_ms")) or 0.0,
        "http_status": status if isinstance(status, int) and 100 <= status <= 599 else None,
        "bytes": int(_num(row.get("bytes")) or 0),
        "phases": phases,
        "redirects": redirects if isinstance(redirects, list) else [],
        "error": None if ok else {
            "code": code if code in KNOWN_CODES else "OPERATION_FAILED",
            "message": str(row.get("detail") or ""),
        },
    })


def _num(value: object) -> float | None:
    """A finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _registry_for(result: ToolResult | None, *, cached: str | None, age_s: float | None
                  ) -> CollectorRegistry:
    reg = CollectorRegistry()
    for name, doc, value in (
        ("probe_success", "Whether the call succeeded", 1 if result and result.ok else 0),
        ("probe_duration_seconds", "How long the call took",
         (result.latency_ms if result else 0.0) / 1000.0),
        ("probe_http_status_code", "Response HTTP status code",
         (result.http_status or 0) if result else 0),
        ("probe_http_content_length", "Length of the decoded body", result.bytes if result else 0),
        ("probe_http_redirects", "Redirects followed", len(result.redirects) if result else 0),
    ):
        Gauge(name, doc, registry=reg).set(value)
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
