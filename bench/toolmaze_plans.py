"""ToolMaze's perturbation recovery rate (PRR) per shipped plan, with and without an
off-path first call, under the plans as shipped (the fault bound to the task's first
alternative group, `on = "branch"`) and under the earlier binding (the run's first call,
whatever the tool: `count = "run"`, `n = 1`).

The agent is the reference agent (retries, then the step's alternatives); the off-path
variant first calls one tool that is on no step of the task, then does the same. PRR = runs
that met a fault of the plan's kind and still reached full success / runs that met one.
Simulator, virtual clock, every shipped task.

    python bench/toolmaze_plans.py [--repeat 3] [--save]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import bench_args, emit, load_average

from realprobe.adapters import default_catalog
from realprobe.simulator.plans import BUILTIN_PLANS, load_plan
from realprobe.tasks.agents import AgentContext
from realprobe.tasks.agents.reference import ReferenceAgent
from realprobe.tasks.batch import TaskBatch
from realprobe.tasks.metrics import recovery

OFF_PATH = ("kanye_quote", "advice_random", "catfact_fact")


class OffPathFirst(ReferenceAgent):
    """The reference agent after one call of a tool the task does not use."""

    name = "reference"

    async def run(self, ctx: AgentContext) -> None:
        used = {t for s in ctx.task.workflow.steps for t in s.tools()}
        tool = next(t for t in OFF_PATH if t not in used)
        await ctx.box.call(tool, {}, turn=0, role="call")
        await super().run(ctx)


def first_call_plan(name: str, folder: Path) -> Path:
    """The plan with its rule moved back to the run's first call, whatever the tool."""
    plan = load_plan(name)
    rule = plan.rules[0].model_copy(update={"on": None, "count": "run", "tool": "*"})
    path = folder / f"{name}-first-call.json"
    path.write_text(plan.model_copy(update={"rules": [rule]}).model_dump_json())
    return path


def prr(plan: str | Path, kind: str, off_path: bool, repeat: int) -> dict[str, Any]:
    batch = TaskBatch.plan([], all=True, catalog=CATALOG, profile="calm",
                           fault_plan=plan, repeat=repeat)
    if off_path:
        batch.config.custom_agent = OffPathFirst()
    rows = [r.row for r in batch.run().runs]
    rec = recovery(rows, kind)
    return {"runs": len(rows), "met": rec["runs_with_failures"],
            "PRR": None if rec["recovery_rate"] is None else round(rec["recovery_rate"], 3)}


CATALOG = default_catalog()


def main() -> None:
    args = bench_args(__doc__, repeat=3)
    load, t0 = load_average(), time.perf_counter()
    out: dict[str, Any] = {"agent": "reference", "tasks": 11, "repeat": args.repeat}
    with tempfile.TemporaryDirectory() as tmp:
        for name in BUILTIN_PLANS:
            kind = name.removeprefix("toolmaze-")
            old = first_call_plan(name, Path(tmp))
            out[name] = {
                "on_path": {"direct": prr(name, kind, False, args.repeat),
                            "off_path_first": prr(name, kind, True, args.repeat)},
                "run_first_call": {"direct": prr(old, kind, False, args.repeat),
                                   "off_path_first": prr(old, kind, True, args.repeat)},
            }
    out["seconds"] = round(time.perf_counter() - t0, 1)
    emit(out, args.save, Path(__file__).parent / "results" / "toolmaze_plans.json", load)


if __name__ == "__main__":
    main()
