"""Where a tool's time goes: median DNS, connect, TLS, first byte and transfer per tool, and
the same statistics side by side per vantage point.

Connection phases (DNS, connect, TLS) are taken over calls that opened a new connection; a
reused keep-alive connection has none. Time to first byte and transfer are taken over every
successful call that recorded phases (simulated and replayed calls record none).
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from realprobe.chunks import real
from realprobe.dbfacts import CONNECTION_PHASES as CONNECTION
from realprobe.dbfacts import PHASE_COLUMNS as PHASES
from realprobe.probes.loading import (
    PHASE_EXTRA,
    ProbeArrays,
    conditions,
    probe_columns,
)
from realprobe.probes.numeric import median
from realprobe.store import Database


def phase_medians(arr: ProbeArrays) -> dict[str, dict[str, Any]]:
    """{tool: {"n": calls with phases, "dns_ms": median, ..., "slowest": phase}} of rows read
    with `extra=PHASE_EXTRA`: per tool, its successful calls that recorded a first byte (none
    when the file has no phase columns)."""
    if not set(PHASE_EXTRA) <= set(arr.extra):
        return {}
    keep = (arr.code < 0) & ~np.isnan(arr.extra["ttfb_ms"])
    # the few calls that opened a connection by their rows, not by a mask over every row
    new = np.flatnonzero(keep & (arr.extra["new_connection"] != 0))
    at = np.searchsorted(new, arr.bounds).tolist()
    cols = {p: (arr.extra[p], np.isfinite(arr.extra[p]) & keep) for p in PHASES
            if p not in CONNECTION}  # fmt: skip
    conn = {p: arr.extra[p][new] for p in CONNECTION}
    out: dict[str, dict[str, Any]] = {}
    for i, tool in enumerate(arr.tools):
        a, b = int(arr.bounds[i]), int(arr.bounds[i + 1])
        if not keep[a:b].any():
            continue
        medians: dict[str, float | None] = {}
        counts: dict[str, int] = {}
        for name in PHASES:
            if name in CONNECTION:
                v = conn[name][at[i]:at[i + 1]]
                v = v[np.isfinite(v)]
            else:
                v, ok = cols[name]
                v = np.compress(ok[a:b], v[a:b])  # what v[a:b][ok[a:b]] holds, twice as fast
            counts[name] = int(v.shape[0])
            medians[name] = round(median(v, overwrite=True), 2) if v.shape[0] else None
        known = {p: m for p, m in medians.items() if m is not None}
        out[tool] = {
            "n": counts["ttfb_ms"],
            "new_connections": counts["connect_ms"],
            **medians,
            "slowest": max(known, key=lambda p: known[p]) if known else None,
        }
    return out


def vantage_table(
    db: Database,
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    kinds: list[str] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """{tool: {vantage: {"n", "ok", "rate", "ci95", "p50_ms"}}}: one API seen from each
    network (Wilson intervals on the calls as they are; `stats --by vantage` adjusts for
    bursts)."""
    from realprobe.probes.stats import wilson

    conn = db.read()
    try:
        cols = probe_columns(conn)
        where, params = conditions(cols, since, until, tools, kinds, None)
        rows = conn.execute(
            f"SELECT tool, COALESCE(vantage, ''), outcome, {real('latency_ms', 'NULL')} "
            f"FROM probes WHERE {where}",
            params,
        ).fetchall()
    finally:
        conn.close()
    cells: dict[tuple[str, str], list[Any]] = {}
    for tool, vantage, outcome, latency in rows:
        cell = cells.setdefault((tool, vantage), [0, 0, []])
        cell[0] += 1
        if outcome == "ok":
            cell[1] += 1
            if latency is not None:
                cell[2].append(float(latency))
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (tool, vantage), (n, ok, lat) in sorted(cells.items()):
        lo, hi = wilson(ok, n)
        out.setdefault(tool, {})[vantage] = {
            "n": n, "ok": ok, "rate": ok / n, "ci95": [lo, hi],
            "p50_ms": round(statistics.median(lat), 1) if lat else None,
        }
    return out
