"""MCP session cassettes: every JSON-RPC message of a session, both ways, as JSON lines.

Line 1 is a header `{"realprobe_mcp_cassette": 1, "pid": ..., "meta": {...}}`; every other
line is one message `{"t": s, "dir": "c2s" | "s2c", "msg": {...}}` (what the client sent, what
it was answered: an injected fault is recorded as the client saw it, with `"injected"`), a
line the server wrote that is not JSON-RPC (`"garbage"`), or an event (`"event": "exit"`;
`"injected"` with the `id` of a hang the proxy held that ended with no answer).
Lines are written through the crash-safe journal (each in the OS before the message goes
on), so a killed proxy loses nothing already relayed; a torn last line is skipped on read.
Credentials are scrubbed by the one scrubber before anything is written.

Replay turns the client's requests and their answers into cassette calls
(`mcp://session/<method>[/<name>]`, the parameters as the body) and finds each request's
answer with the HTTP cassettes' `Player`: same matching, same exhaustion policies
(error, repeat-last, cycle), same miss messages. Server-initiated requests and
notifications recorded during a call are sent again before its answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from realprobe.cassettes.cassette import Call, Cassette, CassetteError, Failure
from realprobe.cassettes.core import CassetteMiss, LatencyPolicy, Player
from realprobe.cassettes.journal import Journal
from realprobe.limits import check_nesting, read_bounded
from realprobe.secrets import scrub_data

FORMAT_KEY = "realprobe_mcp_cassette"
VERSION = 1
MATCH_ON = ("method", "url", "body")
#: the parameters that never decide an answer (a progress token, a client's identity)
_UNMATCHED = {"initialize"}


def request_key(method: str, params: Any) -> tuple[str, bytes | None]:
    """(uri, body) that find a request's recording: the method, the tool/prompt/resource
    named, and the parameters without `_meta`."""
    name = ""
    if isinstance(params, dict):
        name = str(params.get("name") or params.get("uri") or "")
        params = {k: v for k, v in params.items() if k != "_meta"}
    uri = f"mcp://session/{method}" + (f"/{name}" if name else "")
    if method in _UNMATCHED or not params:
        return uri, None
    return uri, json.dumps(params, sort_keys=True, separators=(",", ":")).encode()


class SessionRecorder:
    """Writes one session as it happens."""

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path = path
        self.t0 = time.monotonic()
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        header = {FORMAT_KEY: VERSION, "pid": os.getpid(),
                  "meta": {**meta, "recorded_at": stamp, "scrubbed": True}}
        self.journal = Journal.open_at(path, scrub_data(header))

    def _t(self) -> float:
        return round(time.monotonic() - self.t0, 6)

    def message(self, direction: str, msg: Any, injected: dict[str, Any] | None = None) -> None:
        rec: dict[str, Any] = {"t": self._t(), "dir": direction, "msg": scrub_data(msg)}
        if injected:
            rec["injected"] = injected
        self.journal.write(rec)

    def garbage(self, direction: str, text: str) -> None:
        self.journal.write({"t": self._t(), "dir": direction,
                            "garbage": scrub_data(text[:2000])})

    def event(self, kind: str, **fields: Any) -> None:
        self.journal.write({"t": self._t(), "event": kind, **scrub_data(fields)})

    def close(self) -> None:
        self.journal.close()


def read_session(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header's meta and every whole record (a torn or broken line is skipped)."""
    records: list[dict[str, Any]] = []
    meta: dict[str, Any] | None = None
    for rec in _json_lines(Path(path)):
            if meta is None:
                if FORMAT_KEY not in rec:
                    raise CassetteError(
                        f"{path}: not an MCP session cassette (no {FORMAT_KEY} header); "
                        "`realprobe mcp import` converts other recorders' JSONL"
                    )
                meta = dict(rec.get("meta") or {})
                continue
            records.append(rec)
    if meta is None:
        raise CassetteError(f"{path}: not an MCP session cassette (no {FORMAT_KEY} header "
                            "line); `realprobe mcp import` converts other recorders' JSONL")
    return meta, records


