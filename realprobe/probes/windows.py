"""Time windows for the analysis commands: ISO times, `now`, ages like `7d`, and `A..B`."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from realprobe.errors import RealprobeError

_REL = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_time(text: str, now: float | None = None) -> float:
    """Epoch seconds from an ISO date/datetime (naive means UTC), `now`, or `7d`/`24h`/`30m` ago."""
    now = datetime.now(UTC).timestamp() if now is None else now
    s = text.strip()
    if s.lower() == "now":
        return now
    m = _REL.match(s.lower())
    if m:
        return now - float(m.group(1)) * _UNIT_S[m.group(2)]
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise RealprobeError(
            f"time {text!r}: expected an ISO date or datetime (2026-11-01, 2026-11-01T02:00Z), "
            "`now`, or an age like 7d, 24h, 30m"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def parse_duration(text: str) -> float:
    """Seconds from `30m`, `6h`, `1d`, `2w`."""
    m = _REL.match(text.strip().lower())
    if not m or float(m.group(1)) <= 0:
        raise RealprobeError(f"duration {text!r}: expected a length like 30m, 6h, 1d or 1w")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


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
