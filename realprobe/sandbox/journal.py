"""The request journal: what the sandbox answered, for verification in tests (`GET /_journal`).

One entry per API request (control paths are not journaled): method, path (credentials in its
query replaced, as everywhere realprobe keeps a URL), the tool, where
the body came from, the fault and toxics applied, status, bytes written, timings and the
request id (echoed in the response's `X-Request-Id`, so a client pairs its calls with entries).

The journal is bounded twice: at most `limit` entries and about `max_bytes` bytes (each
entry counts a fixed overhead plus its path and request id); the oldest go first.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from realprobe.secrets import scrub_url

JOURNAL_LIMIT = 10_000
#: about this many bytes of entries are kept (and at most this much is answered at once)
JOURNAL_MAX_BYTES = 8 * 1024 * 1024
#: what one entry costs besides its path and request id (its fields, as JSON and in memory)
ENTRY_OVERHEAD = 600


@dataclass(slots=True)
class Entry:
    seq: int
    at: float  # wall clock, epoch seconds, when the request was read
    method: str
    path: str  # as received, query included
    api: str | None = None
    tool: str | None = None
    source: str | None = None  # body source: cassette | fixture | ... | upstream
    fault: str | None = None  # the variant played: ok, 500, hang, fixture:error, ...
    forced: bool = False  # the fault came from a /_fault/<variant>/ prefix
    toxics: list[str] = field(default_factory=list)
    status: int | None = None  # None: no status line went out (hang, reset, timeout)
    body_bytes: int = 0  # response body bytes written
    wire_bytes: int = 0  # every response byte written (status line and headers included)
    ended: str = "complete"  # complete | closed | reset | hang | deadline | client-closed
    upstream_ms: float | None = None  # proxy mode: time spent on the upstream call
    delay_ms: float = 0.0  # latency added by the profile and latency toxics
    first_byte_ms: float | None = None  # request read -> first response byte written
    total_ms: float | None = None  # request read -> last byte written / connection ended
    request_id: str | None = None  # the client's X-Request-Id, or one the sandbox made
    draw: int | None = None  # the call's number in its caller's run (X-Realprobe-Draw)
    _t0: float = field(default=0.0, repr=False)

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self._t0) * 1000.0

    def size(self) -> int:
        return ENTRY_OVERHEAD + len(self.path) + len(self.request_id or "")

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("_t0", None)
        return out


class Journal:
    def __init__(self, limit: int = JOURNAL_LIMIT, max_bytes: int = JOURNAL_MAX_BYTES) -> None:
        self.limit = limit
        self.max_bytes = max_bytes
        self.entries: deque[Entry] = deque()
        self.bytes = 0
        self.dropped = 0  # entries evicted to stay within the bounds
        self._seq = itertools.count(1)

    def start(self, method: str, path: str, request_id: str | None = None) -> Entry:
        if "?" in path or "@" in path:  # a key in the query is the caller's, not the journal's
            path = scrub_url(path)
        entry = Entry(next(self._seq), time.time(), method, path, request_id=request_id,
                      _t0=time.perf_counter())
        self.entries.append(entry)
        self.bytes += entry.size()
        while self.entries and (len(self.entries) > self.limit or self.bytes > self.max_bytes):
            self.bytes -= self.entries.popleft().size()
            self.dropped += 1
        return entry

    def detached(self) -> Entry:
        """An entry that is not kept (control paths)."""
        return Entry(0, time.time(), "", "", _t0=time.perf_counter())

    def clear(self) -> None:
        self.entries.clear()
        self.bytes = 0

    def dump(self, since: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        rows = [e.as_json() for e in self.entries if e.seq > since]
        return rows[-limit:] if limit else rows
