"""Durations and time windows, one grammar for every flag, keyword and file key: durations
(`500ms`, `1h30m`, `1w`, plain seconds), ISO times, `now`, ages (a duration ago), `A..B`."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from realprobe.errors import RealprobeError

#: one part of a duration: a number and its unit (`1h30m` is two parts)
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
DURATION_FORMS = "500ms, 90s, 30m, 1h30m, 1d, 1w, or plain seconds"


def _seconds(text: str) -> float | None:
    """Seconds from a duration (parts from `ms` to `w`, as in `1h30m`, or plain seconds);
    None when `text` is not one."""
    raw = text.strip().lower().replace(" ", "")
    try:
        return float(raw) if raw and raw[0] != "-" else None
    except ValueError:
        pass
    pos, seconds = 0, 0.0
    for m in _PART.finditer(raw):
        if m.start() != pos:
            return None
        seconds += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    return seconds if raw and pos == len(raw) else None


def parse_duration(text: str, what: str = "duration") -> float:
    """Positive seconds from a duration: the one grammar of every duration a user writes
    (flags, keywords, rule files): parts from `ms` to `w` (`1h30m`), or plain seconds."""
    seconds = _seconds(text)
    if seconds is None or not 0 < seconds < math.inf:
        raise RealprobeError(f"{what} {text!r}: expected a positive length like {DURATION_FORMS}")
    return seconds


def parse_time(text: str, now: float | None = None) -> float:
    """Epoch seconds from an ISO date/datetime (naive means UTC), `now`, or an age (a
    duration: `7d`, `1h30m`, `500ms` ago)."""
    now = datetime.now(UTC).timestamp() if now is None else now
    s = text.strip()
    if s.lower() == "now":
        return now
    age = _seconds(s)
    if age is not None and math.isfinite(age):
        return now - age
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise RealprobeError(
            f"time {text!r}: expected an ISO date or datetime (2026-11-01, 2026-11-01T02:00Z), "
            f"`now`, or an age ({DURATION_FORMS})"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def parse_window(text: str, now: float | None = None) -> tuple[float | None, float | None]:
    """`T1..T2` (either end may be empty: open) as epoch seconds; checks T1 < T2."""
    if ".." not in text:
        raise RealprobeError(
            f"window {text!r}: expected START..END, e.g. 14d..7d or 2026-11-01..now"
        )
    a, _, b = text.partition("..")
    start = parse_time(a, now) if a.strip() else None
    end = parse_time(b, now) if b.strip() else None
    if start is not None and end is not None and start >= end:
        raise RealprobeError(f"window {text!r}: the start is not before the end")
    return start, end


def iso(ts: float | None) -> str | None:
    if ts is None or not math.isfinite(ts):
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
