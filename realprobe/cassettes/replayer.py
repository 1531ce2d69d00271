"""Replay mode: serve every request from a cassette; never open a socket.

Async and sync transports are thin shells over `core.Player` (which recording answers which
request) and `core.body_chunks`/`head_s`/`tail_s` (what the answer looks like and when). Identical
requests get their recordings in order; when they run out a named policy decides (`error`,
`repeat-last`, `cycle`). A recorded failure is raised again as the same httpx exception at the
same point (before the headers, or mid-body after the bytes that arrived). Latency: `none`
(instant), `real` (sleep the recorded time), `scaled:X`, or `virtual` (advance the virtual
clock by the recorded time; timeouts fire without waiting; async only).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from realprobe.cassettes.cassette import Call, Cassette
from realprobe.cassettes.core import (
    CassetteExhausted,
    CassetteMiss,
    LatencyPolicy,
    Player,
    body_chunks,
    budget_of,
    exception_for,
    head_s,
    reason_extensions,
    tail_s,
)
from realprobe.cassettes.importers import load_any
from realprobe.cassettes.matching import Matcher
from realprobe.cassettes.scrub import ScrubConfig
from realprobe.clock import Clock, RealClock, VirtualClock
from realprobe.http.client import DEADLINE_EXT, TIMING_EXT, DeadlineExceeded
from realprobe.http.transports import SANDBOX_EXT

EPS = 1e-6

__all__ = ["CassetteExhausted", "CassetteMiss", "ReplayTransport", "SyncReplayTransport"]


Facade = TypeVar("Facade", bound="_PlayerFacade")


def _ended_before_close(call: Call) -> bool:
    if call.end_s is None or call.offset_s is None or call.elapsed_s is None:
        return False
    return call.end_s < call.offset_s + call.elapsed_s


def _answered_by(call: Call, request: httpx.Request) -> None:
    """A call the sandbox answered when recorded is the sandbox's answer again: the client
    reads its deadline marks as it did live (`realprobe.http.client._Call.settle`)."""
    if call.sandbox:
        request.extensions[SANDBOX_EXT] = True


class _PlayerFacade:
    """What both replay transports set up alike: the player that finds each request's
    recording (one given is shared), and the latency policy."""

    def __init__(
        self,
        cassette: Cassette,
        *,
        latency: LatencyPolicy | str = "none",
        on_exhausted: str = "error",
        scrub: ScrubConfig | None = None,
        match_on: Sequence[Matcher] | None = None,
        player: Player | None = None,
    ) -> None:
        self.player = player or Player(cassette, on_exhausted=on_exhausted, match_on=match_on,
                                       scrub=scrub)
        self.latency = latency if isinstance(latency, LatencyPolicy) else LatencyPolicy.parse(
            latency)

    @classmethod
    def from_path(cls: type[Facade], path: str | Path, **kw: Any) -> Facade:
        return cls(load_any(path), **kw)  # type: ignore[call-arg]

    @property
    def cassette(self) -> Cassette:
        return self.player.cassette


def _lookup(player: Player, request: httpx.Request, body: bytes) -> Call:
    return player.lookup(request.method, str(request.url), body or None,
                         player.headers_of(request))


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

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in body_chunks(self.call):
            yield chunk
        await self._finish(raise_errors=True)

    async def _finish(self, *, raise_errors: bool) -> None:
        if self.done:
            return
        self.done = True
        call, owner = self.call, self.owner
        if raise_errors:
            await owner._wait(tail_s(call), self.request, self.tighter, body=True)
        elif owner.virtual:
            owner._advance(tail_s(call))
        owner._align_end(call, self.start)
        if raise_errors and call.error is not None:
            raise exception_for(call, self.request)

    async def aclose(self) -> None:
        # closed before the end (a redirect hop, or the client's size cap): time passes anyway
        await self._finish(raise_errors=False)


class ReplayTransport(_PlayerFacade, httpx.AsyncBaseTransport):
    def __init__(self, cassette: Cassette, *, clock: Clock | None = None, **kw: Any) -> None:
        super().__init__(cassette, **kw)
        #: a virtual latency replays on a virtual clock unless the caller brings a clock
        self.clock: Clock = clock or (VirtualClock() if self.latency.virtual_clock
                                      else RealClock())
        self.virtual = self.latency.kind == "virtual" and self.clock.virtual

    def synced(self) -> SyncReplayTransport:
        """The same player (what was played, what is left) and latency, for a synchronous
        client."""
        return SyncReplayTransport(self.cassette, latency=self.latency, player=self.player)

    # -- time ----------------------------------------------------------------------------

    def _advance(self, seconds: float) -> None:
        if seconds > 0 and self.virtual:
            self.clock.advance(seconds)  # type: ignore[attr-defined]

    def _align_end(self, call: Call, start: float | None) -> None:
        """On the last hop of a fetch, land the clock on the latency the live client saw."""
        if self.virtual and start is not None and call.end_s is not None:
            self._advance(start + call.end_s - self.clock.now())

    def _budget(self, request: httpx.Request, *, body: bool) -> float:
        return max(0.0, budget_of(request.extensions, self.clock.now(), read=not body))

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
        call = _lookup(self.player, request, await request.aread())
        return await self.answer(call, request)

    async def answer(self, call: Call, request: httpx.Request) -> httpx.Response:
        _answered_by(call, request)
        timing = request.extensions.get(TIMING_EXT)
        start = float(timing["start"]) if isinstance(timing, dict) and "start" in timing else None
        if self.virtual and start is not None and call.offset_s is not None:
            self._advance(call.offset_s - (self.clock.now() - start))
        tighter = self._tighter(request, call)
        if call.status is None:
            await self._wait(head_s(call), request, tighter, body=False)
            self._align_end(call, start)
            raise exception_for(call, request)
        await self._wait(head_s(call), request, tighter, body=False)
        if _ended_before_close(call):
            # the client gave up on this response before closing it (a refused redirect):
            # its latency was taken here, not when the stream closed
            self._align_end(call, start)
        return httpx.Response(
            call.status,
            headers=call.headers,
            stream=_ReplayStream(self, call, request, start, tighter),
            request=request,
            extensions=reason_extensions(call),
        )

    async def aclose(self) -> None:
        return None


class _SyncReplayStream(httpx.SyncByteStream):
    def __init__(self, call: Call, request: httpx.Request, tail: float) -> None:
        self.call, self.request, self.tail = call, request, tail

    def __iter__(self) -> Iterator[bytes]:
        yield from body_chunks(self.call)
        if self.tail > 0:
            time.sleep(self.tail)
        if self.call.error is not None:
            raise exception_for(self.call, self.request)


class SyncReplayTransport(_PlayerFacade, httpx.BaseTransport):
    """Serves every request from the cassette; never opens a socket. Latency: none, real or
    scaled:X (`virtual` needs realprobe's async client and means none here)."""

    def __init__(self, cassette: Cassette, **kw: Any) -> None:
        super().__init__(cassette, **kw)
        self.latency = self.latency.without_virtual()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.answer(_lookup(self.player, request, request.read()), request)

    def answer(self, call: Call, request: httpx.Request) -> httpx.Response:
        _answered_by(call, request)
        scale = self.latency.scale if self.latency.sleeps else 0.0
        if scale:
            time.sleep(head_s(call) * scale)
        if call.status is None:
            raise exception_for(call, request)
        return httpx.Response(
            call.status,
            headers=call.headers,
            stream=_SyncReplayStream(call, request, tail_s(call) * scale),
            request=request,
            extensions=reason_extensions(call),
        )
