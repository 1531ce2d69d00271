"""realprobe in front of any MCP server: every message relayed both ways, faults injected per
request of the faulted methods (`tools/call` by default, and any method the profile names or
`--fault-methods` chooses) from the simulator's fault model, each such call stored as a probe
row.

What passes through is relayed as it came (`initialize`, notifications, progress, the
server's own requests, every answer not injected). For each request of a faulted method the
fault model (the same `FaultModel` as the HTTP tools: profile, fault plan, fault-rate dial,
seeded per tool, or per method for the other methods) draws an outcome:

- an explicit fault is answered by the proxy after its drawn latency (a named profile's; at
  once under the fault-rate dial alone) and the server never sees the call: an `isError`
  result or a JSON-RPC error (the profile's `mcp_errors`, else the tool's calibrated
  JSON-RPC share; always a JSON-RPC error for methods other than tools/call);
- a hang (TIMEOUT) is held: the client's cancellation or the proxy's deadline ends it;
- an implicit fault (stale, empty, wrong, drift) lets a tool call through and rewrites the
  structured result (and the text that mirrors it) before the client sees it;
- a success is relayed once its drawn latency has passed (a named profile's).

Rows say where each outcome came from: what the proxy made or shaped is `simulate`, the
server's own answers (its real errors included) `live`, or `replay` from a cassette.
A server that never answers, writes garbage, answers with more than the size limit or dies
mid-call costs its callers a clear JSON-RPC error and an error row, never a hung proxy; the
session cassette is written line by line, so it survives all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import random
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from realprobe.errors import ErrorCode, RealprobeError
from realprobe.mcp.wire import Unreadable, Wire, parse
from realprobe.result import JSONRPC_ERROR_PREFIX, ToolError, ToolResult
from realprobe.simulator.faults import FaultModel, Outcome, injection_of
from realprobe.simulator.profile import LatencyModel
from realprobe.target import Target, TargetKind

if TYPE_CHECKING:
    from realprobe.store import Database

log = logging.getLogger("realprobe.mcp.proxy")

#: JSON-RPC error codes a server answers with -> the error taxonomy
JSONRPC_CODES = {-32602: ErrorCode.INVALID_INPUT, -32601: ErrorCode.NOT_FOUND,
                 -32001: ErrorCode.TIMEOUT, -32700: ErrorCode.INVALID_RESPONSE}
#: an injected explicit fault as a JSON-RPC error code
INJECTED_CODES = {ErrorCode.TIMEOUT: -32001, ErrorCode.INVALID_INPUT: -32602,
                  ErrorCode.NOT_FOUND: -32601}
UPSTREAM_GONE = -32000
#: the client request methods faults can be injected into (`--fault-methods`)
FAULTABLE_METHODS = ("tools/call", "tools/list", "resources/list", "resources/read",
                     "resources/templates/list", "prompts/list", "prompts/get",
                     "completion/complete", "logging/setLevel", "ping")
DEFAULT_FAULT_METHODS = ("tools/call",)
#: the least time the handshake is given (a server may be slow to start)
HANDSHAKE_S = 30.0
#: where an injected answer carries its label (result `_meta`, error `data`): for evaluators,
#: never shown to a model by a client that passes on content only
FAULT_META = "realprobe/fault"
MESSAGES = {
    ErrorCode.SERVER_ERROR: "the tool's backend failed (HTTP 503)",
    ErrorCode.RATE_LIMIT_ERROR: "rate limited (HTTP 429)",
    ErrorCode.NETWORK_ERROR: "the connection to the tool's backend was reset",
    ErrorCode.TIMEOUT: "no answer before the deadline",
    ErrorCode.INVALID_RESPONSE: "the tool's backend answered with something unreadable",
    ErrorCode.AUTH_ERROR: "not authorised (HTTP 401)",
    ErrorCode.NOT_FOUND: "not found (HTTP 404)",
    ErrorCode.INVALID_INPUT: "the arguments were refused (HTTP 400)",
}


def fault_methods(given: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """`"tools/list,resources/read"` or a list -> the methods, each one faults can be
    injected into (a RealprobeError naming the others)."""
    if given is None:
        return None
    items = given.split(",") if isinstance(given, str) else list(given)
    methods = tuple(dict.fromkeys(str(m).strip() for m in items if str(m).strip()))
    unknown = [m for m in methods if m not in FAULTABLE_METHODS]
    if unknown or not methods:
        raise RealprobeError(f"fault_methods {', '.join(unknown) or repr(given)}: choose "
                             f"among {', '.join(FAULTABLE_METHODS)}", param="fault_methods")
    return methods


def code_in(text: str) -> ErrorCode:
    """The taxonomy code a tool error's text starts with (realprobe's own servers say it),
    else OPERATION_FAILED."""
    head = text.lstrip().split(":", 1)[0].split(" ", 1)[0].strip()
    try:
        return ErrorCode(head)
    except ValueError:
        return ErrorCode.OPERATION_FAILED


def result_text(result: dict[str, Any]) -> str:
    return "\n".join(str(c.get("text", "")) for c in result.get("content") or []
                     if isinstance(c, dict) and c.get("type") == "text")


def _params(msg: dict[str, Any]) -> dict[str, Any]:
    params = msg.get("params")
    return params if isinstance(params, dict) else {}


def tool_result(tool: str, answer: dict[str, Any], latency_ms: float, size: int) -> ToolResult:
    """One `tools/call` answer (its JSON-RPC message) as a ToolResult."""
    err = answer.get("error")
    if isinstance(err, dict):
        code = JSONRPC_CODES.get(err.get("code"), ErrorCode.OPERATION_FAILED)  # type: ignore[arg-type]
        said = str(err.get("message") or "no message")
        return failed(tool, code, f"{JSONRPC_ERROR_PREFIX}{err.get('code')}: {said}",
                      latency_ms, size)
    result = answer.get("result")
    if not isinstance(result, dict):
        return failed(tool, ErrorCode.INVALID_RESPONSE, "an answer with no result",
                      latency_ms, size)
    if result.get("isError"):
        text = result_text(result) or "the tool reported an error"
        return failed(tool, code_in(text), text, latency_ms, size)
    data = result.get("structuredContent")
    return ToolResult(tool=tool, ok=True, data=data if isinstance(data, dict) else None,
                      latency_ms=latency_ms, bytes=size)


def failed(tool: str, code: ErrorCode, message: str, latency_ms: float,
           size: int = 0) -> ToolResult:
    return ToolResult(tool=tool, ok=False, error=ToolError(code=code, message=message),
                      latency_ms=latency_ms, bytes=size)


@dataclass
class ProxyOptions:
    profile: Any = None  # a Profile, a built-in name or a file
    fault_plan: Any = None
    fault_rate: float | None = None
    seed: int = 0
    record: Path | None = None
    db: Database | None = None
    timeout_s: float = 60.0  # the longest a call is awaited or a hang held
    max_message_bytes: int = 16 * 1024 * 1024
    vantage: str | None = None
    replayed: str | None = None  # the cassette standing in for the server, when replaying
    #: the request methods faults are injected into (None: the profile's `mcp_methods`, else
    #: tools/call and every method the profile names under `tools`)
    fault_methods: tuple[str, ...] | None = None

    @property
    def injects(self) -> bool:
        return any(x is not None for x in (self.profile, self.fault_plan, self.fault_rate))

    def fault_model(self) -> FaultModel | None:
        if not self.injects:
            return None
        from realprobe.simulator.plans import plan_for, without_task
        from realprobe.simulator.profile import resolve_profile

        profile = resolve_profile(self.profile if self.profile is not None else "calm")
        if self.fault_rate is not None:
            profile = profile.scaled(self.fault_rate)
        plan = without_task(plan_for(self.fault_plan, self.fault_rate, profile.rule),
                            "the MCP proxy")
        return FaultModel(profile, self.seed, plan)

    def faulted(self, model: FaultModel | None) -> frozenset[str]:
        """The request methods this session draws faults (and latency) for."""
        if model is None:
            return frozenset()
        if self.fault_methods is not None:
            return frozenset(self.fault_methods)
        profile = model.profile
        if profile.mcp_methods is not None:
            return frozenset(profile.mcp_methods)
        return frozenset((*DEFAULT_FAULT_METHODS, *(k for k in profile.tools
                                                    if k in FAULTABLE_METHODS)))

    def target(self, model: FaultModel | None) -> Target:
        if self.replayed is not None:
            return Target(kind=TargetKind.REPLAY, cassette=self.replayed)
        if model is not None:
            return Target(kind=TargetKind.SIMULATE, seed=self.seed,
                          profile=f"proxy:{model.profile.name or 'profile'}")
        return Target.live()


@dataclass
class Call:
    rid: Any
    key: str
    tool: str
    args: Any
    t0: float = field(default_factory=time.perf_counter)
    wall: float = field(default_factory=time.time)
    out: Outcome | None = None
    timer: asyncio.TimerHandle | None = None
    method: str = "tools/call"
    #: the proxy made or shaped what the client saw (an injected or rewritten answer, one
    #: held to the drawn latency): its row is `simulate`, the server's own are not
    shaped: bool = False
    held_ms: float = 0.0


@dataclass
class ProxySummary:
    calls: int = 0
    ok: int = 0
    injected: int = 0
    garbage: int = 0
    upstream_exit: int | None = None  # the server ended the session (its exit code, -1 if unknown)
    server: str = ""
    run_id: str | None = None
    interrupted: bool = False
    #: over HTTP: the client sessions served, and their runs of rows
    sessions: int = 0
    run_ids: list[str] = field(default_factory=list)

    def absorb(self, other: ProxySummary, *, shared: bool) -> None:
        """Count one finished client session in; its own server ending (per-client) is
        that session's end, not the proxy's."""
        self.sessions += 1
        for count in ("calls", "ok", "injected", "garbage"):
            setattr(self, count, getattr(self, count) + getattr(other, count))
        self.server = other.server or self.server
        if other.run_id is not None:
            self.run_ids.append(other.run_id)
            self.run_id = self.run_id or other.run_id
        if shared and other.upstream_exit is not None:
            self.upstream_exit = other.upstream_exit


class Proxy:
    def __init__(self, opts: ProxyOptions, *, server_hint: str,
                 meta: dict[str, Any] | None = None) -> None:
        self.opts = opts
        self.model = opts.fault_model()
        self.target = opts.target(self.model)
        self.own_target = opts.target(None)  # the server's own answers: live, or replay
        self.methods = opts.faulted(self.model)
        #: a named profile's latency is acted out (the fault-rate dial alone changes no time)
        self.holds = self.model is not None and opts.profile is not None
        self.forms = random.Random(f"{opts.seed}:mcp-forms")
        self.summary = ProxySummary(server=server_hint)
        self.pending: dict[str, Call] = {}  # forwarded calls awaiting the server
        self.held: dict[str, Call] = {}  # injected hangs
        self.answered: set[str] = set()  # ended by the proxy: a late answer is dropped
        self.init_ids: set[str] = set()
        self.earlier: dict[str, Any] = {}  # each tool's last answer (for `stale`)
        self.result_type = False
        self.rows = None
        if opts.db is not None:
            from realprobe.mcp.rows import RunRows
            from realprobe.store import default_vantage

            self.rows = RunRows(opts.db, mode="proxy", target=self.target, tools=[],
                                vantage=opts.vantage or default_vantage(),
                                timeout_s=opts.timeout_s)
        self.summary.run_id = self.rows.run_id if self.rows else None
        self.recorder = None
        if opts.record is not None:
            from realprobe.mcp.session_cassette import SessionRecorder

            self.recorder = SessionRecorder(opts.record, {
                **(meta or {}), "target": self.target.label, "seed": opts.seed})
        self.front: Wire | None = None
        self.upstream: Wire | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- the session -----------------------------------------------------------------------

    async def run(self, front: Wire, upstream: Wire) -> ProxySummary:
        self.front, self.upstream = front, upstream
        down = asyncio.ensure_future(self._pump(front, self._from_client))
        up = asyncio.ensure_future(self._pump(upstream, self._from_upstream))
        status = "done"
        try:
            done, _ = await asyncio.wait({down, up}, return_when=asyncio.FIRST_COMPLETED)
            for ended in done:
                failure = None if ended.cancelled() else ended.exception()
                if failure is not None:
                    raise failure
            if up in done and not down.done():
                self.summary.upstream_exit = -1
                await self._upstream_gone()
        except asyncio.CancelledError:  # SIGINT/SIGTERM: a clean stop, rows and cassette kept
            status = "interrupted"
            self.summary.interrupted = True
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # handled here: what follows (closing) runs normally
        except BaseException:
            status = "interrupted"
            raise
        finally:
            for task in (down, up, *self._tasks):
                task.cancel()
            for call in [*self.pending.values(), *self.held.values()]:
                if call.timer is not None:
                    call.timer.cancel()
            for call in self.held.values():
                self._record_held(call)
            if self.recorder is not None:
                self.recorder.close()
            if self.rows is not None:
                self.rows.close(status)
        return self.summary

    async def _pump(self, wire: Wire, handle: Any) -> None:
        while (line := await wire.recv()) is not None:
            await handle(line)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _to_client(self, msg: Any, line: str | None = None,
                         injected: dict[str, Any] | None = None) -> None:
        assert self.front is not None
        if self.recorder is not None:  # on file before the client has it
            self.recorder.message("s2c", msg, injected)
        await self.front.send(line if line is not None else json.dumps(msg, ensure_ascii=False))

    # -- client -> server ------------------------------------------------------------------

    async def _from_client(self, line: str) -> None:
        assert self.upstream is not None
        msg = parse(line, self.opts.max_message_bytes)
        if isinstance(msg, Unreadable):
            await self._unreadable_request(line, msg)
            return
        if self.recorder is not None:
            self.recorder.message("c2s", msg)
        if isinstance(msg, dict):
            method = msg.get("method")
            if "id" in msg and method is not None:
                self.answered.discard(json.dumps(msg["id"]))  # an id used again: a new request
            if "id" in msg and (method == "tools/call" or method in self.methods):
                if not await self._call(msg, str(method)):
                    return
            elif method == "notifications/cancelled":
                if self._cancelled(msg):
                    return
            elif isinstance(method, str) and "id" in msg:  # any other request: its deadline
                handshake = method in ("initialize", "server/discover")
                if handshake:
                    self.init_ids.add(json.dumps(msg["id"]))
                # a server starting up may take its time over the first answer
                self._await_answer(Call(msg["id"], json.dumps(msg["id"]), "", None),
                                   max(self.opts.timeout_s, HANDSHAKE_S) if handshake else None)
        await self.upstream.send(line)

    async def _call(self, msg: dict[str, Any], method: str) -> bool:
        """Start one tools/call, or a request of a faulted method (its row's tool is the
        method's name); False when the proxy answers it itself."""
        params = _params(msg)
        tool = str(params.get("name")) if method == "tools/call" else method
        args = (params.get("arguments") if method == "tools/call" else
                {k: v for k, v in params.items() if k != "_meta"} or None)
        call = Call(msg["id"], json.dumps(msg["id"]), tool, args, method=method)
        self.summary.calls += 1
        out = None
        if self.model is not None and method in self.methods:
            out = self.model.draw(call.tool, call.wall)
            if out.implicit and method != "tools/call":  # only tool results are rewritten
                out = replace(out, variant=None, injected_by=None, permanent=False)
        call.out = out
        loop = asyncio.get_running_loop()
        if out is not None and out.code is not None:
            self.summary.injected += 1
            call.shaped = True
            self.held[call.key] = call  # held until answered, cancelled or the deadline
            if out.code is not ErrorCode.TIMEOUT:
                delay = self._error_delay_s(call, out)
                call.timer = loop.call_later(delay, self._spawn_inject, call.key)
                return False
            call.timer = loop.call_later(self.opts.timeout_s, self._expire, call.key)
            return False
        if out is not None and out.implicit:
            self.summary.injected += 1
        self._await_answer(call)
        return True

    def _await_answer(self, call: Call, deadline_s: float | None = None) -> None:
        """A request relayed to the server: answered by the proxy if its deadline passes."""
        self.pending[call.key] = call
        call.timer = asyncio.get_running_loop().call_later(
            deadline_s or self.opts.timeout_s, self._expire, call.key, deadline_s)

    def _label(self, call: Call) -> dict[str, Any] | None:
        inj = injection_of(call.tool, 0, call.out) if call.out is not None else None
        if inj is None:
            return None
        return {"origin": "injected", "kind": f"{inj.kind}-{inj.persistence}",
                "variant": inj.variant or inj.code, "by": inj.by}

    def _detail(self, label: dict[str, Any], note: str = "") -> str:
        return (f"injected {label['kind']} {label['variant']} ({label['by']})"
                + (f": {note}" if note else ""))

    def _latency_model(self, call: Call) -> LatencyModel | None:
        """The latency of the call's failures: its learned MCP failure latency, if any."""
        if self.model is None:
            return None
        forms = self.model.profile.for_tool(call.tool).mcp
        return forms.error_latency_ms if forms is not None else None

    def _error_delay_s(self, call: Call, out: Outcome) -> float:
        """How long an injected failure takes: drawn from the failures' latency where the
        profile learned it, else the outcome's drawn latency; nothing for the dial alone."""
        if not self.holds:
            return 0.0
        model = self._latency_model(call)
        if model is not None:
            mu, sigma = model.params()
            drawn = math.exp(mu + sigma * self.forms.gauss(0.0, 1.0)) / 1000.0
        else:
            drawn = out.latency_s
        return max(0.0, min(drawn, self.opts.timeout_s))

    def _jsonrpc_form(self, call: Call) -> bool:
        """Whether an injected failure is a JSON-RPC error (else an `isError` result): always
        for a method other than tools/call; else by the profile's `mcp_errors`, else by the
        tool's learned JSON-RPC share (a seeded draw), else a result."""
        if call.method != "tools/call" or self.model is None:
            return True
        profile = self.model.profile
        if profile.mcp_errors is not None:
            return profile.mcp_errors == "jsonrpc"
        forms = profile.for_tool(call.tool).mcp
        return forms is not None and self.forms.random() < forms.jsonrpc_share

    def _spawn_inject(self, key: str) -> None:
        call = self.held.pop(key, None)
        if call is not None and call.out is not None:
            self._spawn(self._inject(call, call.out))

    async def _inject(self, call: Call, out: Outcome) -> None:
        assert out.code is not None
        message = MESSAGES.get(out.code, "the tool failed")
        if out.retry_after_s:
            message += f"; retry after {out.retry_after_s:g} s"
        label = self._label(call)
        self.answered.add(call.key)
        if self._jsonrpc_form(call):
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": call.rid, "error": {
                "code": INJECTED_CODES.get(out.code, -32603), "message": message,
                "data": {FAULT_META: label}}}
        else:
            answer = {"jsonrpc": "2.0", "id": call.rid, "result": {"isError": True, "content": [
                {"type": "text", "text": f"{out.code.value}: {message}"}],
                "_meta": {FAULT_META: label}}}
            if self.result_type:
                answer["result"]["resultType"] = "complete"
        await self._to_client(answer, injected=label)
        latency = (time.perf_counter() - call.t0) * 1000
        if self.rows is not None and label is not None:
            result = failed(call.tool, out.code, message, latency)
            if result.error is not None:
                result.error.retry_after_s = out.retry_after_s
            self._row(call, result, detail=self._detail(label))

    def _cancelled(self, msg: dict[str, Any]) -> bool:
        """The client gave up on a call: True when the proxy held it (nothing to forward)."""
        params = _params(msg)
        key = json.dumps(params.get("requestId"))
        held = key in self.held  # the proxy holds it (a hang, an injected failure's wait)
        call = self.held.pop(key, None) or self.pending.pop(key, None)
        if call is None:
            return False
        if held:
            self._record_held(call)
        self._end(call, failed(call.tool, ErrorCode.TIMEOUT,
                               "cancelled by the client (its deadline passed)",
                               (time.perf_counter() - call.t0) * 1000))
        return held

    def _record_held(self, call: Call) -> None:
        """An injected hang ended with no answer (the client gave up, or the session ended):
        marked in the cassette, so a replay with faults of its own can leave it out."""
        if self.recorder is not None:
            self.recorder.event("injected", id=call.rid, label=self._label(call))

    def _expire(self, key: str, deadline_s: float | None = None) -> None:
        call = self.held.pop(key, None) or self.pending.pop(key, None)
        if call is None:
            return
        self.answered.add(call.key)  # now: the server's answer arriving meanwhile is dropped
        waited = deadline_s or self.opts.timeout_s
        self._spawn(self._answer_error(call, ErrorCode.TIMEOUT, -32001,
                                       f"no answer from the MCP server within {waited:g} s"
                                       + self._garbage_note(), self._label(call)))

    def _garbage_note(self) -> str:
        n = self.summary.garbage
        return f" (it wrote {n} line(s) that are not JSON-RPC meanwhile)" if n else ""

    async def _answer_error(self, call: Call, code: ErrorCode, rpc: int, message: str,
                            label: dict[str, Any] | None = None) -> None:
        result = failed(call.tool, code, message, (time.perf_counter() - call.t0) * 1000)
        self._end(call, result)
        error: dict[str, Any] = {"code": rpc, "message": message}
        if label is not None:
            error["data"] = {FAULT_META: label}
        await self._to_client({"jsonrpc": "2.0", "id": call.rid, "error": error}, injected=label)

    def _end(self, call: Call, result: ToolResult, note: str = "", *,
             by_proxy: bool = True) -> None:
        """Store a finished call (once) and forget it; one the proxy ended itself has its
        server's late answer dropped."""
        if call.timer is not None:
            call.timer.cancel()
        if by_proxy:
            self.answered.add(call.key)
        if not call.tool:
            return  # not a tools/call: no row
        self.summary.ok += int(result.ok)
        if self.rows is None:
            return
        label = self._label(call)
        implicit = call.out.variant if call.out is not None and call.out.implicit else None
        if label is not None and call.out is not None and call.out.implicit and not result.ok:
            label = None  # the server failed the call itself: nothing was injected
            implicit = None
        shaped = call.shaped or label is not None
        if call.held_ms > 0:
            note = (note + "; " if note else "") + f"held to the drawn {result.latency_ms:.0f} ms"
        detail = self._detail(label, note) if label else (note or None)
        self._row(call, result, detail=detail, implicit=implicit,
                  target=self.target if shaped else self.own_target)

    def _row(self, call: Call, result: ToolResult, **fields: Any) -> None:
        assert self.rows is not None
        self.rows.add(result, tool=call.tool, api=self.summary.server, started_wall=call.wall,
                      args=call.args, **fields)

    # -- server -> client ------------------------------------------------------------------

    async def _from_upstream(self, line: str) -> None:
        msg = parse(line, self.opts.max_message_bytes)
        if isinstance(msg, Unreadable) and msg.over_limit:
            await self._too_long(msg)
            return
        if not isinstance(msg, dict):
            self.summary.garbage += 1
            if self.summary.garbage <= 3:
                sys.stderr.write(f"realprobe mcp proxy: the server wrote a line that is not "
                                 f"JSON-RPC: {line[:120]!r}\n")
            if self.recorder is not None:
                self.recorder.garbage("s2c", line)
            return
        if "method" not in msg and "id" in msg:
            key = json.dumps(msg["id"])
            res = msg.get("result")
            if key in self.init_ids and isinstance(res, dict):
                self.init_ids.discard(key)
                info = res.get("serverInfo") or (res.get("_meta") or {}).get(
                    "io.modelcontextprotocol/serverInfo") or {}
                self.summary.server = str(info.get("name") or self.summary.server)
                self.result_type = "resultType" in res  # the 2026 protocol marks every result
            call = self.pending.pop(key, None)
            if call is None and key in self.answered:
                return  # the proxy already answered it (deadline, cancellation)
            if call is not None and call.tool:
                line, msg = self._answered(call, msg, line)
                if call.held_ms > 0:  # the answer waits out the drawn latency
                    self._spawn(self._later(call.held_ms / 1000, msg, line,
                                            self._label_if_rewritten(msg)))
                    return
            elif call is not None:
                self._end(call, tool_result("", msg, 0.0, 0), by_proxy=False)
        await self._to_client(msg, line, self._label_if_rewritten(msg))

    def _label_if_rewritten(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        return msg.pop("_realprobe_injected", None) if isinstance(msg, dict) else None

    async def _later(self, wait_s: float, msg: Any, line: str,
                     label: dict[str, Any] | None) -> None:
        await asyncio.sleep(wait_s)
        await self._to_client(msg, line, label)

    def _hold_ms(self, call: Call, elapsed_ms: float, ok: bool) -> float:
        """How much longer a successful answer waits so the client meets the drawn latency
        (a named profile's; the server's own errors and slower answers pass at once)."""
        out = call.out
        if not (self.holds and ok and out is not None and out.ok):
            return 0.0
        drawn_ms = min(out.latency_s, self.opts.timeout_s) * 1000
        return max(0.0, drawn_ms - elapsed_ms)

    def _answered(self, call: Call, msg: dict[str, Any], line: str) -> tuple[str, Any]:
        latency = (time.perf_counter() - call.t0) * 1000
        result = tool_result(call.tool, msg, latency, len(line))
        call.held_ms = self._hold_ms(call, latency, result.ok)
        if call.held_ms > 0:
            call.shaped = True
            result.latency_ms = latency + call.held_ms
        note = ""
        out = call.out
        res = msg.get("result")
        if result.ok and isinstance(res, dict):
            original = self._doc(res)
            if out is not None and out.implicit and out.variant is not None:
                from realprobe.simulator.implicit import reshape

                new, note = reshape(out.variant, original, out.pick,
                                    self.earlier.get(call.tool))
                self._put_doc(res, new)
                label = self._label(call)
                res["_meta"] = {**(res.get("_meta") or {}), FAULT_META: label}
                line = json.dumps(msg, ensure_ascii=False)
                msg["_realprobe_injected"] = label
            self.earlier[call.tool] = original
        self._end(call, result, note, by_proxy=False)
        return line, msg

    @staticmethod
    def _doc(res: dict[str, Any]) -> Any:
        if "structuredContent" in res:
            return res["structuredContent"]
        text = result_text(res)
        doc = parse(text)  # under the input limits: a deep text stays text
        return text if isinstance(doc, Unreadable) else doc

    @staticmethod
    def _put_doc(res: dict[str, Any], doc: Any) -> None:
        text = doc if isinstance(doc, str) else json.dumps(doc, indent=2, ensure_ascii=False)
        if "structuredContent" in res:
            res["structuredContent"] = doc if isinstance(doc, dict) else {"result": doc}
        texts = [c for c in res.get("content") or [] if isinstance(c, dict)
                 and c.get("type") == "text"]
        if texts:
            texts[0]["text"] = text
            for extra in texts[1:]:
                res["content"].remove(extra)

    async def _too_long(self, why: Unreadable) -> None:
        """An answer over the input limits (size, nesting, entries): refused; the call its id
        names, else the oldest call waiting, gets the error."""
        self.summary.garbage += 1
        limit = self.opts.max_message_bytes
        what = (f"over the {limit}-byte limit" if str(why) == "too long"
                else f"over the input limits ({str(why)[:120]})")
        sys.stderr.write(f"realprobe mcp proxy: the server sent a message {what}; refused\n")
        if self.recorder is not None:
            self.recorder.event("too_long", limit=limit)
        key = json.dumps(why.rid)
        if key not in self.pending:
            key = next(iter(self.pending), key)
        call = self.pending.pop(key, None)
        if call is not None:
            await self._answer_error(call, ErrorCode.INVALID_RESPONSE, -32603,
                                     f"the MCP server's answer is {what}")

    async def _unreadable_request(self, line: str, why: Unreadable) -> None:
        """A client line that is not one JSON message under the limits: answered here with a
        parse error (the id its head names, if any), recorded, never sent on."""
        if not line.strip():
            return
        if self.recorder is not None:
            self.recorder.garbage("c2s", line)
        await self._to_client({"jsonrpc": "2.0", "id": why.rid, "error": {
            "code": -32700, "message": f"Parse error: {str(why)[:200]}"}})

    async def _upstream_gone(self) -> None:
        code = None
        exit_code = getattr(self.upstream, "exit_code", None)
        if exit_code is not None:
            code = await exit_code(2.0)
        self.summary.upstream_exit = code if code is not None else -1
        how = f"exited with code {code}" if code is not None else "closed the session"
        if self.recorder is not None:
            self.recorder.event("exit", code=code)
        for key in list(self.pending):
            call = self.pending.pop(key)
            await self._answer_error(call, ErrorCode.NETWORK_ERROR, UPSTREAM_GONE,
                                     f"the MCP server {how} during the call")


def upstream_error(summary: ProxySummary) -> RealprobeError | None:
    """The one-line error for a session the server ended, else None."""
    from realprobe.errors import Unavailable

    if summary.upstream_exit is None:
        return None
    how = (f"exited with code {summary.upstream_exit}" if summary.upstream_exit >= 0
           else "closed the session")
    return Unavailable(f"the MCP server {how}; {summary.calls} call(s) relayed, "
                       f"{summary.garbage} unreadable line(s)")


def _upstreams(opts: ProxyOptions, command: list[str] | None, url: str | None,
               cassette: Any) -> tuple[Any, str, dict[str, Any]]:
    """(open an upstream: a context manager per session, the server's name, cassette meta)."""
    from realprobe.mcp.wire import ProcessWire, http_upstream

    if cassette is not None:
        first = cassette() if callable(cassette) else cassette
        spare = [first]

        @asynccontextmanager
        async def replayed() -> AsyncIterator[Wire]:
            up = spare.pop() if spare else cassette()
            try:
                yield up
            finally:
                up.close()

        return replayed, str(first.meta.get("server") or "replay"), {"replayed": opts.replayed}
    if url is not None:
        return (lambda: http_upstream(url, opts.max_message_bytes)), url, {"server": url}
    assert command is not None

    @asynccontextmanager
    async def started() -> AsyncIterator[Wire]:
        pw = await ProcessWire.start(command, limit=opts.max_message_bytes)
        try:
            yield pw
        finally:
            await pw.close()

    name = Path(command[0]).name
    return started, name, {"server": name, "argv": command}


async def serve(opts: ProxyOptions, *, command: list[str] | None = None, url: str | None = None,
                cassette: Any = None, on_ready: Any = None,
                http: tuple[str, int] | None = None, upstream_sessions: str = "per-client",
                limits: Any = None) -> ProxySummary:
    """Relay the client (stdio, or streamable-HTTP sessions on `http` = (host, port)) to a
    server started from `command`, a streamable-HTTP server at `url`, or a recorded session
    (`cassette`: a CassetteUpstream, or a function making one per session);
    `on_ready(where)` once the client side is open. Over HTTP each client session has its
    own proxy, and its own upstream session (`upstream_sessions="per-client"`) or a share
    of one (`"shared"`), within `limits` (a SessionLimits)."""
    open_upstream, hint, meta = _upstreams(opts, command, url, cassette)
    if http is not None:
        return await _serve_sessions(opts, open_upstream, hint, meta, http, on_ready,
                                     upstream_sessions == "shared", limits)
    from realprobe.mcp.serve import stdin_lines
    from realprobe.mcp.wire import StdioFront

    async with open_upstream() as upstream:
        front = StdioFront(await stdin_lines())
        try:
            if on_ready is not None:
                on_ready("stdio")
            return await Proxy(opts, server_hint=hint, meta=meta).run(front, upstream)
        finally:
            front.close()


async def _serve_sessions(opts: ProxyOptions, open_upstream: Any, hint: str,
                          meta: dict[str, Any], http: tuple[str, int], on_ready: Any,
                          shared: bool, limits: Any) -> ProxySummary:
    """Serve client sessions side by side until SIGINT/SIGTERM (or, shared, until the one
    upstream session ends); each recorded to `<record folder>/<session id>.jsonl`."""
    from realprobe.mcp.sessions import SessionLimits, serving
    from realprobe.mcp.shared_upstream import SharedUpstream

    total = ProxySummary(server=hint)
    hub: SharedUpstream | None = None

    async def run(sid: str, front: Wire) -> None:
        record = opts.record / f"{sid}.jsonl" if opts.record is not None else None
        proxy = Proxy(replace(opts, record=record), server_hint=total.server,
                      meta={**meta, "session": sid})
        if hub is not None:
            wire = hub.session()
            try:
                total.absorb(await proxy.run(front, wire), shared=True)
            finally:
                hub.drop(wire)
            return
        async with open_upstream() as upstream:
            total.absorb(await proxy.run(front, upstream), shared=False)

    async with contextlib.AsyncExitStack() as stack:
        ended: asyncio.Event = asyncio.Event()  # never set per client: Ctrl-C ends it
        if shared:
            hub = SharedUpstream(await stack.enter_async_context(open_upstream()))
            pump = asyncio.ensure_future(hub.pump())
            stack.callback(pump.cancel)
            ended = hub.ended
        try:
            async with serving(run, *http, limits=limits or SessionLimits(), on_ready=on_ready):
                await ended.wait()
        except asyncio.CancelledError:  # SIGINT/SIGTERM: every session closed, kept
            total.interrupted = True
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        if hub is not None and hub.ended.is_set() and not total.interrupted:
            code = await hub.exit_code(2.0) if hub.exit_code is not None else None
            total.upstream_exit = code if code is not None else -1
    return total
