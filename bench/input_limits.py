"""Input-file limits: time and peak memory to refuse a billion-laughs YAML cassette, to refuse
a 286 MB cassette (over the default cap), and to load and verify a 20 MB one (under it).

    python bench/input_limits.py [--save]
"""

from __future__ import annotations

import argparse
import json
import platform
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


def measure(fn: Any) -> dict[str, Any]:
    tracemalloc.start()
    t = time.perf_counter()
    outcome = "ok"
    try:
        fn()
    except RealprobeError as exc:
        outcome = f"refused: {str(exc).split(': ', 1)[-1][:90]}"
    elapsed = time.perf_counter() - t
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
    if args.save:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps({
            "python": platform.python_version(), "machine": platform.machine(),
            "note": "peak = tracemalloc peak of Python allocations during the load/verify",
            "results": results,
        }, indent=2) + "\n")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
