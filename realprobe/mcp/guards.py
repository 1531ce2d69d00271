"""What keeps the MCP server standing, built on the SDK's own options where it has them.

HTTP: realprobe's one server guard (`realprobe.serving`) in front of the SDK's app: Host and
Origin checks whatever address the server binds to (widened only by `--allowed-host`), JSON
bodies, an optional bearer token read from an environment variable, body limits, and a header
timeout in uvicorn's protocol; a cap on the sessions each client address holds open (so one
client cannot take every session), an overall cap and an idle timeout (the SDK's session
manager). Stdio: each line is checked
before the SDK sees it, so a malformed line is answered with a JSON-RPC parse error (-32700)
or invalid-request error (-32600), and the server keeps reading.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage

from realprobe.errors import RealprobeError
from realprobe.limits import MAX_ENTRIES, InputTooLarge, load_json_text
from realprobe.serving import Guard, Refusal

#: open sessions one client address may hold
DEFAULT_MAX_SESSIONS = 100
#: the server's overall cap, in clients' worth of sessions (the SDK's session manager)
CLIENTS_AT_CAP = 10
DEFAULT_SESSION_IDLE_S = 600.0
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
#: what the stdin reader yields for a line over its length limit
TOO_LONG = "\x00realprobe: line too long\x00"


# -- HTTP --------------------------------------------------------------------------------


class SessionsPerClient:
    """At most `per_client` open sessions per client address, by realprobe's own record of
    them: a session counts from the request that opens it until `live` says it is over (a
    server that keeps the sessions itself knows), else until it is seen to end: a DELETE
    answered, a 404 for its id, or `idle_s` with no request of it under way (the SDK's idle
    rule: a request being served or a GET stream open keeps a session)."""

    def __init__(self, per_client: int, live: Callable[[str], bool] | None = None,
                 idle_s: float = math.inf) -> None:
        self.per_client = per_client
        self.live = live or self._seen_live
        self.idle_s = idle_s
        self.owner: dict[str, str] = {}  # session id -> client address
        self.opening: dict[str, int] = {}  # client address -> opening requests under way
        self.busy: dict[str, int] = {}  # session id -> its requests under way
        self.quiet_since: dict[str, float] = {}  # session id -> when its last request ended

    def _seen_live(self, sid: str) -> bool:
        quiet = time.monotonic() - self.quiet_since.get(sid, -math.inf)
        return self.busy.get(sid, 0) > 0 or quiet < self.idle_s

    def admit(self, client: str) -> bool:
        """Whether `client` may open one more session (then it counts as opening)."""
        for sid in [sid for sid in self.owner if not self.live(sid)]:
            self._forget(sid)
        held = sum(1 for c in self.owner.values() if c == client)
        if held + self.opening.get(client, 0) >= self.per_client:
            return False
        self.opening[client] = self.opening.get(client, 0) + 1
        return True

    def opened(self, client: str, session_id: str | None) -> None:
        """The opening request got its answer (with the new session's id, if it opened one)."""
        self.opening[client] -= 1
        if not self.opening[client]:
            del self.opening[client]
        if session_id:
            self.owner[session_id] = client
            self.quiet_since[session_id] = time.monotonic()

    def begin(self, sid: str) -> None:
        self.busy[sid] = self.busy.get(sid, 0) + 1

    def end(self, sid: str, method: str, status: int | None) -> None:
        """A request of session `sid` was answered (`status`; None: none was sent)."""
        self.busy[sid] -= 1
        if status == 404 or (method == "DELETE" and status is not None and status < 300):
            self._forget(sid)
        elif sid in self.owner:
            self.quiet_since[sid] = time.monotonic()
        elif not self.busy[sid]:  # not a session of this record: nothing kept
            del self.busy[sid]

    def _forget(self, sid: str) -> None:
        for table in (self.owner, self.quiet_since):
            table.pop(sid, None)
        if not self.busy.get(sid):
            self.busy.pop(sid, None)


class GuardedApp:
    """The SDK's ASGI app behind realprobe's one server guard (`realprobe.serving.Guard`):
    the same Host, Origin, JSON-body, token and body-size checks as the sandbox and the
    exporter, answered the same way; and, with `sessions`, the per-client session cap."""

    def __init__(self, app: Any, guard: Guard, sessions: SessionsPerClient | None = None) -> None:
        self.app = app
        self.guard = guard
        self.sessions = sessions

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                       for k, v in scope["headers"]}
            length = headers.get("content-length", "0")
            refusal = self.guard.check(scope["method"], scope["path"], headers,
                                       int(length) if length.isdigit() else 0)
            if refusal is not None:
                await send_json(send, refusal.status, refusal.body(), refusal.headers())
                return
            if self.sessions is not None and "mcp-session-id" in headers:
                await self._in_session(headers["mcp-session-id"], scope, receive, send)
                return
            if self.sessions is not None and scope["method"] == "POST":
                await self._opening(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _in_session(self, sid: str, scope: Any, receive: Any, send: Any) -> None:
        """A request of an open session, seen to its end (the session's record)."""
        assert self.sessions is not None
        answer = Answer(send)
        self.sessions.begin(sid)
        try:
            await self.app(scope, receive, answer)
        finally:
            self.sessions.end(sid, scope["method"], answer.status)

    async def _opening(self, scope: Any, receive: Any, send: Any) -> None:
        """A request that may open a session, counted against its client's cap."""
        assert self.sessions is not None
        cap, client = self.sessions, str((scope.get("client") or ("?",))[0])
        if not cap.admit(client):
            refusal = Refusal(
                503, "too_many_sessions",
                f"this client holds {cap.per_client} open sessions, the most one client may; "
                "end one (DELETE with its Mcp-Session-Id) or let one go idle")
            await send_json(send, refusal.status, refusal.body(), refusal.headers())
            return
        answer = Answer(send)
        try:
            await self.app(scope, receive, answer)
        finally:
            cap.opened(client, answer.session_id)


class Answer:
    """An ASGI `send` passed on, noting the answer's status and the session id it names."""

    def __init__(self, send: Any) -> None:
        self.send = send
        self.status: int | None = None
        self.session_id: str | None = None

    async def __call__(self, message: Any) -> None:
        if message["type"] == "http.response.start" and self.status is None:
            self.status = int(message["status"])
            self.session_id = next((v.decode("latin-1") for k, v in message.get("headers", ())
                                    if k.lower() == b"mcp-session-id"), None)
        await self.send(message)


async def send_json(send: Any, status: int, body: bytes,
                    headers: list[tuple[str, str]] | None = None) -> None:
    """A whole ASGI answer (JSON unless `headers` say otherwise)."""
    head = [(k.lower().encode(), v.encode())
            for k, v in headers or [("Content-Type", "application/json")]]
    await send({"type": "http.response.start", "status": status,
                "headers": [*head, (b"content-length", str(len(body)).encode())]})
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


# -- stdio -------------------------------------------------------------------------------


#: the start of a JSON-RPC message up to its id (serialisers write `jsonrpc` and `id` first)
_HEAD_ID = re.compile(r'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"[^"]*"\s*,\s*)?"id"\s*:\s*'
                      r'(-?\d{1,18}|"[^"\\]{0,200}")\s*[,}]')


class Unreadable(ValueError):
    """A line that is not one JSON message under the input limits; `rid` is the id its head
    names, when it names one (so a request or answer over a limit can still be answered)."""

    def __init__(self, why: str, rid: int | str | None, over_limit: bool) -> None:
        super().__init__(why)
        self.rid = rid
        #: JSON over a limit (size, nesting, entries), not a line that is not JSON at all
        self.over_limit = over_limit


def read_message(line: str, max_bytes: int) -> Any:
    """One JSON-RPC line as data, parsed under the input limits (`limits.load_json_text`:
    at most `max_bytes`, nested and sized within the limits for any document); Unreadable
    otherwise, never a RecursionError or a huge allocation."""
    if line == TOO_LONG:
        raise Unreadable("too long", None, True)
    try:
        return load_json_text(line, "message", max_bytes=max_bytes, max_entries=MAX_ENTRIES)
    except RealprobeError as exc:
        head = _HEAD_ID.match(line[:400])
        rid: int | str | None = None
        if head is not None:
            rid = int(head[1]) if head[1][0] != '"' else head[1][1:-1]
        raise Unreadable(str(exc).removeprefix("message: "), rid,
                         isinstance(exc, InputTooLarge)) from None


def line_problem(line: str, max_bytes: int = 16 * 1024 * 1024
                 ) -> types.JSONRPCError | bool | None:
    """None: pass the line on. False: skip it silently (blank). An error: answer it."""
    if line == TOO_LONG:
        return _error(None, PARSE_ERROR, "Parse error: line too long")
    if not line.strip():
        return False
    try:
        obj = read_message(line, max_bytes)
    except Unreadable as exc:
        return _error(exc.rid, PARSE_ERROR, f"Parse error: {str(exc)[:200]}")
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

    def __init__(self, inner: Any) -> None:
        self.inner = inner  # a line source: `await inner.next()`, None at the end
        self.reply: Any = None  # the SDK's write stream, set once the transport is up

    def __aiter__(self) -> CheckedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self.inner.next()
            if line is None:
                raise StopAsyncIteration
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
