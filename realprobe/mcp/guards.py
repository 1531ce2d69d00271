"""What keeps the MCP server standing, built on the SDK's own options where it has them.

HTTP: realprobe's one server guard (`realprobe.serving`) in front of the SDK's app: Host and
Origin checks whatever address the server binds to (widened only by `--allowed-host`), JSON
bodies, an optional bearer token read from an environment variable, body limits, and a header
timeout in uvicorn's protocol; a cap on open sessions and an idle timeout (the SDK's session
manager). Stdio: each line is checked
before the SDK sees it, so a malformed line is answered with a JSON-RPC parse error (-32700)
or invalid-request error (-32600), and the server keeps reading.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage

from realprobe.errors import RealprobeError
from realprobe.serving import Guard, Refusal

DEFAULT_MAX_SESSIONS = 100
DEFAULT_SESSION_IDLE_S = 600.0
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
#: what the stdin reader yields for a line over its length limit
TOO_LONG = "\x00realprobe: line too long\x00"


# -- HTTP --------------------------------------------------------------------------------


class GuardedApp:
    """The SDK's ASGI app behind realprobe's one server guard (`realprobe.serving.Guard`):
    the same Host, Origin, JSON-body, token and body-size checks as the sandbox and the
    exporter, answered the same way."""

    def __init__(self, app: Any, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                       for k, v in scope["headers"]}
            length = headers.get("content-length", "0")
            refusal = self.guard.check(scope["method"], scope["path"], headers,
                                       int(length) if length.isdigit() else 0)
            if refusal is not None:
                await _send_refusal(send, refusal)
                return
        await self.app(scope, receive, send)


async def _send_refusal(send: Any, refusal: Refusal) -> None:
    body = refusal.body()
    headers = [(k.lower().encode(), v.encode()) for k, v in refusal.headers()]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def guarded_h11(header_timeout_s: float) -> type:
    """uvicorn's h11 protocol with a header timeout: a connection with no request under way
    `header_timeout_s` after it opened (or after its last answer) is closed, so trickled,
    half-sent requests cannot pile up."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutH11(H11Protocol):
        _timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._timer is not None:
                self._timer.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.loop.call_later(header_timeout_s, self._expired)

        def _expired(self) -> None:
            idle = self.cycle is None or self.cycle.response_complete
            if idle and not self.transport.is_closing():
                self.transport.close()

    return HeaderTimeoutH11


def check_session_limits(max_sessions: int, idle_s: float) -> None:
    if max_sessions < 1:
        raise RealprobeError(
            f"max_sessions {max_sessions}: must be at least 1", param="max_sessions"
        )
    if not idle_s > 0 or idle_s == float("inf"):
        raise RealprobeError(
            f"session_idle_s {idle_s:g}: must be a positive number", param="session_idle_s"
        )


# -- stdio -------------------------------------------------------------------------------


def line_problem(line: str) -> types.JSONRPCError | bool | None:
    """None: pass the line on. False: skip it silently (blank). An error: answer it."""
    if line == TOO_LONG:
        return _error(None, PARSE_ERROR, "Parse error: line too long")
    if not line.strip():
        return False
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return _error(None, PARSE_ERROR, f"Parse error: {str(exc)[:200]}")
    try:
        types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
    except Exception as exc:  # pydantic's ValidationError, or anything the adapter raises
        ident = obj.get("id") if isinstance(obj, dict) else None
        if isinstance(ident, bool) or not isinstance(ident, int | str):
            ident = None
        first = str(exc).splitlines()[0][:200]
        return _error(ident, INVALID_REQUEST, f"Invalid Request: {first}")
    return None


def _error(ident: int | str | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=message)
    )


class CheckedLines:
    """Wraps the stdin line source: bad lines are answered through `reply` and skipped."""

    def __init__(self, inner: AsyncIterator[str]) -> None:
        self.inner = inner
        self.reply: Any = None  # the SDK's write stream, set once the transport is up

    def __aiter__(self) -> CheckedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self.inner.__anext__()
            problem = line_problem(line)
            if problem is None:
                return line
            if problem is False or self.reply is None:
                continue
            assert isinstance(problem, types.JSONRPCError)
            try:
                await self.reply.send(SessionMessage(problem))
            except Exception:  # the server is shutting down: nothing to answer to
                raise StopAsyncIteration from None


__all__ = [
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_IDLE_S",
    "CheckedLines",
    "GuardedApp",
    "check_session_limits",
    "guarded_h11",
    "line_problem",
]
