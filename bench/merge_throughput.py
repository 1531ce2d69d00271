"""Merge throughput: three vantage databases of 1,000,000 rows each into one.

Times the first merge (every row new) and a second merge of the same files (every row
already there: the idempotency check), in rows per second.

    python bench/merge_throughput.py [--rows 1000000] [--save]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from monitor_synthetic import build

from realprobe import merge_databases as merge

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--save", action="store_true", help="write bench/results/merge_throughput.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sources = []
        for i, vantage in enumerate(("berlin", "tokyo", "ohio")):
            path = Path(tmp) / f"{vantage}.db"
            build(path, args.rows, vantage=vantage, t_end=time.time(), seed=i)
            sources.append(path)
        out = Path(tmp) / "all.db"
        t = time.perf_counter()
        first = merge(sources, out)
        first_s = time.perf_counter() - t
        t = time.perf_counter()
        second = merge(sources, out)
        second_s = time.perf_counter() - t
    total = 3 * args.rows
    result = {
        "rows_per_source": args.rows,
        "sources": 3,
        "first_merge_s": round(first_s, 2),
        "first_merge_rows_per_s": round(total / first_s),
        "rows_added": first.rows_added,
        "second_merge_s": round(second_s, 2),
        "second_merge_rows_per_s": round(total / second_s),
        "rows_added_again": second.rows_added,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result, indent=2))
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "merge_throughput.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
