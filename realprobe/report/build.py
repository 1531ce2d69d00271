"""What a report shows: the stats, drift between the two halves (or given windows), and
success over time, computed once and rendered as HTML, Markdown or JSON."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from realprobe.probes.drift import DriftReport, drift
from realprobe.probes.loading import (
    BoolArray,
    ProbeArrays,
    conditions,
    load_probes,
    probe_columns,
)
from realprobe.probes.provenance import Group
from realprobe.probes.stats import StatsReport, stats_from_db
from realprobe.probes.windows import iso
from realprobe.store import Database


class TimeSeries(BaseModel):
    """Success rate per tool and period; None where a period has no calls."""

    period_s: float
    starts: list[str]
    tools: dict[str, list[float | None]]
    counts: dict[str, list[int]]


class ReportData(BaseModel):
    generated_at: str
    db: str
    stats: StatsReport
    drift: DriftReport | None = None
    drift_note: str | None = None
    over_time: TimeSeries
    #: successes' latencies per tool, thinned to at most 400 quantiles, for the ECDF plots
    latency_quantiles: dict[str, list[float]]
    #: median DNS/connect/TLS/first byte/transfer per tool (calls that recorded phases)
    phases: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: {tool: {vantage: success, interval, p50}} when the rows come from several vantages
    by_vantage: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)


def _period_for(span_s: float) -> float:
    for p in (3600.0, 6 * 3600.0, 86400.0, 7 * 86400.0):
        if span_s / p <= 60:
            return p
    return 30 * 86400.0


def success_over_time(arr: ProbeArrays) -> TimeSeries:
    if len(arr) == 0:
        return TimeSeries(period_s=3600.0, starts=[], tools={}, counts={})
    t0, t1 = float(arr.ts.min()), float(arr.ts.max())
    if t1 - t0 < 3 * 3600:  # a short run (the sandbox, a demo): minutes
        period = max(60.0, float(np.ceil((t1 - t0) / 30 / 60) * 60))
    else:
        period = _period_for(t1 - t0)
    first = np.floor(t0 / period)
    nbins = int(np.floor(t1 / period) - first) + 1
    out: dict[str, list[float | None]] = {}
    counts: dict[str, list[int]] = {}
    for i, name in enumerate(arr.tools):
        s = arr.slice(i)
        if len(s) == 0:
            continue
        b = (np.floor(s.ts / period) - first).astype(np.int64)
        n = np.bincount(b, minlength=nbins)
        k = np.bincount(b, weights=(s.code < 0).astype(np.float64), minlength=nbins)
        out[name] = [float(k[j] / n[j]) if n[j] else None for j in range(nbins)]
        counts[name] = [int(v) for v in n]
    starts = [iso((first + j) * period) or "" for j in range(nbins)]
    return TimeSeries(period_s=period, starts=starts, tools=out, counts=counts)


def latency_quantiles(arr: ProbeArrays, points: int = 400) -> dict[str, list[float]]:
    out = {}
    for i, name in enumerate(arr.tools):
        s = arr.slice(i)
        lat = s.latency_ms[(s.code < 0) & np.isfinite(s.latency_ms)]
        if lat.shape[0] == 0:
            continue
        if lat.shape[0] > points:
            lat = np.quantile(lat, np.linspace(0, 1, points))
        out[name] = [float(v) for v in np.sort(lat)]
    return out


def several_vantages(
    db: Database,
    since: float | None,
    until: float | None,
    tools: list[str] | None,
    kinds: list[str] | None,
) -> bool:
    """Do the selected rows come from more than one vantage (no vantage counts as one)? One
    indexed query, so the side-by-side table is built only when there is a side to show."""
    conn = db.read()
    try:
        cols = probe_columns(conn)
        if "vantage" not in cols:
            return False
        where, params = conditions(cols, since, until, tools, kinds, None)
        found = conn.execute(
            f"SELECT DISTINCT coalesce(vantage, '') FROM probes WHERE {where} LIMIT 2", params
        ).fetchall()
    finally:
        conn.close()
    return len(found) > 1


def side_tables(
    db: Database,
    since: float | None,
    until: float | None,
    tools: list[str] | None,
    kinds: list[str] | None,
    vantages: list[str] | None,
    arr: ProbeArrays,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, dict[str, Any]]]]:
    """(phase medians per tool, vantages side by side when the rows come from several);
    `arr`: the rows already read with their phases (`PHASE_EXTRA`)."""
    from realprobe.probes.phases import phase_medians, vantage_table

    phases = phase_medians(arr)
    several = not vantages and several_vantages(db, since, until, tools, kinds)
    return phases, vantage_table(db, since, until, tools, kinds) if several else {}


def drift_between_halves(arr: ProbeArrays) -> DriftReport:
    """Each tool's own earlier half of calls against its later half: tools probed at different
    paces (a 5 s politeness interval vs 1 s) still split evenly."""
    bm = np.zeros(len(arr), dtype=bool)
    for i in range(len(arr.tools)):
        a, b = int(arr.bounds[i]), int(arr.bounds[i + 1])
        bm[a : a + (b - a) // 2] = True
    t0, t1 = float(arr.ts.min()), float(arr.ts.max())
    return drift(arr.where(bm), arr.where(~bm), baseline_window=(t0, None),
                 current_window=(None, t1))


def drift_between_windows(
    arr: ProbeArrays,
    baseline: tuple[float | None, float | None],
    current: tuple[float | None, float | None],
) -> DriftReport:
    def inside(w: tuple[float | None, float | None]) -> BoolArray:
        lo = w[0] if w[0] is not None else -np.inf
        hi = w[1] if w[1] is not None else np.inf
        return (arr.ts >= lo) & (arr.ts < hi)

    return drift(arr.where(inside(baseline)), arr.where(inside(current)),
                 baseline_window=baseline, current_window=current)


def build_report(
    db: Database,
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    baseline: tuple[float | None, float | None] | None = None,
    current: tuple[float | None, float | None] | None = None,
    period_s: float = 86400.0,
    *,
    kinds: list[str] | None = None,
    vantages: list[str] | None = None,
    stats: StatsReport | None = None,
    groups: list[Group] | None = None,
) -> ReportData:
    """Stats over the window's rows of `kinds` (target kinds; default as `stats` picks them)
    and `vantages`; drift between `baseline` and `current`, by default each tool's earlier
    half of calls against its later half. `stats` computed for the same selection is reused
    instead of computed again (its provenance names the kinds it read); so is `groups`, the
    window's provenance survey. The phase medians come from the same pass over the rows."""
    from realprobe.probes.loading import PHASE_EXTRA

    if kinds is None and stats is not None and stats.provenance is not None:
        kinds = list(stats.provenance.target_kinds)
    if stats is None:
        arr, rep = stats_from_db(
            db, since, until, tools, period_s, kinds=kinds, vantages=vantages, groups=groups
        )
    else:
        arr = load_probes(db, since, until, tools, kinds=kinds, vantages=vantages,
                          extra=PHASE_EXTRA)
        rep = stats
    drift_rep, note = None, None
    if float(arr.ts.max()) <= float(arr.ts.min()):
        note = "all rows share one timestamp: no drift comparison"
    elif baseline is None or current is None:
        drift_rep = drift_between_halves(arr)
        note = "per tool: the earlier half of its calls against the later half"
    else:
        drift_rep = drift_between_windows(arr, baseline, current)
    over_time, quantiles = success_over_time(arr), latency_quantiles(arr)
    used = list(rep.provenance.target_kinds) if rep.provenance is not None else kinds
    phases, by_vantage = side_tables(db, since, until, tools, used, vantages, arr)
    return ReportData(
        phases=phases,
        by_vantage=by_vantage,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        db=str(db),
        stats=rep,
        drift=drift_rep,
        drift_note=note,
        over_time=over_time,
        latency_quantiles=quantiles,
    )
