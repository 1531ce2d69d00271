"""The one Retry-After parser: seconds, an HTTP date, or the `retry-after-ms` header some LLM
endpoints send. Used for API answers (the error taxonomy's retry-after), the per-host gates,
the sandbox's proxy and the LLM client's limiter alike."""

from __future__ import annotations

import contextlib
import time
from email.utils import parsedate_to_datetime


def parse_retry_after(value: str | None, date_header: str | None = None) -> float | None:
    """Seconds to wait from a Retry-After value given as seconds or as an HTTP date (measured
    from the answer's own `Date` header when there is one, so a skewed clock does not
    matter). None when absent or unreadable; never negative."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if seconds == seconds and seconds != float("inf") else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    base = time.time()
    if date_header:
        with contextlib.suppress(TypeError, ValueError, IndexError):
            date = parsedate_to_datetime(date_header)
            if date is not None and date.tzinfo is not None:
                base = date.timestamp()
    return max(0.0, when.timestamp() - base)


def retry_after_of(headers: object) -> float | None:
    """Seconds from a headers mapping: `retry-after-ms` first, then Retry-After (seconds or an
    HTTP date, against the `date` header)."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    ms = get("retry-after-ms")
    if ms:
        with contextlib.suppress(ValueError):
            value = float(ms) / 1000.0
            if value == value and value != float("inf"):
                return max(0.0, value)
    return parse_retry_after(get("retry-after"), get("date"))
