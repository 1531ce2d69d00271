"""Task runs per second for the reference agent over every task in simulate mode, on the
virtual clock (no real sleeping), under each built-in profile.

    python bench/tasks_simulate.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import time
from pathlib import Path

from realprobe.adapters import default_catalog
from realprobe.clients import Mode
from realprobe.tasks.metrics import levels
from realprobe.tasks.model import default_tasks_dir, load_tasks
from realprobe.tasks.runner import RunConfig, run_batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--save", action="store_true", help="write bench/results/ (otherwise only print)"
    )
    args = parser.parse_args()
    catalog = default_catalog()
    tasks = list(load_tasks(default_tasks_dir()).values())
    out: dict[str, object] = {
        "python": platform.python_version(),
        "tasks": len(tasks),
        "repeat": args.repeat,
        "profiles": {},
    }
    for profile in ("calm", "published", "harsh"):
        cfg = RunConfig(
            agent="reference",
            prompts=["optimal"],
            mode=Mode.SIMULATE,
            profile=profile,
            repeat=args.repeat,
        )
        t0 = time.perf_counter()
        results = asyncio.run(run_batch(tasks, cfg, catalog))
        wall = time.perf_counter() - t0
        rows = [r.row for r in results]
        virtual = sum(r["clock_s"] for r in rows)
        lv = levels(rows)
        entry = {
            "runs": len(rows),
            "wall_s": round(wall, 3),
            "runs_per_s": round(len(rows) / wall, 1),
            "tool_calls": sum(r["tool_calls"] for r in rows),
            "calls_per_s": round(sum(r["tool_calls"] for r in rows) / wall, 1),
            "virtual_s": round(virtual, 1),
            "virtual_speedup": round(virtual / wall, 1),
            "full_rate": round(lv["full_rate"], 3),
            "strict_rate": round(lv["strict_rate"], 3),
        }
        out["profiles"][profile] = entry  # type: ignore[index]
        print(
            f"{profile:>9}: {entry['runs']} runs in {wall:.2f}s = {entry['runs_per_s']} runs/s "
            f"({entry['calls_per_s']} tool calls/s); {virtual:.0f}s of virtual time "
            f"({entry['virtual_speedup']}x real); full {lv['full_rate']:.0%}"
        )
    if args.save:
        dest = Path(__file__).parent / "results" / "tasks_simulate.json"
        dest.parent.mkdir(exist_ok=True)
        dest.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {dest}")


if __name__ == "__main__":
    main()
