"""Sandbox proxy mode: throughput through `realprobe sandbox --upstream URL` vs direct to the
same loopback upstream, no faults (calm profile, latency scale 0).

The upstream is a second realprobe sandbox in its own process, answering Agify's fixture;
the proxy runs in a third process; this process is the load (httpx, C requests in flight).
Cases: an upstream answering after 200 ms (about the median latency of the free APIs in the
catalogue, the case proxy mode is for: the proxy's cost hides behind the upstream's latency)
at 4 and at 16 requests in flight, one after 20 ms, and one at once (CPU-bound loopback: the
proxy's own cost per request against the upstream's, the worst case). Once the machine's CPU
is the limit, the proxy's hop (an HTTP server plus an HTTP client) costs about as much as the
upstream itself, so the ratio there measures CPU per request, not the proxy's latency.

    python bench/sandbox_proxy_throughput.py [--n 1500] [--concurrency 16] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

PATH = "/agify/?name=harry"
GOAL = 0.8


@contextlib.contextmanager
def sandbox_process(*args: str) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "sandbox", "--port", "0", "--latency-scale", "0",
         *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+", line)
        if not match:
            raise RuntimeError(f"sandbox did not start: {line!r}")
        yield match.group(0)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


async def load(url: str, n: int, concurrency: int) -> dict[str, float]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        for _ in range(concurrency):  # warm the connections
            (await client.get(url + PATH)).raise_for_status()
        left = n
        bodies: set[bytes] = set()

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                r = await client.get(url + PATH)
                r.raise_for_status()
                bodies.add(r.content)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - t0
    assert len(bodies) == 1, "proxy and upstream must answer the same bytes"
    return {"requests": n, "seconds": round(elapsed, 3), "rps": round(n / elapsed, 1)}


def measure(
    upstream_args: list[str], n: int, concurrency: int, repeats: int
) -> dict[str, object]:
    with sandbox_process(*upstream_args) as up, sandbox_process(
        "--upstream", up + "/{api}"
    ) as proxy:
        direct, proxied = [], []
        for _ in range(repeats):  # interleaved, so load on the machine hits both alike
            direct.append(asyncio.run(load(up, n, concurrency)))
            proxied.append(asyncio.run(load(proxy, n, concurrency)))
    best_direct = max(d["rps"] for d in direct)
    best_proxy = max(p["rps"] for p in proxied)
    return {
        "direct": direct,
        "proxy": proxied,
        "direct_rps": best_direct,
        "proxy_rps": best_proxy,
        "ratio": round(best_proxy / best_direct, 3),
        "concurrency": concurrency,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1500, help="requests per measurement")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--save", action="store_true", help="write bench/results/<name>.json")
    args = ap.parse_args()
    slow = ["--toxic", "latency:latency_ms=200"]
    cases: dict[str, tuple[list[str], int, int]] = {
        "upstream_200ms_c4": (slow, 4, max(100, args.n // 4)),
        "upstream_200ms": (slow, args.concurrency, args.n),
        "upstream_20ms": (["--toxic", "latency:latency_ms=20"], args.concurrency, args.n),
        "upstream_instant": ([], args.concurrency, args.n),
    }
    results = {}
    for name, (extra, conc, n) in cases.items():
        r = measure(extra, n, conc, args.repeats)
        results[name] = r
        print(
            f"{name:20s} direct {r['direct_rps']:8.1f} req/s   proxy {r['proxy_rps']:8.1f} req/s"
            f"   ratio {r['ratio']:.3f}  (goal >= {GOAL})"
        )
    out = {
        "bench": "sandbox_proxy_throughput",
        "what": "requests/s through `realprobe sandbox --upstream URL` (calm profile, no faults, "
        "latency scale 0) vs direct to the same loopback upstream (a realprobe sandbox in its "
        "own process); best of the interleaved repeats",
        "goal": f"proxy >= {GOAL} x direct",
        "n": args.n,
        "concurrency": args.concurrency,
        "repeats": args.repeats,
        "results": results,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
        },
    }
    if args.save:
        path = Path(__file__).parent / "results" / "sandbox_proxy_throughput.json"
        path.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
