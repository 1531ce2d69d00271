"""Scoring an agent on its own MCP server, through the proxy, under calibrated faults.

A task is a prompt and a success criterion written by the user: a Python callable
`check(answer, calls) -> bool`, or a JSON expectation on the final answer and the calls made
(`answer_contains`, `answer_matches`, `calls_include`, `calls_at_most`). The agent is an async
callable `agent(prompt, toolbox) -> answer`; the toolbox is an SDK client connected to
`realprobe mcp proxy` in front of the server, so every call it makes meets the fault model's
faults and is a probe row, and every run is a `task_runs` row with its `task_steps` (the fault
of each step labelled: injected, or the server's own). A task may carry a `workflow` (tool
calls in order): the built-in `workflow` agent follows it, retrying a failed step twice.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from realprobe.errors import ErrorCode, RealprobeError
from realprobe.mcp.proxy import FAULT_META, JSONRPC_CODES, code_in, result_text

if TYPE_CHECKING:
    from realprobe.store import Database

EXPECTATIONS = ("answer_contains", "answer_matches", "calls_include", "calls_at_most")


@dataclass
class McpCall:
    tool: str
    args: dict[str, Any]
    ok: bool
    text: str
    data: Any = None
    error_code: str | None = None
    latency_ms: float = 0.0
    fault: dict[str, Any] | None = None  # the proxy's label of an injected fault (not shown)


class McpToolbox:
    """What an agent gets: the server's tools and `await call(name, args)`."""

    def __init__(self, client: Any, tools: list[dict[str, Any]]) -> None:
        self.client = client
        self.tools = tools
        self.calls: list[McpCall] = []

    def openai_tools(self) -> list[dict[str, Any]]:
        """The tools as OpenAI function definitions."""
        return [{"type": "function", "function": {
            "name": t["name"], "description": t.get("description", ""),
            "parameters": {"properties": {}, **t.get("inputSchema", {})}}} for t in self.tools]

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> McpCall:
        from mcp import MCPError

        args = dict(arguments or {})
        t0 = time.perf_counter()
        try:
            r = await self.client.call_tool(name, args)
            body = r.model_dump(by_alias=True, exclude_none=True, mode="json")
            text, ok = result_text(body), not body.get("isError")
            call = McpCall(name, args, ok, text, body.get("structuredContent"),
                           None if ok else code_in(text).value,
                           fault=(body.get("_meta") or {}).get(FAULT_META))
        except MCPError as exc:
            code = JSONRPC_CODES.get(exc.error.code, ErrorCode.OPERATION_FAILED)
            call = McpCall(name, args, False, str(exc), None, code.value,
                           fault=(exc.error.data or {}).get(FAULT_META)
                           if isinstance(exc.error.data, dict) else None)
        except Exception as exc:  # the session broke
            call = McpCall(name, args, False, f"{type(exc).__name__}: {exc}", None,
                           ErrorCode.NETWORK_ERROR.value)
        call.latency_ms = (time.perf_counter() - t0) * 1000
        self.calls.append(call)
        return call


Check = Callable[[str, list[McpCall]], Any]


@dataclass
class McpTask:
    id: str
    prompt: str
    expect: dict[str, Any] = field(default_factory=dict)
    check: Check | None = None
    workflow: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, raw: McpTask | dict[str, Any]) -> McpTask:
        if isinstance(raw, McpTask):
            return raw
        if not isinstance(raw, dict) or not raw.get("id") or not raw.get("prompt"):
            raise RealprobeError("an MCP task needs an id and a prompt", param="tasks")
        expect = dict(raw.get("expect") or {})
        unknown = set(expect) - set(EXPECTATIONS)
        if unknown or not (expect or raw.get("check")):
            raise RealprobeError(
                f"task {raw['id']!r}: give `check` or `expect` with "
                f"{', '.join(EXPECTATIONS)}" + (f" (not {', '.join(sorted(unknown))})"
                                                if unknown else ""), param="tasks")
        return cls(str(raw["id"]), str(raw["prompt"]), expect, raw.get("check"),
                   list(raw.get("workflow") or []))


