"""One task run's state, and the toolbox every agent calls tools through.

The toolbox is the only way an agent reaches a tool: catalogue tools go through
`call_tool(tool, args, client)` on the run's transport, output tools store the artifact here.
Every call becomes a StepRecord; the toolbox also enforces the run's limits (deadline,
consecutive failures, loops) by raising `Terminated`.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field, fields
from typing import Any

from realprobe.adapters import Catalog, ToolResult, call_tool
from realprobe.adapters.adapter import format_validation_error
from realprobe.adapters.tool import Tool
from realprobe.errors import ErrorCode
from realprobe.hosts import HeldBack, HostGates, held_back_result
from realprobe.http.client import HttpClient
from realprobe.http.transports import DRAW
from realprobe.secrets import clip
from realprobe.simulator.faults import Injection
from realprobe.tasks.faults import (
    TOOL_FAULT_ORIGINS,
    SandboxJournal,
    fault_label,
    fault_ledger,
    from_journal,
    from_ledger,
)
from realprobe.tasks.model import Task
from realprobe.tasks.outputs import OUTPUT_TOOLS, ValidationError

LOOP_REPEATS = 3  # the same successful call this many times is a loop


class Terminated(Exception):
    """The run ends now (deadline, repeated failures, a loop, the turn limit)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class StepRecord:
    idx: int
    turn: int
    tool: str
    kind: str  # api | output | unknown | malformed
    role: str  # call | retry | fallback
    args: dict[str, Any]
    ok: bool
    error_code: str | None = None
    message: str = ""
    http_status: int | None = None
    retry_after_s: float | None = None
    latency_ms: float = 0.0
    data: dict[str, Any] | None = None
    step_id: str | None = None
    #: who caused this step's fault: injected (the simulator or sandbox put it there),
    #: upstream (a real API's own failure), agent (its own input); None: no fault
    fault_origin: str | None = None
    #: explicit-transient | explicit-permanent | implicit-transient | implicit-permanent
    fault_kind: str | None = None
    #: the variant played (503, hang, stale, ...), when injected
    fault_variant: str | None = None
    #: which setting put the injected fault there: profile | rate (the fault-rate dial) |
    #: plan (a fault plan's rule); None: no injected fault, or the source is not known
    fault_source: str | None = None
    #: the attempt the call belongs to (Reflexion runs several; every other agent one)
    attempt: int = 1

    @property
    def implicit_fault(self) -> bool:
        """The answer looked ok but was an injected implicit fault (wrong content)."""
        return self.fault_origin == "injected" and (self.fault_kind or "").startswith("implicit")

    @property
    def tool_fault(self) -> bool:
        """A fault the environment put in front of the agent (not its own input)."""
        return self.fault_origin in TOOL_FAULT_ORIGINS

    def as_row(self, run_id: str) -> dict[str, Any]:
        """The `task_steps` row: the fields, JSON and clipped where the columns want it."""
        row: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        data = row.pop("data")
        row.update(
            run_id=run_id, ok=int(self.ok), retry_after=row.pop("retry_after_s"),
            args=json.dumps(self.args, sort_keys=True, default=str),
            message=clip(self.message, 500), latency_ms=round(self.latency_ms, 3),
            result=None if data is None else json.dumps(data, sort_keys=True, default=str)[:4000],
        )
        return row


@dataclass
class Attempt:
    """An earlier attempt of a run that tries again (Reflexion): what it did, how it ended,
    and the reflection the agent wrote on it before the next attempt."""

    steps: list[StepRecord]
    completion_signal: bool
    termination: str
    outcome: str  # its score: full | partial | failure
    reflection: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "calls": len(self.steps), "outcome": self.outcome, "termination": self.termination,
            "completion_signal": self.completion_signal, "reflection": self.reflection,
        }  # fmt: skip


@dataclass
class RunState:
    steps: list[StepRecord] = field(default_factory=list)
    artifact: str | None = None
    artifact_tool: str | None = None
    final_message: str = ""
    completion_signal: bool = False
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    termination: str = "finished"
    error: str | None = None  # infrastructure failure (the LLM endpoint), not the agent's
    #: earlier attempts (Reflexion); `steps`, the artifact and the final message are the
    #: current (at the end: the final) attempt's, which is what the run is scored on
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def attempt(self) -> int:
        """The number of the current attempt (1 for a run that never tried again)."""
        return len(self.attempts) + 1

    @property
    def all_steps(self) -> list[StepRecord]:
        """Every call of the run, earlier attempts first."""
        return [s for a in self.attempts for s in a.steps] + self.steps

    @property
    def next_idx(self) -> int:
        """The run-wide index of the next call (attempts continue the numbering)."""
        return sum(len(a.steps) for a in self.attempts) + len(self.steps)

    def begin_attempt(self, outcome: str, reflection: str) -> None:
        """Close the current attempt (scored `outcome`, with the agent's reflection on it)
        and start a fresh one: no calls, no artifact, no final message."""
        self.attempts.append(
            Attempt(self.steps, self.completion_signal, self.termination, outcome, reflection))
        self.steps, self.artifact, self.artifact_tool = [], None, None
        self.final_message, self.completion_signal, self.termination = "", False, "finished"


