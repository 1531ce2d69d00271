"""Hostile JSON-RPC lines from either side of `realprobe mcp proxy` (and of `realprobe mcp` on
stdio, which reads lines through the same reader): a deeply nested or over-limit line costs
a JSON-RPC error and an error row, never the session."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
DEEP = "[" * 100_000 + "]" * 100_000

#: a stdio MCP server written by hand: `deep` answers with JSON nested 100,000 levels deep,
#: `deeptext` with a text content that holds such JSON, `echo` behaves
SERVER = r'''
import json, sys
DEEP = "[" * 100_000 + "]" * 100_000
def send(text):
    sys.stdout.write(text + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    rid, method = msg.get("id"), msg.get("method")
    if rid is None:
        continue
    if method == "initialize":
        send(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "deep", "version": "1"}}}))
    elif method == "tools/call" and msg["params"]["name"] == "deep":
        send('{"jsonrpc": "2.0", "id": %s, "result": %s}' % (json.dumps(rid), DEEP))
    elif method == "tools/call" and msg["params"]["name"] == "deeptext":
        send(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"content": [
            {"type": "text", "text": "[" * 900 + "]" * 900}]}}))
    elif method == "tools/call":
        send(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"content": [
            {"type": "text", "text": "ok"}], "isError": False}}))
'''


def start(tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    server = tmp_path / "deep_server.py"
    server.write_text(SERVER)
    return subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "mcp", "proxy", *extra, "--",
         sys.executable, str(server)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=ENV, cwd=tmp_path)


def ask(proc: subprocess.Popen[str], line: str) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    answer: dict[str, Any] = json.loads(proc.stdout.readline())
    return answer


def call(rid: int, tool: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": tool, "arguments": {}}})


def test_deep_lines_from_either_side_cost_an_error_never_the_session(tmp_path: Path) -> None:
    db, record = tmp_path / "p.db", tmp_path / "s.jsonl"
    proc = start(tmp_path, "--db", str(db), "--record", str(record), "--timeout", "30")
    try:
        init = ask(proc, json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}))
        assert init["result"]["serverInfo"]["name"] == "deep"
        deep_answer = ask(proc, call(1, "deep"))  # from the server
        assert deep_answer["id"] == 1 and deep_answer["error"]["code"] == -32603
        assert "input limits" in deep_answer["error"]["message"]
        # from the client: a request with its id first, then one with none to be found
        mine = ask(proc, '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": '
                   + DEEP + "}")
        assert mine["id"] == 2 and mine["error"]["code"] == -32700
        anon = ask(proc, DEEP)
        assert anon["id"] is None and anon["error"]["code"] == -32700
        text = ask(proc, call(3, "deeptext"))
        assert text["id"] == 3 and "result" in text
        assert ask(proc, call(4, "echo"))["result"]["content"][0]["text"] == "ok"
    finally:
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert "Traceback" not in err and "RecursionError" not in err
    con = sqlite3.connect(db)
    try:
        stored = con.execute("SELECT tool, outcome, error_code FROM probes ORDER BY id").fetchall()
    finally:
        con.close()
    assert stored == [("deep", "error", "INVALID_RESPONSE"), ("deeptext", "ok", None),
                      ("echo", "ok", None)]
    lines = [json.loads(x) for x in record.read_text().splitlines()]
    assert sum(1 for r in lines if r.get("dir") == "c2s" and "garbage" in r) == 2
    assert any(r.get("event") == "too_long" for r in lines)


def test_stdio_server_answers_a_deep_line_with_a_parse_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "mcp", "--mode", "simulate"],
        input='{"jsonrpc": "2.0", "id": 9, "params": ' + DEEP + "}\n", capture_output=True,
        text=True, env=ENV, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    answer = json.loads(proc.stdout.splitlines()[0])
    assert answer["id"] == 9 and answer["error"]["code"] == -32700
    assert "nested deeper" in answer["error"]["message"]
    assert "Traceback" not in proc.stderr
