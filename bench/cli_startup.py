"""Time `realprobe --help` and `realprobe <verb> --help` in fresh processes (goal: under 0.25 s).

Each command runs 7 times; the best wall time and the best CPU time (user + system of the
child) are kept, and the modules a help screen imported are checked for heavy libraries. The
load average is recorded: on 2 shared cores other work shows up directly in wall times.

    python bench/cli_startup.py [--runs 7] [--save]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "cli_startup.json"
COMMANDS = [
    ["--help"], ["call", "--help"], ["probe", "--help"], ["stats", "--help"],
    ["report", "--help"], ["cassette", "inspect", "--help"], ["run", "--help"],
    ["mcp", "--help"], ["demo", "--help"],
]
HEAVY = ("numpy", "scipy", "matplotlib", "mcp", "openai", "httpx", "pydantic", "sqlite_utils")


def one(args: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "realprobe.cli", *args], capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"realprobe {' '.join(args)} failed: {proc.stderr.decode()[-300:]}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def heavy_imports(args: list[str]) -> list[str]:
    code = (
        f"import sys; sys.argv = ['realprobe', *{args!r}]\n"
        "from realprobe.cli import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return list(json.loads(proc.stderr.strip().splitlines()[-1].replace("'", '"')))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--save", action="store_true", help="write bench/results/ (else print only)")
    args = ap.parse_args()
    baseline = min(one_python() for _ in range(args.runs))
    rows = {}
    for cmd in COMMANDS:
        times = [one(cmd) for _ in range(args.runs)]
        rows["realprobe " + " ".join(cmd)] = {
            "best_wall_s": round(min(t[0] for t in times), 3),
            "best_cpu_s": round(min(t[1] for t in times), 3),
            "heavy_imports": heavy_imports(cmd),
        }
        print(f"{'realprobe ' + ' '.join(cmd):38} {rows['realprobe ' + ' '.join(cmd)]}")
    out = {
        "commands": rows,
        "worst_best_wall_s": max(r["best_wall_s"] for r in rows.values()),
        "worst_best_cpu_s": max(r["best_cpu_s"] for r in rows.values()),
        "bare_python_wall_s": round(baseline, 3),
        "goal_s": 0.25,
        "runs": args.runs,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": sys.version.split()[0],
    }
    print(json.dumps({k: v for k, v in out.items() if k != "commands"}, indent=2))
    if args.save:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {RESULTS}")


def one_python() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
