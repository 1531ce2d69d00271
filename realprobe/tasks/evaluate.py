"""Scoring your own agent: a Python protocol, and task sessions driven from outside.

- `evaluate(agent, tasks=..., target=..., repeat=..., db=...)`: `agent` is an async
  callable `agent(prompt, toolbox) -> final answer`. The toolbox offers the tools the
  built-in agents get (same definitions, same transport, same fault injection) and records
  every call, so the run is scored and stored exactly like a built-in agent's.
- `TaskSession`: one task run whose calls arrive one by one from elsewhere (an MCP client,
  an agent framework's tool calls); `finish(answer)` (or `close()`) scores and stores it.

Either way the final answer counts as the completion signal when it says `TASK COMPLETE`,
as for the built-in LLM agents (the task prompt asks for it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from realprobe.adapters.catalog import Catalog
from realprobe.clients import TransportOptions
from realprobe.errors import RealprobeError
from realprobe.tasks.agents import AGENT_NAMES
from realprobe.tasks.agents.base import AgentContext
from realprobe.tasks.agents.llm import run_tool
from realprobe.tasks.agents.openai_native import tool_definitions
from realprobe.tasks.batch import TaskBatch, TaskBatchResult
from realprobe.tasks.model import Task, default_tasks_dir, load_tasks, pick_tasks
from realprobe.tasks.prompts import Prompt, render
from realprobe.tasks.runner import (
    PreparedRun,
    RunOutcome,
    RunTiming,
    Shared,
    in_own_thread,
    prepare_run,
    rows_to_store,
    run_variant,
)
from realprobe.tasks.scoring import score_run
from realprobe.tasks.settings import EvalSettings
from realprobe.tasks.state import StepRecord, Terminated, says_complete, tool_message

if TYPE_CHECKING:
    from realprobe.store import Database

#: finishes a task session: not a tool of the task, never recorded as a call
FINISH_TOOL = "finish"


@dataclass(frozen=True)
class ToolCall:
    """What one call returned: `text` is what a model would read (data as JSON, or
    `ERROR <CODE>: message`); `data` the structured result on success."""

    ok: bool
    text: str
    data: dict[str, Any] | None
    error_code: str | None


def _as_call(rec: StepRecord) -> ToolCall:
    return ToolCall(rec.ok, tool_message(rec), rec.data, rec.error_code)


def _ended(reason: str) -> ToolCall:
    """What a call gets once its session's run has ended on a limit."""
    text = f"ERROR OPERATION_FAILED: the task run ended ({reason}); call {FINISH_TOOL}"
    return ToolCall(False, text, None, "OPERATION_FAILED")


class Toolbox:
    """The tools of one run, as a user's agent sees them."""

    def __init__(self, ctx: AgentContext) -> None:
        self._ctx = ctx
        self.prompt: Prompt = render(ctx.task, ctx.prompt)
        #: why the run ended (deadline, loop, consecutive_failures), once it has
        self.ended: str | None = None
        #: the loop the run's tools live on, when the agent runs on a loop of its own
        self.home: asyncio.AbstractEventLoop | None = None
        self._inflight: set[concurrent.futures.Future[ToolCall]] = set()

    @property
    def tools(self) -> list[dict[str, Any]]:
        """OpenAI function-tool definitions (catalogue tools and the output tools)."""
        return tool_definitions(self._ctx.catalog)

    @property
    def task(self) -> Task:
        return self._ctx.task

    async def call(self, name: str, arguments: dict[str, Any] | str | None = None) -> ToolCall:
        """Run one tool (arguments as a dict or a JSON string); never raises for a failed
        or malformed call (a name that is no string is an unknown tool). A run that has ended
        (deadline, a loop, repeated failures) raises Terminated."""
        home = self.home
        if home is None or asyncio.get_running_loop() is home:
            return await self._call(name, arguments)
        # the agent's own loop: the call runs on the run's loop, where its tools live
        fut = asyncio.run_coroutine_threadsafe(self._call(name, arguments), home)
        self._inflight.add(fut)
        fut.add_done_callback(self._inflight.discard)
        return await asyncio.wrap_future(fut)

    def end(self, reason: str) -> None:
        """The run is over: later calls raise Terminated, calls in flight are cancelled."""
        self.ended = self.ended or reason
        for fut in list(self._inflight):
            fut.cancel()

    async def _call(self, name: Any, arguments: Any) -> ToolCall:
        if self.ended is not None:
            raise Terminated(self.ended)  # an agent that caught the first one is stopped here
        self._ctx.state.turns += 1
        turn = self._ctx.state.turns
        if not isinstance(name, str):
            name = f"<{type(name).__name__}>"
        try:
            return _as_call(await run_tool(self._ctx, name, arguments or {}, turn))
        except Terminated as exc:
            self.ended = exc.reason
            raise
        except Exception as exc:  # arguments no tool can take (e.g. not JSON-able values)
            rec = self._ctx.box.record_bad_call(
                name, {}, turn, "malformed", f"the call could not be made: {exc!r}"[:500])
            return _as_call(rec)


