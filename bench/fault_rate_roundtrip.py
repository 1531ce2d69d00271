"""The fault-rate dial through every door that takes it: the failure share a client sees over
N calls against the rate asked, per door, rate and seed, with the share's 95 % interval.

Doors (each seed a fresh target; one tool called N times, each failure as the caller sees it:
an `isError` result, a JSON-RPC error, an HTTP or transport failure):

- `simulator`: `options(profile="published", fault_rate=)` in process (the dial keeps its
  burst chain), tool jsonplaceholder_post;
- `simulator_day_effect`: the same on a profile with a day-to-day effect (logit sd 0.8, as
  `calibrate` writes when days differ);
- `sandbox`: `make_sandbox(fault_rate=)` (calm, as `options(fault_rate=)` alone), a client
  with a 0.2 s read timeout (hangs);
- `mcp_proxy`: `realprobe mcp proxy --fault-rate` in front of mcp-server-time (`--timeout
  0.5`: hangs held that long, and the server's own answers awaited that long, so a slow
  answer under load is no extra failure), an SDK client calling get_current_time;
- `mcp_replay`: `realprobe mcp replay --fault-rate` of a clean recorded session of N calls;
- `evaluate`: `realprobe.evaluate(agent, tasks, mcp_server=, fault_rate=)`, 10 tasks each
  calling get_current_time N/10 times once per step (no retry); its profile's mix has no
  TIMEOUT (the client's read timeout also bounds the handshake, so hangs would need seconds
  each; the proxy door measures hangs).

The interval is the one `realprobe stats` quotes: Wilson on the burst chain's effective n,
rho from the calls' own transitions (`burst_adjusted95`); plain Wilson is kept beside it.

    python bench/fault_rate_roundtrip.py [--calls 400] [--seeds 3] [--doors a,b] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from benchlib import emit, load_average

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TIME = shutil.which("mcp-server-time") or str(BIN / "mcp-server-time")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
RATES = (0.1, 0.3, 0.5, 0.9)
TOOL = "jsonplaceholder_post"
UTC = {"timezone": "UTC"}
NO_HANG = {"format": "realprobe-profile/1", "name": "no-hang", "default": {
    "success_rate": 1.0, "errors": {"SERVER_ERROR": 0.4, "RATE_LIMIT_ERROR": 0.3,
                                    "NETWORK_ERROR": 0.3}, "latency_ms": {"p50": 5}}}
DAY = {"format": "realprobe-profile/1", "name": "day-effect", "default": {
    "success_rate": 0.8, "errors": {"SERVER_ERROR": 1.0}, "daily_logit_sd": 0.8,
    "latency_ms": {"p50": 50}}}

Door = Callable[[float, int, int, Path], list[bool]]


def intervals(failed: list[bool]) -> dict[str, Any]:
    """The failure share with plain Wilson and the interval `stats` quotes (burst-adjusted)."""
    from realprobe.probes.stats import burst_chain, chain_rho, success_stats, wilson

    fail = np.array(failed, dtype=bool)
    n, k = len(failed), int(fail.sum())
    rho, _, _ = chain_rho(burst_chain(fail, np.arange(n, dtype=float)), None)
    ok = success_stats(n, n - k, rho)
    lo, hi = ok.quoted95
    return {"n": n, "failed": k, "share": round(k / n, 4), "rho": None if rho is None
            else round(rho, 3), "wilson95": [round(x, 4) for x in wilson(k, n)],
            "quoted95": [round(1 - hi, 4), round(1 - lo, 4)]}


async def _http_calls(opts: Any, n: int, config: Any = None) -> list[bool]:
    from realprobe.adapters import call_tool, default_catalog
    from realprobe.clients import make_client

    cat = default_catalog()
    tool = cat.get(TOOL)
    client = make_client(cat, opts, config=config)
    try:
        return [not (await call_tool(tool, dict(tool.examples[0]), client)).ok
                for _ in range(n)]
    finally:
        await client.aclose()


def simulator(rate: float, seed: int, n: int, tmp: Path,
              profile: str = "published") -> list[bool]:
    import realprobe

    return asyncio.run(_http_calls(realprobe.options(fault_rate=rate, seed=seed,
                                                     profile=profile), n))


def simulator_day_effect(rate: float, seed: int, n: int, tmp: Path) -> list[bool]:
    path = tmp / "day.json"
    path.write_text(json.dumps(DAY))
    return simulator(rate, seed, n, tmp, str(path))


def sandbox(rate: float, seed: int, n: int, tmp: Path) -> list[bool]:
    import realprobe
    from realprobe.http.client import ClientConfig
    from realprobe.sandbox.server import running

    sb = realprobe.make_sandbox("calm", seed=seed, latency_scale=0.0, fault_rate=rate)
    with running(sb) as url:
        return asyncio.run(_http_calls(realprobe.options(sandbox=url), n, ClientConfig(
            read_timeout_s=0.2, deadline_s=0.5)))


async def _mcp_calls(args: list[str], n: int) -> list[bool]:
    from mcp import Client, MCPError, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "realprobe.cli", *args],
                                   env=ENV)
    out = []
    async with Client(params, read_timeout_seconds=30) as c:
        for _ in range(n):
            try:
                out.append(bool((await c.call_tool("get_current_time", UTC)).is_error))
            except MCPError:
                out.append(True)
    return out


def mcp_proxy(rate: float, seed: int, n: int, tmp: Path) -> list[bool]:
    return asyncio.run(_mcp_calls(["mcp", "proxy", "--fault-rate", str(rate), "--seed",
                                   str(seed), "--timeout", "0.5", "--", TIME], n))


def mcp_replay(rate: float, seed: int, n: int, tmp: Path) -> list[bool]:
    cassette = tmp / f"clean-{n}.jsonl"
    if not cassette.exists():
        clean = asyncio.run(_mcp_calls(["mcp", "proxy", "--record", str(cassette), "--",
                                        TIME], n))
        assert not any(clean), "the recorded session is not clean"
    return asyncio.run(_mcp_calls(["mcp", "replay", str(cassette), "--fault-rate", str(rate),
                                   "--seed", str(seed), "--timeout", "0.5"], n))


def evaluate(rate: float, seed: int, n: int, tmp: Path) -> list[bool]:
    import realprobe

    per_task = -(-n // 10)
    profile = tmp / "no-hang.json"
    profile.write_text(json.dumps(NO_HANG))

    async def agent(prompt: str, box: Any) -> str:
        for _ in range(per_task):
            await box.call("get_current_time", UTC)
        return "done"

    tasks = [{"id": f"t{i}", "prompt": "What time is it?", "expect": {"answer_contains": ["done"]}}
             for i in range(10)]
    runs = realprobe.evaluate(agent, tasks, mcp_server=TIME, profile=str(profile),
                              fault_rate=rate, seed=seed)
    return [not c.ok for r in runs for c in r.calls]


DOORS: dict[str, Door] = {"simulator": simulator, "simulator_day_effect": simulator_day_effect,
                          "sandbox": sandbox, "mcp_proxy": mcp_proxy, "mcp_replay": mcp_replay,
                          "evaluate": evaluate}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--doors", default=",".join(DOORS))
    ap.add_argument("--save", action="store_true", help="write bench/results/")
    args = ap.parse_args()
    load = load_average()
    out: dict[str, Any] = {"calls": args.calls, "seeds": list(range(args.seeds)),
                           "rates": list(RATES), "doors": {}}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name in args.doors.split(","):
            t0 = time.perf_counter()
            cells = {}
            for rate in RATES:
                per_seed = [intervals(DOORS[name](rate, s, args.calls, tmp))
                            for s in range(args.seeds)]
                cells[f"{rate:g}"] = {
                    "seeds": per_seed,
                    "covered_quoted": sum(c["quoted95"][0] <= rate <= c["quoted95"][1]
                                          for c in per_seed),
                    "covered_wilson": sum(c["wilson95"][0] <= rate <= c["wilson95"][1]
                                          for c in per_seed),
                    "pooled_share": round(sum(c["failed"] for c in per_seed)
                                          / sum(c["n"] for c in per_seed), 4)}
                shares = " ".join(f"{c['share']:.3f}{c['quoted95']}" for c in per_seed)
                print(f"{name:>21} {rate:g}: {shares}", file=sys.stderr, flush=True)
            out["doors"][name] = {"rates": cells, "wall_s": round(time.perf_counter() - t0, 1)}
    out["covered"] = {k: [sum(c["covered_quoted"] for c in v["rates"].values()),
                          len(RATES) * args.seeds] for k, v in out["doors"].items()}
    emit(out, args.save, ROOT / "bench" / "results" / "fault_rate_roundtrip.json", load)


if __name__ == "__main__":
    main()
