"""Scheduling efficiency: 30 hosts x 20 calls, 100 ms latency each, one call in flight per host.

Ideal makespan: every host busy all the time = 20 x 0.1 s = 2.0 s. All runs are real time
with real concurrency; the probe runner gives each host one in-flight slot (politeness
max_in_flight=1, min interval 0, no jitter) and writes one committed SQLite row per call.

- sandbox: a sandbox in its own process serves 30 emulated APIs (a bench catalogue, one tool
  each, each on its own canonical host) under a profile whose latency is exactly 100 ms;
  real sockets. This is the headline number.
- raw httpx: the same 600 requests to the same sandbox, one asyncio task per host sending
  its 20 requests one after another through one httpx.AsyncClient - the floor that the HTTP
  stack and the sandbox set, without realprobe.
- simulate: the same probe through SimulateTransport(real_time=True): real sleeps of exactly
  100 ms, no sockets - what the scheduling itself costs.

    python bench/scheduling_efficiency.py [--hosts 30] [--calls 20] [--latency-ms 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from probe_throughput import sandbox_process  # the sandbox in its own process

from realprobe import PolitenessConfig, run_probes
from realprobe.adapters.catalog import Catalog
from realprobe.adapters.spec import Politeness
from realprobe.clients import Mode, TransportOptions, make_client
from realprobe.store import Store

RESULTS = Path(__file__).resolve().parent / "results" / "scheduling_efficiency.json"


def bench_catalog(hosts: int) -> dict[str, object]:
    return {
        "apis": [
            {
                "id": f"bench-host{i:02d}",
                "name": f"Bench host {i}",
                "base_url": f"https://host{i:02d}.bench.example",
                "docs_url": "https://example.org",
                "category": "Benchmark",
                "https": True,
                "tools": [
                    {
                        "name": f"bench_host{i:02d}",
                        "title": "Bench call",
                        "description": "Answers {\"v\": 1} after the profile's latency.",
                        "path": "/v",
                        "output": {"v": {"from": "v", "type": "integer"}},
                        "fixtures": [{"body": '{"v": 1}', "source": "benchmark"}],
                    }
                ],
            }
            for i in range(hosts)
        ]
    }


def exact_latency_profile(latency_ms: float) -> dict[str, object]:
    return {
        "format": "realprobe-profile/1",
        "name": f"exact-{latency_ms:g}ms",
        "default": {
            "success_rate": 1.0,
            "errors": {},
            "latency_ms": {"lognormal": {"mu": math.log(latency_ms), "sigma": 1e-9}},
        },
    }


async def probe(
    cat: Catalog, opts: TransportOptions, calls: int, db: Path
) -> tuple[float, list[float]]:
    tools = [t for t in cat if t.api_id.startswith("bench-host")]
    client = make_client(cat, opts)
    config = PolitenessConfig(
        override=Politeness(max_in_flight=1, min_interval_s=0.0, jitter_s=0.0)
    )
    with Store(db) as store:
        t0 = time.perf_counter()
        summary = await run_probes(cat, tools, calls, client, store, politeness=config,
                                   concurrency=len(tools), vantage="bench",
                                   target=opts.sandbox or "simulate")
        makespan = time.perf_counter() - t0
        latencies = [r["latency_ms"] for r in store.probes_for_run(summary.run_id)]
    await client.aclose()
    assert summary.n_ok == len(tools) * calls, summary.model_dump()
    return makespan, latencies


async def raw_httpx(cat: Catalog, sandbox: str, calls: int) -> float:
    tools = [t for t in cat if t.api_id.startswith("bench-host")]
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=50)
    async with httpx.AsyncClient(limits=limits, timeout=10) as client:

        async def host(api: str) -> None:
            for _ in range(calls):
                r = await client.get(f"{sandbox}/{api}/v")
                await r.aread()
                assert r.status_code == 200

        t0 = time.perf_counter()
        await asyncio.gather(*(host(t.api_id) for t in tools))
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=30)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--save", action="store_true", help="write bench/results/ (otherwise only print)"
    )
    args = ap.parse_args()
    ideal = args.calls * args.latency_ms / 1000
    with tempfile.TemporaryDirectory() as tmp:
        cat_file = Path(tmp) / "bench_catalog.json"
        cat_file.write_text(json.dumps(bench_catalog(args.hosts)))
        prof_file = Path(tmp) / "exact.json"
        prof_file.write_text(json.dumps(exact_latency_profile(args.latency_ms)))
        cat = Catalog.load([cat_file])
        makespans: list[float] = []
        raw: list[float] = []
        simulated: list[float] = []
        latencies: list[float] = []
        with sandbox_process(str(prof_file), 1.0, catalog=cat_file) as url:
            sb = TransportOptions(sandbox=url)
            asyncio.run(probe(cat, sb, 1, Path(tmp) / "warm.db"))
            for i in range(args.repeats):
                m, lat = asyncio.run(probe(cat, sb, args.calls, Path(tmp) / f"r{i}.db"))
                makespans.append(m)
                latencies.extend(lat)
                raw.append(asyncio.run(raw_httpx(cat, url, args.calls)))
        sim = TransportOptions(mode=Mode.SIMULATE, profile=str(prof_file), real_time=True)
        for i in range(args.repeats):
            simulated.append(asyncio.run(probe(cat, sim, args.calls, Path(tmp) / f"s{i}.db"))[0])
    best, med = min(makespans), statistics.median(makespans)
    raw_med, sim_med = statistics.median(raw), statistics.median(simulated)
    result = {
        "benchmark": "scheduling_efficiency",
        "hosts": args.hosts,
        "calls_per_host": args.calls,
        "latency_ms": args.latency_ms,
        "in_flight_per_host": 1,
        "ideal_makespan_s": ideal,
        "makespans_s": [round(m, 3) for m in makespans],
        "median_makespan_s": round(med, 3),
        "ratio_median_to_ideal": round(med / ideal, 3),
        "ratio_best_to_ideal": round(best / ideal, 3),
        "goal": "<= 1.15",
        "raw_httpx_makespans_s": [round(m, 3) for m in raw],
        "raw_httpx_ratio_to_ideal": round(raw_med / ideal, 3),
        "simulate_real_time_makespans_s": [round(m, 3) for m in simulated],
        "simulate_real_time_ratio_to_ideal": round(sim_med / ideal, 3),
        "mean_call_latency_ms": round(statistics.fmean(latencies), 2),
        "p99_call_latency_ms": round(sorted(latencies)[int(0.99 * (len(latencies) - 1))], 2),
        "notes": "real time, real sockets; sandbox in its own process; one committed SQLite "
        "row per call; per-call latency above 100 ms is HTTP + server + client overhead",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    print(f"{args.hosts} hosts x {args.calls} calls, {args.latency_ms:g} ms each, 1 in flight/host")
    print(f"  ideal makespan : {ideal:.3f} s")
    print(f"  measured       : {', '.join(f'{m:.3f}' for m in makespans)} s")
    print(f"  ratio (median) : {result['ratio_median_to_ideal']}  (goal <= 1.15)")
    print(f"  raw httpx, same requests and pattern: {', '.join(f'{m:.3f}' for m in raw)} s"
          f" -> ratio {result['raw_httpx_ratio_to_ideal']}")
    print(f"  simulate (real 100 ms sleeps, no sockets): "
          f"{', '.join(f'{m:.3f}' for m in simulated)} s"
          f" -> ratio {result['simulate_real_time_ratio_to_ideal']}")
    print(f"  mean call latency {result['mean_call_latency_ms']} ms, "
          f"p99 {result['p99_call_latency_ms']} ms")
    if args.save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(f"-> {RESULTS}")


if __name__ == "__main__":
    main()