COMPLETION_PHRASE = "TASK COMPLETE"


def says_complete(text: str) -> bool:
    return COMPLETION_PHRASE.casefold() in text.casefold()


class ToolBox:
    def __init__(
        self,
        catalog: Catalog,
        client: HttpClient,
        task: Task,
        state: RunState,
        *,
        polite: bool = False,
        gates: HostGates | None = None,
        draw_key: str | None = None,
    ) -> None:
        self.catalog = catalog
        self.client = client
        self.task = task
        self.state = state
        # real APIs get the catalogue's politeness per host; `gates` may be shared by
        # concurrent runs, so ten runs using one API still keep its interval between them
        self.polite = polite
        self.gates = gates if gates is not None else HostGates(client.clock)
        self.started = client.clock.now()
        self._consecutive_failures = 0
        self._ok_calls: dict[str, int] = {}
        # tool -> (step id, the step's tools): how an agent's free-form calls map to steps
        self._steps = {t: (s.id, s.tools()) for s in task.workflow.steps for t in s.tools()}
        target = client.target
        # a sandbox draws call n of each tool by this run's key (`FaultModel.draw_numbered`):
        # runs side by side meet the faults each would meet alone, whatever the load
        self.draw_key = draw_key if target.kind.value == "sandbox" else None
        self._numbers: dict[str, int] = {}
        # a sandbox's journal says what it played for each call (paired by request id);
        # not read while recording, so a cassette holds the agent's calls only
        self.journal = (
            SandboxJournal(client, target.sandbox)
            if target.kind.value == "sandbox" and target.sandbox and target.recording is None
            else None
        )

    # -- limits --------------------------------------------------------------------------

    def elapsed(self) -> float:
        return self.client.clock.now() - self.started

    def time_left(self) -> float:
        return self.task.constraints.timeout_s - self.elapsed()

    def check_deadline(self) -> None:
        if self.time_left() <= 0:
            raise Terminated("deadline")

    async def sleep(self, seconds: float) -> None:
        """Wait on the run's clock (virtual in simulate/replay: no real sleeping)."""
        seconds = min(seconds, max(0.0, self.time_left()))
        await self.client.clock.sleep(seconds)
        self.check_deadline()

    def suggest(self, name: str) -> str:
        names = [*OUTPUT_TOOLS, *self.catalog.tools]
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        return f" Did you mean: {', '.join(close)}?" if close else ""

    # -- calls ---------------------------------------------------------------------------

    def record_bad_call(
        self, tool: str, args: dict[str, Any], turn: int, kind: str, msg: str
    ) -> StepRecord:
        """A call that never reached a tool: unknown name or unparseable arguments."""
        role, step_id = self.infer_role(tool)
        rec = _rejected(_Call(self.state.next_idx, turn, tool, role, args, step_id), kind, msg)
        self._after(rec)
        return rec

    def infer_role(self, name: str) -> tuple[str, str | None]:
        """(role, step id) of a call an agent made without saying: after a failed call of
        the same workflow step, the same tool again is a retry, another of its tools a
        fallback."""
        if name not in self._steps:
            return "call", None
        step_id, tools = self._steps[name]
        before = [s for s in self.state.steps if s.tool in tools and s.kind != "unknown"]
        if not before or before[-1].ok:
            return "call", step_id
        return ("retry" if before[-1].tool == name else "fallback"), step_id

    async def call(
        self,
        name: str,
        args: dict[str, Any],
        *,
        turn: int,
        role: str | None = None,
        step_id: str | None = None,
    ) -> StepRecord:
        self.check_deadline()
        if role is None:
            role, step_id = self.infer_role(name)
        at = _Call(self.state.next_idx, turn, name, role, args, step_id)
        if name in OUTPUT_TOOLS:
            rec = self._output(at)
        elif name in self.catalog:
            ledger = fault_ledger(self.client)
            seen = len(ledger) if ledger is not None else 0
            result = await self._polite_call(self.catalog.get(name), args)
            err = result.error
            rec = StepRecord(
                **at.fields(), kind="api", ok=result.ok,
                error_code=err.code.value if err else None, message=err.message if err else "",
                http_status=result.http_status, retry_after_s=err.retry_after_s if err else None,
                latency_ms=result.latency_ms, data=result.data,
            )
            await self._label(rec, result, ledger[seen:] if ledger is not None else None)
        else:
            rec = _rejected(at, "unknown", f"unknown tool {name!r}.{self.suggest(name)}")
        self._after(rec)
        return rec

    async def _label(
        self, rec: StepRecord, result: ToolResult, injected: list[Injection] | None
    ) -> None:
        """Who caused the step's fault: the simulator's ledger or the sandbox's journal when
        they say, else the step's error decides (`tasks.faults.fault_label`)."""
        found = from_ledger(rec.tool, injected) if injected else None
        label, rec.fault_source = found if found is not None else (None, None)
        if label is None and self.journal is not None:
            entry = await self.journal.entry(result.request_id)
            if entry is not None:
                label = from_journal(entry) or (None, None, None)
        if label is None or (label[0] is None and not rec.ok):
            label = fault_label(rec.ok, rec.error_code, self.client.target.kind.value)
        rec.fault_origin, rec.fault_kind, rec.fault_variant = label

    async def _polite_call(self, tool: Tool, args: dict[str, Any]) -> ToolResult:
        """The call (numbered for a sandbox), after this host's turn when the target is a
        real API."""
        if self.draw_key is None:
            return await self._turn_call(tool, args)
        n = self._numbers[tool.name] = self._numbers.get(tool.name, -1) + 1
        token = DRAW.set(f"{self.draw_key}:{n}")
        try:
            return await self._turn_call(tool, args)
        finally:
            DRAW.reset(token)

    async def _turn_call(self, tool: Tool, args: dict[str, Any]) -> ToolResult:
        budget = max(1e-6, self.time_left())  # never past the deadline, even by a millisecond
        if not self.polite:
            timeout = min(self.task.constraints.call_timeout_s, budget)
            return await call_tool(tool, args, self.client, timeout_s=timeout)
        try:
            async with self.gates.turn(tool.api, budget) as waited:
                timeout = min(self.task.constraints.call_timeout_s, max(1e-6, budget - waited))
                result = await call_tool(tool, args, self.client, timeout_s=timeout)
            self.gates.note(tool.api, result)  # Retry-After pauses the host for every run
            return result
        except HeldBack as held:
            return held_back_result(tool.name, held)

    def _output(self, at: _Call) -> StepRecord:
        try:
            text = OUTPUT_TOOLS[at.tool].artifact(at.args)
        except ValidationError as exc:
            return _rejected(at, "output", format_validation_error(exc))
        self.state.artifact = text
        self.state.artifact_tool = at.tool
        return StepRecord(**at.fields(), kind="output", ok=True,
                          data={"stored": True, "chars": len(text)})

    def new_attempt(self, outcome: str, reflection: str) -> None:
        """The run tries again (Reflexion): the state starts a fresh attempt, and the loop
        and consecutive-failure limits count afresh; the deadline and the tools' own state
        (a dead tool stays dead) carry on."""
        self.state.begin_attempt(outcome, reflection)
        self._consecutive_failures = 0
        self._ok_calls.clear()

    def _after(self, rec: StepRecord) -> None:
        rec.attempt = self.state.attempt
        self.state.steps.append(rec)
        limits = self.task.constraints
        if rec.ok:
            self._consecutive_failures = 0
            key = rec.tool + json.dumps(rec.args, sort_keys=True, default=str)
            self._ok_calls[key] = self._ok_calls.get(key, 0) + 1
            if self._ok_calls[key] >= LOOP_REPEATS and rec.kind == "api":
                raise Terminated("loop")
        else:
            self._consecutive_failures += 1
            if self._consecutive_failures >= limits.max_consecutive_failures:
                raise Terminated("consecutive_failures")


def tool_message(rec: StepRecord) -> str:
    """What the model sees after a call: the data as JSON, or `ERROR <code>: message`."""
    if rec.ok:
        return json.dumps(rec.data, ensure_ascii=False, default=str)
    retry = f" (retry after {rec.retry_after_s:g}s)" if rec.retry_after_s else ""
    return f"ERROR {rec.error_code}: {rec.message}{retry}"


@dataclass(frozen=True)
class _Call:
    """What every step record of one call holds, whatever became of the call."""

    idx: int
    turn: int
    tool: str
    role: str
    args: dict[str, Any]
    step_id: str | None

    def fields(self) -> dict[str, Any]:
        return {"idx": self.idx, "turn": self.turn, "tool": self.tool, "role": self.role,
                "args": self.args, "step_id": self.step_id}


def _rejected(at: _Call, kind: str, message: str) -> StepRecord:
    """A call refused before anything ran: INVALID_INPUT, with the reason (the agent's)."""
    return StepRecord(
        **at.fields(), kind=kind, ok=False, error_code=ErrorCode.INVALID_INPUT.value,
        message=message, fault_origin="agent",
    )
