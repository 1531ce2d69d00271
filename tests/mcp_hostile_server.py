"""An MCP server on stdio, written by hand, that misbehaves on demand (for `realprobe mcp
proxy` tests): `huge` answers with more than the proxy's limit, `silent` never answers,
`garbage` writes a line that is not JSON-RPC before answering, `die` kills the process
mid-call; `echo` behaves. With `--mute` it answers the handshake and nothing else."""

import json
import os
import sys

TOOLS = ["echo", "huge", "silent", "garbage", "die"]


def send(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def text(rid: object, value: str) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": value}],
                                                 "isError": False}})


for line in sys.stdin:
    msg = json.loads(line)
    rid, method = msg.get("id"), msg.get("method")
    if rid is None:
        continue  # notifications
    if method != "initialize" and sys.argv[1:] == ["--mute"]:
        continue  # never answers anything after the handshake
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
            {"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]}})
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name == "echo":
            text(rid, msg["params"].get("arguments", {}).get("text", ""))
        elif name == "huge":
            text(rid, "x" * 300_000)
        elif name == "garbage":
            sys.stdout.write("this is not JSON-RPC\n")
            text(rid, "after garbage")
        elif name == "die":
            os._exit(7)
        # silent: no answer, ever
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no method"}})
