"""Where a tool's time goes: median DNS, connect, TLS, first byte and transfer per tool, and
the same statistics side by side per vantage point.

Connection phases (DNS, connect, TLS) are taken over calls that opened a new connection; a
reused keep-alive connection has none. Time to first byte and transfer are taken over every
successful call that recorded phases (simulated and replayed calls record none).
"""

from __future__ import annotations

import sqlite3
import statistics
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from realprobe.dbfacts import CONNECTION_PHASES as CONNECTION
from realprobe.dbfacts import PHASE_COLUMNS as PHASES
from realprobe.errors import RealprobeError
from realprobe.probes.loading import conditions, number, probe_columns, read_by_tool, real
from realprobe.store import read_error, read_only


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
    finally:
        conn.close()
    where += f" AND outcome = 'ok' AND {number('ttfb_ms')} IS NOT NULL"
    values = ", ".join(f"{real(p)} AS c{i}" for i, p in enumerate(PHASES, start=1))
    query = (
        f"SELECT coalesce({number('new_connection')}, 0) AS c0, {values} FROM probes "
        f"WHERE {where} ORDER BY tool", params,
    )
    try:
        groups, columns = read_by_tool(Path(db), where, params, query, len(PHASES) + 1)
    except sqlite3.DatabaseError as exc:
        raise RealprobeError(f"cannot read probes ({read_error(exc)})") from exc
    flat = np.column_stack(columns)
    bounds = np.cumsum([0] + [c for _, c in groups])
    return {t: _phase_medians(flat[bounds[i] : bounds[i + 1]]) for i, (t, _) in enumerate(groups)}


def _phase_medians(flat: NDArray[np.float64]) -> dict[str, Any]:
    """One tool's medians from its rows (new connection flag, then the phases in ms)."""
    new = flat[:, 0] != 0
    medians: dict[str, float | None] = {}
    counts: dict[str, int] = {}
    for j, name in enumerate(PHASES, start=1):
        v = flat[:, j]
        v = v[np.isfinite(v) & new] if name in CONNECTION else v[np.isfinite(v)]
        counts[name] = int(v.shape[0])
        medians[name] = round(float(np.median(v)), 2) if v.shape[0] else None
    known = {p: m for p, m in medians.items() if m is not None}
    return {
        "n": counts["ttfb_ms"],
        "new_connections": counts["connect_ms"],
        **medians,
        "slowest": max(known, key=lambda p: known[p]) if known else None,
    }


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
