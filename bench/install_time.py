"""How long the README's two installs take: `pip install .` (the demo's) and
`pip install -e '.[test]'` (the tests'), each into a fresh virtual environment, wall and CPU
(pip and its children), from whatever index and cache this machine's pip is set up with.

    python bench/install_time.py [--save]
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import bench_args, emit, load_average

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "install_time.json"


def children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def timed_install(spec: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        cpu, wall = children_cpu(), time.perf_counter()
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *spec], check=True,
                       cwd=ROOT, stdout=subprocess.DEVNULL)
        return {"wall_s": round(time.perf_counter() - wall, 1),
                "cpu_s": round(children_cpu() - cpu, 1)}


def main() -> None:
    args = bench_args(__doc__)
    load = load_average()
    out = {"demo_install": timed_install(["."]),
           "test_install": timed_install(["-e", ".[test]"]),
           "cores": len(os.sched_getaffinity(0))}
    emit(out, args.save, RESULTS, load)


if __name__ == "__main__":
    main()
