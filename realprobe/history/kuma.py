"""Uptime Kuma: its SQLite file's `monitor` and `heartbeat` tables.

A heartbeat is a recorded check: status 0 DOWN, 1 UP, 2 PENDING (failed within its retries;
Kuma counts it as down), 3 MAINTENANCE (censored: the owner said not to count it); `ping` is
the response time in ms (none on failure); the HTTP code is only inside `msg`
("200 - OK", "Request failed with status code 503"). A silence longer than three check
intervals (a paused monitor, Kuma itself down, the retention cut) is censored. Kuma's own
aggregates (`stat_daily`) are read as its published figures.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

from realprobe.history.records import (
    Check,
    History,
    HistoryError,
    Monitor,
    censor_silences,
    columns,
    foreign,
    keep,
    median_gap,
    monitor_time,
    short,
)

_STATES = {0: "down", 1: "up", 2: "pending", 3: "maintenance"}
_CODE = re.compile(r"^(\d{3}) - |status code (\d{3})")
VANTAGE = "uptime-kuma"
#: a silence longer than this many check intervals is censored
GAP_INTERVALS = 3.0


@lru_cache(maxsize=4096)
def _http(msg: str | None) -> int | None:
    """The HTTP status inside a heartbeat's message (messages repeat: each parsed once)."""
    m = _CODE.search(msg or "")
    return int(m.group(1) or m.group(2)) if m else None


def _published(conn: sqlite3.Connection, mid: int) -> dict[str, Any] | None:
    try:
        row = conn.execute("SELECT sum(up), sum(down), min(timestamp), max(timestamp), count(*) "
                           "FROM stat_daily WHERE monitor_id = ?", [mid]).fetchone()
    except sqlite3.Error:
        return None
    if not row or not row[4]:
        return None
    up, down = int(row[0] or 0), int(row[1] or 0)
    return {"by": "Uptime Kuma stat_daily (heartbeats counted, not time)", "up_beats": up,
            "down_beats": down, "days": int(row[4]),
            "uptime": f"{100 * up / (up + down):.2f}%" if up + down else None}


def read_kuma(path: str, *, now: float, since: float | None = None,
              until: float | None = None) -> History:
    where = f"kuma:{path}"
    conn = foreign(path, where, "Uptime Kuma database", {
        "heartbeat": {"monitor_id", "status", "time"}, "monitor": {"id", "name"}})
    try:
        return _read(conn, where, Path(path).name, now, since, until)
    except sqlite3.Error as exc:
        raise HistoryError(f"{where}: cannot read the database ({exc})") from None
    finally:
        conn.close()


def _read(conn: sqlite3.Connection, where: str, label: str, now: float,
          since: float | None, until: float | None) -> History:
    hist = History(source=f"kuma:{label}", monitor_kind="kuma")
    skipped: Counter[str] = hist.skipped
    mcols = columns(conn, "monitor")
    extra = [c for c in ("url", "interval", "retry_interval", "active", "type")
             if c in mcols]
    monitors: dict[int, dict[str, Any]] = {}
    for row in conn.execute(f"SELECT id, name{''.join(', ' + c for c in extra)} FROM monitor"):
        monitors[int(row[0])] = {"name": row[1], **dict(zip(extra, row[2:], strict=True))}
    beats: dict[int, list[Check]] = {}
    hcols = columns(conn, "heartbeat")
    ping = "ping" if "ping" in hcols else "NULL"
    msg = "msg" if "msg" in hcols else "NULL"
    # SQLite reads Kuma's own time format in C (a million beats in a second); anything it
    # cannot read is tried by `monitor_time`
    for mid, status, msg_v, when, ping_v, epoch in conn.execute(
            f"SELECT monitor_id, status, {msg}, time, {ping}, "
            "CASE WHEN typeof(time) = 'text' THEN (julianday(time) - 2440587.5) * 86400.0 "
            "END FROM heartbeat"):
        state = _STATES.get(status) if isinstance(status, int) else None
        ts = round(epoch, 3) if isinstance(epoch, float) else monitor_time(when)
        if state is None or ts is None or mid not in monitors:
            skipped["heartbeat of the wrong types" if mid in monitors
                    else "heartbeat of no monitor"] += 1
            continue
        lat = float(ping_v) if isinstance(ping_v, int | float) and ping_v >= 0 else None
        beats.setdefault(mid, []).append(Check(
            ts=ts, state=state, http_status=_http(msg_v), latency_ms=lat if state == "up" else
            None, detail=short(msg_v)))
    for mid, info in monitors.items():
        m = _monitor(mid, info, label, hist.source)
        m.checks = keep(beats.get(mid, []), skipped, now, since, until)
        if not m.checks:
            continue
        censor_silences(m)
        m.cadence_s = median_gap(m.checks, m.gap_limit_s)
        m.cadence_how = "the median spacing of its heartbeats"
        m.published = _published(conn, mid)
        hist.monitors.append(m)
    if not hist.monitors:
        why = ", ".join(f"{n} {k}" for k, n in skipped.most_common()) or "no heartbeats"
        raise HistoryError(f"{where}: no usable heartbeat in the window ({why})")
    return hist


def _monitor(mid: int, info: dict[str, Any], label: str, source: str) -> Monitor:
    interval = info.get("interval")
    interval = float(interval) if isinstance(interval, int | float) and interval > 0 else 60.0
    retry = info.get("retry_interval")
    spacing = max(interval, float(retry) if isinstance(retry, int | float) else 0.0)
    name = str(info.get("name") or f"monitor {mid}")
    m = Monitor(key=f"kuma:{label}#{mid}", monitor=name, kind="kuma", name=name,
                url=str(info["url"]) if info.get("url") else None, vantage=VANTAGE,
                source=source, gap_limit_s=GAP_INTERVALS * spacing,
                cadence_configured_s=interval)
    if info.get("active") in (0, False):
        m.notes.append("paused in Kuma now: time after its last heartbeat is not counted")
    return m