def _json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file read under the input limits (size, nesting);
    a torn last line (a kill mid-write) and lines that are not objects are skipped."""
    text = read_bounded(path).decode("utf-8", "replace")
    out: list[dict[str, Any]] = []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(rec, dict):
            check_nesting(rec, str(path))
            out.append(rec)
    return out


def _id(msg: dict[str, Any]) -> str:
    return json.dumps(msg.get("id"))


def session_calls(records: list[dict[str, Any]], server_only: bool = False,
                  ) -> tuple[list[Call], dict[int, list[Any]]]:
    """The client's requests as cassette calls (answer, latency, failure), and per call the
    server's own messages recorded while it was under way; `server_only`: without the calls
    whose recorded answer a proxy injected (made or rewrote), for a replay that injects faults
    of its own (recorded faults on top would push its failure share past the rate asked)."""
    calls: list[Call] = []
    open_: dict[str, tuple[Call, float]] = {}
    extras: dict[int, list[Any]] = {}
    dropped: set[int] = set()
    by_id: dict[str, Call] = {}  # each id's latest request
    for rec in records:
        msg = rec.get("msg")
        if rec.get("event") == "injected":  # a hang the proxy held, ended without an answer
            held = by_id.get(json.dumps(rec.get("id")))
            if server_only and held is not None:
                dropped.add(held.seq)
            continue
        if not isinstance(msg, dict):
            continue
        t = float(rec.get("t") or 0.0)
        if rec.get("dir") == "c2s":
            method = msg.get("method")
            if isinstance(method, str) and "id" in msg:
                uri, body = request_key(method, msg.get("params"))
                call = Call(seq=len(calls), method="MCP", uri=uri, request_body=body,
                            status=None, t_s=t)
                calls.append(call)
                open_[_id(msg)] = (call, t)
                by_id[_id(msg)] = call
            elif method == "notifications/cancelled":
                rid = json.dumps((msg.get("params") or {}).get("requestId"))
                if rid in open_:
                    call, t0 = open_.pop(rid)
                    call.error = Failure("CancelledError", "cancelled by the client", "read")
                    call.elapsed_s = t - t0
            continue
        if "method" in msg:  # the server's own request or notification, during the last call
            if open_:
                last = max(open_.values(), key=lambda ct: ct[0].seq)[0]
                extras.setdefault(last.seq, []).append(msg)
            continue
        found = open_.pop(_id(msg), None)
        if found is None:
            continue
        call, t0 = found
        if server_only and rec.get("injected"):
            dropped.add(call.seq)
            continue
        answer = {k: v for k, v in msg.items() if k not in ("id", "jsonrpc")}
        call.status, call.body, call.elapsed_s = 200, json.dumps(answer).encode(), t - t0
    for call, _ in open_.values():
        call.error = Failure("TimeoutError", "the session ended before an answer", "read")
    if dropped:
        kept = [c for c in calls if c.seq not in dropped]
        extras = {i: extras[c.seq] for i, c in enumerate(kept) if c.seq in extras}
        for i, c in enumerate(kept):
            c.seq = i
        calls = kept
    return calls, extras


class CassetteUpstream:
    """A recorded session standing in for the server: a `Wire` the proxy relays to."""

    def __init__(self, path: str | Path, *, on_exhausted: str = "error",
                 latency: str = "none", server_only: bool = False) -> None:
        self.meta, records = read_session(path)
        calls, self.extras = session_calls(records, server_only)
        cassette = Cassette(calls, {"match_on": list(MATCH_ON)}, Path(path))
        self.player = Player(cassette, on_exhausted=on_exhausted, match_on=MATCH_ON)
        self.latency = LatencyPolicy.parse(latency).without_virtual()
        self.out: asyncio.Queue[str | None] = asyncio.Queue()
        self._server_ids = 0

    async def recv(self) -> str | None:
        return await self.out.get()

    def close(self) -> None:
        self.out.put_nowait(None)

    async def send(self, line: str) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if not isinstance(msg, dict) or "id" not in msg or not isinstance(msg.get("method"), str):
            return  # notifications and the client's answers to replayed server requests
        uri, body = request_key(msg["method"], msg.get("params"))
        try:
            call = self.player.lookup("MCP", uri, body)
        except CassetteMiss as exc:
            self._put({"jsonrpc": "2.0", "id": msg["id"],
                       "error": {"code": -32602, "message": str(exc)}})
            return
        asyncio.get_running_loop().create_task(self._answer(msg["id"], call))

    def _put(self, msg: dict[str, Any]) -> None:
        self.out.put_nowait(json.dumps(msg, ensure_ascii=False))

    async def _answer(self, rid: Any, call: Call) -> None:
        for extra in self.extras.get(call.seq, ()):
            if "id" in extra:  # a server request: a fresh id, its answer is not awaited
                self._server_ids += 1
                extra = {**extra, "id": f"replay-{self._server_ids}"}
            self._put(extra)
        if self.latency.sleeps and call.elapsed_s:
            await asyncio.sleep(call.elapsed_s * (self.latency.scale
                                                  if self.latency.kind == "scaled" else 1.0))
        if call.error is not None or call.status is None:
            return  # recorded without an answer: held until the client gives up
        self._put({"jsonrpc": "2.0", "id": rid, **json.loads(call.body)})


# -- other recorders' JSON lines ------------------------------------------------------------

_DIRS = {"in": "c2s", "c2s": "c2s", "client": "c2s", "client_to_server": "c2s",
         "request": "c2s", "out": "s2c", "s2c": "s2c", "server": "s2c",
         "server_to_client": "s2c", "response": "s2c"}
_BODY_KEYS = ("raw", "msg", "message", "frame", "data", "payload")
_DIR_KEYS = ("dir", "direction", "from", "side")


def _seconds(value: Any, first: list[float]) -> float:
    if isinstance(value, int | float):
        t = float(value) / (1000.0 if value > 1e11 else 1.0)
    elif isinstance(value, str):
        try:
            t = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return 0.0
    else:
        return 0.0
    if not first:
        first.append(t)
    return round(t - first[0], 6)


def import_session(source: str | Path, out: str | Path) -> int:
    """Convert a JSON-lines MCP transcript (mcp-tape v1 `{"t", "dir": "in"|"out", "raw"}`,
    and the like: a direction under dir/direction/from/side, the message under
    raw/msg/message/frame/data/payload, a time as ISO text or epoch seconds/ms) into a
    realprobe MCP cassette, scrubbed; returns the messages kept."""
    src = Path(source)
    lines = _json_lines(src)
    recorder = SessionRecorder(Path(out), {"imported_from": src.name})
    first: list[float] = []
    kept = 0
    try:
        for rec in lines:
            direction = next((_DIRS.get(str(rec[k]).lower()) for k in _DIR_KEYS
                              if k in rec), None)
            msg = next((rec[k] for k in _BODY_KEYS if isinstance(rec.get(k), dict)), None)
            if isinstance(msg, dict) and isinstance(msg.get("message"), dict):
                msg = msg["message"]  # a frame wrapping the JSON-RPC message
            if direction is None or not isinstance(msg, dict) or "jsonrpc" not in msg:
                continue
            t = _seconds(rec.get("t", rec.get("ts", rec.get("timestamp"))), first)
            recorder.journal.write({"t": t, "dir": direction, "msg": scrub_data(msg)})
            kept += 1
    finally:
        recorder.close()
    if not kept:
        raise CassetteError(f"{src}: no JSON-RPC messages with a direction found")
    return kept
