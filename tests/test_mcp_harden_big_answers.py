"""An answer over the MCP message limit, on every transport (a streamable-HTTP upstream's
JSON body, a stdio line): read no further than the limit and recorded as an error
(INVALID_RESPONSE), by `probe --mcp-url/--mcp-server` and by `mcp proxy --upstream`, whose
session goes on. The memory it costs is measured by bench/mcp_big_answer.py."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
BIG = 20 * 1024 * 1024  # over the 16 MiB message limit


def answer(rid: Any) -> tuple[bytes, bytes]:
    """A tools/call answer as (head, tail) around its text."""
    head = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"content": [
        {"type": "text", "text": "@"}]}}).encode()
    cut = head.index(b"@")
    return head[:cut], head[cut + 1:]


class Bulky(BaseHTTPRequestHandler):
    """A streamable-HTTP MCP server by hand: `bulk` answers with a 20 MB JSON body."""

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, parts: list[bytes], total: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Mcp-Session-Id", "s1")
        self.send_header("Content-Length", str(total if total is not None else
                                               sum(map(len, parts))))
        self.end_headers()
        for part in parts:
            try:
                self.wfile.write(part)
            except (BrokenPipeError, ConnectionResetError):
                return  # the client read what it wanted and went

    def do_GET(self) -> None:
        self._send(405, [])

    def do_DELETE(self) -> None:
        self._send(200, [])

    def do_POST(self) -> None:
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        rid, method = msg.get("id"), msg.get("method")
        if rid is None:
            self._send(202, [])
        elif method == "initialize":
            self._send(200, [json.dumps({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bulky", "version": "1"}}}).encode()])
        elif method == "tools/list":
            self._send(200, [json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
                {"name": n, "inputSchema": {"type": "object"}} for n in ("bulk", "small")]}}
            ).encode()])
        elif method == "tools/call":
            size = BIG if msg["params"]["name"] == "bulk" else 5
            head, tail = answer(rid)
            chunk = b"x" * (1 << 20)
            parts = [head, *[chunk] * (size >> 20), b"x" * (size % (1 << 20)), tail]
            self._send(200, parts, len(head) + size + len(tail))
        else:
            self._send(200, [json.dumps({"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32601, "message": "no such method"}}).encode()])


@pytest.fixture()
def bulky() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Bulky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()


def stored(db: Path) -> list[tuple[str, str, str | None]]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT tool, outcome, error_code FROM probes ORDER BY id").fetchall()
    finally:
        con.close()


STDIO_SERVER = r'''
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    rid, method = msg.get("id"), msg.get("method")
    if rid is None:
        continue
    if method == "initialize":
        out = {"protocolVersion": msg["params"]["protocolVersion"],
               "capabilities": {"tools": {}}, "serverInfo": {"name": "bulky", "version": "1"}}
    elif method == "tools/list":
        out = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("bulk", "small")]}
    elif method == "tools/call":
        size = 20 * 1024 * 1024 if msg["params"]["name"] == "bulk" else 5
        out = {"content": [{"type": "text", "text": "x" * size}]}
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {
            "code": -32601, "message": "no such method"}}) + "\n"); sys.stdout.flush(); continue
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": out}) + "\n")
    sys.stdout.flush()
'''


@pytest.mark.parametrize("where", ["url", "stdio"])
def test_a_probe_records_an_answer_over_the_limit_as_invalid(
    tmp_path: Path, bulky: str, where: str,
) -> None:
    calls = tmp_path / "calls.json"
    calls.write_text('{"bulk": {}, "small": {}}')
    server = tmp_path / "bulky.py"
    server.write_text(STDIO_SERVER)
    target = (["--mcp-url", bulky] if where == "url"
              else ["--mcp-server", f"{sys.executable} {server}"])
    db = tmp_path / "p.db"
    done = subprocess.run([sys.executable, "-m", "realprobe.cli", "probe", *target,
                           "--mcp-calls", str(calls), "--db", str(db), "--timeout", "60"],
                          capture_output=True, text=True, env=ENV, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert stored(db) == [("bulk", "error", "INVALID_RESPONSE"), ("small", "ok", None)]


def test_the_proxy_refuses_a_huge_upstream_answer_and_goes_on(tmp_path: Path,
                                                              bulky: str) -> None:
    db = tmp_path / "p.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "mcp", "proxy", "--upstream", bulky,
         "--db", str(db), "--max-message-bytes", str(1 << 20)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=ENV)
    assert proc.stdin is not None and proc.stdout is not None

    def ask(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                     "params": params}) + "\n")
        proc.stdin.flush()
        got: dict[str, Any] = json.loads(proc.stdout.readline())
        return got

    try:
        ask(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "t", "version": "1"}})
        big = ask(1, "tools/call", {"name": "bulk", "arguments": {}})
        assert big["id"] == 1 and big["error"]["code"] == -32700
        assert "message limit" in big["error"]["message"]
        small = ask(2, "tools/call", {"name": "small", "arguments": {}})
        assert small["result"]["content"][0]["text"] == "xxxxx"
    finally:
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert stored(db) == [("bulk", "error", "INVALID_RESPONSE"), ("small", "ok", None)]
