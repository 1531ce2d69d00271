"""Times as the stored rows and reports print them (the grammar users write them in is
`realprobe.ranges`)."""

from __future__ import annotations

import math
from datetime import UTC, datetime


def iso(ts: float | None) -> str | None:
    if ts is None or not math.isfinite(ts):
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
