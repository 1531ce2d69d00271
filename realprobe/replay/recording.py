"""Record mode: a transport around the one that really answers (network, sandbox router or
simulator) that keeps every call, including the ones that ended in an exception, and writes
the cassette when the client is closed. Also `transport_for`, the seam `make_client` calls
for record and replay.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from realprobe import __version__
from realprobe.adapters.catalog import Catalog
from realprobe.clock import Clock, RealClock
from realprobe.errors import RealprobeError
from realprobe.replay.cassette import Call, Cassette, Failure, save_cassette
from realprobe.replay.client import DEADLINE_EXT, TIMING_EXT
from realprobe.replay.decoding import decode_whole
from realprobe.replay.matching import MATCH_URL_BODY
from realprobe.replay.modes import Mode, TransportOptions
from realprobe.replay.replayer import (
    EXHAUSTION_POLICIES,
    LatencyPolicy,
    ReplayTransport,
)
from realprobe.replay.scrub import ScrubConfig, ScrubReport, scrub_cassette

MAX_DECODE_ON_SAVE = 20 * 1024 * 1024
CONNECT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)
WRITE_ERRORS = (httpx.WriteError, httpx.WriteTimeout)


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


class _RecordingStream(httpx.AsyncByteStream):
    def __init__(
        self, inner: httpx.AsyncByteStream, call: Call, clock: Clock, entry: float,
        chunks: list[bytes],
    ) -> None:
        self.inner = inner
        self.call = call
        self.clock = clock
        self.entry = entry
        self.chunks = chunks
        self.received = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.inner:
                self.chunks.append(chunk)
                self.received += len(chunk)
                yield chunk
        except GeneratorExit:
            raise
        except BaseException as exc:
            self.call.error = failure_of(exc, True, self.received)
            self.call.complete = False
            self.call.elapsed_s = self.clock.now() - self.entry
            raise
        self.call.complete = True
        self.call.elapsed_s = self.clock.now() - self.entry

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            if self.call.elapsed_s is None:  # closed before the end: a redirect, or a cap
                self.call.complete = False
                self.call.elapsed_s = self.clock.now() - self.entry


class RecordingTransport(httpx.AsyncBaseTransport):
    """Passes every request to `inner` and keeps what happened, in order."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        path: str | Path,
        *,
        clock: Clock | None = None,
        meta: dict[str, Any] | None = None,
        scrub: ScrubConfig | None = None,
    ) -> None:
        self.inner = inner
        self.path = Path(path)
        self.clock: Clock = clock or RealClock()
        self.meta = dict(meta or {})
        self.scrub = scrub or ScrubConfig()
        self.calls: list[Call] = []
        self._chunks: dict[int, list[bytes]] = {}
        self._timings: dict[int, dict[str, float]] = {}
        self._seq = itertools.count()
        self._t0: float | None = None
        self.saved: Path | None = None
        self.scrub_report: ScrubReport | None = None

    def _begin(self, request: httpx.Request, body: bytes) -> tuple[Call, float]:
        seq = next(self._seq)
        entry = self.clock.now()
        if self._t0 is None:
            self._t0 = entry
        call = Call(
            seq=seq,
            method=request.method,
            uri=str(request.url),
            request_headers=[
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw
            ],
            request_body=body or None,
            t_s=entry - self._t0,
            recorded_at=datetime.fromtimestamp(self.clock.wall(), UTC).isoformat(
                timespec="milliseconds"
            ),
        )
        call.budget_s = _budget(request, entry)
        timing = request.extensions.get(TIMING_EXT)
        if isinstance(timing, dict) and "start" in timing:
            call.offset_s = entry - float(timing["start"])
            self._timings[seq] = timing
        self.calls.append(call)
        return call, entry

    def _failed(self, call: Call, exc: BaseException, entry: float) -> None:
        call.error = failure_of(exc, False, 0)
        call.complete = False
        call.elapsed_s = self.clock.now() - entry

    def _answered(self, call: Call, response: httpx.Response, entry: float) -> list[bytes] | None:
        """Headers are in; the body chunks will go into the list returned (None: already read)."""
        call.ttfb_s = self.clock.now() - entry
        call.status = response.status_code
        reason = response.extensions.get("reason_phrase", b"")
        call.reason = reason.decode("latin-1") if isinstance(reason, bytes) else str(reason or "")
        call.headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw]
        chunks: list[bytes] = []
        self._chunks[call.seq] = chunks
        try:
            content = response.content  # an in-process origin may hand over a read body
        except httpx.ResponseNotRead:
            return chunks
        chunks.append(content)
        call.complete = True
        call.elapsed_s = call.ttfb_s
        return None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        call, entry = self._begin(request, await request.aread())
        try:
            response = await self.inner.handle_async_request(request)
        except BaseException as exc:
            self._failed(call, exc, entry)
            raise
        chunks = self._answered(call, response, entry)
        if chunks is not None:
            response.stream = _RecordingStream(
                response.stream,  # type: ignore[arg-type]
                call, self.clock, entry, chunks,
            )
        return response

    def cassette(self) -> Cassette:
        """What has been recorded so far, bodies joined and the client's latencies attached."""
        last_hop: dict[int, Call] = {}
        for call in self.calls:
            chunks = self._chunks.get(call.seq)
            if chunks is not None:
                call.body = b"".join(chunks)
                call.chunk_sizes = [len(c) for c in chunks] if len(chunks) > 1 else None
            if call.error is not None and call.error.bytes_before == 0 and call.body:
                call.error.bytes_before = len(call.body)
            timing = self._timings.get(call.seq)
            if timing is not None:
                last_hop[id(timing)] = call
        for call in last_hop.values():
            timing = self._timings[call.seq]
            if "elapsed" in timing:
                call.end_s = float(timing["elapsed"])
        calls = [_decoded(_copy(c)) for c in self.calls]
        meta = {
            "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "realprobe_version": __version__,
            "match_on": list(MATCH_URL_BODY),
            **self.meta,
        }
        return Cassette(calls, meta, self.path)

    def save(self) -> Path:
        cassette = self.cassette()
        self.scrub_report = scrub_cassette(cassette, self.scrub)
        cassette.meta["scrubbed"] = self.scrub.enabled
        self.saved = save_cassette(cassette, self.path)
        return self.saved

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            self.save()


