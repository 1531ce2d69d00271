"""Input-file limits: time and peak memory to refuse a billion-laughs YAML cassette, to refuse
a 286 MB cassette (over the default cap), and to load and verify a 20 MB one (under it); and
for every other file a user hands in (catalogue, alert rules, profile, fault plan, task, price
and sweep files) the time to refuse each hostile kind (5,000 deep, 300 MB, 100,001 rules, too
many entries, empty, binary, a link to a device or in a loop), in process and, for the fault
plan and the price file, through the command line (exit code and seconds, start-up
included; `realprobe --version` alone for comparison). Timings are wall clock on the machine
as it is (its load average is saved with them).

    python bench/input_limits.py [--save]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from realprobe.adapters.catalog import default_catalog
from realprobe.cassettes.importers import load_cassette
from realprobe.cassettes.verify import verify_cassette
from realprobe.errors import RealprobeError

RESULTS = Path(__file__).parent / "results" / "input_limits.json"
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))


def billion_laughs(folder: Path) -> Path:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for n in "bcdefghij":
        lines.append(f"{n}: &{n} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = n
    lines.append("version: 1\ninteractions:\n- request: {method: GET, uri: 'https://x.test/', "
                 "headers: {h: *j}}\n  response: {status: {code: 200}, body: {string: ''}}")
    path = folder / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def big_cassette(folder: Path, megabytes: int) -> Path:
    body = json.dumps({"fact": "x" * 50_000, "length": 50_000})
    per = len(body) + 200
    n = megabytes * 1_000_000 // per
    interactions = [
        {"request": {"method": "GET", "uri": f"https://catfact.ninja/fact?i={i}", "body": None,
                     "headers": {}},
         "response": {"status": {"code": 200, "message": "OK"},
                      "headers": {"Content-Type": ["application/json"]},
                      "body": {"string": body}}}
        for i in range(n)
    ]
    path = folder / f"big-{megabytes}mb.json"
    path.write_text(json.dumps({"version": 1, "interactions": interactions}))
    return path


def measure(fn: Any, memory: bool = True) -> dict[str, Any]:
    """Seconds, outcome and (with `memory`, under tracemalloc, which slows pure-Python
    parsers several times) the peak of Python allocations."""
    if memory:
        tracemalloc.start()
    t = time.perf_counter()
    outcome = "ok"
    try:
        fn()
    except RealprobeError as exc:
        outcome = f"refused: {str(exc).split(': ', 1)[-1][:90]}"
    elapsed = time.perf_counter() - t
    if not memory:
        return {"seconds": round(elapsed, 4), "peak_mb": None, "outcome": outcome}
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"seconds": round(elapsed, 4), "peak_mb": round(peak / 1e6, 2), "outcome": outcome}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--save", action="store_true", help="write bench/results/input_limits.json")
    args = parser.parse_args()
    catalog = default_catalog()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        laughs = billion_laughs(folder)
        huge = folder / "huge.json"
        with huge.open("wb") as fh:  # 286 MB, sparse: refused from its size alone
            fh.truncate(286 * 1_000_000)
        medium = big_cassette(folder, 20)
        results = {
            "billion_laughs": {"file_bytes": laughs.stat().st_size,
                               **measure(lambda: load_cassette(laughs))},
            "cassette_286mb": {"file_bytes": huge.stat().st_size,
                               **measure(lambda: verify_cassette(load_cassette(huge), catalog))},
            "cassette_20mb_verify": {
                "file_bytes": medium.stat().st_size,
                **measure(lambda: verify_cassette(load_cassette(medium), catalog)),
            },
        }
    for name, r in results.items():
        print(f"{name:24} {r['file_bytes'] / 1e6:9.3f} MB file  {r['seconds']:8.3f} s  "
              f"peak {r['peak_mb']:8.1f} MB  {r['outcome']}")
    results["hostile_files"] = hostile_files()
    worst = max(results["hostile_files"].values(), key=lambda r: r["seconds"])
    print(f"hostile files: {len(results['hostile_files'])} reader x kind refusals, slowest "
          f"{worst['seconds']:.3f} s ({worst['outcome'][:60]})")
    if args.save:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps({
            "python": platform.python_version(), "machine": platform.machine(),
            "load_average": os.getloadavg(),
            "note": "peak = tracemalloc peak of Python allocations during the load/verify",
            "results": results,
        }, indent=2) + "\n")
        print(f"wrote {RESULTS}")


def hostile_files() -> dict[str, dict[str, Any]]:
    """Every reader x every hostile kind (the files of tests/test_hostile_files.py)."""
    from test_hostile_files import KINDS, READERS, write_hostile

    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for reader, (load, suffix) in READERS.items():
            for kind in KINDS:
                folder = Path(tmp) / f"{reader}-{kind}".replace(" ", "_")
                folder.mkdir()
                path = write_hostile(folder / f"hostile{suffix}", kind)
                r = measure(lambda load=load, path=path: load(path), memory=False)
                out[f"{reader}/{kind}"] = r
                print(f"  {reader:12} {kind:13} {r['seconds']:7.3f} s  {r['outcome'][:80]}")
        env = {**os.environ, "REALPROBE_DATA_DIR": str(Path(tmp) / "data")}
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "realprobe.cli", "--version"], capture_output=True,
                       timeout=120, env=env)
        out["cli --version (start-up alone)"] = {
            "seconds": round(time.perf_counter() - t, 3), "outcome": "ok", "peak_mb": None}
        for kind in ("deep", "huge", "rules"):
            for flag, args in (("--fault-plan", ["run", "--all", "--mode", "simulate"]),
                               ("--prices", ["results"])):
                path = write_hostile(Path(tmp) / f"cli-{flag[2:]}-{kind}.json", kind)
                db = Path(tmp) / f"cli-{flag[2:]}-{kind}.db"
                if flag == "--prices":
                    from realprobe.store import Store

                    with Store(db):
                        pass
                t = time.perf_counter()
                cmd = [sys.executable, "-m", "realprobe.cli", *args, flag, str(path),
                       "--db", str(db)]
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
                secs = time.perf_counter() - t
                out[f"cli {flag}/{kind}"] = {
                    "seconds": round(secs, 3), "exit": res.returncode,
                    "outcome": res.stderr.strip().splitlines()[-1][:160] if res.stderr else "",
                    "stderr_lines": len(res.stderr.strip().splitlines()), "peak_mb": None,
                }
                print(f"  cli {flag:12} {kind:6} exit {res.returncode}  {secs:6.2f} s  "
                      f"{out[f'cli {flag}/{kind}']['outcome'][:70]}")
    return out


if __name__ == "__main__":
    main()
