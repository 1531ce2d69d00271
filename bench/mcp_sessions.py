"""MCP proxy, round two: overhead per call with 1 and 8 concurrent sessions, the fault share
and failure-form round trip, and replay speed in the pytest fixture.

1. overhead: the scripted server's `echo` tool (tests/mcp2_scripted_server.py, no wait of
   its own), N calls in all, each made direct and then through the proxy, back to back so
   both meet the same load: `realprobe mcp proxy --transport http` (each session its own
   upstream on stdio) against the server on streamable HTTP of its own, and the stdio proxy
   against the server on stdio; one session, then 8 sessions at once: per call median and
   p95 of each, and of (proxied - direct);
2. round trip: R probes of the scripted server failing 40% of calls (half as JSON-RPC
   errors, failures ~80 ms) -> `calibrate` -> that profile in the proxy in front of the same
   server scripted never to fail, R calls: success share, JSON-RPC share of failures and
   failure latency (the rows') against the truth and the calibrated intervals;
3. replay in the pytest fixture: a suite of one test making C calls through `mcp_server`,
   recorded once, then replayed (pytest run with the server command pointing nowhere):
   the replay run's wall time, and per call inside the test.

    python bench/mcp_sessions.py [--n 200] [--rounds 300] [--calls 100] [--save]
    (--rounds 0 or --calls 0 leaves that part out)
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import bench_args, emit, load_average
from mcp import Client, MCPError, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
SCRIPTED = [sys.executable, str(ROOT / "tests" / "mcp2_scripted_server.py")]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def q(values: list[float], p: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, max(0, math.ceil(p * len(s)) - 1))], 3)


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "median_ms": round(statistics.median(values), 3),
            "p95_ms": q(values, 0.95)}


async def paired_calls(direct: Any, proxied: Any, n: int) -> list[tuple[float, float]]:
    """n calls, each made direct and then proxied, back to back (so both meet the same load
    on a busy machine): (direct ms, proxied ms) per call."""
    out = []
    async with Client(direct, mode="legacy", cache=None, read_timeout_seconds=120) as d, \
            Client(proxied, mode="legacy", cache=None, read_timeout_seconds=120) as p:
        for c in (d, p):
            await c.call_tool("echo", {"text": "warm"})
        for i in range(n):
            pair = []
            for c in (d, p):
                t0 = time.perf_counter()
                await c.call_tool("echo", {"text": f"hello {i}"})
                pair.append((time.perf_counter() - t0) * 1000)
            out.append((pair[0], pair[1]))
    return out


async def concurrent(direct: Any, proxied: Any, sessions: int,
                     n: int) -> list[tuple[float, float]]:
    runs = await asyncio.gather(*(paired_calls(direct, proxied, n) for _ in range(sessions)))
    return [pair for run in runs for pair in run]


def compared(pairs: list[tuple[float, float]]) -> dict[str, Any]:
    extra = [p - d for d, p in pairs]
    return {"direct": summary([d for d, _ in pairs]), "proxied": summary([p for _, p in pairs]),
            "overhead_median_ms": round(statistics.median(extra), 3),
            "overhead_p95_ms": q(extra, 0.95)}


def http_proxy(*args: str) -> tuple[subprocess.Popen[str], str]:
    served = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "mcp", "proxy", "--transport", "http", "--port",
         "0", *args, "--", *SCRIPTED], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, env=ENV)
    assert served.stderr is not None
    line = served.stderr.readline()
    found = re.search(r"on (http://127\.0\.0\.1:\d+/mcp)", line)
    assert found, line
    return served, found.group(1)


def native_http() -> tuple[subprocess.Popen[str], str]:
    """The scripted server on streamable HTTP of its own (the SDK's server transport)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    served = subprocess.Popen([*SCRIPTED, "--http-port", str(port)], stdin=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, text=True, env=ENV)
    for _ in range(300):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return served, f"http://127.0.0.1:{port}/mcp"
        time.sleep(0.1)
    served.kill()
    raise SystemExit("the scripted server did not start on HTTP")


def overhead(n: int) -> dict[str, Any]:
    """Per call, proxied minus direct (each call made both ways back to back): the HTTP proxy
    (a stdio server behind it) against the same server on HTTP of its own, and the stdio
    proxy against the server on stdio."""
    direct = StdioServerParameters(command=SCRIPTED[0], args=SCRIPTED[1:], env=ENV)
    stdio_proxy = StdioServerParameters(command=sys.executable, env=ENV, args=[
        "-m", "realprobe.cli", "mcp", "proxy", "--", *SCRIPTED])
    out: dict[str, Any] = {}
    served, url = http_proxy()
    native, native_url = native_http()
    try:
        for sessions in (1, 8):
            per = max(10, n // sessions)
            out[f"{sessions}_sessions"] = {
                "http_proxy": compared(asyncio.run(concurrent(native_url, url, sessions, per))),
                "stdio_proxy": compared(asyncio.run(concurrent(direct, stdio_proxy, sessions,
                                                               per))),
            }
    finally:
        for proc in (served, native):
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    return out


def cli(*args: str) -> None:
    res = subprocess.run([sys.executable, "-m", "realprobe.cli", *args], capture_output=True,
                         text=True, env=ENV, timeout=1200, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        raise SystemExit(f"realprobe {' '.join(args[:2])} failed: {res.stderr.strip()}")


def wilson(k: int, n: int) -> tuple[float, float]:
    from realprobe.probes.stats import wilson as w

    lo, hi = w(k, n)
    return round(lo, 4), round(hi, 4)


def round_trip(rounds: int, tmp: Path) -> dict[str, Any]:
    truth = {"success": 0.6, "jsonrpc_share": 0.5, "error_ms": 80.0}
    calls, db, profile = tmp / "calls.json", tmp / "probe.db", tmp / "profile.json"
    calls.write_text(json.dumps({"lookup": {"key": "a"}}))
    scripted = " ".join([*SCRIPTED, "--fail", "0.4", "--jsonrpc", "0.5", "--ok-ms", "2",
                         "--error-ms", "80", "--sigma", "0.2", "--seed", "5"])
    cli("probe", "--mcp-server", scripted, "--mcp-calls", str(calls), "--rounds", str(rounds),
        "--db", str(db))
    cli("calibrate", "--db", str(db), "-o", str(profile))
    learned = json.loads(profile.read_text())["tools"]["lookup"]

    rows = tmp / "proxy.db"
    params = StdioServerParameters(command=sys.executable, env=ENV, args=[
        "-m", "realprobe.cli", "mcp", "proxy", "--profile", str(profile), "--seed", "11",
        "--db", str(rows), "--", *SCRIPTED])

    async def measure() -> list[str]:
        seen = []
        async with Client(params, mode="legacy", cache=None, read_timeout_seconds=60) as c:
            for _ in range(rounds):
                try:
                    got = await c.call_tool("lookup", {"key": "a"})
                    seen.append("isError" if got.is_error else "ok")
                except MCPError:
                    seen.append("jsonrpc")
        return seen

    seen = asyncio.run(measure())
    con = sqlite3.connect(rows)
    try:
        failed_ms = [ms for (ms,) in con.execute(
            "SELECT latency_ms FROM probes WHERE outcome = 'error'")]
    finally:
        con.close()
    n_fail = seen.count("isError") + seen.count("jsonrpc")
    forms = learned["mcp"]
    ok_share = seen.count("ok") / rounds
    split = seen.count("jsonrpc") / n_fail if n_fail else None
    return {
        "truth": truth,
        "calibrated": {"success_rate": round(learned["success_rate"], 4),
                       "success_ci95": learned.get("success_ci95"),
                       "jsonrpc_share": round(forms["jsonrpc_share"], 4),
                       "jsonrpc_share_ci95": forms["jsonrpc_share_ci95"],
                       "error_latency_p50_ms": forms["error_latency_ms"]["p50"]},
        "through_proxy": {"calls": rounds, "success_share": round(ok_share, 4),
                          "success_ci95": wilson(seen.count("ok"), rounds),
                          "jsonrpc_share": round(split, 4) if split is not None else None,
                          "jsonrpc_ci95": wilson(seen.count("jsonrpc"), n_fail)
                          if n_fail else None,
                          "failure_latency_median_ms": round(statistics.median(failed_ms), 3)
                          if failed_ms else None},
        "inside": {
            "success": bool(learned.get("success_ci95")
                            and learned["success_ci95"][0] <= ok_share
                            <= learned["success_ci95"][1]),
            "jsonrpc_share": split is not None and forms["jsonrpc_share_ci95"][0] <= split
            <= forms["jsonrpc_share_ci95"][1],
        },
    }


SUITE = '''
import asyncio, json, time
import pytest
from mcp import Client

@pytest.mark.mcp_cassette(server=SERVER)
def test_many_calls(mcp_server):
    async def run():
        async with Client(mcp_server.params, mode="legacy", cache=None) as c:
            await c.list_tools()
            t0 = time.perf_counter()
            for i in range(CALLS):
                await c.call_tool("echo", {"text": f"hello {i}"})
            return (time.perf_counter() - t0) * 1000
    ms = asyncio.run(run())
    with open("timing.json", "w") as fh:
        json.dump({"calls_ms": ms}, fh)
'''


def fixture_replay(calls: int, tmp: Path) -> dict[str, Any]:
    suite = tmp / "suite"
    suite.mkdir()
    test = suite / "test_agent.py"

    def run(server: list[str], *flags: str) -> tuple[float, float]:
        test.write_text(SUITE.replace("SERVER", repr(server)).replace("CALLS", str(calls)))
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "-p", "no:xdist", *flags, str(test)], cwd=suite, env=ENV,
                             capture_output=True, text=True, timeout=600)
        wall = time.perf_counter() - t0
        if res.returncode != 0:
            raise SystemExit(f"pytest failed: {res.stdout[-800:]}")
        inner = json.loads((suite / "timing.json").read_text())["calls_ms"]
        return wall, inner

    rec_wall, rec_ms = run(SCRIPTED, "--realprobe-record-mode=once")
    rep_wall, rep_ms = run(["/nonexistent/mcp-server"], "--realprobe-block-network")
    return {"calls": calls,
            "record_run": {"pytest_wall_s": round(rec_wall, 2),
                           "per_call_ms": round(rec_ms / calls, 3)},
            "replay_run": {"pytest_wall_s": round(rep_wall, 2),
                           "per_call_ms": round(rep_ms / calls, 3),
                           "calls_per_s": round(calls / (rep_ms / 1000), 1)}}


def main() -> None:
    a = bench_args(__doc__, n=200, rounds=300, calls=100)
    before = load_average()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        result = {"overhead": overhead(a.n)}
        if a.rounds:
            result["round_trip"] = round_trip(a.rounds, tmp)
        if a.calls:
            result["pytest_fixture_replay"] = fixture_replay(a.calls, tmp)
    emit(result, a.save, ROOT / "bench" / "results" / "mcp_sessions.json", before)


if __name__ == "__main__":
    main()
