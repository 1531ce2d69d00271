"""Faults on every request method a profile names (`tools/list`, `resources/read`, ...), with
`--fault-methods` choosing them; latency drawn for successes and failures alike; the
server's own notifications pass through and are recorded. Asserted by the drawn and recorded
values, never by the wall clock."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

from mcp import Client, MCPError, StdioServerParameters

from realprobe import FaultModel, load_cassette, load_profile

ROOT = Path(__file__).resolve().parents[1]
SCRIPTED = [sys.executable, str(ROOT / "tests" / "mcp2_scripted_server.py")]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def proxy(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, env=ENV, args=[
        "-m", "realprobe.cli", "mcp", "proxy", *args, "--", *SCRIPTED])


def write_profile(tmp_path: Path) -> Path:
    """resources/read always fails (SERVER_ERROR, ~40 ms); tools/list is slow (~300 ms);
    tool calls are fast and never fail."""
    path = tmp_path / "methods.json"
    path.write_text(json.dumps({
        "format": "realprobe-profile/1", "name": "methods",
        "default": {"success_rate": 1.0, "latency_ms": {"p50": 1, "p90": 2}},
        "tools": {
            "resources/read": {"success_rate": 0.0, "errors": {"SERVER_ERROR": 1.0},
                               "latency_ms": {"p50": 40, "p90": 60}},
            "tools/list": {"success_rate": 1.0, "latency_ms": {"p50": 300, "p90": 400}},
        }}))
    return path


def rows(db: Path) -> list[dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute("SELECT * FROM probes ORDER BY id")]
    finally:
        con.close()


async def a_session(params: StdioServerParameters) -> dict[str, Any]:
    seen: list[str] = []

    async def note(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if isinstance(method, str):
            seen.append(method)

    out: dict[str, Any] = {}
    async with Client(params, read_timeout_seconds=60, cache=None, message_handler=note,
                      mode="legacy") as c:
        out["tools"] = sorted(t.name for t in (await c.list_tools()).tools)
        try:
            await c.read_resource("note://hello")
            out["read"] = "ok"
        except MCPError as exc:
            out["read"] = exc.error.code
            out["read_label"] = (exc.error.data or {}).get("realprobe/fault")
        out["echo"] = (await c.call_tool("echo", {"text": "hi"})).content[0].text
        out["touch"] = (await c.call_tool("touch", {})).content[0].text
        out["prompt"] = (await c.get_prompt("greet", {"name": "Ann"})).messages[0].content.text
    out["notified"] = seen
    return out


async def test_a_profile_fails_resources_read_and_delays_tools_list(tmp_path: Path) -> None:
    profile, db, cassette = write_profile(tmp_path), tmp_path / "m.db", tmp_path / "m.jsonl"
    got = await a_session(proxy("--profile", str(profile), "--seed", "3", "--db", str(db),
                                "--record", str(cassette)))
    assert got["tools"] == ["count", "echo", "lookup", "touch"]
    assert got["read"] == -32603  # a JSON-RPC error: resources/read has no isError form
    assert got["read_label"]["origin"] == "injected"
    assert got["echo"] == "hi" and got["touch"] == "touched"
    assert got["prompt"] == "Greet Ann warmly."  # prompts/get is not named: relayed as is
    assert "notifications/tools/list_changed" in got["notified"]

    stored = {r["tool"]: r for r in rows(db)}
    assert set(stored) == {"tools/list", "resources/read", "echo", "touch"}
    model = FaultModel(load_profile(profile), 3)
    listing, read = model.draw("tools/list"), model.draw("resources/read")
    # tools/list: a success held to at least its drawn latency (the server was faster)
    assert stored["tools/list"]["outcome"] == "ok"
    assert stored["tools/list"]["latency_ms"] >= listing.latency_s * 1000 - 0.5
    assert stored["tools/list"]["target_kind"] == "simulate"
    assert "held to the drawn" in stored["tools/list"]["detail"]
    # resources/read: injected, answered after its drawn latency, never sent to the server
    assert (stored["resources/read"]["outcome"], stored["resources/read"]["error_code"]) == (
        "error", "SERVER_ERROR")
    assert stored["resources/read"]["latency_ms"] >= read.latency_s * 1000 - 0.5
    assert stored["resources/read"]["detail"].startswith("injected explicit-transient")

    records = load_cassette(cassette).records or []
    sent_up = [r["msg"].get("method") for r in records if r.get("dir") == "c2s"]
    assert "resources/read" in sent_up  # what the client sent is recorded
    injected = [r for r in records if r.get("injected")]
    assert len(injected) == 1 and injected[0]["msg"]["error"]["code"] == -32603
    notes = [r["msg"]["method"] for r in records
             if r.get("dir") == "s2c" and "method" in r.get("msg", {})]
    assert "notifications/tools/list_changed" in notes


async def test_fault_methods_chooses_the_methods(tmp_path: Path) -> None:
    profile, db = write_profile(tmp_path), tmp_path / "only-list.db"
    got = await a_session(proxy("--profile", str(profile), "--fault-methods", "tools/list",
                                "--db", str(db)))
    assert got["read"] == "ok"  # resources/read is not chosen: the server answers it
    assert {r["tool"] for r in rows(db)} == {"tools/list", "echo", "touch"}


def test_an_unknown_fault_method_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import subprocess

    res = subprocess.run([sys.executable, "-m", "realprobe.cli", "mcp", "proxy",
                          "--fault-methods", "tools/list,resources/explode", "--", *SCRIPTED],
                         capture_output=True, text=True, env=ENV, stdin=subprocess.DEVNULL,
                         timeout=120)
    assert res.returncode == 2
    assert "resources/explode" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1



async def count_with_progress(target: Any) -> tuple[list[float], str]:
    seen: list[float] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(done)

    async with Client(target, mode="legacy", cache=None, read_timeout_seconds=60) as c:
        got = await c.call_tool("count", {"steps": 3}, progress_callback=progress)
    return seen, got.content[0].text  # type: ignore[union-attr]


async def test_progress_passes_through_stdio_and_http_and_is_recorded(tmp_path: Path) -> None:
    import re
    import signal
    import subprocess

    profile, cassette = write_profile(tmp_path), tmp_path / "progress.jsonl"
    assert await count_with_progress(proxy("--profile", str(profile), "--record",
                                           str(cassette))) == ([1, 2, 3], "counted to 3")
    records = load_cassette(cassette).records or []
    assert [r["msg"]["params"]["progress"] for r in records if r.get("dir") == "s2c"
            and r["msg"].get("method") == "notifications/progress"] == [1, 2, 3]

    served = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "mcp", "proxy", "--transport", "http", "--port",
         "0", "--profile", str(profile), "--", *SCRIPTED], stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        assert served.stderr is not None
        found = re.search(r"on (http://127\.0\.0\.1:\d+/mcp)", served.stderr.readline())
        assert found
        # over HTTP the progress rides on the call's own answer stream
        assert await count_with_progress(found.group(1)) == ([1, 2, 3], "counted to 3")
    finally:
        served.send_signal(signal.SIGINT)
        assert served.wait(timeout=60) == 130
