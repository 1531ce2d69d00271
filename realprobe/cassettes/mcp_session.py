"""The MCP session formats: realprobe's session JSON lines, and other recorders' transcripts.

A session file's line 1 is a header `{"realprobe_mcp_cassette": 1, "pid": ..., "meta": {...}}`;
every other line is one message `{"t": s, "dir": "c2s" | "s2c", "msg": {...}}` (what the
client sent, what it was answered: an injected fault is recorded as the client saw it, with
`"injected"`), a line a side wrote that is not JSON-RPC (`"garbage"`), or an event (`"event":
"exit"`; `"injected"` with the `id` of a hang the proxy held that ended with no answer).
A torn last line (a kill mid-write) and lines that are not JSON are skipped; every other line
is checked with pydantic, so a field of the wrong type is one line naming it.

Other recorders' transcripts (mcp-tape v1 `{"t", "dir": "in"|"out", "raw"}`, and the like: a
direction under dir/direction/from/side, the message under raw/msg/message/frame/data/payload,
a time as ISO text or epoch seconds/ms) read as the same records.

As a cassette, the client's requests and their answers are calls (`mcp://session/<method>
[/<name>]`, the parameters as the body), matched by the HTTP cassettes' `Player`; the records
stay beside them (`Cassette.records`) for the MCP replay and for writing the session back.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from realprobe.cassettes.cassette import (
    MCP_SESSION_KEY,
    MCP_SESSION_VERSION,
    Call,
    Cassette,
    CassetteError,
    Failure,
    validated,
)
from realprobe.errors import RealprobeError
from realprobe.limits import MAX_ENTRIES, InputTooLarge, load_json_text, max_bytes
from realprobe.secrets import Scrubber

MATCH_ON = ("method", "url", "body")
#: the parameters that never decide an answer (a progress token, a client's identity)
_UNMATCHED = {"initialize"}
#: seconds since the session began (a recorder's clock cannot say more than 30 years)
Seconds = Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)]


class _Header(BaseModel):
    model_config = ConfigDict(extra="allow")
    realprobe_mcp_cassette: int = Field(ge=1, le=MCP_SESSION_VERSION)
    pid: int | None = Field(None, ge=0, lt=2**63)
    meta: dict[str, Any] = Field(default_factory=dict)


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow")
    t: Seconds = 0.0
    dir: Literal["c2s", "s2c"] | None = None
    msg: Any = None  # a JSON-RPC message (a client may send anything JSON)
    garbage: str | None = None
    event: str | None = None
    injected: dict[str, Any] | None = None


def json_lines(raw: bytes, label: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) of a JSON-lines file under the input limits; a torn last line
    and lines that are not JSON objects are skipped; a line over a limit is an error."""
    out: list[tuple[int, dict[str, Any]]] = []
    cap = max_bytes()
    for n, line in enumerate(raw.decode("utf-8", "replace").splitlines(keepends=True), 1):
        if not line.endswith("\n") or not line.strip():
            continue  # torn (a kill mid-write), or blank
        try:
            rec = load_json_text(line, f"{label}: line {n}", max_bytes=cap,
                                 max_entries=MAX_ENTRIES)
        except InputTooLarge as exc:
            raise CassetteError(str(exc)) from None
        except RealprobeError:
            continue  # not JSON: a broken line
        if isinstance(rec, dict):
            out.append((n, rec))
    return out


def is_session(first: dict[str, Any]) -> bool:
    return MCP_SESSION_KEY in first


def session_cassette(lines: list[tuple[int, dict[str, Any]]], label: str) -> Cassette:
    """A realprobe session file as a cassette (its records checked, field by field)."""
    if not lines or not is_session(lines[0][1]):
        raise CassetteError(f"{label}: not an MCP session cassette (no {MCP_SESSION_KEY} header "
                            "line)")
    header = validated(_Header, lines[0][1], f"{label}: line {lines[0][0]}")
    records = []
    for n, raw in lines[1:]:
        rec = validated(_Record, raw, f"{label}: line {n}")
        records.append({**raw, "t": rec.t})
    return _as_cassette(dict(header.meta), records, "mcp-session")


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


