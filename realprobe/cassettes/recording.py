"""Record mode: transports around the one that really answers (network, sandbox router or
simulator) that keep every call, including the ones that ended in an exception, and write the
cassette when the client is closed. Async and sync are thin shells over `core.Recorder`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

import httpx

from realprobe.cassettes.cassette import Call
from realprobe.cassettes.core import Recorder
from realprobe.cassettes.scrub import ScrubConfig
from realprobe.clock import Clock

Inner = TypeVar("Inner")


class _RecordingStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body passed through to the client while the recorder keeps each chunk and
    how the body ended (read to its end, failed, or closed early)."""

    def __init__(self, inner: Any, recorder: Recorder, call: Call) -> None:
        self.inner, self.recorder, self.call = inner, recorder, call

    @contextlib.contextmanager
    def _watched(self) -> Iterator[None]:
        try:
            yield
        except GeneratorExit:
            raise
        except BaseException as exc:
            self.recorder.body_failed(self.call, exc)
            raise
        self.recorder.body_done(self.call)

    def __iter__(self) -> Iterator[bytes]:
        with self._watched():
            for chunk in self.inner:
                self.recorder.received(self.call, chunk)
                yield chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with self._watched():
            async for chunk in self.inner:
                self.recorder.received(self.call, chunk)
                yield chunk

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.recorder.body_closed(self.call)

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            self.recorder.body_closed(self.call)


class _RecorderFacade(Generic[Inner]):
    """What both recording transports share: the transport they wrap, and their recorder
    (made here unless one is given)."""

    def __init__(
        self,
        inner: Inner,
        path: str | Path = "",
        *,
        clock: Clock | None = None,
        meta: dict[str, Any] | None = None,
        scrub: ScrubConfig | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self.inner = inner
        self.recorder = recorder or Recorder(path, clock=clock, meta=meta, scrub=scrub)
        self.clock = self.recorder.clock

    def _begin(self, request: httpx.Request, body: bytes) -> Call:
        return self.recorder.begin(request.method, str(request.url), request.headers.raw, body,
                                   request.extensions)

    def _kept(self, call: Call, response: httpx.Response) -> httpx.Response:
        """The response, its body streaming through the recorder unless it came whole."""
        try:
            content: bytes | None = response.content  # an in-process origin may hand it read
        except httpx.ResponseNotRead:
            content = None
        reason = response.extensions.get("reason_phrase", b"")
        reason = reason.decode("latin-1") if isinstance(reason, bytes) else str(reason or "")
        if self.recorder.answered(call, response.status_code, reason, response.headers.raw,
                                  content):
            response.stream = _RecordingStream(response.stream, self.recorder, call)
        return response


class RecordingTransport(_RecorderFacade[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport):
    """Passes every request to `inner` and keeps what happened, in order."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        call = self._begin(request, await request.aread())
        try:
            response = await self.inner.handle_async_request(request)
        except BaseException as exc:
            self.recorder.failed(call, exc)
            raise
        return self._kept(call, response)

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            self.recorder.save()


class SyncRecordingTransport(_RecorderFacade[httpx.BaseTransport], httpx.BaseTransport):
    """The same for a synchronous `httpx.Client`."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        call = self._begin(request, request.read())
        try:
            response = self.inner.handle_request(request)
        except BaseException as exc:
            self.recorder.failed(call, exc)
            raise
        return self._kept(call, response)

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.recorder.save()
