"""The record/replay core, with no I/O of its own: what to store for a finished exchange
(`Recorder`) and what to answer for a request (`Player`). The sync and async transports, the
httpx patch and the vcrpy bridge are thin layers that feed these the events they see, so they
cannot drift apart.
"""

from __future__ import annotations

import asyncio
import builtins
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from realprobe.cassettes.cassette import (
    Call,
    Cassette,
    Failure,
    appended_bytes,
    save_cassette,
)
from realprobe.cassettes.journal import Journal
from realprobe.cassettes.matching import (
    MATCH_URL_BODY,
    Matcher,
    MatchSpec,
    body_differences,
    canonical_url,
    closest,
)
from realprobe.cassettes.scrub import (
    ScrubConfig,
    config_for,
    scrub_cassette,
    scrub_for_match,
    secret_header,
)
from realprobe.clock import Clock, RealClock
from realprobe.errors import RealprobeError
from realprobe.http.client import DEADLINE_EXT, TIMING_EXT, DeadlineExceeded
from realprobe.http.transports import SANDBOX_EXT
from realprobe.version import __version__

EXHAUSTION_POLICIES = ("error", "repeat-last", "cycle")
DEADLINE_TYPES = ("CancelledError", "TimeoutError", "DeadlineExceeded")
CONNECT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)
WRITE_ERRORS = (httpx.WriteError, httpx.WriteTimeout)
REDIRECTS = frozenset({301, 302, 303, 307, 308})


class CassetteMiss(RealprobeError):
    """A request the cassette has no recording for (not retryable: replay never goes live)."""


class CassetteExhausted(CassetteMiss):
    """More identical requests than recordings, under on_exhausted=error."""


# -- failures ------------------------------------------------------------------------------


def phase_of(exc: BaseException, headers_seen: bool) -> str:
    if headers_seen:
        return "body"
    if isinstance(exc, httpx.PoolTimeout):
        return "pool"
    if isinstance(exc, CONNECT_ERRORS):
        return "connect"
    if isinstance(exc, WRITE_ERRORS):
        return "write"
    if isinstance(exc, httpx.TransportError | OSError | asyncio.CancelledError):
        return "read"
    return "other"


def failure_of(exc: BaseException, headers_seen: bool, received: int) -> Failure:
    message = str(exc)
    if isinstance(exc, asyncio.CancelledError) and not message:
        message = "cancelled by the caller (its deadline passed, or it shut down)"
    return Failure(type(exc).__name__, message, phase_of(exc, headers_seen), received)


def exception_for(call: Call, request: httpx.Request) -> Exception:
    """The recorded failure as an exception of the same class, bound to this request (a
    call with neither a response nor a failure: the protocol error of no response)."""
    if call.error is None:
        return httpx.RemoteProtocolError("recorded call has no response", request=request)
    name, message = call.error.type, call.error.message
    if name in DEADLINE_TYPES:
        return DeadlineExceeded("the call's deadline passed (as recorded)")
    cls = getattr(httpx, name, None)
    if isinstance(cls, type) and issubclass(cls, httpx.RequestError):
        return cls(message, request=request)
    if isinstance(cls, type) and issubclass(cls, httpx.HTTPError):
        return cls(message)
    b = getattr(builtins, name, None)
    if isinstance(b, type) and issubclass(b, OSError):
        return b(message)
    return httpx.TransportError(f"{name}: {message}", request=request)


# -- latency -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LatencyPolicy:
    kind: str = "none"
    scale: float = 1.0

    @classmethod
    def parse(cls, text: str) -> LatencyPolicy:
        t = text.strip().lower()
        if t in ("none", "real", "virtual"):
            return cls(t)
        if t.startswith("scaled:"):
            try:
                scale = float(t.split(":", 1)[1])
            except ValueError:
                scale = -1.0
            if scale >= 0 and math.isfinite(scale):
                return cls("scaled", scale)
        raise RealprobeError(
            f"replay latency {text!r}: choose none, real, scaled:X (X >= 0) or virtual"
        )

    @property
    def virtual_clock(self) -> bool:
        """Whether replay under this policy wants a virtual clock (nothing waits for real)."""
        return self.kind in ("none", "virtual")

    @property
    def sleeps(self) -> bool:
        return self.kind in ("real", "scaled")

    def without_virtual(self) -> LatencyPolicy:
        """Synchronous replay has no virtual clock: `virtual` means no waiting there."""
        return LatencyPolicy("none") if self.kind == "virtual" else self

    def __str__(self) -> str:
        return f"scaled:{self.scale:g}" if self.kind == "scaled" else self.kind