def tool_of(uri: str) -> str | None:
    """The MCP tool a call's uri names (`mcp://session/tools/call/<name>`)."""
    head = "mcp://session/tools/call/"
    return uri[len(head):] or None if uri.startswith(head) else None


def _as_cassette(meta: dict[str, Any], records: list[dict[str, Any]], source: str) -> Cassette:
    calls, _ = session_calls(records)
    cassette = Cassette(calls, {**meta, "source": source, "match_on": list(MATCH_ON)})
    cassette.records = records
    return cassette


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
                params = msg.get("params")
                rid = json.dumps(params.get("requestId") if isinstance(params, dict) else None)
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


def between_calls(records: list[dict[str, Any]]) -> dict[int, list[Any]]:
    """The server's own messages recorded while no client request was under way (a
    `notifications/tools/list_changed` after the handshake, say), by the number (from 0) of
    the client message they followed (requests and notifications of the client, in order), so
    a replay sends them again at the same place: after that request's answer, or once that
    notification arrives; -1: before the client said anything."""
    out: dict[int, list[Any]] = {}
    open_: set[str] = set()
    said = -1
    for rec in records:
        msg = rec.get("msg")
        if not isinstance(msg, dict):
            continue
        method = msg.get("method")
        if rec.get("dir") == "c2s":
            if isinstance(method, str):
                said += 1
                if "id" in msg:
                    open_.add(_id(msg))
                elif method == "notifications/cancelled" and isinstance(msg.get("params"), dict):
                    open_.discard(json.dumps(msg["params"].get("requestId")))
            continue
        if method is None:
            open_.discard(_id(msg))
        elif not open_:
            out.setdefault(said, []).append(msg)
    return out


# -- other recorders' JSON lines ------------------------------------------------------------

_DIRS = {"in": "c2s", "c2s": "c2s", "client": "c2s", "client_to_server": "c2s",
         "request": "c2s", "out": "s2c", "s2c": "s2c", "server": "s2c",
         "server_to_client": "s2c", "response": "s2c",
         "client->server": "c2s", "server->client": "s2c"}  # the last two: mcp-rec's
_BODY_KEYS = ("raw", "msg", "message", "frame", "data", "payload")
_DIR_KEYS = ("dir", "direction", "from", "side")
_WHEN = TypeAdapter(Annotated[float, Field(allow_inf_nan=False)] | str | None)


def _seconds(value: Any, first: list[float], where: str) -> float:
    try:
        when = _WHEN.validate_python(value, strict=True)
    except ValidationError:
        raise CassetteError(f"{where}: t: expected a time (ISO text or epoch seconds or "
                            f"milliseconds), got {type(value).__name__}") from None
    if when is None:
        return 0.0
    if isinstance(when, str):
        try:
            t = datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return 0.0
    elif abs(when) > 1e15:
        raise CassetteError(f"{where}: t: {when:.3g} is not a time")
    else:
        t = when / (1000.0 if when > 1e11 else 1.0)
    if not first:
        first.append(t)
    return round(t - first[0], 6)


def _imported(records: list[dict[str, Any]], label: str, source: str, empty: str) -> Cassette:
    """Another recorder's messages as a session, scrubbed as they are read (`empty`: what
    to say when there are none)."""
    if not records:
        raise CassetteError(f"{label}: {empty}")
    return _as_cassette({"imported_from": Path(label).name}, Scrubber().all(records), source)