def load_mcp_tasks(path: str | Path) -> list[McpTask]:
    """Tasks from a JSON or TOML file: a list of tasks, or {"tasks": [...]}."""
    from realprobe.limits import read_document

    p = Path(path)
    raw = read_document(p, "tasks file")
    items = raw.get("tasks") if isinstance(raw, dict) else raw
    if not isinstance(items, list) or not items:
        raise RealprobeError(f"tasks file {p}: expected a list of tasks", param="tasks")
    return [McpTask.of(t) for t in items]


def judge(task: McpTask, answer: str, calls: list[McpCall]) -> tuple[bool, list[str]]:
    """Whether the run met the task's criterion, and why not."""
    why: list[str] = []
    if task.check is not None and not task.check(answer, calls):
        why.append("the check returned false")
    exp = task.expect
    for text in exp.get("answer_contains") or []:
        if str(text).lower() not in answer.lower():
            why.append(f"the answer lacks {text!r}")
    if exp.get("answer_matches") and not re.search(exp["answer_matches"], answer):
        why.append(f"the answer does not match {exp['answer_matches']!r}")
    done = {c.tool for c in calls if c.ok}
    why += [f"no successful call of {t}" for t in exp.get("calls_include") or [] if t not in done]
    if exp.get("calls_at_most") is not None and len(calls) > int(exp["calls_at_most"]):
        why.append(f"{len(calls)} calls, more than {exp['calls_at_most']}")
    return not why, why


def workflow_agent(task: McpTask) -> Callable[[str, McpToolbox], Awaitable[str]]:
    """Calls the task's workflow in order, each failed step retried twice; answers with the
    texts it got."""

    async def agent(prompt: str, box: McpToolbox) -> str:
        texts = []
        for step in task.workflow:
            for _ in range(3):
                got = await box.call(step["tool"], step.get("args") or {})
                if got.ok:
                    texts.append(got.text)
                    break
        return "\n".join(texts) + "\nTASK COMPLETE"

    return agent


@dataclass
class McpRun:
    task: str
    repeat: int
    success: bool
    reasons: list[str]
    answer: str
    calls: list[McpCall]
    run_id: str


def mcp_run_seed(task: str, seed: int, repeat: int) -> int:
    """The proxy's seed for one run: the task runner's run seed with the agent left out."""
    from realprobe.tasks.runner import run_seed

    return run_seed(task, "mcp", "baseline", seed, repeat)


def proxy_params(server: str | Sequence[str] | None, url: str | None, *, seed: int,
                 profile: Any, fault_plan: Any, fault_rate: float | None,
                 db: Database | None, timeout_s: float) -> Any:
    """The proxy as a stdio server the SDK client starts."""
    from mcp import StdioServerParameters

    from realprobe.mcp.wire import split_command

    # a hang is held a little less than the client waits: its answer carries its label
    args = ["-m", "realprobe.cli", "mcp", "proxy", "--seed", str(seed),
            "--timeout", f"{timeout_s * 0.9:g}"]
    for flag, value in (("--profile", profile), ("--fault-plan", fault_plan),
                        ("--fault-rate", fault_rate), ("--db", db), ("--upstream", url)):
        if value is not None:
            args += [flag, str(getattr(value, "name", None) if flag == "--profile" and hasattr(
                value, "for_tool") else value)]
    if url is None:
        args += ["--", *split_command(server or "")]
    return StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))


async def run_task(agent: Any, task: McpTask, params: Any,
                   timeout_s: float) -> tuple[str, McpToolbox]:
    from mcp import Client

    async with Client(params, read_timeout_seconds=timeout_s) as client:
        listed = await client.list_tools()
        tools = [t.model_dump(by_alias=True, exclude_none=True, mode="json")
                 for t in listed.tools]
        box = McpToolbox(client, tools)
        try:
            answer = await agent(task.prompt, box)
        except Exception as exc:  # the agent's own crash is a failed run, not ours
            answer = f"agent error: {type(exc).__name__}: {exc}"
    return str(answer or ""), box