def _budget(request: httpx.Request, now: float) -> float:
    """The time this request was allowed: its read timeout or what was left of the deadline."""
    budget = math.inf
    read = request.extensions.get("timeout", {}).get("read")
    if read is not None:
        budget = float(read)
    deadline = request.extensions.get(DEADLINE_EXT)
    if deadline is not None:
        budget = min(budget, float(deadline) - now)
    return budget


def _copy(call: Call) -> Call:
    from dataclasses import replace

    return replace(
        call,
        request_headers=list(call.request_headers),
        headers=list(call.headers),
        error=None if call.error is None else replace(call.error),
    )


def _decoded(call: Call) -> Call:
    """Complete gzip/deflate bodies are stored decoded (readable, and replayable by vcrpy)."""
    enc = (call.header("content-encoding") or "").strip().lower()
    if not call.complete or call.error is not None or enc not in ("gzip", "x-gzip", "deflate"):
        return call
    out = decode_whole(call.body, enc, MAX_DECODE_ON_SAVE)
    if out is None:
        return call  # corrupt, or too large to store decoded: keep the exact bytes
    call.body = out
    call.chunk_sizes = None
    call.headers = [
        (k, str(len(out)) if k.lower() == "content-length" else v)
        for k, v in call.headers
        if k.lower() != "content-encoding"
    ]
    return call


# -- the seam make_client uses -----------------------------------------------------------

LATENCY_ENV = "REALPROBE_REPLAY_LATENCY"
EXHAUSTED_ENV = "REALPROBE_ON_EXHAUSTED"


def replay_latency_of(opts: TransportOptions) -> LatencyPolicy:
    return LatencyPolicy.parse(opts.replay_latency or os.environ.get(LATENCY_ENV) or "virtual")


def on_exhausted_of(opts: TransportOptions) -> str:
    policy = opts.on_exhausted or os.environ.get(EXHAUSTED_ENV) or "error"
    if policy not in EXHAUSTION_POLICIES:
        raise RealprobeError(
            f"--on-exhausted {policy!r}: choose one of {', '.join(EXHAUSTION_POLICIES)}"
        )
    return policy


def _profile_label(profile: object) -> str | None:
    if profile is None:
        return None
    name = getattr(profile, "name", None)
    return str(name) if name else str(profile)


def transport_for(
    catalog: Catalog,
    opts: TransportOptions,
    clock: Clock,
    base_transport: Callable[[Catalog, TransportOptions, Clock], httpx.AsyncBaseTransport],
) -> httpx.AsyncBaseTransport:
    """Mode.RECORD: a RecordingTransport around the real one. Mode.REPLAY: a ReplayTransport."""
    if opts.cassette is None:
        raise RealprobeError(f"--mode {opts.mode.value} needs --cassette PATH")
    path = Path(opts.cassette)
    if opts.mode is Mode.REPLAY:
        return ReplayTransport.from_path(
            path, clock=clock, latency=replay_latency_of(opts), on_exhausted=on_exhausted_of(opts)
        )
    if opts.mode is not Mode.RECORD:
        raise RealprobeError(f"transport_for: mode {opts.mode.value} is not record or replay")
    if path.is_dir():
        raise RealprobeError(f"--cassette {path} is a directory; give a file name")
    base_opts = opts
    if opts.sandbox:
        source: dict[str, Any] = {"source": "realprobe sandbox", "sandbox": opts.sandbox}
        if opts.profile is not None:
            source["profile"] = _profile_label(opts.profile)
    elif opts.profile is not None:
        from dataclasses import replace

        base_opts = replace(opts, mode=Mode.SIMULATE)
        source = {"source": "realprobe simulator", "profile": _profile_label(opts.profile)}
    else:
        source = {"source": "live"}
    source["seed"] = opts.seed
    source["catalog_tools"] = len(catalog)
    inner = base_transport(catalog, base_opts, clock)
    return RecordingTransport(
        inner, path, clock=clock, meta=source, scrub=ScrubConfig(enabled=opts.scrub)
    )


__all__ = [
    "RecordingTransport",
    "ReplayTransport",
    "on_exhausted_of",
    "replay_latency_of",
    "transport_for",
]