# -- recording -----------------------------------------------------------------------------


def _pairs(raw: Iterable[tuple[bytes | str, bytes | str]]) -> list[tuple[str, str]]:
    return [
        (k.decode("latin-1") if isinstance(k, bytes) else k,
         v.decode("latin-1") if isinstance(v, bytes) else v)
        for k, v in raw
    ]


def budget_of(extensions: Mapping[str, Any], now: float, *, read: bool = True) -> float:
    """The time a request was allowed: its read timeout (unless not `read`: a body read is
    bound by the deadline alone) or what was left of the deadline."""
    budget = math.inf
    timeout = (extensions.get("timeout") or {}).get("read") if read else None
    if timeout is not None:
        budget = float(timeout)
    deadline = extensions.get(DEADLINE_EXT)
    if deadline is not None:
        budget = min(budget, float(deadline) - now)
    return budget


class Recorder:
    """Everything a record run saw, in order; journals each call as it ends.

    `base` is an existing cassette the run adds to (record mode `new_episodes`): its calls are
    written back unchanged and the new ones follow them.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock | None = None,
        meta: dict[str, Any] | None = None,
        scrub: ScrubConfig | None = None,
        base: Cassette | None = None,
        journal: bool = True,
        before_record: Callable[[Call], Call | None] | None = None,
    ) -> None:
        self.path = Path(path)
        #: vcrpy's `before_record_*` hooks: applied to each call before it is journalled or
        #: written (None from it: the call is not kept)
        self.before_record = before_record
        self.clock: Clock = clock or RealClock()
        self.meta = dict(meta or {})
        self.scrub = scrub or ScrubConfig()
        self.base = base
        self.calls: list[Call] = []
        self._chunks: dict[int, list[bytes]] = {}
        self._entry: dict[int, float] = {}
        self._timings: dict[int, dict[str, float]] = {}
        #: each open request's extensions, until the answer or failure: who answered it
        #: (`SANDBOX_EXT`, set by a sandbox router while it sends) is read then
        self._extensions: dict[int, Mapping[str, Any]] = {}
        first = max((c.seq for c in base.calls), default=-1) + 1 if base is not None else 0
        self._seq = itertools.count(first)
        self._t0: float | None = None
        self.saved: Path | None = None
        self.journal: Journal | None = None
        #: each journal entry goes through the one scrubber before it is written (declared and
        #: environment secrets are looked up per entry; the environment scan is cached)
        self._journal_scrub = self.scrub
        if journal:
            self.journal = Journal.start(
                self.path, base=base,
                meta={**self._fresh_meta(), "scrubbed": self.scrub.enabled},
            )

    # events, in the order a transport sees them

    def begin(
        self,
        method: str,
        uri: str,
        headers: Iterable[tuple[bytes | str, bytes | str]],
        body: bytes | None,
        extensions: Mapping[str, Any] | None = None,
    ) -> Call:
        call = self._kept(Call(0, method.upper(), uri, _pairs(headers), body or None))
        ext, entry = extensions or {}, self._entry[call.seq]
        self._extensions[call.seq] = ext
        call.budget_s = budget_of(ext, entry)
        timing = ext.get(TIMING_EXT)
        if isinstance(timing, dict) and "start" in timing:
            call.offset_s = entry - float(timing["start"])
            self._timings[call.seq] = timing
        return call

    def _kept(self, call: Call) -> Call:
        """`call` numbered, timed (a call seen whole began `elapsed_s` ago) and kept."""
        call.seq = next(self._seq)
        entry = self.clock.now()
        started = entry - (call.elapsed_s or 0.0)
        if self._t0 is None:
            self._t0 = started
        call.t_s = max(0.0, started - self._t0)
        call.recorded_at = datetime.fromtimestamp(self.clock.wall(), UTC).isoformat(
            timespec="milliseconds"
        )
        self._entry[call.seq] = entry
        self.calls.append(call)
        return call

    def _answered_by(self, call: Call) -> None:
        call.sandbox = bool(self._extensions.pop(call.seq, {}).get(SANDBOX_EXT))

    def failed(self, call: Call, exc: BaseException) -> None:
        """No response headers: the call ended in `exc`."""
        self._answered_by(call)
        call.error = failure_of(exc, False, 0)
        self._end(call, complete=False)

    def answered(
        self,
        call: Call,
        status: int,
        reason: str,
        headers: Iterable[tuple[bytes | str, bytes | str]],
        content: bytes | None = None,
    ) -> bool:
        """Headers are in. With `content` the body is already whole; otherwise the transport
        streams it through `received` and ends with `body_done`/`body_failed`/`body_closed`
        (returns True then)."""
        self._answered_by(call)
        call.ttfb_s = self.clock.now() - self._entry[call.seq]
        call.status = status
        call.reason = reason
        call.headers = _pairs(headers)
        self._chunks[call.seq] = []
        if content is None:
            return True
        self._chunks[call.seq].append(content)
        call.complete = True
        call.elapsed_s = call.ttfb_s
        self._finish(call)
        return False

    def received(self, call: Call, chunk: bytes) -> None:
        self._chunks[call.seq].append(chunk)

    def body_done(self, call: Call) -> None:
        self._end(call, complete=True)

    def body_failed(self, call: Call, exc: BaseException) -> None:
        received = sum(len(c) for c in self._chunks.get(call.seq, ()))
        call.error = failure_of(exc, True, received)
        self._end(call, complete=False)

    def body_closed(self, call: Call) -> None:
        """The stream was closed; before its end, that is a redirect hop or a size cap."""
        if call.elapsed_s is None:
            self._end(call, complete=False)

    def _end(self, call: Call, *, complete: bool) -> None:
        call.complete = complete
        call.elapsed_s = self.clock.now() - self._entry[call.seq]
        self._finish(call)

    def add(self, call: Call) -> Call:
        """A finished exchange seen whole (the vcrpy bridge): numbered and journalled."""
        self._finish(self._kept(call))
        return call

    # what gets written

    def _stored(self, call: Call) -> Call | None:
        """The call as the cassette keeps it: body joined, redirect hops whole, through
        `before_record` (None: not kept)."""
        chunks = self._chunks.get(call.seq)
        if chunks is not None:
            call.body = b"".join(chunks)
            call.chunk_sizes = [len(c) for c in chunks] if len(chunks) > 1 else None
        if call.error is not None and call.error.bytes_before == 0 and call.body:
            call.error.bytes_before = len(call.body)
        stored = _whole_hop(_copy(call))
        return stored if self.before_record is None else self.before_record(stored)

    def _finish(self, call: Call) -> None:
        if self.journal is None:
            return
        stored = self._stored(call)
        if stored is None:
            return
        scrub_cassette(Cassette([stored], {}), self._journal_scrub)
        self.journal.write(stored)

    def cassette(self) -> Cassette:
        """What has been recorded so far, bodies joined and the client's latencies attached."""
        last_hop: dict[int, Call] = {}
        for call in self.calls:
            timing = self._timings.get(call.seq)
            if timing is not None:
                last_hop[id(timing)] = call
        for call in last_hop.values():
            timing = self._timings[call.seq]
            if "elapsed" in timing:
                call.end_s = float(timing["elapsed"])
        calls = [s for s in map(self._stored, self.calls) if s is not None]
        if self.base is not None:
            meta = dict(self.base.meta)
            meta.setdefault("match_on", list(MATCH_URL_BODY))
        else:
            meta = self._fresh_meta()
        return Cassette(calls, meta, self.path)

    def _fresh_meta(self) -> dict[str, Any]:
        return {
            "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "realprobe_version": __version__,
            "match_on": list(MATCH_URL_BODY),
            **self.meta,
        }

    def save(self) -> Path:
        """Scrub and write atomically; the journal goes once the cassette is on disk."""
        fresh = self.cassette()
        scrub_cassette(fresh, self.scrub)
        out = fresh
        payload = None
        if self.base is not None:
            out = Cassette(list(self.base.calls) + fresh.calls, fresh.meta, self.path)
            # a plain vcrpy file gets the new interactions appended as text: not a byte of it
            # changes (its layout is vcrpy's, which realprobe's writer would not reproduce)
            payload = appended_bytes(self.path, self.base, fresh.calls)
        else:
            out.meta["scrubbed"] = self.scrub.enabled
        self.saved = save_cassette(out, self.path, payload=payload)
        if self.journal is not None:
            self.journal.remove()
        return self.saved

    def discard(self) -> None:
        """Write nothing (a test that failed while recording) and drop the journal."""
        if self.journal is not None:
            self.journal.remove()
        self.saved = None