def store_run(db: Database, run: McpRun, *, batch: str, name: str, model: str, seed: int,
              target_kind: str, target: str, fault_rate: float | None, wall_s: float) -> None:
    from collections import Counter

    from realprobe.store import default_vantage, iso_utc
    from realprobe.tasks.store import TaskStore

    faults = [c.fault for c in run.calls if c.fault]
    row = {
        "id": run.run_id, "batch": batch, "started_at": iso_utc(time.time() - wall_s),
        "task": run.task, "task_type": "mcp", "agent": name, "model": model,
        "prompt": "baseline", "mode": "simulate" if target_kind == "simulate" else "live",
        "seed": seed, "run_seed": mcp_run_seed(run.task, seed, run.repeat),
        "repeat": run.repeat, "outcome": "full" if run.success else "failure",
        "score": 1.0 if run.success else 0.0, "tool_calls": len(run.calls),
        "failures": sum(not c.ok for c in run.calls), "tool_faults": len(faults),
        "fault_kinds": json.dumps(dict(Counter(str(f.get("kind")) for f in faults))),
        "fault_rate": fault_rate, "wall_s": round(wall_s, 4), "reasons": json.dumps(run.reasons),
        "final_message": run.answer[:2000], "target_kind": target_kind, "target": target,
        "source": "task", "vantage": default_vantage(), "turns": len(run.calls),
    }  # fmt: skip
    steps = []
    for i, c in enumerate(run.calls):
        retry = i > 0 and run.calls[i - 1].tool == c.tool and not run.calls[i - 1].ok
        origin = "injected" if c.fault else (None if c.ok else "upstream")
        steps.append({
            "run_id": run.run_id, "idx": i, "turn": i, "tool": c.tool, "kind": "api",
            "role": "retry" if retry else "call", "args": json.dumps(c.args), "ok": int(c.ok),
            "error_code": c.error_code, "message": None if c.ok else c.text[:500],
            "latency_ms": round(c.latency_ms, 3), "result": c.text[:2000] if c.ok else None,
            "target_kind": target_kind, "fault_origin": origin,
            "fault_kind": (c.fault or {}).get("kind") or ("explicit-transient"
                                                         if origin == "upstream" else None),
            "fault_variant": (c.fault or {}).get("variant") or (c.error_code if origin else None),
        })  # fmt: skip
    with db.write() as store:
        TaskStore(store).insert_run(row, steps)


async def evaluate_mcp(
    agent: Any, tasks: Sequence[McpTask | dict[str, Any]] | str | Path, *,
    mcp_server: str | Sequence[str] | None = None, mcp_url: str | None = None,
    profile: Any = None, fault_plan: Any = None, fault_rate: float | None = None,
    seed: int = 0, repeat: int = 1, db: Database | None = None, name: str = "custom",
    model: str = "-", timeout_s: float = 10.0,
) -> list[McpRun]:
    """Every task `repeat` times, each through a fresh proxy seeded per (task, seed, repeat)
    and not per agent (`mcp_run_seed`): every agent meets the same faults, and two tasks that
    call one tool do not meet the same ones."""
    todo = load_mcp_tasks(tasks) if isinstance(tasks, str | Path) else [
        McpTask.of(t) for t in tasks]
    injects = any(x is not None for x in (profile, fault_plan, fault_rate))
    if fault_plan is not None:  # the proxy serves no task: refused here, before it starts
        from realprobe.simulator.plans import load_plan, without_task

        without_task(load_plan(fault_plan), "the MCP proxy")
    kind = "simulate" if injects else "live"
    where = mcp_url or (mcp_server if isinstance(mcp_server, str) else " ".join(mcp_server or []))
    target = f"mcp:{where}" + (f" fault_rate={fault_rate:g}" if fault_rate is not None else "")
    batch, runs = uuid.uuid4().hex[:12], []
    for task in todo:
        act = agent if agent != "workflow" else workflow_agent(task)
        for r in range(repeat):
            params = proxy_params(mcp_server, mcp_url, seed=mcp_run_seed(task.id, seed, r),
                                  profile=profile,
                                  fault_plan=fault_plan, fault_rate=fault_rate, db=db,
                                  timeout_s=timeout_s)
            t0 = time.perf_counter()
            answer, box = await run_task(act, task, params, timeout_s)
            ok, why = judge(task, answer, box.calls)
            run = McpRun(task.id, r, ok, why, answer, box.calls, uuid.uuid4().hex)
            runs.append(run)
            if db is not None:
                store_run(db, run, batch=batch, name=name, model=model, seed=seed,
                          target_kind=kind, target=target, fault_rate=fault_rate,
                          wall_s=time.perf_counter() - t0)
    return runs
