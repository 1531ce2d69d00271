"""Probe throughput against the sandbox with zero injected latency, and its ratio to raw async
httpx (httpx.AsyncClient, same concurrency) on the same calls, in one run.

The sandbox (calm profile, latency_scale 0) runs in its own process. realprobe probes every
catalogue tool --rounds times with politeness off and --concurrency calls in flight, writing
one committed SQLite row per call (WAL) - the real `realprobe probe` path. The raw baseline
sends the same requests (same sandbox URLs and query strings) through one httpx.AsyncClient
with a semaphore of the same size and reads each body. Both paths are warmed up, runs
alternate in order, and medians are reported.

    python bench/probe_throughput.py [--rounds 20] [--concurrency 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from realprobe import PolitenessConfig, run_probes
from realprobe.adapters.catalog import Catalog, default_catalog
from realprobe.clients import TransportOptions, make_client
from realprobe.http.client import ClientConfig
from realprobe.probes.runner import plan_calls
from realprobe.store import Store

RESULTS = Path(__file__).resolve().parent / "results" / "probe_throughput.json"


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


@contextmanager
def sandbox_process(
    profile: str, latency_scale: float, catalog: Path | None = None
) -> Iterator[str]:
    port = free_port()
    cmd = [sys.executable, "-m", "realprobe.cli", "sandbox", "--port", str(port),
           "--profile", profile, "--latency-scale", str(latency_scale)]
    if catalog is not None:
        cmd += ["--catalog", str(catalog)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"sandbox exited: {proc.stderr.read() if proc.stderr else ''}")
            try:
                if httpx.get(url + "/_health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > end:
                raise RuntimeError("sandbox did not start within 30 s")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


def sandbox_requests(
    cat: Catalog, sandbox: str, rounds: int
) -> list[tuple[str, str, dict[str, str]]]:
    """The requests realprobe will send, addressed to the sandbox as the SandboxRouter does."""
    out = []
    for call in plan_calls(list(cat), rounds):
        method, url, params = call.tool.build_request(call.tool.validate_args(call.args))
        path = httpx.URL(url).raw_path.decode()
        out.append((method, f"{sandbox}/{call.tool.api_id}{path}", params))
    return out


async def raw_httpx(reqs: list[tuple[str, str, dict[str, str]]], concurrency: int) -> float:
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=50)
    async with httpx.AsyncClient(limits=limits, timeout=10) as client:

        async def one(method: str, url: str, params: dict[str, str]) -> int:
            async with sem:
                r = await client.request(method, url, params=params or None)
                await r.aread()
                return r.status_code

        t0 = time.perf_counter()
        statuses = await asyncio.gather(*(one(*r) for r in reqs))
        elapsed = time.perf_counter() - t0
    assert all(s == 200 for s in statuses), set(statuses)
    return elapsed


async def realprobe_run(cat: Catalog, sandbox: str, rounds: int, concurrency: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db")
        client = make_client(cat, TransportOptions(sandbox=sandbox), config=ClientConfig())
        try:
            t0 = time.perf_counter()
            summary = await run_probes(
                cat, None, rounds, client, store, politeness=PolitenessConfig.off(),
                concurrency=concurrency, target=sandbox, vantage="bench",
            )
            elapsed = time.perf_counter() - t0
        finally:
            await client.aclose()
            store.close()
    assert summary.n_ok == summary.n_calls == rounds * len(cat), summary.model_dump()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--save", action="store_true", help="write bench/results/ (otherwise only print)"
    )
    args = ap.parse_args()
    cat = default_catalog()
    n = args.rounds * len(cat)
    rp_times: list[float] = []
    raw_times: list[float] = []
    with sandbox_process("calm", 0.0) as url:
        reqs = sandbox_requests(cat, url, args.rounds)
        # warm up both paths (sandbox, imports, pydantic models), then alternate the order
        asyncio.run(raw_httpx(reqs[: len(cat)], args.concurrency))
        asyncio.run(realprobe_run(cat, url, 1, args.concurrency))
        for i in range(args.repeats):
            if i % 2:
                raw_times.append(asyncio.run(raw_httpx(reqs, args.concurrency)))
            rp_times.append(asyncio.run(realprobe_run(cat, url, args.rounds, args.concurrency)))
            if not i % 2:
                raw_times.append(asyncio.run(raw_httpx(reqs, args.concurrency)))
    rp = statistics.median(rp_times)
    raw = statistics.median(raw_times)
    result = {
        "benchmark": "probe_throughput",
        "calls": n,
        "tools": len(cat),
        "rounds": args.rounds,
        "concurrency": args.concurrency,
        "repeats": args.repeats,
        "realprobe_s": [round(t, 3) for t in rp_times],
        "raw_httpx_s": [round(t, 3) for t in raw_times],
        "realprobe_calls_per_s": round(n / rp, 1),
        "raw_httpx_calls_per_s": round(n / raw, 1),
        "throughput_ratio_realprobe_to_raw": round(raw / rp, 3),
        "notes": "sandbox calm, latency_scale 0, own process; realprobe: politeness off, "
        "one committed SQLite row per call (WAL); raw: httpx.AsyncClient + semaphore, body read",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    print(f"{n} calls, concurrency {args.concurrency}, median of {args.repeats}:")
    print(f"  realprobe probe : {result['realprobe_calls_per_s']:8.1f} calls/s")
    print(f"  raw httpx async : {result['raw_httpx_calls_per_s']:8.1f} calls/s")
    print(f"  ratio (realprobe / raw throughput): {result['throughput_ratio_realprobe_to_raw']}")
    if args.save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(f"-> {RESULTS}")


if __name__ == "__main__":
    main()
