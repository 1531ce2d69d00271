"""Where a tool's time goes: median DNS, connect, TLS, first byte and transfer per tool, and
the same statistics side by side per vantage point.

Connection phases (DNS, connect, TLS) are taken over calls that opened a new connection; a
reused keep-alive connection has none. Time to first byte and transfer are taken over every
successful call that recorded phases (simulated and replayed calls record none).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from realprobe.dbfacts import CONNECTION_PHASES as CONNECTION
from realprobe.dbfacts import PHASE_COLUMNS as PHASES
from realprobe.probes.loading import conditions, number, probe_columns
from realprobe.store import read_only


def phase_breakdown(
    db: str | Path,
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    kinds: list[str] | None = None,
    vantages: list[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """{tool: {"n": calls with phases, "dns_ms": median, ..., "slowest": phase}}."""
    conn = read_only(db)
    try:
        cols = probe_columns(conn)
        if not set(PHASES) <= cols:
            return {}
        where, params = conditions(cols, since, until, tools, kinds, vantages)
        rows = conn.execute(
            f"SELECT tool, new_connection, {', '.join(number(p) for p in PHASES)} FROM probes "
            f"WHERE {where} AND outcome = 'ok' AND {number('ttfb_ms')} IS NOT NULL "
            "ORDER BY tool",
            params,
        ).fetchall()
    finally:
        conn.close()
    per: dict[str, dict[str, list[float]]] = {}
    for tool, new, *values in rows:
        cells = per.setdefault(tool, {p: [] for p in PHASES})
        for name, value in zip(PHASES, values, strict=True):
            if value is None or (name in CONNECTION and not new):
                continue
            cells[name].append(float(value))
    out: dict[str, dict[str, Any]] = {}
    for tool, cells in per.items():
        medians = {p: (round(statistics.median(v), 2) if v else None) for p, v in cells.items()}
        known = {p: m for p, m in medians.items() if m is not None}
        out[tool] = {
            "n": len(cells["ttfb_ms"]),
            "new_connections": len(cells["connect_ms"]),
            **medians,
            "slowest": max(known, key=lambda p: known[p]) if known else None,
        }
    return out


def vantage_table(
    db: str | Path,
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    kinds: list[str] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """{tool: {vantage: {"n", "ok", "rate", "ci95", "p50_ms"}}}: one API seen from each
    network (Wilson intervals on the calls as they are; `stats --by vantage` adjusts for
    bursts)."""
    from realprobe.probes.stats import wilson

    conn = read_only(db)
    try:
        cols = probe_columns(conn)
        where, params = conditions(cols, since, until, tools, kinds, None)
        rows = conn.execute(
            f"SELECT tool, COALESCE(vantage, ''), outcome, {number('latency_ms')} FROM probes "
            f"WHERE {where}",
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
