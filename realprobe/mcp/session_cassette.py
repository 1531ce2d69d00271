"""MCP session cassettes: writing one as a session happens, and standing in for the server.

The format (header line, one JSON-RPC message a line, both ways) and its reading are the
cassettes room's (`realprobe.cassettes.mcp_session`), loaded like every cassette by
`load_any`. Lines are written through the crash-safe journal (each in the OS before the
message goes on), so a killed proxy loses nothing already relayed. Credentials are scrubbed
by the one scrubber before anything is written.

Replay finds each request's answer with the HTTP cassettes' `Player`: same matching, same
exhaustion policies (error, repeat-last, cycle), same miss messages. Server-initiated
requests and notifications recorded during a call are sent again before its answer; those
recorded between calls are sent again at the same place in the client's messages.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from realprobe.cassettes.cassette import (
    MCP_SESSION_KEY,
    MCP_SESSION_VERSION,
    Call,
    Cassette,
    CassetteError,
)
from realprobe.cassettes.core import CassetteMiss, LatencyPolicy, Player
from realprobe.cassettes.importers import load_any
from realprobe.cassettes.journal import Journal
from realprobe.cassettes.mcp_session import MATCH_ON, between_calls, request_key, session_calls
from realprobe.mcp.guards import Unreadable, read_message
from realprobe.secrets import Scrubber

__all__ = ["CassetteUpstream", "SessionRecorder"]


class SessionRecorder:
    """Writes one session as it happens."""

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path = path
        self.t0 = time.monotonic()
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        header = {MCP_SESSION_KEY: MCP_SESSION_VERSION, "pid": os.getpid(),
                  "meta": {**meta, "recorded_at": stamp, "scrubbed": True}}
        #: a key found under a credential name is taken out of every later message too
        self.scrub = Scrubber()
        self.journal = Journal.open_at(path, self.scrub.data(header))

    def _t(self) -> float:
        return round(time.monotonic() - self.t0, 6)

    def message(self, direction: str, msg: Any, injected: dict[str, Any] | None = None) -> None:
        rec: dict[str, Any] = {"t": self._t(), "dir": direction, "msg": self.scrub.data(msg)}
        if injected:
            rec["injected"] = injected
        self.journal.write(rec)

    def garbage(self, direction: str, text: str) -> None:
        self.journal.write({"t": self._t(), "dir": direction,
                            "garbage": self.scrub.data(text[:2000])})

    def event(self, kind: str, **fields: Any) -> None:
        self.journal.write({"t": self._t(), "event": kind, **self.scrub.data(fields)})

    def close(self) -> None:
        self.journal.close()


class CassetteUpstream:
    """A recorded session standing in for the server: a `Wire` the proxy relays to."""

    def __init__(self, path: str | Path, *, on_exhausted: str = "error",
                 latency: str = "none", server_only: bool = False) -> None:
        session = load_any(path)
        if session.records is None:
            raise CassetteError(f"{session.label()}: holds HTTP calls, not an MCP session; "
                                "replay it with `realprobe replay` or use_cassette")
        self.meta = session.meta
        calls, self.extras = session_calls(session.records or [], server_only)
        self.between = between_calls(session.records or [])
        self.said = 0  # the client's requests and notifications so far
        cassette = Cassette(calls, {"match_on": list(MATCH_ON)}, Path(path))
        self.player = Player(cassette, on_exhausted=on_exhausted, match_on=MATCH_ON)
        self.latency = LatencyPolicy.parse(latency).without_virtual()
        self.out: asyncio.Queue[str | None] = asyncio.Queue()
        self._server_ids = 0

    async def recv(self) -> str | None:
        if -1 in self.between:  # what the server said before the client said anything
            self._send_extras(self.between.pop(-1))
        return await self.out.get()

    def close(self) -> None:
        self.out.put_nowait(None)

    async def send(self, line: str) -> None:
        try:
            msg = read_message(line, len(line) + 1)
        except Unreadable:
            return
        if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
            return  # the client's answers to replayed server requests
        said, self.said = self.said, self.said + 1
        if "id" not in msg:  # a notification: what followed it in the recording, now
            self._send_extras(self.between.pop(said, ()))
            return
        uri, body = request_key(msg["method"], msg.get("params"))
        try:
            call = self.player.lookup("MCP", uri, body)
        except CassetteMiss as exc:
            self._put({"jsonrpc": "2.0", "id": msg["id"],
                       "error": {"code": -32602, "message": str(exc)}})
            self._send_extras(self.between.pop(said, ()))
            return
        asyncio.get_running_loop().create_task(self._answer(msg["id"], call, said))

    def _put(self, msg: dict[str, Any]) -> None:
        self.out.put_nowait(json.dumps(msg, ensure_ascii=False))

    def _send_extras(self, extras: Any) -> None:
        for extra in extras:
            if "id" in extra:  # a server request: a fresh id, its answer is not awaited
                self._server_ids += 1
                extra = {**extra, "id": f"replay-{self._server_ids}"}
            self._put(extra)

    async def _answer(self, rid: Any, call: Call, said: int = -2) -> None:
        self._send_extras(self.extras.get(call.seq, ()))
        if self.latency.sleeps and call.elapsed_s:
            await asyncio.sleep(call.elapsed_s * self.latency.scale)  # real: a scale of 1
        if call.error is not None or call.status is None:
            return  # recorded without an answer: held until the client gives up
        answer = read_message(call.body.decode("utf-8", "replace"), len(call.body) + 1)
        self._put({"jsonrpc": "2.0", "id": rid, **answer})
        self._send_extras(self.between.pop(said, ()))  # what the server said after it