def transcript_cassette(lines: list[tuple[int, dict[str, Any]]], label: str) -> Cassette:
    """Another recorder's transcript as a session (scrubbed as it is read)."""
    first: list[float] = []
    records: list[dict[str, Any]] = []
    for n, rec in lines:
        direction = next((_DIRS.get(rec[k].lower()) for k in _DIR_KEYS
                          if isinstance(rec.get(k), str)), None)
        msg = next((rec[k] for k in _BODY_KEYS if isinstance(rec.get(k), dict)), None)
        if isinstance(msg, dict) and isinstance(msg.get("message"), dict):
            msg = msg["message"]  # a frame wrapping the JSON-RPC message
        if direction is None or not isinstance(msg, dict) or "jsonrpc" not in msg:
            continue
        t = _seconds(rec.get("t", rec.get("ts", rec.get("timestamp"))), first,
                     f"{label}: line {n}")
        records.append({"t": max(t, 0.0), "dir": direction, "msg": msg})
    return _imported(records, label, "mcp-tape", "no JSON-RPC messages with a direction found")


def is_mcp_cassette(data: dict[str, Any]) -> bool:
    """mcp-cassette's JSON document (`format_version`, `messages` of `sender`/`payload`)."""
    return "format_version" in data and isinstance(data.get("messages"), list)


def from_mcp_cassette(data: dict[str, Any], label: str) -> Cassette:
    """An mcp-cassette recording (its documented v1-v3 schema: each message's `sender`
    client|server, `t_offset_ms` and verbatim `payload`) as a session; raw lines it kept
    are left out."""
    records: list[dict[str, Any]] = []
    for n, m in enumerate(data["messages"]):
        if not isinstance(m, dict) or not isinstance(m.get("payload"), dict):
            continue
        direction = {"client": "c2s", "server": "s2c"}.get(str(m.get("sender")))
        if direction is None:
            raise CassetteError(f"{label}: message {n}: sender must be client or server")
        offset = m.get("t_offset_ms")
        t = 0.0
        if isinstance(offset, int | float) and offset == offset and abs(offset) < 1e15:
            t = float(offset) / 1000.0
        records.append({"t": max(t, 0.0), "dir": direction, "msg": m["payload"]})
    return _imported(records, label, "mcp-cassette",
                     "an mcp-cassette recording with no JSON-RPC messages")


def is_mcp_recorder(data: dict[str, Any]) -> bool:
    """mcp-recorder's JSON document (`version`, `metadata`, `interactions` with a `type`)."""
    items = data.get("interactions")
    return ("metadata" in data and isinstance(items, list)
            and all(isinstance(i, dict) and "type" in i for i in items))


def from_mcp_recorder(data: dict[str, Any], label: str) -> Cassette:
    """An mcp-recorder cassette (its documented 1.x schema: `jsonrpc_request` interactions
    pair a request with its response and latency, `notification`s are the client's; HTTP
    `lifecycle` entries carry no message) as a session, timed by the latencies."""
    records: list[dict[str, Any]] = []
    t = 0.0
    for item in data["interactions"]:
        request, response = item.get("request"), item.get("response")
        if item.get("type") not in ("jsonrpc_request", "notification"):
            continue
        if isinstance(request, dict):
            records.append({"t": round(t, 6), "dir": "c2s", "msg": request})
        latency = item.get("latency_ms")
        t += max(float(latency), 0.0) / 1000.0 if isinstance(latency, int | float) else 0.0
        if isinstance(response, dict):
            records.append({"t": round(t, 6), "dir": "s2c", "msg": response})
    return _imported(records, label, "mcp-recorder",
                     "an mcp-recorder cassette with no JSON-RPC messages")


def scrub_records(cassette: Cassette, secrets: tuple[str, ...] = (),
                  names: tuple[str, ...] = ()) -> int:
    """Credentials out of a session's records as recording takes them out (values under a
    credential name, URLs, known secrets), plus `names` and the literal `secrets`; the calls
    are read again from the records. Returns the records changed."""
    before = cassette.records or []
    after = Scrubber(names, secrets).all(before)  # echoes of a key found anywhere go too
    cassette.records = after
    cassette.calls, _ = session_calls(after)
    return sum(a != b for a, b in zip(after, before, strict=True))
