"""Gatus: its SQLite store (`endpoints`, `endpoint_results`, `endpoint_events`,
`endpoint_uptimes`).

A result is a recorded check: success, whether it connected, the HTTP status, its duration
(ns) and its errors (joined by `|~|`). Gatus keeps only the last results per endpoint (100 by
default), so the long history is `endpoint_uptimes`: hourly counts of executions and
successes, read as the monitor's own figures (rates, never the order of failures).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from realprobe.history.records import (
    Check,
    History,
    HistoryError,
    Monitor,
    censor_silences,
    foreign,
    keep,
    median_gap,
    monitor_time,
    short,
)

VANTAGE = "gatus"
GAP_INTERVALS = 3.0


def read_gatus(path: str, *, now: float, since: float | None = None,
               until: float | None = None) -> History:
    where = f"gatus:{path}"
    conn = foreign(path, where, "Gatus store", {
        "endpoints": {"endpoint_id", "endpoint_name", "endpoint_group"},
        "endpoint_results": {"endpoint_id", "success", "connected", "status", "duration",
                             "timestamp", "errors"}})
    try:
        return _read(conn, where, Path(path).name, now, since, until)
    except sqlite3.Error as exc:
        raise HistoryError(f"{where}: cannot read the database ({exc})") from None
    finally:
        conn.close()


def _check(row: tuple[Any, ...]) -> Check | None:
    _eid, success, connected, status, duration, when, errors = row
    ts = monitor_time(when)
    if ts is None or success not in (0, 1) or not isinstance(status, int):
        return None
    lat = duration / 1e6 if isinstance(duration, int | float) and duration >= 0 else None
    text = " | ".join(e for e in str(errors or "").split("|~|") if e) or None
    return Check(ts=ts, state="up" if success else "down",
                 http_status=status if connected else 0, latency_ms=lat, detail=short(text))


def _published(conn: sqlite3.Connection, eid: int) -> dict[str, Any] | None:
    try:
        row = conn.execute(
            "SELECT sum(total_executions), sum(successful_executions), count(*) "
            "FROM endpoint_uptimes WHERE endpoint_id = ?", [eid]).fetchone()
    except sqlite3.Error:
        return None
    if not row or not row[2] or not row[0]:
        return None
    total, good = int(row[0]), int(row[1] or 0)
    return {"by": "Gatus endpoint_uptimes (executions counted per hour, not time)",
            "executions": total, "successful": good, "hours": int(row[2]),
            "uptime": f"{100 * good / total:.2f}%"}


def _read(conn: sqlite3.Connection, where: str, label: str, now: float,
          since: float | None, until: float | None) -> History:
    hist = History(source=f"gatus:{label}", monitor_kind="gatus")
    skipped: Counter[str] = hist.skipped
    endpoints = {int(r[0]): (str(r[1]), str(r[2] or "")) for r in conn.execute(
        "SELECT endpoint_id, endpoint_name, endpoint_group FROM endpoints")}
    results: dict[int, list[Check]] = {}
    for row in conn.execute("SELECT endpoint_id, success, connected, status, duration, "
                            "timestamp, errors FROM endpoint_results"):
        check = _check(row) if row[0] in endpoints else None
        if check is None:
            skipped["result of the wrong types" if row[0] in endpoints
                    else "result of no endpoint"] += 1
            continue
        results.setdefault(row[0], []).append(check)
    for eid, (name, group) in endpoints.items():
        checks = keep(results.get(eid, []), skipped, now, since, until)
        if not checks:
            continue
        spacing = median_gap(checks, float("inf")) or 60.0
        full = f"{group}/{name}" if group else name
        m = Monitor(key=f"gatus:{label}#{group}_{name}", monitor=full, kind="gatus",
                    name=full, url=None, vantage=VANTAGE, source=hist.source,
                    gap_limit_s=GAP_INTERVALS * spacing, checks=checks)
        censor_silences(m)
        m.cadence_s = median_gap(checks, m.gap_limit_s)
        m.cadence_how = "the median spacing of its results (Gatus keeps its last results only)"
        m.published = _published(conn, eid)
        hist.monitors.append(m)
    if not hist.monitors:
        why = ", ".join(f"{n} {k}" for k, n in skipped.most_common()) or "no results"
        raise HistoryError(f"{where}: no usable result in the window ({why})")
    return hist