UserAgent = Callable[[str, Toolbox], Awaitable[Any]]


@dataclass
class CallableAgent:
    """A user's async callable behind the agent interface the runner drives."""

    fn: UserAgent
    name: str
    model: str

    async def run(self, ctx: AgentContext) -> None:
        """The agent on a loop and thread of its own (`runner.in_own_thread`), under the
        task's deadline in real time too: on a virtual clock only tool calls move time, so an
        agent awaiting something that never comes, or blocking its loop, would hold the
        batch. Whatever it raises or returns, the run ends with a reason."""
        box = Toolbox(ctx)
        box.home = asyncio.get_running_loop()
        limit = ctx.task.constraints.timeout_s

        async def answer() -> str:
            got = await self.fn(box.prompt.user, box)
            return "" if got is None else str(got)  # in its thread: a __str__ may misbehave

        try:
            how, value = await in_own_thread(answer, limit)
        finally:
            by_run = box.ended  # how the run ended it, if it did
            box.end("deadline")  # nothing it left behind touches the run any more
        if how == "deadline":
            ctx.state.termination = "deadline"
            ctx.state.final_message = f"the agent gave no answer within {limit:g}s"
            return
        if how == "raised":
            if isinstance(value, Terminated):
                raise Terminated(value.reason)
            ctx.state.termination = "agent_error"  # the agent's own failure, kept in the run
            try:
                said = str(value)
            except Exception:  # an exception whose message cannot be read
                said = "<unreadable message>"
            ctx.state.final_message = f"the agent raised {type(value).__name__}: {said}"[:2000]
            return
        ctx.state.final_message = value
        ctx.state.completion_signal = says_complete(value)
        if by_run is not None:  # the agent swallowed the end of its run
            raise Terminated(by_run)


def evaluate(
    agent: UserAgent,
    tasks: Sequence[str] | None = None,
    *,
    settings: EvalSettings | None = None,
    target: TransportOptions | None = None,
    repeat: int = 1,
    db: str | Path | Database | None = None,
    name: str = "custom",
    model: str = "-",
    concurrency: int = 1,
    tasks_dir: str | Path | None = None,
    catalog: Catalog | None = None,
    **fields: Any,
) -> TaskBatchResult:
    """Run `agent` on `tasks` (default: all), score every run like a built-in agent's and
    store it in `db`. Where calls go and what the agent is shown: `settings`, or `target`
    (`options(...)`) with the other settings as keywords (prompt, seed, flaw_seed,
    paraphrase, profile, fault_plan, fault_rate, ...); default: the published simulate
    profile and the baseline prompt. `name` and `model` label the runs in `results`."""
    if not callable(agent):
        raise RealprobeError("agent must be an async callable (prompt, toolbox)", param="agent")
    if name in AGENT_NAMES:
        raise RealprobeError(f"name {name!r} is a built-in agent's; pick another", param="name")
    batch = TaskBatch.plan(
        list(tasks or []), all=not tasks, agent="reference",
        settings=EvalSettings.given(settings, target, outside=True, **fields), repeat=repeat,
        concurrency=concurrency, tasks_dir=tasks_dir, catalog=catalog,
    )
    batch.config.agent = name
    batch.config.custom_agent = CallableAgent(agent, name, model)
    return batch.run(db=db)


# -- sessions driven from outside --------------------------------------------------------


