"""A huge answer through `realprobe mcp proxy --upstream`: the proxy's peak memory (VmHWM)
while a streamable-HTTP server on loopback answers one tools/call with an N MB JSON body,
against the same proxy's peak for a 5-byte answer. The 16 MiB message limit should bound
the difference, whatever N.

    python bench/mcp_big_answer.py [--mb 300]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SIZE = {"bytes": 5}


class Server(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, parts: list[bytes], total: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Mcp-Session-Id", "s1")
        self.send_header("Content-Length", str(total if total is not None
                                               else sum(map(len, parts))))
        self.end_headers()
        try:
            for part in parts:
                self.wfile.write(part)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:
        self._send(405, [])

    def do_DELETE(self) -> None:
        self._send(200, [])

    def do_POST(self) -> None:
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        rid, method = msg.get("id"), msg.get("method")
        if rid is None:
            return self._send(202, [])
        if method == "initialize":
            result: Any = {"protocolVersion": msg["params"]["protocolVersion"],
                           "capabilities": {"tools": {}}, "serverInfo": {"name": "big"}}
        elif method == "tools/call":
            size = SIZE["bytes"]
            head = json.dumps({"jsonrpc": "2.0", "id": rid,
                               "result": {"content": [{"type": "text", "text": "@"}]}}).encode()
            cut = head.index(b"@")
            chunk = b"x" * (1 << 20)
            parts = [head[:cut], *[chunk] * (size >> 20), b"x" * (size % (1 << 20)),
                     head[cut + 1:]]
            return self._send(200, parts, len(head) - 1 + size)
        else:
            return self._send(200, [json.dumps({"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32601, "message": "no"}}).encode()])
        return self._send(200, [json.dumps({"jsonrpc": "2.0", "id": rid,
                                            "result": result}).encode()])


def peak_mb(size: int, url: str) -> tuple[float, str]:
    SIZE["bytes"] = size
    proc = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "mcp", "proxy", "--upstream", url],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdin is not None and proc.stdout is not None
    for rid, method, params in ((0, "initialize", {"protocolVersion": "2025-06-18",
                                                   "capabilities": {},
                                                   "clientInfo": {"name": "b", "version": "1"}}),
                                (1, "tools/call", {"name": "big", "arguments": {}})):
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                     "params": params}) + "\n")
        proc.stdin.flush()
        last = proc.stdout.readline()
    status = Path(f"/proc/{proc.pid}/status").read_text()
    hwm = next(int(x.split()[1]) for x in status.splitlines() if x.startswith("VmHWM"))
    proc.communicate(timeout=60)
    outcome = json.loads(last)
    what = "error " + str(outcome["error"]["code"]) if "error" in outcome else "answered"
    return hwm / 1024, what


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=300)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
    small, _ = peak_mb(5, url)
    big, what = peak_mb(args.mb << 20, url)
    print(f"proxy peak memory: {small:.0f} MB with a 5-byte answer, {big:.0f} MB with a "
          f"{args.mb} MB answer ({what}); difference {big - small:.0f} MB")
    server.shutdown()


if __name__ == "__main__":
    main()
