"""Time to replay every shipped task run (cassettes/tasks/) offline, and whether each replay
reproduces the outcome the recording had.

    python bench/tasks_replay.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import statistics
import time
from pathlib import Path

from realprobe.adapters import default_catalog
from realprobe.clients import Mode
from realprobe.tasks.model import default_tasks_dir, load_tasks
from realprobe.tasks.runner import RunConfig, run_batch, shipped_cassettes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--save", action="store_true", help="write bench/results/ (otherwise only print)"
    )
    args = parser.parse_args()
    catalog = default_catalog()
    tasks = list(load_tasks(default_tasks_dir()).values())
    folder = shipped_cassettes()
    recorded = dict(
        re.findall(r"^\| (\S+?)__\S+ \| (\w+) \|", (folder / "README.md").read_text(), re.M)
    )
    cfg = RunConfig(agent="reference", prompts=["optimal"], mode=Mode.REPLAY)
    times = []
    matches = 0
    calls = 0
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        results = asyncio.run(run_batch(tasks, cfg, catalog))
        times.append(time.perf_counter() - t0)
        matches = sum(recorded.get(r.row["task"]) == r.row["outcome"] for r in results)
        calls = sum(r.row["tool_calls"] for r in results)
    best = min(times)
    out = {
        "python": platform.python_version(),
        "cassettes": len(list(folder.glob("*.json"))),
        "bytes": sum(p.stat().st_size for p in folder.glob("*.json")),
        "runs": len(tasks),
        "tool_calls": calls,
        "rounds": args.rounds,
        "best_s": round(best, 4),
        "median_s": round(statistics.median(times), 4),
        "ms_per_run": round(1000 * best / len(tasks), 2),
        "outcomes_as_recorded": f"{matches}/{len(tasks)}",
    }
    print(
        f"replayed {len(tasks)} shipped task runs ({calls} tool calls) in {best * 1000:.0f} ms "
        f"(median {statistics.median(times) * 1000:.0f} ms over {args.rounds} rounds, "
        f"{out['ms_per_run']} ms per run); outcomes as recorded: {out['outcomes_as_recorded']}"
    )
    if args.save:
        dest = Path(__file__).parent / "results" / "tasks_replay.json"
        dest.parent.mkdir(exist_ok=True)
        dest.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {dest}")


if __name__ == "__main__":
    main()
