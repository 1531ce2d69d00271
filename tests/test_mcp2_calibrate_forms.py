"""Calibration learns how an MCP server fails (isError results or JSON-RPC errors, per tool,
and how long failures take) and the proxy serves it back: a round trip through a scripted
server whose split and latency are known."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_runner import main
from mcp import Client, MCPError, StdioServerParameters

from realprobe.probes.stats import wilson

ROOT = Path(__file__).resolve().parents[1]
SERVER = [sys.executable, str(ROOT / "tests" / "mcp2_scripted_server.py")]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
#: the scripted truth: 40% of calls fail, half of those as JSON-RPC errors, failures ~40 ms
#: (successes ~2 ms: twenty times quicker, so the learned failure latency is the failures' own)
FAIL, JSONRPC, ERROR_MS = 0.4, 0.5, 40.0
ROUNDS = 240


def cli(*args: str) -> None:
    """`realprobe <args>` in process, which must succeed. The probe hands the MCP server
    this process's stderr, so it runs under pytest's own capture (a real file), not
    click's test runner."""
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    assert exited.value.code == 0


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


async def test_an_isError_and_json_rpc_split_round_trips(tmp_path: Path) -> None:
    calls, db, profile = tmp_path / "calls.json", tmp_path / "probe.db", tmp_path / "p.json"
    calls.write_text(json.dumps({"lookup": {"key": "a"}}))
    scripted = " ".join([*SERVER, "--fail", str(FAIL), "--jsonrpc", str(JSONRPC), "--ok-ms",
                         "2", "--error-ms", str(ERROR_MS), "--sigma", "0.2", "--seed", "5"])
    # the command runs its own event loop: beside this test's, in a thread
    await asyncio.to_thread(cli, "probe", "--mcp-server", scripted, "--mcp-calls", str(calls),
                            "--rounds", str(ROUNDS), "--db", str(db))
    await asyncio.to_thread(cli, "calibrate", "--db", str(db), "-o", str(profile))
    learned = json.loads(profile.read_text())["tools"]["lookup"]
    forms = learned["mcp"]
    lo, hi = forms["jsonrpc_share_ci95"]
    assert lo <= JSONRPC <= hi  # the scripted split, inside the learned interval
    con = sqlite3.connect(db)
    try:
        (probed_failures,) = con.execute("SELECT count(*) FROM probes WHERE outcome = 'error'"
                                         ).fetchone()
    finally:
        con.close()
    assert forms["n"] == probed_failures > 0
    # the failures' latency: at least the scripted wait (the round trip only adds to it)
    assert forms["error_latency_ms"]["p50"] >= ERROR_MS * 0.8

    # the proxy, with the profile, in front of a server that never fails by itself
    rows_db = tmp_path / "proxy.db"
    params = StdioServerParameters(command=sys.executable, env=ENV, args=[
        "-m", "realprobe.cli", "mcp", "proxy", "--profile", str(profile), "--seed", "11",
        "--db", str(rows_db), "--", *SERVER])
    seen: list[str] = []
    async with Client(params, read_timeout_seconds=60, mode="legacy") as c:
        for _ in range(ROUNDS):
            try:
                got = await c.call_tool("lookup", {"key": "a"})
                seen.append("isError" if got.is_error else "ok")
            except MCPError:
                seen.append("jsonrpc")
    n_fail = seen.count("isError") + seen.count("jsonrpc")
    measured_success = wilson(seen.count("ok"), ROUNDS)
    measured_split = wilson(seen.count("jsonrpc"), n_fail)
    assert overlap(measured_success, tuple(learned["success_ci95"]))
    assert overlap(measured_split, (lo, hi))
    assert lo <= seen.count("jsonrpc") / n_fail <= hi

    con = sqlite3.connect(rows_db)
    try:
        failed: list[Any] = [ms for (ms,) in con.execute(
            "SELECT latency_ms FROM probes WHERE outcome = 'error' ORDER BY latency_ms")]
        kinds = {k for (k,) in con.execute(
            "SELECT DISTINCT target_kind FROM probes WHERE outcome = 'error'")}
    finally:
        con.close()
    assert len(failed) == n_fail and kinds == {"simulate"}
    # each injected failure waited its drawn latency: their median sits at the learned one
    assert failed[len(failed) // 2] >= forms["error_latency_ms"]["p50"] * 0.8


def test_request_methods_are_probed_and_calibrated_per_method(tmp_path: Path) -> None:
    calls, db, profile = tmp_path / "calls.json", tmp_path / "m.db", tmp_path / "m.json"
    calls.write_text(json.dumps({
        "lookup": {"key": "a"}, "tools/list": {}, "resources/read": {"uri": "note://hello"},
        "prompts/get": {"name": "greet", "arguments": {"name": "Ann"}}}))
    scripted = " ".join([*SERVER, "--fail", "0.5", "--jsonrpc", "1", "--seed", "3"])
    cli("probe", "--mcp-server", scripted, "--mcp-calls", str(calls), "--rounds", "12",
        "--db", str(db))
    cli("calibrate", "--db", str(db), "-o", str(profile))
    tools = json.loads(profile.read_text())["tools"]
    assert {"lookup", "tools/list", "resources/read", "prompts/get"} <= set(tools)
    assert tools["resources/read"]["success_rate"] == 1.0 and "mcp" not in tools["tools/list"]
    assert tools["lookup"]["mcp"]["jsonrpc_share"] == 1.0  # every failure a JSON-RPC error


def test_a_method_realprobe_does_not_probe_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = tmp_path / "calls.json"
    calls.write_text(json.dumps({"resources/read": {}}))
    with pytest.raises(SystemExit) as exited:
        main(["probe", "--mcp-server", " ".join(SERVER), "--mcp-calls", str(calls), "--db",
              str(tmp_path / "x.db")])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "resources/read needs uri" in err
    assert "Traceback" not in err
