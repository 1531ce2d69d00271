"""Evaluation round three, measured: Reflexion against ReAct on scripted models, ToolMaze's
perturbation recovery rate per plan and complexity grade for the reference agent, Chain F1
and Kendall tau per severity on every task, and the runs that separate two full-success
rates.

    python bench/eval_round3.py [--repeat 5] [--llm-repeat 5] [--save]

- Reflexion vs ReAct: `openai-reflexion` and `openai` on three scripted models served on
  127.0.0.1 (`tests/llm_server.py`), on `pet_newsletter` in the calm simulator. Each model
  does the fetches and stops without storing the post on its first try; asked to reflect, it
  answers in plain text (`text`), puts the text beside a tool call (`beside-call`), or only
  calls a tool (`ignores`); after a reflection the first two finish the task.
- PRR: the four ToolMaze plans on the calm profile, every task `--repeat` times; PRR = runs
  that met the plan's fault and still reached full success / runs that met it, per plan, per
  grade (C1..C4) and by whether the task has an alternative tool; `visible` counts only runs
  whose faulted answer differs from the same call's answer with no plan (an implicit variant
  can leave what the tool reads unchanged, which no agent can notice).
- Severity: every flaw type at 10 / 30 / 50 on every task (calm, flaw seed 0), the reference
  agent following the flawed workflow; Chain F1 and tau per task and level (mean over the
  ten types), and whether any (task, type) rose with severity.
- Power: runs per agent to tell 0.6 from 0.7 full success at 95% confidence, 80% power.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from statistics import fmean
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import os

import realprobe
from bench.benchlib import bench_args, emit, load_average
from realprobe.simulator.plans import BUILTIN_PLANS
from realprobe.tasks.flaws import ALL_FLAW_TYPES, SEVERITIES
from realprobe.tasks.model import default_tasks_dir, load_tasks
from realprobe.tasks.power import runs_to_separate
from tests.llm_server import (
    ScriptedLLM,
    ignores_the_request,
    reflects_beside_a_call,
    text_reflector,
)

TASKS = load_tasks(default_tasks_dir())
MODELS = {"text": text_reflector, "beside-call": reflects_beside_a_call,
          "ignores": ignores_the_request}


def reflexion_vs_react(repeat: int) -> list[dict[str, Any]]:
    os.environ.setdefault("ROUND3_KEY", "k")
    out = []
    for model, responder in MODELS.items():
        for agent in ("openai", "openai-reflexion"):
            with ScriptedLLM([], responder=responder) as server:
                res = realprobe.run_tasks(
                    ["pet_newsletter"], agent=agent, base_url=server.base_url, model=model,
                    api_key_env="ROUND3_KEY", mode="simulate", profile="calm",
                    prompt="optimal", repeat=repeat,
                )
            runs = res.runs
            out.append({
                "model": model, "agent": agent, "runs": len(runs),
                "attempts_mean": round(fmean(r.row["attempts"] for r in runs), 2),
                "reached_second_attempt": sum(r.row["attempts"] >= 2 for r in runs),
                "full_success": round(sum(r.row["outcome"] == "full" for r in runs) / len(runs), 3),
            })
    return out


def _met(run: Any) -> bool:
    return any(s["fault_source"] == "plan" for s in run.steps)


def _visible(run: Any, calm: dict[tuple[str, int], Any]) -> bool:
    """Whether the plan's first fault changed what the agent read: its answer against the
    same call of the same run with no plan (an implicit variant may leave it unchanged: the
    recorded answer again, a drift of a field the parser never reads)."""
    hit = next(s for s in run.steps if s["fault_source"] == "plan")
    if not hit["ok"]:
        return True
    clean = calm[(run.row["task"], run.row["repeat"])].steps
    same = [s for s in clean if s["idx"] == hit["idx"] and s["tool"] == hit["tool"]]
    return not same or same[0]["result"] != hit["result"]


def prr(repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    calm = {(r.row["task"], r.row["repeat"]): r for r in realprobe.run_tasks(
        all=True, agent="reference", profile="calm", repeat=repeat).runs}
    for plan in BUILTIN_PLANS:
        res = realprobe.run_tasks(all=True, agent="reference", profile="calm", repeat=repeat,
                                  fault_plan=plan)
        cells: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for r in res.runs:
            if not _met(r):
                continue
            t = TASKS[r.row["task"]]
            full = int(r.row["outcome"] == "full")
            alt = "with alternative" if t.has_alternative else "one path"
            keys = ["all", t.topology, alt]
            if _visible(r, calm):  # the fault changed what the agent read
                keys += ["visible", f"visible, {alt}"]
            for key in keys:
                cells[key][0] += 1
                cells[key][1] += full
        out[plan] = {k: {"met": n, "prr": round(f / n, 3) if n else None}
                     for k, (n, f) in sorted(cells.items())}
    return out


def severity() -> dict[str, Any]:
    prompts = ",".join(f"flawed:{t}@{s}" for t in ALL_FLAW_TYPES for s in SEVERITIES)
    res = realprobe.run_tasks(all=True, agent="reference", profile="calm", prompt=prompts)
    cell: dict[tuple[str, str], dict[int, tuple[float, float | None, float]]] = defaultdict(dict)
    for r in res.runs:
        flaw, sev = r.row["prompt"].split(":", 1)[1].split("@")
        cell[(r.row["task"], flaw)][int(sev)] = (
            r.row["chain_f1"], r.row["kendall_tau"], r.row["severity_share"])
    rises = []
    for key, by in cell.items():
        f1 = [by[s][0] for s in SEVERITIES]
        tau = [-2.0 if by[s][1] is None else by[s][1] for s in SEVERITIES]
        if f1 != sorted(f1, reverse=True) or tau != sorted(tau, reverse=True):
            rises.append(key)
    per_task = {
        task: {str(s): {
            "chain_f1": round(fmean(cell[(task, f)][s][0] for f in ALL_FLAW_TYPES), 3),
            "tau": round(fmean(cell[(task, f)][s][1] for f in ALL_FLAW_TYPES
                               if cell[(task, f)][s][1] is not None), 3),
            "share": round(fmean(cell[(task, f)][s][2] for f in ALL_FLAW_TYPES), 3)}
            for s in SEVERITIES}
        for task in sorted(TASKS)
    }
    per_flaw = {f: [round(fmean(cell[(t, f)][s][0] for t in TASKS), 3) for s in SEVERITIES]
                for f in ALL_FLAW_TYPES}
    return {"runs": len(res.runs), "rises": [list(k) for k in rises], "per_task": per_task,
            "chain_f1_per_flaw_10_30_50": per_flaw}


def main() -> None:
    args = bench_args(__doc__, repeat=5, llm_repeat=5)
    load = load_average()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory():
        out = {
            "tasks": len(TASKS),
            "reflexion_vs_react": reflexion_vs_react(args.llm_repeat),
            "prr": prr(args.repeat),
            "severity": severity(),
            "power_0.6_vs_0.7": {"runs_per_agent": runs_to_separate(0.6, 0.7),
                                 "repeats_of_the_task_set": -(-runs_to_separate(0.6, 0.7)
                                                              // len(TASKS))},
            "seconds": round(time.perf_counter() - t0, 1),
        }
    emit(out, args.save, Path(__file__).with_name("results") / "eval_round3.json", load)


if __name__ == "__main__":
    main()
