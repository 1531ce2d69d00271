"""MCP overhead: the same tool called N times directly (call_tool), through the MCP server in
process (SDK Client), over stdio (`realprobe mcp` subprocess) and over streamable HTTP on
loopback; all against one loopback sandbox (calm profile, no injected latency). Also
concurrent calls over HTTP.

    python bench/mcp_overhead.py [--n 300] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from realprobe.adapters import call_tool, default_catalog
from realprobe.clients import TransportOptions, make_client
from realprobe.http.simulate import routes_from_catalog
from realprobe.mcp import McpService, ServiceOptions
from realprobe.sandbox.server import Sandbox, running
from realprobe.simulator.profile import load_profile

TOOL = "advice_random"


async def timed(n: int, one: Callable[[], Awaitable[Any]]) -> list[float]:
    await one()  # warm-up
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await one()
        out.append((time.perf_counter() - t0) * 1000)
    return out


async def direct(url: str, n: int) -> list[float]:
    cat = default_catalog()
    tool = cat.get(TOOL)
    client = make_client(cat, TransportOptions(sandbox=url))
    try:
        return await timed(n, lambda: call_tool(tool, {}, client))
    finally:
        await client.aclose()


async def in_process(url: str, n: int) -> list[float]:
    service = McpService(default_catalog(), ServiceOptions(transport=TransportOptions(sandbox=url)))
    async with service, Client(service.server) as client:
        return await timed(n, lambda: client.call_tool(TOOL, {}))


async def stdio(url: str, n: int) -> list[float]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "realprobe.cli", "mcp", "--sandbox", url]
    )
    async with Client(params) as client:
        return await timed(n, lambda: client.call_tool(TOOL, {}))


def start_http(url: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "mcp", "--transport", "http", "--port", "0",
         "--sandbox", url],
        stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    return proc, line.rsplit(" on ", 1)[1].strip()


async def http(mcp_url: str, n: int) -> list[float]:
    async with Client(mcp_url) as client:
        return await timed(n, lambda: client.call_tool(TOOL, {}))


async def http_concurrent(mcp_url: str, n: int, concurrency: int) -> float:
    """Calls per second with `concurrency` calls in flight on one client session."""
    async with Client(mcp_url) as client:
        await client.call_tool(TOOL, {})
        sem = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with sem:
                r = await client.call_tool(TOOL, {})
                assert not r.is_error

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return n / (time.perf_counter() - t0)


def summary(ms: list[float]) -> dict[str, float]:
    qs = statistics.quantiles(ms, n=100)
    return {
        "mean_ms": round(statistics.fmean(ms), 3),
        "p50_ms": round(qs[49], 3),
        "p95_ms": round(qs[94], 3),
        "calls_per_s": round(1000 / statistics.fmean(ms), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument(
        "--save", action="store_true", help="write bench/results/ (otherwise only print)"
    )
    a = ap.parse_args()
    cat = default_catalog()
    sb = Sandbox(routes_from_catalog(cat), load_profile("calm"), latency_scale=0.0)
    results: dict[str, Any] = {"n": a.n, "tool": TOOL, "python": platform.python_version()}
    with running(sb) as url:
        results["direct_call_tool"] = summary(asyncio.run(direct(url, a.n)))
        results["mcp_in_process"] = summary(asyncio.run(in_process(url, a.n)))
        results["mcp_stdio"] = summary(asyncio.run(stdio(url, a.n)))
        proc, mcp_url = start_http(url)
        try:
            results["mcp_http"] = summary(asyncio.run(http(mcp_url, a.n)))
            results["mcp_http_concurrent"] = {
                "concurrency": a.concurrency,
                "calls_per_s": round(
                    asyncio.run(http_concurrent(mcp_url, a.n, a.concurrency)), 1
                ),
            }
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    base = results["direct_call_tool"]["mean_ms"]
    for key in ("mcp_in_process", "mcp_stdio", "mcp_http"):
        results[key]["overhead_ms_vs_direct"] = round(results[key]["mean_ms"] - base, 3)
    for key, val in results.items():
        print(f"{key:22} {val}")
    if a.save:
        out = Path(__file__).parent / "results" / "mcp_overhead.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
