"""Hostile servers: how long a call with a 3 s deadline takes against a server that drips its
headers, drips its body, or never answers (sync and async client), and what the bounded parser
costs on the worst bodies (200,000 nested `[`, a 400,000-character string, a 5 MB body).

    python bench/hostile_limits.py [--deadline 3] [--save]

Writes bench/results/hostile_limits.json only with --save.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from realprobe.adapters import Catalog, call_tool, call_tool_sync
from realprobe.adapters.bounded import load_json
from realprobe.clients import make_client, make_sync_client
from realprobe.errors import BadResponse

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from hostile_server import hostile, tool_name

SLOW = ("slow_headers", "slow_body", "silent")


def time_calls(catalog: Catalog, deadline: float) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with make_sync_client(catalog) as client:
        for case in SLOW:
            t0 = time.monotonic()
            r = call_tool_sync(catalog.get(tool_name(case)), {}, client, timeout_s=deadline)
            out.setdefault(case, {})["sync_s"] = time.monotonic() - t0
            assert r.error is not None and r.error.code.value == "TIMEOUT"

    async def run_async() -> None:
        client = make_client(catalog)
        try:
            for case in SLOW:
                t0 = time.monotonic()
                tool = catalog.get(tool_name(case))
                r = await call_tool(tool, {}, client, timeout_s=deadline)
                out[case]["async_s"] = time.monotonic() - t0
                assert r.error is not None and r.error.code.value == "TIMEOUT"
        finally:
            await client.aclose()

    asyncio.run(run_async())
    return out


def parse_cost() -> dict[str, float]:
    bodies = {
        "nested_200k": b"[" * 200_000,
        "string_400k": b'{"fact": "' + b"a" * 400_000 + b'"}',
        "json_5mb_ok": json.dumps([{"fact": "x" * 90, "n": i} for i in range(50_000)]).encode(),
    }
    out: dict[str, float] = {}
    for name, body in bodies.items():
        t0 = time.perf_counter()
        with contextlib.suppress(BadResponse):
            load_json(body)
        out[f"{name}_ms"] = (time.perf_counter() - t0) * 1000
        out[f"{name}_bytes"] = len(body)
    t0 = time.perf_counter()
    json.loads(bodies["json_5mb_ok"])
    out["json_5mb_plain_json_loads_ms"] = (time.perf_counter() - t0) * 1000
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--deadline", type=float, default=3.0)
    ap.add_argument("--save", action="store_true")
    ns = ap.parse_args()
    with hostile(Path(tempfile.mkdtemp())) as (_, catalogue):
        catalog = Catalog.load([catalogue])
        calls = time_calls(catalog, ns.deadline)
    result = {
        "deadline_s": ns.deadline,
        "calls": calls,
        "worst_overrun_s": max(v - ns.deadline for c in calls.values() for v in c.values()),
        "parse": parse_cost(),
        "python": platform.python_version(),
        "machine": f"{platform.machine()} {platform.processor()}".strip(),
    }
    print(json.dumps(result, indent=2))
    if ns.save:
        out = Path(__file__).parent / "results" / "hostile_limits.json"
        out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
