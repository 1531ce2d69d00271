"""Replay mode: serve every request from a cassette; never open a socket.

Lookup is a dict from match key to that key's calls in recorded order, so each request costs
O(1). Identical requests get their recordings in order; when they run out a named policy
decides (`error`, `repeat-last`, `cycle`). A recorded failure is raised again as the same
httpx exception at the same point (before the headers, or mid-body after the bytes that
arrived). Latency: `none` (instant), `real` (sleep the recorded time), `scaled:X`, or
`virtual` (advance the virtual clock by the recorded time; timeouts fire without waiting).
"""

from __future__ import annotations

import asyncio
import builtins
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from realprobe.clock import Clock, RealClock
from realprobe.errors import RealprobeError
from realprobe.replay.cassette import Call, Cassette, load_cassette
from realprobe.replay.client import DEADLINE_EXT, TIMING_EXT, DeadlineExceeded
from realprobe.replay.matching import canonical_url, closest, match_key
from realprobe.replay.scrub import ScrubConfig, config_for, scrub_for_match

EXHAUSTION_POLICIES = ("error", "repeat-last", "cycle")
LATENCY_KINDS = ("none", "real", "scaled:X", "virtual")
EPS = 1e-6
DEADLINE_TYPES = ("CancelledError", "TimeoutError", "DeadlineExceeded")


class CassetteMiss(RealprobeError):
    """A request the cassette has no recording for (not retryable: replay never goes live)."""


class CassetteExhausted(CassetteMiss):
    """More identical requests than recordings, under on_exhausted=error."""


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
            f"--replay-latency {text!r}: choose none, real, scaled:X (X >= 0) or virtual"
        )

    @property
    def virtual_clock(self) -> bool:
        """Whether replay under this policy wants a virtual clock (nothing waits for real)."""
        return self.kind in ("none", "virtual")

    @property
    def sleeps(self) -> bool:
        return self.kind in ("real", "scaled")

    def __str__(self) -> str:
        return f"scaled:{self.scale:g}" if self.kind == "scaled" else self.kind


def exception_for(call: Call, request: httpx.Request) -> Exception:
    """The recorded failure as an exception of the same class, bound to this request."""
    assert call.error is not None
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


def _ended_before_close(call: Call) -> bool:
    if call.end_s is None or call.offset_s is None or call.elapsed_s is None:
        return False
    return call.end_s < call.offset_s + call.elapsed_s


class _ReplayStream(httpx.AsyncByteStream):
    def __init__(
        self, owner: ReplayTransport, call: Call, request: httpx.Request, start: float | None,
        tighter: bool,
    ) -> None:
        self.owner = owner
        self.call = call
        self.request = request
        self.start = start
        self.tighter = tighter
        self.done = False

    def _chunks(self) -> list[bytes]:
        call = self.call
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

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks():
            yield chunk
        await self._finish(raise_errors=True)

    async def _finish(self, *, raise_errors: bool) -> None:
        if self.done:
            return
        self.done = True
        call, owner = self.call, self.owner
        body_s = 0.0
        if call.elapsed_s is not None and call.ttfb_s is not None:
            body_s = max(0.0, call.elapsed_s - call.ttfb_s)
        if raise_errors:
            await owner._wait(body_s, self.request, self.tighter, body=True)
        elif owner.virtual:
            owner._advance(body_s)
        owner._align_end(call, self.start)
        if raise_errors and call.error is not None:
            raise exception_for(call, self.request)

    async def aclose(self) -> None:
        # closed before the end (a redirect hop, or the client's size cap): time passes anyway
        await self._finish(raise_errors=False)


