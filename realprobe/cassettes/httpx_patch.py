"""The one place realprobe patches httpx: the request handler of httpx's default transports
(`HTTPTransport.handle_request`, `AsyncHTTPTransport.handle_async_request`), the classes every
`httpx.Client()`/`AsyncClient()` builds when it is given no transport; and the same two in
`httpx2`, the copy of httpx the `openai` and `mcp` SDKs use. While a cassette is in
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


def check_httpx() -> None:
    """Refuse an httpx whose default transports this patch does not know."""
    lo, hi = SUPPORTED
    if not lo <= tuple(int(x) for x in httpx.__version__.split(".")[:2]) < hi:
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
            _patch2(True)
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
            _patch2(False)


def patched() -> bool:
    return httpx.HTTPTransport.handle_request is not ORIGINAL_SYNC


# -- httpx2: the second copy of httpx that the `openai` and `mcp` SDKs use ---------------------
#
# Its default transports are patched the same way; each request is carried over into an httpx
# request, answered by the same handler, and the response (headers and raw body stream, as
# recorded) carried back, with httpx exceptions turned into httpx2's of the same name.

httpx2: Any
try:  # an optional dependency: realprobe works without it
    import httpx2
except ImportError:  # pragma: no cover - httpx2 is installed with the openai SDK
    httpx2 = None

ORIGINAL2_SYNC = httpx2.HTTPTransport.handle_request if httpx2 is not None else None
ORIGINAL2_ASYNC = httpx2.AsyncHTTPTransport.handle_async_request if httpx2 is not None else None


def _exc_into(module: Any, exc: Exception, request: Any) -> Exception:
    """`exc` as the exception of the same name in `module` (httpx or httpx2)."""
    cls: Any = getattr(module, type(exc).__name__, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        return exc
    maker: Any = cls
    try:
        return maker(str(exc), request=request) if "request" in _params(cls) else maker(str(exc))
    except TypeError:
        return exc


def _params(cls: type) -> tuple[str, ...]:
    import inspect

    try:
        return tuple(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return ()


def _request_into(module: Any, req: Any, body: bytes) -> Any:
    """`req` as a request of `module` (httpx or httpx2), with `body` read."""
    return module.Request(req.method, str(req.url), headers=req.headers.raw, content=body,
                          extensions=dict(req.extensions))


class _SyncCarry:
    """A response stream carried from one httpx copy to the other, bytes untouched."""

    def __init__(self, stream: Any, into: Any, request: Any) -> None:
        self.stream, self.into, self.request = stream, into, request

    def __iter__(self) -> Any:
        try:
            yield from self.stream
        except Exception as exc:
            raise _exc_into(self.into, exc, self.request) from exc

    def close(self) -> None:
        close = getattr(self.stream, "close", None)
        if close is not None:
            close()


class _AsyncCarry(_SyncCarry):
    async def __aiter__(self) -> Any:
        try:
            async for chunk in self.stream:
                yield chunk
        except Exception as exc:
            raise _exc_into(self.into, exc, self.request) from exc

    async def aclose(self) -> None:
        close = getattr(self.stream, "aclose", None)
        if close is not None:
            await close()


def _response_into(module: Any, resp: Any, request: Any, carry: type[_SyncCarry]) -> Any:
    base = module.AsyncByteStream if carry is _AsyncCarry else module.SyncByteStream
    stream_cls = type(f"Carried{base.__name__}", (carry, base), {})
    return module.Response(resp.status_code, headers=resp.headers.raw,
                           stream=stream_cls(resp.stream, module, request), request=request,
                           extensions=dict(resp.extensions))


def _sync_handler2(self: Any, req2: Any) -> Any:
    handler = _active[-1] if _active else None
    if handler is None:
        return ORIGINAL2_SYNC(self, req2)  # type: ignore[misc]
    body = req2.read()

    def real(request: httpx.Request) -> httpx.Response:
        try:
            got = ORIGINAL2_SYNC(self, _request_into(httpx2, request, body))  # type: ignore[misc]
        except Exception as exc:
            raise _exc_into(httpx, exc, request) from exc
        return _response_into(httpx, got, request, _SyncCarry)  # type: ignore[no-any-return]

    try:
        resp = handler.handle_sync(_request_into(httpx, req2, body), real)
    except httpx.HTTPError as exc:
        raise _exc_into(httpx2, exc, req2) from exc
    return _response_into(httpx2, resp, req2, _SyncCarry)


async def _async_handler2(self: Any, req2: Any) -> Any:
    handler = _active[-1] if _active else None
    if handler is None:
        return await ORIGINAL2_ASYNC(self, req2)  # type: ignore[misc]
    body = await req2.aread()

    async def real(request: httpx.Request) -> httpx.Response:
        try:
            got = await ORIGINAL2_ASYNC(self, _request_into(httpx2, request, body))  # type: ignore[misc]
        except Exception as exc:
            raise _exc_into(httpx, exc, request) from exc
        return _response_into(httpx, got, request, _AsyncCarry)  # type: ignore[no-any-return]

    try:
        resp = await handler.handle_async(_request_into(httpx, req2, body), real)
    except httpx.HTTPError as exc:
        raise _exc_into(httpx2, exc, req2) from exc
    return _response_into(httpx2, resp, req2, _AsyncCarry)


def _patch2(on: bool) -> None:
    if httpx2 is None:
        return
    for cls, name, patched_fn, original in (
        (httpx2.HTTPTransport, "handle_request", _sync_handler2, ORIGINAL2_SYNC),
        (httpx2.AsyncHTTPTransport, "handle_async_request", _async_handler2, ORIGINAL2_ASYNC),
    ):
        setattr(cls, name, patched_fn if on else original)
