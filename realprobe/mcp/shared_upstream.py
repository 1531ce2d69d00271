"""One upstream MCP session shared by many client sessions (`--upstream-sessions shared`).

Each client session talks to a `SessionWire` of its own; the shared upstream sees one client.
Request ids are rewritten on the way up (`rp<n>`) and restored on the way down, so two
clients may both use id 1; a cancellation names the rewritten id. The upstream is initialised
once: the first client's `initialize` goes up, every later one is answered with the same
result (its own id) and its `notifications/initialized` is not sent again. What the server
sends outside any answer goes where it belongs: a progress notification to the session whose
request carried that progress token, a server request to the session with the latest request
under way (its answer comes back as the client wrote it), any other notification to every
session.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from realprobe.mcp.guards import TOO_LONG
from realprobe.mcp.wire import Wire, parse

HANDSHAKE = ("initialize", "server/discover")


class SharedUpstream:
    """The shared server side; `session()` hands out one client's view of it."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.sessions: list[SessionWire] = []
        self.routes: dict[str, tuple[SessionWire, Any]] = {}  # upstream id -> (session, id)
        self.tokens: dict[str, SessionWire] = {}  # progress token -> session
        self.server_asks: dict[str, SessionWire] = {}  # a server request's id -> session
        self.handshake: dict[str, asyncio.Future[dict[str, Any]]] = {}  # method -> answer
        self.next_id = 0
        self.ended = asyncio.Event()
        self.exit_code: Any = getattr(wire, "exit_code", None)

    def session(self) -> SessionWire:
        s = SessionWire(self)
        self.sessions.append(s)
        return s

    def drop(self, s: SessionWire) -> None:
        if s in self.sessions:
            self.sessions.remove(s)
        for key in [k for k, (owner, _) in self.routes.items() if owner is s]:
            del self.routes[key]
        for table in (self.tokens, self.server_asks):
            for key in [k for k, owner in table.items() if owner is s]:
                del table[key]

    async def pump(self) -> None:
        """Route every line the server sends until it ends; then every session ends too."""
        try:
            while (line := await self.wire.recv()) is not None:
                self._route(line)
        finally:
            self.ended.set()
            for s in list(self.sessions):
                s.inbox.put_nowait(None)

    def _route(self, line: str) -> None:
        msg = parse(line)
        if not isinstance(msg, dict) or line == TOO_LONG:
            for s in self.sessions:  # each session's proxy counts it (and fails its oldest call)
                s.inbox.put_nowait(line)
            return
        method = msg.get("method")
        if method is None and "id" in msg:  # an answer: back to its session, its id restored
            found = self.routes.pop(json.dumps(msg["id"]), None)
            if found is None:
                return
            owner, rid = found
            if owner.handshake_method is not None:
                self._settle(owner.handshake_method, msg)
                owner.handshake_method = None
            owner.deliver({**msg, "id": rid})
            return
        if "id" in msg:  # the server's own request: the session with the latest call
            asked = self._latest()
            if asked is not None:
                self.server_asks[json.dumps(msg["id"])] = asked
                asked.deliver(msg)
            return
        token = (msg.get("params") or {}).get("progressToken") if isinstance(
            msg.get("params"), dict) else None
        if token is not None and json.dumps(token) in self.tokens:
            self.tokens[json.dumps(token)].deliver(msg)
            return
        for s in self.sessions:
            s.deliver(msg)

    def _latest(self) -> SessionWire | None:
        if self.routes:
            return next(reversed(self.routes.values()))[0]
        return self.sessions[-1] if self.sessions else None

    def _settle(self, method: str, answer: dict[str, Any]) -> None:
        fut = self.handshake.get(method)
        if fut is not None and not fut.done():
            if "result" in answer:
                fut.set_result(answer)
            else:  # a refused handshake: the next client tries again
                del self.handshake[method]
                fut.cancel()

    async def up(self, owner: SessionWire, msg: dict[str, Any]) -> None:
        """A client request on its way up, under an id of the shared session's own."""
        self.next_id += 1
        uid = f"rp{self.next_id}"
        self.routes[json.dumps(uid)] = (owner, msg["id"])
        params = msg.get("params")
        token = (params.get("_meta") or {}).get("progressToken") if isinstance(
            params, dict) and isinstance(params.get("_meta"), dict) else None
        if token is not None:
            self.tokens[json.dumps(token)] = owner
        await self.wire.send(json.dumps({**msg, "id": uid}, ensure_ascii=False))

    def upstream_id(self, owner: SessionWire, rid: Any) -> str | None:
        for key, (s, original) in self.routes.items():
            if s is owner and original == rid:
                return key[1:-1]  # the key is our own id "rp<n>" as JSON: in quotes
        return None


class SessionWire:
    """One client session's view of the shared upstream (a `Wire`)."""

    def __init__(self, shared: SharedUpstream) -> None:
        self.shared = shared
        self.inbox: asyncio.Queue[str | None] = asyncio.Queue()
        self.handshake_method: str | None = None
        self.joined = False  # answered from the shared handshake: its `initialized` stays here

    async def recv(self) -> str | None:
        return await self.inbox.get()

    def deliver(self, msg: dict[str, Any]) -> None:
        self.inbox.put_nowait(json.dumps(msg, ensure_ascii=False))

    async def exit_code(self, wait_s: float = 2.0) -> int | None:
        if self.shared.exit_code is None:
            return None
        code: int | None = await self.shared.exit_code(wait_s)
        return code

    async def send(self, line: str) -> None:
        msg = parse(line)
        if not isinstance(msg, dict):
            await self.shared.wire.send(line)  # the server answers garbage as it does
            return
        method = msg.get("method")
        if method is None:  # the client's answer to a server request: ids are the server's
            self.shared.server_asks.pop(json.dumps(msg.get("id")), None)
            await self.shared.wire.send(line)
            return
        if "id" not in msg:
            await self._notify(msg, line)
            return
        if method in HANDSHAKE:
            await self._handshake(method, msg)
            return
        await self.shared.up(self, msg)

    async def _notify(self, msg: dict[str, Any], line: str) -> None:
        method = msg.get("method")
        if method == "notifications/initialized" and self.joined:
            return  # the shared session was initialised by its first client
        if method == "notifications/cancelled" and isinstance(msg.get("params"), dict):
            uid = self.shared.upstream_id(self, msg["params"].get("requestId"))
            if uid is None:
                return
            msg = {**msg, "params": {**msg["params"], "requestId": uid}}
            line = json.dumps(msg, ensure_ascii=False)
        await self.shared.wire.send(line)

    async def _handshake(self, method: str, msg: dict[str, Any]) -> None:
        known = self.shared.handshake.get(method)
        if known is None:
            self.shared.handshake[method] = asyncio.get_running_loop().create_future()
            self.handshake_method = method
            await self.shared.up(self, msg)
            return
        try:
            answer = await asyncio.shield(known)
        except asyncio.CancelledError:
            if known.cancelled():  # the first client's handshake was refused: try ours
                await self._handshake(method, msg)
                return
            raise
        self.joined = True
        self.deliver({**answer, "id": msg["id"]})
