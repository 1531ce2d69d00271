"""What an import reads from a monitor, before it is stored: recorded checks, the time the
monitor implied between its records, the time it did not watch, and what was skipped.

Every importer turns its monitor's format into these values; `rows` turns them into the
rows of the imported tables (`realprobe.store`), each naming its monitor, source and vantage.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import sqlite3
import statistics
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from realprobe.errors import ErrorCode, RealprobeError, code_for_status
from realprobe.store import FUTURE_SKEW_S, IMPORTED_KIND, iso_utc, open_db

#: what a monitor said about one check
STATES = ("up", "down", "degraded", "pending", "maintenance")
#: states that count as the endpoint failing (Uptime Kuma counts a pending beat as down)
DOWN_STATES = frozenset({"down", "pending"})
#: longest text kept from a monitor's message
DETAIL_CHARS = 300


class HistoryError(RealprobeError):
    """A source that cannot be imported: one line naming the source and what is wrong."""


@dataclass(slots=True)
class Check:
    """One check the monitor recorded."""

    ts: float
    state: str
    http_status: int | None = None
    latency_ms: float | None = None
    detail: str | None = None
    source: str = ""


@dataclass(slots=True)
class Interval:
    """A stretch of time: `observed` (a state held from one record to the next, `count`
    checks implied at the configured cadence), `censored` (the monitor did not watch), or a
    declared `incident`."""

    start: float
    end: float | None
    kind: str
    state: str | None = None
    count: int = 0
    recorded: int = 0
    reason: str | None = None
    ref: str = ""
    source: str = ""


@dataclass
class Monitor:
    """One monitored endpoint and what was read of it."""

    key: str
    monitor: str
    kind: str
    name: str
    url: str | None
    vantage: str
    source: str
    gap_limit_s: float
    cadence_configured_s: float | None = None
    cadence_s: float | None = None
    cadence_how: str = ""
    checks: list[Check] = field(default_factory=list)
    observed: list[Interval] = field(default_factory=list)
    censored: list[Interval] = field(default_factory=list)
    published: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class History:
    """Everything one import read: its monitors, and the records it skipped, by reason."""

    source: str
    monitor_kind: str
    monitors: list[Monitor] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)


# -- values in monitors' formats -----------------------------------------------------------

_JS_DATE = re.compile(
    r"^\w{3} (\w{3}) (\d{1,2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT([+-]\d{4})"
)
_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
#: a number of epoch seconds past this is milliseconds (seconds would be past the year 5000)
EPOCH_MS_FROM = 1e11
#: naive times are UTC: seconds since this
_EPOCH = dt.datetime(1970, 1, 1)
_FRACTION = re.compile(r"(\.\d{6})\d+")
_GO_ZONE = re.compile(r" ([+-]\d{2})(\d{2})( [A-Z]{2,5})?$")


def monitor_time(value: object) -> float | None:
    """Epoch seconds from a time as monitors write it: ISO 8601 (with `Z`, an offset, a space
    for the `T`, nanoseconds), SQLite's `YYYY-MM-DD HH:MM:SS.sss` (UTC), a YAML timestamp,
    epoch seconds, JavaScript's `Date.toString()` ("Wed Jan 25 2023 17:20:42 GMT+0000
    (...)") or Go's `2006-01-02 15:04:05 +0000 UTC`. None when it is none of them."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, dt.datetime):
        when = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return when.timestamp()
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            return None
        return value / 1000.0 if value > EPOCH_MS_FROM else float(value)
    if not isinstance(value, str):
        return None
    try:  # the common forms (ISO 8601, SQLite's) at once
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        pass
    else:
        return when.timestamp() if when.tzinfo else (when - _EPOCH).total_seconds()
    text = value.strip()
    js = _JS_DATE.match(text)
    if js is not None and js.group(1) in _MONTHS:
        mon, day, year, hh, mm, ss, zone = js.groups()
        sign = 1 if zone[0] == "+" else -1
        offset = dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[3:5])) * sign
        when = dt.datetime(int(year), _MONTHS[mon], int(day), int(hh), int(mm), int(ss),
                           tzinfo=dt.timezone(offset))
        return when.timestamp()
    text = _GO_ZONE.sub(lambda m: f"{m.group(1)}:{m.group(2)}", text)
    text = _FRACTION.sub(lambda m: m.group(1), text.replace("Z", "+00:00"))
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def whole(value: object) -> int | None:
    """An integer from an int or a numeric string (monitors write `responseTime: "484"`)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def error_code(state: str, http_status: int | None, detail: str | None = None) -> str | None:
    """The error code of a failed check from what the monitor kept: no answer (code 0 or
    none) is NETWORK_ERROR, or TIMEOUT when the message says so; an answer that failed the
    monitor's own check (a 2xx/3xx it did not accept, a missing keyword) INVALID_RESPONSE;
    an HTTP error status by the usual table. None for a check that did not fail."""
    if state not in DOWN_STATES:
        return None
    text = (detail or "").lower()
    if not http_status:
        return (ErrorCode.TIMEOUT if "timeout" in text or "timed out" in text
                else ErrorCode.NETWORK_ERROR).value
    code = code_for_status(http_status)
    return (code or ErrorCode.INVALID_RESPONSE).value


def short(text: object) -> str | None:
    if text is None:
        return None
    return str(text)[:DETAIL_CHARS]


# -- from checks to time -------------------------------------------------------------------


def keep(checks: list[Check], skipped: Counter[str], now: float,
         since: float | None, until: float | None) -> list[Check]:
    """The checks of one monitor in time order within the window: a check stamped in the
    future, or again at a time already seen (a duplicated record), is skipped and counted."""
    out: list[Check] = []
    seen: set[float] = set()
    for c in sorted(checks, key=lambda c: c.ts):
        if c.ts > now + FUTURE_SKEW_S:
            skipped["future time"] += 1
        elif c.ts in seen:
            skipped["duplicate"] += 1
        elif (since is None or c.ts >= since) and (until is None or c.ts < until):
            seen.add(c.ts)
            out.append(c)
    return out


def censor_silences(m: Monitor) -> None:
    """Censored intervals of a monitor with recorded checks: a silence longer than its gap
    limit (the monitor was paused, down itself, or its retention cut the rows) and the time
    from a maintenance check to the next check."""
    for a, b in pairwise(m.checks):
        gap = b.ts - a.ts
        if gap > m.gap_limit_s:
            m.censored.append(Interval(a.ts, b.ts, "censored", reason=(
                f"no check for {duration_words(gap)} (over {duration_words(m.gap_limit_s)})"
            ), source=a.source))
        elif a.state == "maintenance":
            m.censored.append(Interval(a.ts, b.ts, "censored", reason="maintenance",
                                       source=a.source))


def median_gap(checks: list[Check], limit: float) -> float | None:
    gaps = [b.ts - a.ts for a, b in pairwise(checks)
            if 0 < b.ts - a.ts <= limit]
    return float(statistics.median(gaps)) if gaps else None


def duration_words(seconds: float) -> str:
    """`2d 3h`, `14m`, `40s`: a duration for people."""
    s = round(seconds)
    if s >= 86400:
        return f"{s // 86400}d {s % 86400 // 3600}h" if s % 86400 >= 3600 else f"{s // 86400}d"
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60}m" if s % 3600 >= 60 else f"{s // 3600}h"
    if s >= 60:
        return f"{s // 60}m"
    return f"{s}s"


# -- rows of the imported tables ---------------------------------------------------------------


def rows(history: History, imported_at: float) -> tuple[
        list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(monitor rows, check rows, interval rows) of the imported tables."""
    monitors, checks, intervals = [], [], []
    for m in history.monitors:
        first = min([c.ts for c in m.checks] + [i.start for i in m.observed + m.censored],
                    default=None)
        last = max([c.ts for c in m.checks] + [i.end or i.start for i in m.observed
                                                + m.censored], default=None)
        monitors.append({
            "monitor_key": m.key, "monitor": m.monitor, "monitor_kind": m.kind,
            "name": m.name, "url": m.url, "source": m.source, "vantage": m.vantage,
            "cadence_configured_s": m.cadence_configured_s, "cadence_s": m.cadence_s,
            "cadence_how": m.cadence_how, "gap_limit_s": m.gap_limit_s,
            "first_ts": first, "last_ts": last,
            "published": json.dumps(m.published) if m.published is not None else None,
            "detail": "; ".join(m.notes) or None, "imported_at": iso_utc(imported_at),
        })
        for c in m.checks:
            checks.append({
                "monitor_key": m.key, "ts": c.ts, "state": c.state,
                "ok": None if c.state == "maintenance" else int(c.state not in DOWN_STATES),
                "http_status": c.http_status,
                "error_code": error_code(c.state, c.http_status, c.detail),
                "latency_ms": c.latency_ms, "detail": c.detail,
                "source": c.source or m.source, "vantage": m.vantage, "kind": IMPORTED_KIND,
            })
        for i in m.observed + m.censored:
            intervals.append({
                "monitor_key": m.key, "kind": i.kind, "state": i.state, "start_ts": i.start,
                "end_ts": i.end, "count": i.count, "recorded": i.recorded,
                "reason": i.reason, "ref": i.ref, "source": i.source or m.source,
                "vantage": m.vantage,
            })
    return monitors, checks, intervals


def foreign(path: str, where: str, what: str, need: dict[str, set[str]]) -> sqlite3.Connection:
    """Another program's SQLite file, read-only, with the tables and columns `need` names;
    one line naming `where` when it is missing, not SQLite, or not `what`."""
    if not Path(path).exists():
        raise HistoryError(f"{where}: no such file")
    try:
        conn = open_db(path, read=True).read(need=None, what=what)
    except RealprobeError as exc:  # the store's one-line errors (missing, a folder, not SQLite)
        raise HistoryError(f"{where}: {str(exc).removeprefix(f'{path}: ')}") from None
    try:
        tables = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
        for table, cols in need.items():
            if not cols <= (columns(conn, table) if table in tables else set()):
                shown = ", ".join(sorted(tables)[:5]) or "none"
                raise HistoryError(f"{where}: not an {what} (no `{table}` table with "
                                   f"{', '.join(sorted(cols))}; tables: {shown})")
    except (HistoryError, sqlite3.Error) as exc:
        conn.close()
        if isinstance(exc, HistoryError):
            raise
        raise HistoryError(f"{where}: cannot read the database ({exc})") from None
    return conn


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
