"""The one place realprobe patches httpx: the request handler of httpx's default transports
(`HTTPTransport.handle_request`, `AsyncHTTPTransport.handle_async_request`), the classes every
`httpx.Client()`/`AsyncClient()` builds when it is given no transport. While a cassette is in
use, those handlers ask the innermost active cassette first; a transport a caller passes in
(`MockTransport`, realprobe's replay transports...) is never touched.

Patched for the duration of the outermost `use_cassette` only, and put back exactly as found.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import httpx

from realprobe.errors import RealprobeError

SUPPORTED = ((0, 28), (0, 29))  # httpx versions this patch point is tested against: [lo, hi)

SyncReal = Callable[[httpx.Request], httpx.Response]
AsyncReal = Callable[[httpx.Request], Awaitable[httpx.Response]]


class Handler(Protocol):
    """What a cassette in use answers (replay, or record through `real`)."""

    def handle_sync(self, request: httpx.Request, real: SyncReal) -> httpx.Response: ...

    async def handle_async(self, request: httpx.Request, real: AsyncReal) -> httpx.Response: ...


def _version() -> tuple[int, int]:
    major, minor = (int(x) for x in httpx.__version__.split(".")[:2])
    return major, minor


def check_httpx() -> None:
    """Refuse an httpx whose default transports this patch does not know."""
    lo, hi = SUPPORTED
    if not lo <= _version() < hi:
        raise RealprobeError(
            f"use_cassette patches httpx {lo[0]}.{lo[1]}.x; this is httpx {httpx.__version__}"
        )
    for cls, name in ((httpx.HTTPTransport, "handle_request"),
                      (httpx.AsyncHTTPTransport, "handle_async_request")):
        if not callable(getattr(cls, name, None)):
            raise RealprobeError(f"httpx {httpx.__version__} has no {cls.__name__}.{name}")


ORIGINAL_SYNC = httpx.HTTPTransport.handle_request
ORIGINAL_ASYNC = httpx.AsyncHTTPTransport.handle_async_request

_lock = threading.Lock()
_active: list[Handler] = []


def _sync_handler(self: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
    handler = _active[-1] if _active else None
    if handler is None:
        return ORIGINAL_SYNC(self, request)
    return handler.handle_sync(request, lambda r: ORIGINAL_SYNC(self, r))


async def _async_handler(self: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
    handler = _active[-1] if _active else None
    if handler is None:
        return await ORIGINAL_ASYNC(self, request)
    return await handler.handle_async(request, lambda r: ORIGINAL_ASYNC(self, r))


def push(handler: Handler) -> None:
    """Make `handler` answer httpx's default transports (patching them on first use)."""
    with _lock:
        if not _active:
            check_httpx()
            httpx.HTTPTransport.handle_request = _sync_handler  # type: ignore[method-assign]
            httpx.AsyncHTTPTransport.handle_async_request = (  # type: ignore[method-assign]
                _async_handler
            )
        _active.append(handler)


def pop(handler: Handler) -> None:
    with _lock:
        if handler in _active:
            _active.remove(handler)
        if not _active:
            httpx.HTTPTransport.handle_request = ORIGINAL_SYNC  # type: ignore[method-assign]
            httpx.AsyncHTTPTransport.handle_async_request = (  # type: ignore[method-assign]
                ORIGINAL_ASYNC
            )


def patched() -> bool:
    return httpx.HTTPTransport.handle_request is not ORIGINAL_SYNC


def active() -> list[Any]:
    return list(_active)