def _copy(call: Call) -> Call:
    return replace(
        call,
        request_headers=list(call.request_headers),
        headers=list(call.headers),
        error=None if call.error is None else replace(call.error),
    )


def _whole_hop(call: Call) -> Call:
    """A redirect hop the client closed unread is stored as a whole, empty-bodied response so
    plain vcrpy can replay the chain (its per-call `complete: false` stays in the timing).
    Every other call is kept as it arrived: status, headers and body bytes (a compressed body
    stays compressed under its `Content-Encoding`; decoding is the client's job)."""
    if (
        not call.complete and call.error is None and call.status in REDIRECTS
        and call.header("location") and not call.body
    ):
        call.headers = [
            (k, "0" if k.lower() == "content-length" else v)
            for k, v in call.headers
            if k.lower() not in ("content-encoding", "transfer-encoding")
        ]
    return call


# -- replaying -----------------------------------------------------------------------------


class Player:
    """Finds each request's recording: a dict from match key to that key's calls in order,
    so a request costs O(1) with named matchers; custom matchers then pick among those."""

    def __init__(
        self,
        cassette: Cassette,
        *,
        on_exhausted: str = "error",
        match_on: Sequence[Matcher] | None = None,
        scrub: ScrubConfig | None = None,
    ) -> None:
        if on_exhausted not in EXHAUSTION_POLICIES:
            raise RealprobeError(
                f"on_exhausted {on_exhausted!r}: choose one of {', '.join(EXHAUSTION_POLICIES)}"
            )
        self.cassette = cassette
        self.on_exhausted = on_exhausted
        self.spec = MatchSpec.of(match_on if match_on is not None else cassette.match_on)
        self.match_on = self.spec.names
        recorded = config_for(cassette.meta)  # the names the cassette was scrubbed with, too
        self.scrub = (scrub or recorded).with_vcrpy_filters(
            recorded.extra_headers if scrub else (), recorded.extra_params if scrub else ()
        )
        self.scrubbed = bool(cassette.meta.get("scrubbed"))
        self.index: dict[str, list[Call]] = {}
        for call in sorted(cassette.calls, key=lambda c: c.seq):
            key = self.spec.key(call.method, call.uri, call.request_body, call.request_headers)
            self.index.setdefault(key, []).append(call)
        self.served: dict[str, int] = {}
        self.used: set[int] = set()
        self.played: list[int] = []

    def headers_of(self, request: httpx.Request) -> list[tuple[str, str]] | None:
        """The request's headers when a matcher looks at them (None: they are not matched)."""
        if not (self.spec.uses_headers or self.spec.custom):
            return None
        return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]

    def key_for(
        self, method: str, url: str, body: bytes | None,
        headers: Iterable[tuple[str, str]] | None = None,
    ) -> str:
        if self.scrubbed:
            url, body = scrub_for_match(url, body, self.scrub)
            if headers is not None and self.spec.uses_headers:
                headers = [
                    (k, self.scrub.placeholder if secret_header(k, self.scrub.extra_headers) else v)
                    for k, v in headers
                ]
        return self.spec.key(method, url, body, headers)

    def find(
        self, method: str, url: str, body: bytes | None,
        headers: Iterable[tuple[str, str]] | None = None, *, consume: bool = True,
    ) -> Call | None:
        """The next unplayed recording for this request, or None (never raises)."""
        key = self.key_for(method, url, body, headers)
        calls = self.index.get(key)
        if not calls:
            return None
        if self.spec.custom:
            incoming = (method, url, body, list(headers or ()))
            for call in calls:
                if call.seq not in self.used and self.spec.custom_match(incoming, call):
                    if consume:
                        self.used.add(call.seq)
                        self.played.append(call.seq)
                    return call
            return None
        n = self.served.get(key, 0)
        if n >= len(calls):
            return None
        if consume:
            self.served[key] = n + 1
            self.played.append(calls[n].seq)
        return calls[n]

    def lookup(
        self, method: str, url: str, body: bytes | None,
        headers: Iterable[tuple[str, str]] | None = None,
    ) -> Call:
        """The recording to answer with; CassetteMiss when there is none."""
        headers = list(headers) if headers is not None else None
        call = self.find(method, url, body, headers)
        if call is not None:
            return call
        key = self.key_for(method, url, body, headers)
        calls = self.index.get(key)
        if self.spec.custom and calls:
            incoming = (method, url, body, list(headers or ()))
            calls = [c for c in calls if self.spec.custom_match(incoming, c)]
        label = self.cassette.label()
        if not calls:
            hint = self._closest(method, url, body, key)
            raise CassetteMiss(
                f"no recording for {method} {canonical_url(url)} in cassette {label}{hint}"
            )
        n = self.served.get(key, len(calls))
        self.served[key] = n + 1
        if self.on_exhausted == "repeat-last":
            chosen = calls[-1]
        elif self.on_exhausted == "cycle":
            chosen = calls[n % len(calls)]
        else:
            raise CassetteExhausted(
                f"request #{n + 1} for {method} {canonical_url(url)} but cassette {label} holds "
                f"{len(calls)} recording(s) of it (on_exhausted=error; repeat-last or cycle "
                "reuse them)"
            )
        self.played.append(chosen.seq)
        return chosen

    def _closest(self, method: str, url: str, body: bytes | None, key: str) -> str:
        """The recording nearest a missed request, and the body fields that differ."""
        if self.scrubbed:
            url, body = scrub_for_match(url, body, self.scrub)
        same = [c for c in self.cassette.calls if c.method == method.upper()
                and canonical_url(c.uri) == canonical_url(url) and c.request_body]
        if body and same:
            scored = [(body_differences(body, c.request_body), c) for c in same]
            diffs, near = min(scored, key=lambda pair: len(pair[0]))
            return (f"; closest recorded: {near.method} {canonical_url(near.uri)} (call "
                    f"#{near.seq}), whose body differs in {', '.join(diffs)}")
        found = closest(key, list(self.index))
        return f"; closest recorded: {found}" if found else "; the cassette is empty"

    def unplayed(self) -> list[Call]:
        if self.spec.custom:
            return [c for calls in self.index.values() for c in calls if c.seq not in self.used]
        out: list[Call] = []
        for key, calls in self.index.items():
            out.extend(calls[min(self.served.get(key, 0), len(calls)):])
        return out


def body_chunks(call: Call) -> list[bytes]:
    """The body as it arrived (its recorded chunk boundaries), cut where a failure struck."""
    body = call.body
    if call.error is not None and call.error.bytes_before:
        body = body[: call.error.bytes_before]
    if not body:
        return []
    sizes = call.chunk_sizes
    if not sizes or sum(sizes) != len(body):
        return [body]
    out, pos = [], 0
    for n in sizes:
        out.append(body[pos : pos + n])
        pos += n
    return out


def head_s(call: Call) -> float:
    """Recorded time before the response headers (or before the failure, without any)."""
    if call.status is None:
        return call.elapsed_s or 0.0
    return call.ttfb_s if call.ttfb_s is not None else 0.0


def tail_s(call: Call) -> float:
    """Recorded time from the headers to the body's end."""
    if call.elapsed_s is None or call.ttfb_s is None:
        return 0.0
    return max(0.0, call.elapsed_s - call.ttfb_s)


def reason_extensions(call: Call) -> dict[str, Any]:
    if call.reason:
        return {"reason_phrase": call.reason.encode("latin-1", "replace")}
    return {}
