"""Time `realprobe demo` end to end in a fresh process (goal: under 15 s), and each of its
steps in process (sandbox and every tool once, probes, statistics, profile, report, tasks).

The load average is recorded: on 2 shared cores other work shows up directly in wall times,
so the CPU time of the command (user + system) is recorded too.

    python bench/demo_time.py [--save]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "demo_time.json"


def steps(out: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Wall and CPU seconds (this process, every thread) per step; wall minus CPU is waiting."""
    from realprobe.demo import run_demo

    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    t0, c0 = time.perf_counter(), time.process_time()
    last = [t0, c0]

    def step(name: str, value: Any) -> None:
        now, cnow = time.perf_counter(), time.process_time()
        wall[name] = round(now - last[0], 3)
        cpu[name] = round(cnow - last[1], 3)
        last[:] = [now, cnow]

    run_demo(out, on_step=step)
    wall["total"] = round(time.perf_counter() - t0, 3)
    cpu["total"] = round(time.process_time() - c0, 3)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", action="store_true", help="write bench/results/ (else print only)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "realprobe.cli", "demo", "--out", str(Path(tmp) / "cli")],
            capture_output=True, text=True,
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"demo failed: {proc.stderr[-500:]}")
        in_process, in_process_cpu = steps(Path(tmp) / "lib")
    out = {
        "cli_wall_s": round(wall, 3),
        "cli_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3),
        "in_process_steps_s": in_process,
        "in_process_steps_cpu_s": in_process_cpu,
        "goal_s": 15.0,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": sys.version.split()[0],
    }
    print(json.dumps(out, indent=2))
    if args.save:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
