"""Record and replay for synchronous `httpx.Client` users (the pytest plugin's
`realprobe_sync_transport`). Same cassettes, same matching, same failures; replay latency is
`none`, `real` or `scaled:X` (a virtual clock needs realprobe's async client).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from realprobe.clock import Clock
from realprobe.replay.cassette import Call, Cassette, load_cassette
from realprobe.replay.recording import RecordingTransport, failure_of
from realprobe.replay.replayer import LatencyPolicy, ReplayTransport, exception_for
from realprobe.replay.scrub import ScrubConfig


class _SyncRecordingStream(httpx.SyncByteStream):
    def __init__(
        self, inner: httpx.SyncByteStream, call: Call, clock: Clock, entry: float,
        chunks: list[bytes],
    ) -> None:
        self.inner, self.call, self.clock, self.entry, self.chunks = (
            inner, call, clock, entry, chunks,
        )
        self.received = 0

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self.inner:
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

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            if self.call.elapsed_s is None:
                self.call.complete = False
                self.call.elapsed_s = self.clock.now() - self.entry


class SyncRecordingTransport(httpx.BaseTransport):
    """Records every call through `inner`; writes the cassette when closed."""

    def __init__(
        self,
        inner: httpx.BaseTransport,
        path: str | Path,
        *,
        clock: Clock | None = None,
        meta: dict[str, Any] | None = None,
        scrub: ScrubConfig | None = None,
    ) -> None:
        self.inner = inner
        self.recorder = RecordingTransport(
            httpx.AsyncBaseTransport(), path, clock=clock, meta=meta, scrub=scrub
        )

    @property
    def saved(self) -> Path | None:
        return self.recorder.saved

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        rec = self.recorder
        call, entry = rec._begin(request, request.read())
        try:
            response = self.inner.handle_request(request)
        except BaseException as exc:
            rec._failed(call, exc, entry)
            raise
        chunks = rec._answered(call, response, entry)
        if chunks is not None:
            response.stream = _SyncRecordingStream(
                response.stream,  # type: ignore[arg-type]
                call, rec.clock, entry, chunks,
            )
        return response

    def save(self) -> Path:
        return self.recorder.save()

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.recorder.save()


class _SyncReplayStream(httpx.SyncByteStream):
    def __init__(self, call: Call, request: httpx.Request, chunks: list[bytes], tail_s: float):
        self.call, self.request, self.chunks, self.tail_s = call, request, chunks, tail_s

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        if self.tail_s > 0:
            time.sleep(self.tail_s)
        if self.call.error is not None:
            raise exception_for(self.call, self.request)


class SyncReplayTransport(httpx.BaseTransport):
    """Serves every request from the cassette; never opens a socket."""

    def __init__(
        self, cassette: Cassette, *, latency: str = "none", on_exhausted: str = "error"
    ) -> None:
        policy = LatencyPolicy.parse(latency)
        if policy.kind == "virtual":
            policy = LatencyPolicy("none")
        self.replay = ReplayTransport(cassette, latency=policy, on_exhausted=on_exhausted)

    @classmethod
    def from_path(cls, path: str | Path, **kw: Any) -> SyncReplayTransport:
        return cls(load_cassette(path), **kw)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        rp = self.replay
        call = rp.lookup(request.method, str(request.url), request.read() or None)
        rp.played.append(call.seq)
        scale = rp.latency.scale if rp.latency.sleeps else 0.0
        if call.status is None:
            time.sleep((call.elapsed_s or 0.0) * scale)
            if call.error is None:
                raise httpx.RemoteProtocolError("recorded call has no response", request=request)
            raise exception_for(call, request)
        head = call.ttfb_s or 0.0
        time.sleep(head * scale)
        tail = max(0.0, (call.elapsed_s or head) - head) * scale
        extensions = {}
        if call.reason:
            extensions["reason_phrase"] = call.reason.encode("latin-1", "replace")
        body = call.body
        if call.error is not None and call.error.bytes_before:
            body = body[: call.error.bytes_before]
        return httpx.Response(
            call.status,
            headers=call.headers,
            stream=_SyncReplayStream(call, request, [body] if body else [], tail),
            request=request,
            extensions=extensions,
        )
