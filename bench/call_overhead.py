"""Call overhead: N sequential realprobe tool calls vs N raw httpx.Client.get calls, one run,
same loopback sandbox (calm profile, no injected latency). Also: simulate-transport rate.

    python bench/call_overhead.py [--n 2000]
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

from realprobe.adapters import Catalog, call_tool, call_tool_sync, default_catalog
from realprobe.clients import TransportOptions, make_client, make_sync_client

TOOL = "uselessfacts_random"


def raw_sync(url: str, n: int) -> float:
    with httpx.Client() as client:
        client.get(url)
        t0 = time.perf_counter()
        for _ in range(n):
            r = client.get(url)
            r.json()
        return time.perf_counter() - t0


async def raw_async(url: str, n: int) -> float:
    async with httpx.AsyncClient() as client:
        await client.get(url)
        t0 = time.perf_counter()
        for _ in range(n):
            r = await client.get(url)
            r.json()
        return time.perf_counter() - t0


async def realprobe_async_calls(sandbox: str, n: int, *, routed: bool) -> float:
    """`call_tool` over the async client: through sandbox routing, or with the loopback
    server as the tool's own base URL (the plain live transport, as a user catalogue gets)."""
    cat = default_catalog() if routed else _mirror_catalog(sandbox)
    tool = cat.get(TOOL)
    client = make_client(cat, TransportOptions(sandbox=sandbox) if routed else TransportOptions())
    args = dict(tool.examples[0])
    try:
        await call_tool(tool, args, client)
        t0 = time.perf_counter()
        for _ in range(n):
            r = await call_tool(tool, args, client)
            assert r.ok, r.summary()
        return time.perf_counter() - t0
    finally:
        await client.aclose()


def _mirror_catalog(sandbox: str) -> Catalog:
    api = default_catalog().get(TOOL).api
    return Catalog(
        [api.model_copy(update={"base_url": sandbox + "/" + api.id + httpx.URL(api.base_url).path})]
    )


def realprobe_sync_calls(sandbox: str, n: int, *, routed: bool) -> float:
    """`call_tool_sync` over the sync client: through sandbox routing, or with the loopback
    server as the tool's own base URL (the plain live transport)."""
    cat = default_catalog() if routed else _mirror_catalog(sandbox)
    tool = cat.get(TOOL)
    opts = TransportOptions(sandbox=sandbox) if routed else TransportOptions()
    args = dict(tool.examples[0])
    with make_sync_client(cat, opts) as client:
        call_tool_sync(tool, args, client)
        t0 = time.perf_counter()
        for _ in range(n):
            r = call_tool_sync(tool, args, client)
            assert r.ok, r.summary()
        return time.perf_counter() - t0


async def simulate_calls(n: int) -> float:
    cat = default_catalog()
    tools = list(cat)
    client = make_client(cat, TransportOptions(profile="published", seed=1))
    try:
        t0 = time.perf_counter()
        for i in range(n):
            t = tools[i % len(tools)]
            await call_tool(t, dict(t.examples[0]), client)
        return time.perf_counter() - t0
    finally:
        await client.aclose()


@contextlib.contextmanager
def sandbox_process() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "sandbox", "--port", "0", "--latency-scale", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
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
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--save", action="store_true", help="write bench/results/ (otherwise only print)"
    )
    n = ap.parse_args().n
    repeats = ap.parse_args().repeats
    cat = default_catalog()
    tool = cat.get(TOOL)
    # the server runs in its own process, so client and server do not share one GIL
    with sandbox_process() as url:
        _method, canonical, params = tool.build_request(tool.validate_args(dict(tool.examples[0])))
        raw_url = str(httpx.URL(url + "/" + tool.api_id + httpx.URL(canonical).path, params=params))
        rows = []
        for _ in range(repeats):  # interleaved, so drift in machine load hits all alike
            rows.append(
                (
                    raw_sync(raw_url, n),
                    asyncio.run(raw_async(raw_url, n)),
                    asyncio.run(realprobe_async_calls(url, n, routed=True)),
                    asyncio.run(realprobe_async_calls(url, n, routed=False)),
                    realprobe_sync_calls(url, n, routed=False),
                    realprobe_sync_calls(url, n, routed=True),
                )
            )
    best = [min(col) for col in zip(*rows, strict=True)]
    t_sim = asyncio.run(simulate_calls(n * 5))
    result = {
        "n": n,
        "repeats": repeats,
        "raw_httpx_sync_per_s": n / best[0],
        "raw_httpx_async_per_s": n / best[1],
        "realprobe_sync_live_transport_per_s": n / best[4],
        "realprobe_sync_sandbox_routing_per_s": n / best[5],
        "ratio_sync_live_vs_raw_sync": best[0] / best[4],
        "ratio_sync_routing_vs_raw_sync": best[0] / best[5],
        "realprobe_sandbox_routing_per_s": n / best[2],
        "realprobe_live_transport_per_s": n / best[3],
        "ratio_live_vs_raw_sync": best[0] / best[3],
        "ratio_live_vs_raw_async": best[1] / best[3],
        "ratio_routing_vs_raw_sync": best[0] / best[2],
        "ratio_routing_vs_raw_async": best[1] / best[2],
        "simulate_calls_per_s": n * 5 / t_sim,
        "python": platform.python_version(),
        "machine": f"{platform.machine()} {platform.processor()}".strip(),
    }
    print(json.dumps(result, indent=2))
    if ap.parse_args().save:
        out = Path(__file__).parent / "results" / "call_overhead.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
