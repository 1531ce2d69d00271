"""Makespan of a 330-run sweep against a scripted model with 300 ms per request.

330 runs = 11 tasks x (baseline, cot, optimal, 7 flawed) x 3 repeats, agent `openai`, simulated
APIs (calm), every run two model turns. The ideal makespan is the total model time divided
by the concurrency (660 requests x 0.3 s / N); the goal is within 1.2 times of it. Also the
overhead per run of the Ray executor against the local one (simulate, reference agent).

    python bench/tasks_concurrency.py [--concurrency 1,8,32] [--delay 0.3] [--ray] [--save]

Concurrency 1 takes about 200 s by construction.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from realprobe.adapters.catalog import default_catalog
from realprobe.clients import Mode
from realprobe.tasks.agents import LlmSettings
from realprobe.tasks.model import default_tasks_dir, load_tasks
from realprobe.tasks.prompts import prompt_variants
from realprobe.tasks.runner import RunConfig, run_batch

RESULTS = Path(__file__).parent / "results"
SERVER = """
import sys, time
from tests.llm_server import ScriptedLLM, two_turns
s = ScriptedLLM([], delay_s={delay}, responder=two_turns, keep_alive=True)
print(s.start(), flush=True)
while True:
    time.sleep(3600)
"""


def makespan(concurrency: int, delay: float) -> dict[str, float]:
    import realprobe.tasks.agents.openai_native  # noqa: F401  (import once, outside the timing)

    tasks = list(load_tasks(default_tasks_dir()).values())
    # the model runs in its own process, as a real endpoint would (not on our GIL)
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(delay=delay)], stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        cfg = RunConfig(
            agent="openai", prompts=prompt_variants("baseline,cot,optimal,flawed:all"),
            mode=Mode.SIMULATE, profile="calm", repeat=3, concurrency=concurrency,
            llm=LlmSettings(base_url=base_url, model="scripted", api_key="k"),
        )
        t0 = time.perf_counter()
        out = asyncio.run(run_batch(tasks, cfg, default_catalog()))
        wall = time.perf_counter() - t0
        requests = sum(r.row["turns"] for r in out)  # one model request per turn
    finally:
        server.terminate()
        server.wait()
    ideal = requests * delay / concurrency
    return {"concurrency": concurrency, "runs": len(out), "requests": requests,
            "makespan_s": round(wall, 2), "ideal_s": round(ideal, 2),
            "ratio_to_ideal": round(wall / ideal, 3)}


def ray_overhead(runs_per_executor: int = 64) -> dict[str, float]:
    from realprobe.store import open_db
    from realprobe.tasks.sweep import SweepFile, run_sweep

    sweep = SweepFile.model_validate({
        "tasks": "all", "prompts": ["optimal"], "repeats": max(1, runs_per_executor // 11),
        "targets": [{"kind": "simulate", "profile": "calm"}],
    })
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for executor in ("local", "ray"):
            t0 = time.perf_counter()
            summary = run_sweep(sweep, open_db(Path(tmp) / f"{executor}.db"),
                                catalog=default_catalog(), executor=executor, concurrency=2)
            out[f"{executor}_s"] = round(time.perf_counter() - t0, 2)
            out["runs"] = summary.ran
    out["ray_overhead_per_run_ms"] = round(
        (out["ray_s"] - out["local_s"]) / out["runs"] * 1000, 1
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--delay", type=float, default=0.3)
    ap.add_argument("--ray", action="store_true", help="also time the Ray executor")
    ap.add_argument("--save", action="store_true",
                    help="write bench/results/tasks_concurrency.json")
    args = ap.parse_args()
    rows = []
    for n in (int(x) for x in args.concurrency.split(",")):
        row = makespan(n, args.delay)
        print(json.dumps(row))
        rows.append(row)
    result: dict[str, object] = {
        "delay_s": args.delay, "makespan": rows, "goal_ratio": 1.2,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    if args.ray:
        result["ray"] = ray_overhead()
        print(json.dumps(result["ray"]))
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "tasks_concurrency.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
