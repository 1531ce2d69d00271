"""A scripted MCP server (the SDK's MCPServer, stdio) whose failures and latency are known:
its tool `lookup` fails a seeded share `--fail` of calls, `--jsonrpc` of those as JSON-RPC
errors (-32603) and the rest as `isError` results (text `SERVER_ERROR: ...`); a success
waits `--ok-ms`, a failure `--error-ms` (each times a seeded lognormal factor of sd
`--sigma`). It also serves a resource `note://hello`, a prompt `greet`, a tool `echo`
that never fails, a tool `count` that reports progress, and sends
`notifications/tools/list_changed` after a call to `touch`. `--http-port N` serves
streamable HTTP on 127.0.0.1:N/mcp instead of stdio."""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import random

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fail", type=float, default=0.0)
    ap.add_argument("--jsonrpc", type=float, default=0.0)
    ap.add_argument("--ok-ms", type=float, default=0.0)
    ap.add_argument("--error-ms", type=float, default=0.0)
    ap.add_argument("--sigma", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--http-port", type=int, default=None,
                    help="serve streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio")
    opts = ap.parse_args()
    logging.disable(logging.WARNING)  # the scripted failures are not news on stderr
    rng = random.Random(opts.seed)
    server = MCPServer("scripted")

    async def wait(ms: float) -> None:
        if ms > 0:
            await asyncio.sleep(ms * math.exp(opts.sigma * rng.gauss(0.0, 1.0)) / 1000.0)

    @server.tool()
    async def lookup(key: str) -> dict[str, str]:
        """Look a key up; fails as scripted."""
        if rng.random() < opts.fail:
            await wait(opts.error_ms)
            if rng.random() < opts.jsonrpc:
                raise MCPError(code=-32603, message="backend exploded")
            raise ToolError("SERVER_ERROR: the backend failed")
        await wait(opts.ok_ms)
        return {"key": key, "value": key.upper()}

    @server.tool()
    async def echo(text: str) -> str:
        """Say it back."""
        return text

    @server.tool()
    async def touch(ctx: Context) -> str:
        """Change the tool list (the server says so with a notification)."""
        await ctx.session.send_tool_list_changed()
        return "touched"

    @server.tool()
    async def count(steps: int, ctx: Context) -> str:
        """Count to `steps`, reporting progress at each step."""
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}")
        return f"counted to {steps}"

    @server.resource("note://hello")
    def hello() -> str:
        return "hello from the scripted server"

    @server.prompt()
    def greet(name: str) -> str:
        return f"Greet {name} warmly."

    if opts.http_port is not None:
        server.run("streamable-http", host="127.0.0.1", port=opts.http_port)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
