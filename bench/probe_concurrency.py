"""Does more concurrency ever make a probe slower? A live `probe` of 300 hosts (loopback servers
on 300 ports standing in for 300 APIs, each answering after exactly `--latency-ms`; one call
in flight per host, no spacing), `--calls` rounds, at concurrency 32 and at concurrency 300,
interleaved, best of `--repeats`; the ratio is the makespan at 300 over the makespan at 32
(goal: at most 1.0). Also the median call latency the probe stored at each (a call that
waited for a connection of the pool shows up there) and the calls that failed (a call that
waited past its deadline is a TIMEOUT). `--sandbox` serves the hosts from one realprobe
sandbox process instead (its own CPU then bounds the throughput).

    python bench/probe_concurrency.py [--hosts 300] [--calls 3] [--latency-ms 300] [--save]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import emit, load_average
from probe_throughput import sandbox_process
from ray_live_gate import UpstreamProcess
from scheduling_efficiency import bench_catalog, exact_latency_profile

import realprobe
from realprobe.adapters.catalog import Catalog
from realprobe.clients import TransportOptions

RESULTS = Path(__file__).resolve().parent / "results" / "probe_concurrency.json"


def one(cat: Catalog, target: TransportOptions, calls: int, concurrency: int, db: Path
        ) -> tuple[float, float, int]:
    """(makespan, median stored latency in ms, calls that failed) of one probe run."""
    tools = [t.name for t in cat if t.api_id.startswith("bench-host")]
    t0 = time.perf_counter()
    summary = realprobe.probe(tools, rounds=calls, target=target, db=db, catalog=cat,
                              concurrency=concurrency)
    makespan = time.perf_counter() - t0
    with sqlite3.connect(db) as conn:
        lat = [r[0] for r in conn.execute("SELECT latency_ms FROM probes WHERE run_id = ?",
                                          [summary.run_id])]
    return makespan, statistics.median(lat), summary.n_error


def loopback_catalog(ports: list[int]) -> Catalog:
    """The bench catalogue with each API on its own loopback port, one call in flight each."""
    from realprobe.adapters.spec import ApiSpec

    data = bench_catalog(len(ports))["apis"]
    assert isinstance(data, list)
    return Catalog([
        ApiSpec.model_validate({
            **api, "base_url": f"http://127.0.0.1:{port}", "https": False,
            "politeness": {"max_in_flight": 1, "min_interval_s": 0, "jitter_s": 0,
                           "daily_budget": 10**9},
        })
        for api, port in zip(data, ports, strict=True)
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=300)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--latency-ms", type=float, default=300.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sandbox", action="store_true", help="one sandbox serves every host")
    ap.add_argument("--save", action="store_true", help=f"write {RESULTS.name}")
    args = ap.parse_args()
    before = load_average()
    runs: dict[int, list[tuple[float, float, int]]] = {32: [], args.hosts: []}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        if args.sandbox:
            cat_file = Path(tmp) / "bench_catalog.json"
            cat_file.write_text(json.dumps(bench_catalog(args.hosts)))
            prof_file = Path(tmp) / "exact.json"
            prof_file.write_text(json.dumps(exact_latency_profile(args.latency_ms)))
            cat = Catalog.load([cat_file])
            url = stack.enter_context(sandbox_process(str(prof_file), 1.0, catalog=cat_file))
            target = TransportOptions(sandbox=url)
        else:  # in its own process: the upstream must not share the prober's GIL
            up = UpstreamProcess(args.hosts, args.latency_ms / 1000)
            stack.callback(up.close)
            cat, target = loopback_catalog(up.ports), TransportOptions()
        for r in range(args.repeats):
            for c in runs:
                runs[c].append(one(cat, target, args.calls, c, Path(tmp) / f"p{c}_{r}.db"))
    best = {c: min(v) for c, v in runs.items()}
    calls = args.hosts * args.calls
    out = {
        "hosts": args.hosts, "calls": calls, "latency_ms": args.latency_ms,
        "makespan_s": {str(c): round(b[0], 2) for c, b in best.items()},
        "median_call_ms": {str(c): round(b[1], 1) for c, b in best.items()},
        "failed_calls": {str(c): b[2] for c, b in best.items()},
        "ideal_s": {str(c): round(calls * args.latency_ms / 1000 / c, 2) for c in best},
        "ratio_300_to_32": round(best[args.hosts][0] / best[32][0], 2),
        "upstream": "sandbox" if args.sandbox else "loopback servers",
        "repeats": args.repeats, "goal_ratio": 1.0,
    }
    emit(out, args.save, RESULTS, before)


if __name__ == "__main__":
    main()
