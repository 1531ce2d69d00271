"""Exporter `/metrics` latency on a database of 1,000,000 rows (goal: under 100 ms a scrape).

The first scrape reads every row once; later scrapes fold only the rows added since. The
benchmark times the first scrape, then 30 scrapes over HTTP with 100 new rows written
between each (a prober at work), and reports their median and p95 wall time, and the median
CPU time (on a busy machine the wall time mostly measures waiting for a core).

    python bench/exporter_scrape.py [--rows 1000000] [--save]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from monitor_synthetic import build

from realprobe.monitor.exporter import Exporter, ExporterServer
from realprobe.store import Store, iso_utc, open_db

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--scrapes", type=int, default=30)
    ap.add_argument("--save", action="store_true", help="write bench/results/exporter_scrape.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "big.db"
        t = time.perf_counter()
        build(db, args.rows, t_end=time.time())
        build_s = time.perf_counter() - t
        server = ExporterServer(Exporter(open_db(db)), port=0)
        url = server.start() + "/metrics"
        try:
            t = time.perf_counter()
            first = httpx.get(url, timeout=600)
            first_s = time.perf_counter() - t
            times, cpu = [], []
            with Store(db) as store:
                for _ in range(args.scrapes):
                    now = time.time()
                    with store.conn:
                        store.conn.executemany(
                            "INSERT INTO probes (run_id, tool, api, started_at, started_ts, "
                            "latency_ms, outcome, vantage, excluded, source) "
                            "VALUES ('live', ?, 'api00', ?, ?, 150, 'ok', 'bench', 0, 'probe')",
                            [(f"tool_{j % 30:02d}", iso_utc(now), now) for j in range(100)],
                        )
                    t, c = time.perf_counter(), time.process_time()
                    r = httpx.get(url, timeout=60)
                    times.append(time.perf_counter() - t)
                    cpu.append(time.process_time() - c)
                    assert r.status_code == 200
            size = len(first.content)
        finally:
            server.stop()
    times.sort()
    result = {
        "rows": args.rows,
        "build_s": round(build_s, 2),
        "first_scrape_s": round(first_s, 3),
        "scrapes": args.scrapes,
        "rows_added_between_scrapes": 100,
        "scrape_median_ms": round(statistics.median(times) * 1000, 1),
        "scrape_p95_ms": round(times[int(0.95 * (len(times) - 1))] * 1000, 1),
        # CPU seconds of this process (client and server) per scrape: what the wall time
        # would be on an idle core
        "scrape_cpu_median_ms": round(statistics.median(cpu) * 1000, 1),
        "metrics_bytes": size,
        "goal_ms": 100,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result, indent=2))
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "exporter_scrape.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