@dataclass
class _Outside:
    """The agent of a session: its calls come from outside, so it does nothing itself."""

    name: str
    model: str

    async def run(self, ctx: AgentContext) -> None:
        return None


class TaskSession:
    """One task run at a time, its calls made by an outside agent: each `call` is recorded
    like a built-in agent's; `finish(answer)` scores the run and stores it (in `db`), and
    the next call starts the next run (repeat + 1)."""

    def __init__(
        self,
        task: str | Task,
        catalog: Catalog,
        *,
        settings: EvalSettings | None = None,
        db: str | Path | Database | None = None,
        agent: str = "mcp",
        model: str = "-",
        tasks_dir: str | Path | None = None,
        repeat: int = 0,
    ) -> None:
        """`settings` as for `evaluate` (default: the published simulate profile)."""
        if isinstance(task, str):
            folder = Path(tasks_dir) if tasks_dir is not None else default_tasks_dir()
            (task,) = pick_tasks(load_tasks(folder), [task], False)
        self.task = task
        self.catalog = catalog
        settings = EvalSettings.given(settings, outside=True)
        self.cfg = settings.run_config(agent=agent, custom_agent=_Outside(agent, model))
        if len(self.cfg.prompts) != 1:
            raise RealprobeError(
                f"prompt {settings.prompt!r} names {len(self.cfg.prompts)} prompts; a session "
                "runs one", param="prompt",
            )
        self.db = db
        self.repeat = repeat
        self._run: PreparedRun | None = None
        self._started = (datetime.now(UTC).isoformat(timespec="seconds"), time.perf_counter())
        self._lock = asyncio.Lock()

    @property
    def prompt(self) -> Prompt:
        """The prompt as this session's runs show it (a graded flaw built like a run's)."""
        prompt = self.cfg.prompts[0]
        return render(run_variant(self.task, self.cfg, prompt, self.catalog), prompt)

    def _current(self) -> PreparedRun:
        if self._run is None:
            self._run = prepare_run(
                self.task, self.cfg, self.cfg.prompts[0], self.repeat, self.catalog, n_runs=1,
                shared=Shared.for_config(self.cfg),
            )
            self._started = (datetime.now(UTC).isoformat(timespec="seconds"), time.perf_counter())
        return self._run

    async def call(self, name: str, arguments: dict[str, Any] | str | None) -> ToolCall:
        """One call of the current run; after the run ended on a limit, an error result."""
        async with self._lock:
            run = self._current()
            if run.state.termination != "finished":
                return _ended(run.state.termination)
            run.state.turns += 1
            calls = len(run.state.steps)
            try:
                rec = await run_tool(run.ctx, name, arguments or {}, run.state.turns)
            except Terminated as exc:
                run.state.termination = exc.reason
                if len(run.state.steps) == calls:  # ended before the call (the deadline)
                    return _ended(exc.reason)
                rec = run.state.steps[-1]
            return _as_call(rec)

    async def finish(
        self, answer: str = "", tokens: tuple[int, int] = (0, 0)
    ) -> RunOutcome | None:
        """Score and store the current run (None when no call was made); `tokens` are the
        model's (input, output) tokens, when the caller knows them."""
        async with self._lock:
            run, self._run = self._run, None
            if run is None:
                return None
            run.state.tokens_in, run.state.tokens_out = tokens
            run.state.final_message = answer
            run.state.completion_signal = says_complete(answer)
            await run.client.aclose()
            timing = RunTiming(self._started[0], time.perf_counter() - self._started[1])
            outcome = rows_to_store(run, score_run(run.task, run.state), timing, batch="")
            self.repeat += 1
            if self.db is not None:
                self._store(outcome)
            return outcome

    def _store(self, outcome: RunOutcome) -> None:
        from realprobe.store import open_db
        from realprobe.tasks.store import TaskStore

        with open_db(self.db).write() as store:
            TaskStore(store).insert_run(outcome.row, outcome.steps)

    async def close(self) -> None:
        """The outside agent left: a run in progress is scored as it stands."""
        await self.finish("")


__all__ = [
    "FINISH_TOOL", "CallableAgent", "TaskSession", "ToolCall", "Toolbox", "evaluate",
]
