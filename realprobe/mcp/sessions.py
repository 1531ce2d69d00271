"""Many MCP client sessions over one streamable-HTTP endpoint, side by side.

Each client session has a transport of its own (the SDK's `StreamableHTTPServerTransport`,
one per `Mcp-Session-Id`) and a `Proxy` of its own: its own fault draws (seeded as a lone
session would be), its own session cassette (`<record folder>/<session id>.jsonl`), its own
run of probe rows. Upstream, each session has a server of its own (`per-client`: a process
started for it, an HTTP session of its own, the recording replayed from its start) or they
all share one (`shared`, see shared_upstream.py).

The limits are those of `realprobe mcp --transport http`: at most `per_client` open
sessions per client address (the guard's `SessionsPerClient`, 503 past it), `CLIENTS_AT_CAP`
times that in all, and a session with no request in flight for `idle_s` seconds is closed
(its upstream too). A DELETE ends a session and gives its place back.

What the server sends while a client's request is under way (progress, logging, its own
requests) is sent on that request's answer stream, so a client that opened no GET stream
still gets it; the rest goes to the GET stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from realprobe.mcp.guards import (
    CLIENTS_AT_CAP,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_S,
    Answer,
    GuardedApp,
    SessionsPerClient,
    send_json,
)
from realprobe.mcp.wire import SdkWire, Wire, parse

log = logging.getLogger("realprobe.mcp.sessions")

UPSTREAM_SESSIONS = ("per-client", "shared")


@dataclass(frozen=True)
class SessionLimits:
    per_client: int = DEFAULT_MAX_SESSIONS
    idle_s: float = DEFAULT_SESSION_IDLE_S
    #: the server guard's widening (`--allowed-host`) and bearer token (`--auth-token-env`)
    allowed_hosts: tuple[str, ...] = ()
    auth_token: str | None = None


class SessionFront(SdkWire):
    """One client session's side of the proxy, over its transport's streams; server messages
    that are not answers ride on the stream of the client request under way (the progress
    token's request, else the latest)."""

    def __init__(self, read: Any, write: Any) -> None:
        super().__init__(read, write)
        self.open: dict[str, Any] = {}  # client request id (json) -> id, in order
        self.tokens: dict[str, Any] = {}  # progress token (json) -> request id

    async def recv(self) -> str | None:
        line = await super().recv()
        msg = parse(line) if line is not None else None
        if isinstance(msg, dict) and "id" in msg and isinstance(msg.get("method"), str):
            self.open[json.dumps(msg["id"])] = msg["id"]
            meta = (msg.get("params") or {}).get("_meta") if isinstance(
                msg.get("params"), dict) else None
            if isinstance(meta, dict) and "progressToken" in meta:
                self.tokens[json.dumps(meta["progressToken"])] = msg["id"]
        return line

    def _related(self, msg: dict[str, Any]) -> Any:
        params = msg.get("params")
        token = params.get("progressToken") if isinstance(params, dict) else None
        if token is not None and json.dumps(token) in self.tokens:
            return self.tokens[json.dumps(token)]
        return next(reversed(self.open.values())) if self.open else None

    async def send(self, line: str, metadata: Any = None) -> None:
        import anyio
        from mcp.shared.message import ServerMessageMetadata

        msg = parse(line)
        if not isinstance(msg, dict):
            return  # the HTTP transport carries JSON-RPC only
        if "method" not in msg:  # an answer: its request is over
            key = json.dumps(msg.get("id"))
            self.open.pop(key, None)
            for token in [t for t, rid in self.tokens.items() if json.dumps(rid) == key]:
                del self.tokens[token]
        else:
            related = self._related(msg)
            if related is not None:
                metadata = ServerMessageMetadata(related_request_id=related)
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await super().send(line, metadata)


RunSession = Callable[[str, Wire], Awaitable[None]]


class SessionRouter:
    """ASGI: a request with an `Mcp-Session-Id` goes to that session's transport (404 for an
    unknown or ended one); one without opens a session, run by `run(session_id, front)`."""

    def __init__(self, run: RunSession, path: str, limits: SessionLimits) -> None:
        self.run = run
        self.path = path
        self.limits = limits
        self.transports: dict[str, Any] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def live(self, session_id: str) -> bool:
        return session_id in self.transports

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"].rstrip("/") != self.path:
            await send_json(send, 404, b"not found")
            return
        sid = next((v.decode("latin-1") for k, v in scope["headers"]
                    if k.lower() == b"mcp-session-id"), None)
        if sid is not None:
            transport = self.transports.get(sid)
            if transport is None:
                await send_json(send, 404, b'{"error": "Session not found"}')
                return
            await transport.handle_request(scope, receive, send)
            if transport.is_terminated:
                self.transports.pop(sid, None)
            return
        if len(self.transports) >= self.limits.per_client * CLIENTS_AT_CAP:
            await send_json(send, 503, b'{"error": "Too many open sessions"}')
            return
        body = await _body(receive) if scope["method"] == "POST" else b""
        if not _opens_a_session(body):  # as the SDK answers it, with nothing started
            await send_json(send, 400, b'{"jsonrpc": "2.0", "id": null, "error": {"code": '
                            b'-32600, "message": "Bad Request: Missing session ID"}}')
            return
        sent = [False]

        async def replayed() -> Any:
            if not sent[0]:
                sent[0] = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self._open(scope, replayed, send)

    async def _open(self, scope: Any, receive: Any, send: Any) -> None:
        from mcp.server.streamable_http import StreamableHTTPServerTransport
        from mcp.server.transport_security import TransportSecuritySettings

        sid = uuid.uuid4().hex
        transport = StreamableHTTPServerTransport(
            sid, idle_timeout=self.limits.idle_s,
            # the Host/Origin checks are the guard's (one home for every realprobe server)
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        self.transports[sid] = transport
        ready = asyncio.Event()
        task = asyncio.ensure_future(self._session(sid, transport, ready))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        await ready.wait()
        answer = Answer(send)
        try:
            await transport.handle_request(scope, receive, answer)
        finally:
            if answer.status is None or answer.status >= 400:  # nothing opened: none kept
                self.transports.pop(sid, None)
                await transport.terminate()

    async def _session(self, sid: str, transport: Any, ready: asyncio.Event) -> None:
        try:
            async with transport.connect() as (read, write):
                ready.set()
                idle = asyncio.ensure_future(_end_when_idle(transport))
                try:
                    await self.run(sid, SessionFront(read, write))
                finally:
                    idle.cancel()
                    self.transports.pop(sid, None)
                    await transport.terminate()
        except Exception as exc:  # one session's failure never takes the others down
            log.error("MCP session %s ended: %s", sid, exc)
        finally:
            ready.set()
            self.transports.pop(sid, None)

    async def close(self) -> None:
        """End every session (each closes its upstream, cassette and rows)."""
        for transport in list(self.transports.values()):
            with contextlib.suppress(Exception):
                await transport.terminate()
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=10)


#: the largest opening request read before a session starts (the guard's body cap)
OPENING_BODY_MAX = 4 * 1024 * 1024


async def _body(receive: Any) -> bytes:
    out = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(out)
        out += message.get("body", b"")
        if len(out) > OPENING_BODY_MAX or not message.get("more_body"):
            return bytes(out)


def _opens_a_session(body: bytes) -> bool:
    """Only an `initialize` opens a session (anything else without a session id is refused
    by the SDK's transport; a client's `server/discover` probe then falls back to it)."""
    msg = parse(body.decode("utf-8", "replace")) if len(body) <= OPENING_BODY_MAX else None
    return isinstance(msg, dict) and msg.get("method") == "initialize"


async def _end_when_idle(transport: Any) -> None:
    """Terminate the transport once its idle scope (the SDK's idle countdown) fires."""
    import anyio

    scope = transport.idle_scope
    if scope is None:
        return
    with scope:
        await anyio.sleep_forever()
    await transport.terminate()


@asynccontextmanager
async def serving(run: RunSession, host: str, port: int, *, limits: SessionLimits,
                  on_ready: Callable[[str], None] | None = None) -> AsyncIterator[SessionRouter]:
    """Serve sessions on `host:port/mcp` behind the server base's guard (Host/Origin, JSON
    bodies, body size) and the per-client session cap, until the block ends."""
    from realprobe.mcp.serve import MCP_PATH, bind, listening
    from realprobe.serving import MAX_BODY, Guard

    router = SessionRouter(run, MCP_PATH, limits)
    sock = bind(host, port)
    guard = Guard(host, limits.allowed_hosts, limits.auth_token, json_paths=(MCP_PATH,),
                  max_body=4 * MAX_BODY)
    app = GuardedApp(router, guard, SessionsPerClient(limits.per_client, router.live))
    async with listening(app, host, sock, on_ready, lifespan="off"):
        try:
            yield router
        finally:
            await router.close()  # the proxy's own handlers stop it, sessions closed first
