"""The reference agent under the four ToolMaze fault settings and at ReliabilityBench's fault
rates: full-success rate per setting (with its 95 % Wilson interval) and recovery per
injected fault kind, every task, simulate mode on the virtual clock.

    python bench/fault_settings.py [--repeat 10] [--profile calm] [--save]

The ToolMaze plans hit each run's first tool call (on calm tools); the fault rates are
`Profile.scaled(λ)` of `--profile` (calm: every tool gets an even mix of timeouts, rate
limits, partial responses and schema drift).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import time
from pathlib import Path
from typing import Any

from realprobe.adapters import default_catalog
from realprobe.clients import Mode
from realprobe.probes.stats import wilson
from realprobe.simulator.plans import BUILTIN_PLANS
from realprobe.tasks.metrics import FAULT_KINDS, levels, recovery, recovery_by_kind
from realprobe.tasks.model import default_tasks_dir, load_tasks
from realprobe.tasks.runner import RunConfig, run_batch

LAMBDAS = (0.0, 0.075, 0.175, 0.275)


def _rate(rec: dict[str, Any]) -> dict[str, Any]:
    rate = rec["recovery_rate"]
    return {"runs": rec["runs_with_failures"], "rate": None if rate is None else round(rate, 3)}


def measure(cfg: RunConfig, tasks: list[Any], catalog: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    rows = [r.row for r in asyncio.run(run_batch(tasks, cfg, catalog))]
    lv = levels(rows)
    full = sum(r["outcome"] == "full" for r in rows)
    rec = recovery(rows)
    return {
        "runs": len(rows),
        "full_rate": round(lv["full_rate"], 3),
        "full_ci95": [round(x, 3) for x in wilson(full, len(rows))],
        "runs_with_tool_faults": rec["runs_with_failures"],
        "recovery_rate": None if rec["recovery_rate"] is None else round(rec["recovery_rate"], 3),
        "recovery_by_kind": {k: _rate(v) for k, v in recovery_by_kind(rows).items()},
        "wall_s": round(time.perf_counter() - t0, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--profile", default="calm", help="the profile the λ levels scale")
    parser.add_argument(
        "--save", action="store_true", help="write bench/results/ (otherwise only print)"
    )
    args = parser.parse_args()
    catalog = default_catalog()
    tasks = list(load_tasks(default_tasks_dir()).values())
    out: dict[str, Any] = {
        "python": platform.python_version(), "tasks": len(tasks), "repeat": args.repeat,
        "profile": args.profile, "toolmaze": {}, "lambda": {},
    }  # fmt: skip
    base = {"agent": "reference", "mode": Mode.SIMULATE, "repeat": args.repeat}
    for plan in BUILTIN_PLANS:
        got = measure(RunConfig(**base, profile="calm", fault_plan=plan), tasks, catalog)
        out["toolmaze"][plan] = got
        kind = plan.removeprefix("toolmaze-")
        rec = got["recovery_by_kind"][kind]
        print(f"{plan:>30}: full {got['full_rate']:.1%} {got['full_ci95']}, recovery "
              f"({kind}) {rec['rate']} over {rec['runs']} runs")  # fmt: skip
    for lam in LAMBDAS:
        got = measure(RunConfig(**base, profile=args.profile, fault_rate=lam), tasks, catalog)
        out["lambda"][f"{lam:g}"] = got
        print(f"{'λ = ' + format(lam, 'g'):>30}: full {got['full_rate']:.1%} "
              f"{got['full_ci95']}, recovery {got['recovery_rate']} over "
              f"{got['runs_with_tool_faults']} runs with tool faults")  # fmt: skip
    assert set(FAULT_KINDS) == {p.removeprefix("toolmaze-") for p in BUILTIN_PLANS}
    if args.save:
        dest = Path(__file__).parent / "results" / "fault_settings.json"
        dest.parent.mkdir(exist_ok=True)
        dest.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {dest}")


if __name__ == "__main__":
    main()
