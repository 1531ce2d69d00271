"""Other MCP recorders' files import through `cassette import` and replay: mcp-cassette's
JSON document (format_version 3: messages with sender, t_offset_ms, payload) and
mcp-recorder's (version 1.0: interactions pairing a request with its response and latency),
each laid out per the schema its PyPI package ships (mcp-cassette 0.4.0, mcp-recorder 0.5.0),
holding a session recorded here from the real mcp-server-time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from realprobe import load_cassette

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TIME = shutil.which("mcp-server-time") or str(BIN / "mcp-server-time")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
CONVERT = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}

pytestmark = pytest.mark.skipif(not Path(TIME).exists(), reason="mcp-server-time not installed")


def realprobe(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, env=ENV,
                                 args=["-m", "realprobe.cli", *args])


async def a_session(params: StdioServerParameters) -> list[Any]:
    async with Client(params, mode="legacy", cache=None, read_timeout_seconds=60) as c:
        tools = sorted(t.name for t in (await c.list_tools()).tools)
        got = await c.call_tool("convert_time", CONVERT)
        return [tools, got.structured_content]


def as_mcp_cassette(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"format_version": 3, "recorded_at": "2026-12-07T05:00:00Z", "transport": "stdio",
            "messages": [{"seq": i, "t_offset_ms": int(r["t"] * 1000),
                          "sender": "client" if r["dir"] == "c2s" else "server",
                          "kind": ("request" if "id" in r["msg"] and "method" in r["msg"]
                                   else "notification" if "method" in r["msg"]
                                   else "response"),
                          "method": r["msg"].get("method"), "msg_id": r["msg"].get("id"),
                          "payload": r["msg"], "redacted": False}
                         for i, r in enumerate(records)]}


def as_mcp_recorder(records: list[dict[str, Any]]) -> dict[str, Any]:
    answers = {json.dumps(r["msg"]["id"]): r for r in records
               if r["dir"] == "s2c" and "id" in r["msg"] and "method" not in r["msg"]}
    interactions = []
    for r in records:
        msg = r["msg"]
        if r["dir"] != "c2s":
            continue
        if "id" in msg:
            answer = answers[json.dumps(msg["id"])]
            interactions.append({"type": "jsonrpc_request", "request": msg,
                                 "response": answer["msg"], "response_status": 200,
                                 "latency_ms": int((answer["t"] - r["t"]) * 1000)})
        else:
            interactions.append({"type": "notification", "request": msg, "response": None,
                                 "response_status": 202, "latency_ms": 0})
    return {"version": "1.0", "metadata": {"recorded_at": "2026-12-07T05:00:00Z",
                                           "transport_type": "stdio"},
            "interactions": interactions}


@pytest.mark.parametrize("layout", [as_mcp_cassette, as_mcp_recorder])
async def test_another_recorders_file_imports_and_replays(tmp_path: Path, layout: Any) -> None:
    recorded = tmp_path / "real.jsonl"
    original = await a_session(realprobe("mcp", "proxy", "--record", str(recorded), "--", TIME))
    records = load_cassette(recorded).records or []
    theirs = tmp_path / "theirs.json"
    theirs.write_text(json.dumps(layout([r for r in records if "msg" in r]), indent=2))

    ours = tmp_path / "ours.jsonl"
    res = subprocess.run([sys.executable, "-m", "realprobe.cli", "cassette", "import",
                          str(theirs), "-o", str(ours)], capture_output=True, text=True,
                         env=ENV, timeout=120, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    assert await a_session(realprobe("mcp", "replay", str(ours))) == original


@pytest.mark.parametrize("fmt", ["mcp-cassette", "mcp-recorder"])
async def test_a_session_exports_to_another_recorder_and_back(tmp_path: Path, fmt: str) -> None:
    recorded = tmp_path / "real.jsonl"
    original = await a_session(realprobe("mcp", "proxy", "--record", str(recorded), "--", TIME))
    theirs, back = tmp_path / f"{fmt}.json", tmp_path / "back.jsonl"
    for args in (["mcp", "export", str(recorded), "-o", str(theirs), "--format", fmt],
                 ["cassette", "import", str(theirs), "-o", str(back)]):
        res = subprocess.run([sys.executable, "-m", "realprobe.cli", *args],
                             capture_output=True, text=True, env=ENV, timeout=120,
                             stdin=subprocess.DEVNULL)
        assert res.returncode == 0, res.stderr
    doc = json.loads(theirs.read_text())
    if fmt == "mcp-cassette":
        assert doc["format_version"] == 3 and doc["server_info"]["name"] == "mcp-time"
        assert {m["sender"] for m in doc["messages"]} == {"client", "server"}
    else:
        assert doc["version"] == "1.0" and doc["metadata"]["server_info"]["name"] == "mcp-time"
        assert [i["request"]["method"] for i in doc["interactions"]
                if i["type"] == "jsonrpc_request"] == ["initialize", "tools/list",
                                                         "tools/call"]
    assert await a_session(realprobe("mcp", "replay", str(back))) == original
