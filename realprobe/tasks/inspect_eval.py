"""realprobe tasks as Inspect AI tasks (`pip install 'realprobe[inspect]'`).

One Inspect task per realprobe task: the task prompt as the sample, the catalogue and
output tools as Inspect tools (each call goes through realprobe's toolbox, with the
target's fault injection, and is recorded), Inspect's own `generate()` loop, and
realprobe's scorer (full / partial / failure as 1.0 / 0.6 / 0.0, with the trajectory
metrics in the score's metadata). Each sample-epoch is one realprobe run, stored in `db`
when given, so `realprobe results` shows Inspect-driven runs beside built-in ones.

    inspect eval realprobe/tasks/inspect_eval.py@realprobe -T task_id=pet_newsletter \\
        -T profile=harsh --model openai/gpt-4o-mini

Offline, Inspect's `mockllm/model` with scripted outputs drives it (the tests do).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.event import ModelEvent
from inspect_ai.log import transcript
from inspect_ai.model import ChatMessageSystem
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import Generate, Solver, TaskState, generate, solver
from inspect_ai.tool import ToolDef, ToolParams

from realprobe.adapters.catalog import Catalog
from realprobe.clients import Mode, TransportOptions
from realprobe.store import Database
from realprobe.tasks.agents.openai_native import tool_definitions
from realprobe.tasks.evaluate import TaskSession
from realprobe.tasks.model import default_tasks_dir, load_tasks
from realprobe.tasks.settings import EvalSettings

#: live sessions, by the id a sample carries in its metadata (the scorer closes them)
_SESSIONS: dict[str, TaskSession] = {}
SESSION_KEY = "realprobe_session"


def _params(schema: dict[str, Any]) -> ToolParams:
    keep = {k: schema[k] for k in ("properties", "required") if k in schema}
    return ToolParams.model_validate({"type": "object", "properties": {}, **keep})


def _tool(session_id: str, function: dict[str, Any]) -> ToolDef:
    """One OpenAI function definition as an Inspect tool calling the session."""
    name = function["name"]

    async def execute(**arguments: Any) -> str:
        call = await _SESSIONS[session_id].call(name, arguments)
        return call.text

    return ToolDef(execute, name=name, description=function.get("description", name),
                   parameters=_params(function.get("parameters", {})))


@solver
def realprobe_tools(
    task_id: str, settings: EvalSettings, db: str | None, catalog: Catalog
) -> Solver:
    """Open the sample's realprobe run and hand its tools to the model."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        session_id = uuid.uuid4().hex
        _SESSIONS[session_id] = TaskSession(
            task_id, catalog, settings=settings, db=db, agent="inspect", model=str(state.model),
            repeat=state.epoch - 1,
        )
        state.metadata[SESSION_KEY] = session_id
        state.messages.insert(0, ChatMessageSystem(content=_SESSIONS[session_id].prompt.system))
        # the tools the built-in agents are offered, as they are described to them
        state.tools = [_tool(session_id, d["function"])
                       for d in tool_definitions(catalog)]
        return state

    return solve


def _tokens() -> tuple[int, int]:
    """(input, output) tokens of the sample's model calls, from its transcript."""
    tin = tout = 0
    for event in transcript().events:
        usage = getattr(getattr(event, "output", None), "usage", None)
        if isinstance(event, ModelEvent) and usage is not None:
            tin += usage.input_tokens or 0
            tout += usage.output_tokens or 0
    return tin, tout


@scorer(metrics=[mean()])
def realprobe_scorer() -> Any:
    """The run scored by realprobe: 1.0 / 0.6 / 0.0 for full / partial / failure."""

    async def score(state: TaskState, target: Target) -> Score:
        session = _SESSIONS.pop(state.metadata[SESSION_KEY])
        outcome = await session.finish(state.output.completion, tokens=_tokens())
        if outcome is None:
            return Score(value=0.0, answer="", explanation="no tool was called",
                         metadata={"outcome": "failure"})
        row = outcome.row
        keys = ("outcome", "grounded", "strict", "chain_f1", "kendall_tau", "graph_f1",
                "graph_node_f1", "tool_calls", "failures", "run_seed")
        return Score(value=row["score"], answer=row["artifact"] or "",
                     explanation="; ".join(outcome.score.reasons) or row["outcome"],
                     metadata={k: row[k] for k in keys})

    return score


def inspect_task(
    task_id: str,
    *,
    settings: EvalSettings | None = None,
    target: TransportOptions | None = None,
    db: str | Path | Database | None = None,
    catalog: Catalog | None = None,
    **fields: Any,
) -> Task:
    """One realprobe task as an Inspect task. `settings` as for `realprobe.evaluate` (or
    `target` and the other settings as keywords; default: the published profile)."""
    rp = load_tasks(default_tasks_dir())[task_id]
    chosen = EvalSettings.given(settings, target, outside=True, **fields)
    cat = catalog or Catalog.load([])
    first = TaskSession(rp, cat, settings=chosen).prompt  # checked, and as the runs show it
    return Task(
        name=f"realprobe_{task_id}",
        dataset=[Sample(id=task_id, input=first.user)],
        solver=[realprobe_tools(task_id, chosen, str(db) if db else None, cat), generate()],
        scorer=realprobe_scorer(),
        message_limit=4 * rp.constraints.max_turns,
    )


def inspect_tasks(**settings: Any) -> list[Task]:
    """Every realprobe task as an Inspect task (`settings` as for `inspect_task`)."""
    return [inspect_task(t, **settings) for t in load_tasks(default_tasks_dir())]


@task
def realprobe(
    task_id: str = "content_social_post", mode: str | None = None, sandbox: str | None = None,
    profile: str | None = None, cassette: str | None = None, seed: int = 0,
    fault_plan: str | None = None, fault_rate: float | None = None,
    prompt: str = "baseline", flaw_seed: int = 0, paraphrase: int = 0, db: str | None = None,
) -> Task:
    """`inspect eval ...@realprobe -T task_id=... -T profile=calm|published|harsh|FILE`, and
    every other setting of an evaluation (`-T fault_rate=0.3`, `-T prompt=cot`, ...)."""
    return inspect_task(task_id, db=db, settings=EvalSettings(
        mode=Mode.parse(mode or ("live" if sandbox else "simulate")), sandbox=sandbox,
        profile=profile, cassette=cassette, seed=seed,
        fault_plan=fault_plan, fault_rate=fault_rate, prompt=prompt, flaw_seed=flaw_seed,
        paraphrase=paraphrase))


__all__ = ["inspect_task", "inspect_tasks", "realprobe", "realprobe_scorer", "realprobe_tools"]
