"""What the progress bar costs a probe: the same simulated probe (every catalogue tool, harsh
profile, politeness off, seed 7) through the command line, to a file (no bar) and on a
pseudo-terminal (the bar drawn, its ETA worked out), against the front door
`realprobe.probe(...)` in a fresh process, each in a process of its own. CPU time of each
process (what the machine's load barely moves), wall time beside it; the three run
interleaved, `--repeats` times, and each is its best. A probe on a simulated clock is all
CPU: what the bar takes, the probe waits for.

    python bench/progress_cost.py [--rounds 300] [--long-rounds 625] [--repeats 3] [--save]

`--rounds 300` is 9,600 calls (the claim: the command line costs at most 1.15x the CPU of
the front door, to a file and on a terminal); `--long-rounds 625` is 20,000 (it finishes
within 1.2x of the front door's wall time; once the bar's ETA simulated the whole plan at
every redraw, and this run did not finish in ten minutes).
"""

from __future__ import annotations

import contextlib
import os
import pty
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import bench_args, emit, load_average

ROOT = Path(__file__).resolve().parent.parent
SEED = 7
DOOR = ("import sys, realprobe\n"
        "seed = int(sys.argv[3])\n"
        "realprobe.probe(None, rounds=int(sys.argv[1]), db=sys.argv[2], politeness='off',\n"
        "                target=realprobe.options(profile='harsh', seed=seed), seed=seed)\n")


def command(how: str, rounds: int, db: Path) -> list[str]:
    if how == "door":
        return [sys.executable, "-c", DOOR, str(rounds), str(db), str(SEED)]
    return [sys.executable, "-m", "realprobe.cli", "probe", "--all", "--rounds", str(rounds),
            "--profile", "harsh", "--politeness", "off", "--seed", str(SEED), "--db", str(db)]


def outcomes(db: Path) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT tool, round, outcome, error_code, latency_ms FROM probes "
                            "ORDER BY tool, round").fetchall()


def run(how: str, rounds: int, tmp: Path) -> dict[str, Any]:
    """One probe in a process of its own: its CPU (user + system) and wall seconds, and the
    rows it stored."""
    db = tmp / f"{how}-{rounds}-{time.monotonic_ns()}.db"
    main = sub = None
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    if how == "pty":
        main, sub = pty.openpty()
        out: Any = sub
    else:
        out = open(tmp / "stderr.txt", "wb")  # noqa: SIM115 - closed below
    reader = None
    if main is not None:
        def drain() -> None:
            with contextlib.suppress(OSError):
                while os.read(main, 65536):
                    pass

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
    began = time.monotonic()
    proc = subprocess.Popen(command(how, rounds, db), stdin=subprocess.DEVNULL,
                            stdout=out if how == "pty" else subprocess.DEVNULL, stderr=out,
                            env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - began
    if sub is not None:
        os.close(sub)
    if reader is not None:
        reader.join(10)
    if main is not None:
        os.close(main)
    if how != "pty":
        out.close()
    if proc.returncode != 0:
        raise SystemExit(f"{how} probe failed with exit code {proc.returncode}")
    return {"cpu_s": round(usage.ru_utime + usage.ru_stime, 3), "wall_s": round(wall, 3),
            "rows": outcomes(db)}


def compare(rounds: int, repeats: int, tmp: Path) -> dict[str, Any]:
    """The three ways interleaved `repeats` times; each one's best CPU and best wall."""
    seen: dict[str, list[dict[str, Any]]] = {"door": [], "file": [], "pty": []}
    rows = []
    for r in range(repeats):
        order = list(seen) if r % 2 == 0 else list(reversed(seen))
        for how in order:
            seen[how].append(run(how, rounds, tmp))
            rows.append(seen[how][-1].pop("rows"))
    best = {how: {"cpu_s": min(x["cpu_s"] for x in xs), "wall_s": min(x["wall_s"] for x in xs)}
            for how, xs in seen.items()}
    door = best["door"]
    return {
        "rounds": rounds, "calls": 32 * rounds, "repeats": repeats, "best": best, "runs": seen,
        "same_rows_every_run": all(r == rows[0] for r in rows),
        "cpu_ratio": {how: round(best[how]["cpu_s"] / door["cpu_s"], 3) for how in ("file", "pty")},
        "wall_ratio": {how: round(best[how]["wall_s"] / door["wall_s"], 3)
                       for how in ("file", "pty")},
    }


def main() -> None:
    args = bench_args(__doc__, rounds=300, long_rounds=625, repeats=3)
    load = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        out: dict[str, Any] = {"profile": "harsh", "seed": SEED, "tools": 32}
        out["probe"] = compare(args.rounds, args.repeats, Path(tmp))
        if args.long_rounds:
            out["long_probe"] = compare(args.long_rounds, 1, Path(tmp))
    emit(out, args.save, ROOT / "bench" / "results" / "progress_cost.json", load)


if __name__ == "__main__":
    main()