class ReplayTransport(httpx.AsyncBaseTransport):
    def __init__(
        self,
        cassette: Cassette,
        *,
        clock: Clock | None = None,
        latency: LatencyPolicy | str = "none",
        on_exhausted: str = "error",
        scrub: ScrubConfig | None = None,
    ) -> None:
        if on_exhausted not in EXHAUSTION_POLICIES:
            raise RealprobeError(
                f"on_exhausted {on_exhausted!r}: choose one of {', '.join(EXHAUSTION_POLICIES)}"
            )
        self.cassette = cassette
        self.clock: Clock = clock or RealClock()
        if not isinstance(latency, LatencyPolicy):
            latency = LatencyPolicy.parse(latency)
        self.latency = latency
        self.virtual = self.latency.kind == "virtual" and self.clock.virtual
        self.on_exhausted = on_exhausted
        self.match_on = cassette.match_on
        self.scrub = scrub or config_for(cassette.meta)
        self.scrubbed = bool(cassette.meta.get("scrubbed"))
        self.index: dict[str, list[Call]] = {}
        for call in sorted(cassette.calls, key=lambda c: c.seq):
            key = match_key(call.method, call.uri, call.request_body, self.match_on)
            self.index.setdefault(key, []).append(call)
        self.served: dict[str, int] = {}
        self.played: list[int] = []

    @classmethod
    def from_path(
        cls,
        path: str | Path,
        *,
        clock: Clock | None = None,
        latency: LatencyPolicy | str = "none",
        on_exhausted: str = "error",
    ) -> ReplayTransport:
        return cls(load_cassette(path), clock=clock, latency=latency, on_exhausted=on_exhausted)

    # -- lookup --------------------------------------------------------------------------

    def key_for(self, method: str, url: str, body: bytes | None) -> str:
        if self.scrubbed:
            url, body = scrub_for_match(url, body, self.scrub)
        return match_key(method, url, body, self.match_on)

    def lookup(self, method: str, url: str, body: bytes | None) -> Call:
        key = self.key_for(method, url, body)
        calls = self.index.get(key)
        label = self.cassette.label()
        if not calls:
            near = closest(key, list(self.index))
            hint = f"; closest recorded: {near}" if near else "; the cassette is empty"
            raise CassetteMiss(
                f"no recording for {method} {canonical_url(url)} in cassette {label}{hint}"
            )
        n = self.served.get(key, 0)
        self.served[key] = n + 1
        if n < len(calls):
            return calls[n]
        if self.on_exhausted == "repeat-last":
            return calls[-1]
        if self.on_exhausted == "cycle":
            return calls[n % len(calls)]
        raise CassetteExhausted(
            f"request #{n + 1} for {method} {canonical_url(url)} but cassette {label} holds "
            f"{len(calls)} recording(s) of it (on_exhausted=error; repeat-last or cycle reuse them)"
        )

    def unplayed(self) -> list[Call]:
        return [c for calls in self.index.values() for c in calls[self._count(calls):]]

    def _count(self, calls: list[Call]) -> int:
        c = calls[0]
        key = match_key(c.method, c.uri, c.request_body, self.match_on)
        return min(self.served.get(key, 0), len(calls))

    # -- time ----------------------------------------------------------------------------

    def _advance(self, seconds: float) -> None:
        if seconds > 0 and self.virtual:
            self.clock.advance(seconds)  # type: ignore[attr-defined]

    def _align_end(self, call: Call, start: float | None) -> None:
        """On the last hop of a fetch, land the clock on the latency the live client saw."""
        if self.virtual and start is not None and call.end_s is not None:
            self._advance(start + call.end_s - self.clock.now())

    def _budget(self, request: httpx.Request, *, body: bool) -> float:
        budget = math.inf
        if not body:
            read = request.extensions.get("timeout", {}).get("read")
            if read is not None:
                budget = float(read)
        deadline = request.extensions.get(DEADLINE_EXT)
        if deadline is not None:
            budget = min(budget, float(deadline) - self.clock.now())
        return max(0.0, budget)

    def _tighter(self, request: httpx.Request, call: Call) -> bool:
        """Whether this run gives the request less time than the recording did."""
        if not self.virtual:
            return False
        recorded = call.budget_s if call.budget_s is not None else math.inf
        return self._budget(request, body=False) < recorded - EPS

    async def _wait(
        self, seconds: float, request: httpx.Request, tighter: bool, *, body: bool
    ) -> None:
        """Let `seconds` of recorded time pass. On a virtual clock, when this run allows
        less time than the recording had, time out where the shorter limit falls."""
        if self.latency.sleeps:
            await asyncio.sleep(seconds * self.latency.scale)
            return
        if not self.virtual:
            return
        budget = self._budget(request, body=body)
        if tighter and seconds > budget + EPS:
            self._advance(budget)
            deadline = request.extensions.get(DEADLINE_EXT)
            if deadline is not None and self.clock.now() >= float(deadline) - EPS:
                raise DeadlineExceeded("replayed call ran past its deadline")
            raise httpx.ReadTimeout(
                "replayed response slower than the read timeout", request=request
            )
        self._advance(seconds)

    # -- the transport -------------------------------------------------------------------

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        call = self.lookup(request.method, str(request.url), body or None)
        self.played.append(call.seq)
        timing = request.extensions.get(TIMING_EXT)
        start = float(timing["start"]) if isinstance(timing, dict) and "start" in timing else None
        if self.virtual and start is not None and call.offset_s is not None:
            self._advance(call.offset_s - (self.clock.now() - start))
        tighter = self._tighter(request, call)
        if call.status is None:
            await self._wait(call.elapsed_s or 0.0, request, tighter, body=False)
            self._align_end(call, start)
            if call.error is None:
                raise httpx.RemoteProtocolError("recorded call has no response", request=request)
            raise exception_for(call, request)
        head = call.ttfb_s if call.ttfb_s is not None else 0.0
        await self._wait(head, request, tighter, body=False)
        if _ended_before_close(call):
            # the client gave up on this response before closing it (a refused redirect):
            # its latency was taken here, not when the stream closed
            self._align_end(call, start)
        extensions = {}
        if call.reason:
            extensions["reason_phrase"] = call.reason.encode("latin-1", "replace")
        return httpx.Response(
            call.status,
            headers=call.headers,
            stream=_ReplayStream(self, call, request, start, tighter),
            request=request,
            extensions=extensions,
        )

    async def aclose(self) -> None:
        return None
