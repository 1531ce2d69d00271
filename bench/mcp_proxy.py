"""realprobe in front of real MCP servers: proxy overhead, replay speed, fault shares, and
calibrated profiles round-tripping through the proxy.

1. overhead: `convert_time` on mcp-server-time, N calls in one SDK session, direct vs through
   `realprobe mcp proxy --profile calm` (and with --db); median and mean per call, ratio;
2. replay: the proxied session recorded (--record), then `realprobe mcp replay`: per call;
3. fault shares: --fault-rate 0.1 and 0.5 (seed 7), N calls each: the injected share the
   rows say and the failed share the client saw, against the rate asked;
4. round trip: 200 probes each of mcp-server-time (some arguments invalid: the server's own
   failures) and mcp-server-git (some revisions missing) -> `calibrate` -> that profile in
   the proxy in front of the same server called with valid arguments only, N calls: the
   success seen against the profile's interval.

    python bench/mcp_proxy.py [--n 200] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import emit, load_average
from mcp import Client, MCPError, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TIME = shutil.which("mcp-server-time") or str(BIN / "mcp-server-time")
GIT = shutil.which("mcp-server-git") or str(BIN / "mcp-server-git")
CONVERT = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def realprobe(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "realprobe.cli", *args],
                                 env=ENV)


async def calls(params: StdioServerParameters, n: int, tool: str, args: dict[str, Any],
                read_timeout: float = 30.0) -> tuple[list[float], int]:
    """Per-call seconds (after one warm-up call) and how many calls failed."""
    times, failed = [], 0
    async with Client(params, read_timeout_seconds=read_timeout) as c:
        with contextlib.suppress(MCPError):  # the warm-up may meet a fault too
            await c.call_tool(tool, args)
        for _ in range(n):
            t0 = time.perf_counter()
            try:
                r = await c.call_tool(tool, args)
                failed += bool(r.is_error)
            except MCPError:
                failed += 1
            times.append(time.perf_counter() - t0)
    return times, failed


def per_call(times: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(times) * 1000, 3),
            "mean_ms": round(statistics.fmean(times) * 1000, 3)}


def injected_share(db: Path) -> float:
    con = sqlite3.connect(db)
    rows = con.execute("SELECT detail FROM probes").fetchall()
    con.close()
    # the first call (warm-up) is a row too
    return round(sum(str(d or "").startswith("injected") for (d,) in rows) / len(rows), 4)


async def alternating(sessions: dict[str, StdioServerParameters], n: int, tool: str,
                      args: dict[str, Any]) -> dict[str, list[float]]:
    """The sessions open side by side, called in turn (one call each, N rounds), so load
    from other work on shared cores falls on all of them alike."""
    from contextlib import AsyncExitStack

    times: dict[str, list[float]] = {k: [] for k in sessions}
    async with AsyncExitStack() as stack:
        clients = {k: await stack.enter_async_context(Client(p, read_timeout_seconds=30))
                   for k, p in sessions.items()}
        for c in clients.values():
            await c.call_tool(tool, args)  # warm-up
        for _ in range(n):
            for k, c in clients.items():
                t0 = time.perf_counter()
                await c.call_tool(tool, args)
                times[k].append(time.perf_counter() - t0)
    return times


async def overhead(n: int, tmp: Path) -> dict[str, Any]:
    times = await alternating({
        "direct": StdioServerParameters(command=TIME, env=ENV),
        "proxy": realprobe("mcp", "proxy", "--profile", "calm", "--", TIME),
        "proxy_with_db": realprobe("mcp", "proxy", "--profile", "calm", "--db",
                                   str(tmp / "o.db"), "--", TIME),
    }, n, "convert_time", CONVERT)
    d, p, s = (per_call(times[k]) for k in ("direct", "proxy", "proxy_with_db"))
    return {"n": n, "direct": d, "proxy": p, "proxy_with_db": s,
            "ratio_median": round(p["median_ms"] / d["median_ms"], 3),
            "ratio_mean": round(p["mean_ms"] / d["mean_ms"], 3),
            "ratio_median_with_db": round(s["median_ms"] / d["median_ms"], 3),
            "goal": "<= 1.5x, aim 1.1x"}


async def replay(n: int, tmp: Path) -> dict[str, Any]:
    """The proxied session recorded, then its replay and a live proxied session called in
    turn (as for the overhead)."""
    cassette = tmp / "session.jsonl"
    await calls(realprobe("mcp", "proxy", "--record", str(cassette), "--", TIME), n,
                "convert_time", CONVERT)
    times = await alternating({
        "live_through_proxy": realprobe("mcp", "proxy", "--", TIME),
        "replay": realprobe("mcp", "replay", str(cassette)),
    }, n, "convert_time", CONVERT)
    lv, rp = per_call(times["live_through_proxy"]), per_call(times["replay"])
    return {"n": n, "live_through_proxy": lv, "replay": rp,
            "speedup_median": round(lv["median_ms"] / rp["median_ms"], 3)}


def model_share(rate: float, draws: int = 20_000) -> float:
    """The failure share the fault model itself draws at this dial (no server)."""
    from realprobe.simulator.faults import FaultModel
    from realprobe.simulator.profile import load_profile

    model = FaultModel(load_profile("calm").scaled(rate), 7)
    return round(sum(not model.draw("convert_time").ok for _ in range(draws)) / draws, 4)


def wilson(k: int, n: int, z: float = 1.96) -> list[float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return [round(centre - half, 4), round(centre + half, 4)]


async def fault_shares(n: int, tmp: Path) -> dict[str, Any]:
    out = {}
    for rate in (0.1, 0.5):
        db = tmp / f"f{rate}.db"
        _, failed = await calls(realprobe(
            "mcp", "proxy", "--fault-rate", str(rate), "--seed", "7", "--db", str(db),
            "--timeout", "0.5", "--", TIME), n, "convert_time", CONVERT)
        out[str(rate)] = {"asked": rate, "injected_share_rows": injected_share(db),
                          "failed_share_client": round(failed / n, 4),
                          "failed_share_wilson95": wilson(failed, n), "n": n,
                          "model_share_20000_draws": model_share(rate)}
    return out


def _probe(calls_file: dict[str, Any], server: list[str], n_rounds: int, db: Path) -> Any:
    from realprobe.api_mcp import probe_mcp

    return probe_mcp(calls_file, mcp_server=server, rounds=n_rounds, db=db, timeout=10)


async def round_trip(n: int, tmp: Path) -> dict[str, Any]:
    from realprobe import calibrate

    repo = tmp / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    for i in range(3):
        subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=t", "commit", "-q",
                        "--allow-empty", "-m", f"commit {i}"], cwd=repo, check=True)
    servers = {
        # one argument set in ten is invalid: the server's own failures
        "mcp-time": ([TIME], "get_current_time",
                     [{"timezone": "Europe/Paris"}] * 9 + [{"timezone": "No/Where"}],
                     {"timezone": "Europe/Paris"}),
        "mcp-git": ([GIT, "--repository", str(repo)], "git_show",
                    [{"repo_path": str(repo), "revision": "HEAD"}] * 9
                    + [{"repo_path": str(repo), "revision": "no-such-revision"}],
                    {"repo_path": str(repo), "revision": "HEAD"}),
    }
    out = {}
    for name, (argv, tool, mix, valid) in servers.items():
        db = tmp / f"{name}.db"
        t0 = time.perf_counter()
        await asyncio.to_thread(_probe, {tool: mix}, argv, 200, db)
        probe_s = time.perf_counter() - t0
        profile = calibrate(db)
        path = tmp / f"{name}.profile.json"
        profile.save(path)
        tp = profile.tools[tool]
        rdb = tmp / f"{name}.replayed.db"
        _, failed = await calls(realprobe("mcp", "proxy", "--profile", str(path), "--seed", "1",
                                          "--db", str(rdb), "--timeout", "0.5", "--", *argv),
                                n, tool, valid)
        seen = 1 - failed / n
        lo, hi = tp.success_ci95 or (tp.success_rate, tp.success_rate)
        out[name] = {"probes": 200, "probe_seconds": round(probe_s, 1),
                     "calibrated_success": round(tp.success_rate, 4),
                     "success_ci95": [round(lo, 4), round(hi, 4)],
                     "errors": {k.value: round(v, 3) for k, v in tp.errors.items()},
                     "replayed_calls": n, "replayed_success": round(seen, 4),
                     "within_interval": lo <= seen <= hi}
    return out


async def main(n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        return {"overhead": await overhead(n, tmp), "replay": await replay(n, tmp),
                "fault_shares": await fault_shares(n, tmp),
                "calibrated_round_trip": await round_trip(n, tmp)}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--save", action="store_true")
    a = ap.parse_args()
    before = load_average()
    result = asyncio.run(main(a.n))
    result["python"] = sys.version.split()[0]
    emit(result, a.save, ROOT / "bench" / "results" / "mcp_proxy.json", before)
    json.dumps(result)
