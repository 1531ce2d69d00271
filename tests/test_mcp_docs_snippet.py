"""The README's MCP client config, run as a new user's client would run it."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from realprobe import Catalog

DOC = Path(__file__).resolve().parent.parent / "docs" / "mcp.md"
DOC_SANDBOX = "http://127.0.0.1:8765"


def snippet() -> dict[str, Any]:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"<!-- mcp-config-snippet -->\s*```json\n(.*?)```", text, re.S)
    assert m, "docs/mcp.md lost its marked config snippet"
    server: dict[str, Any] = json.loads(m.group(1))["mcpServers"]["realprobe"]
    return server


async def run(entry: dict[str, Any], sandbox: str, tool: str) -> tuple[int, Any]:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    command = shutil.which(entry["command"], path=path)
    assert command, f"{entry['command']!r} is not installed next to {sys.executable}"
    args = [a.replace(DOC_SANDBOX, sandbox) for a in entry["args"]]
    assert args != entry["args"], "the snippet no longer points at the sandbox"
    async with Client(StdioServerParameters(command=command, args=args)) as client:
        n = len((await client.list_tools()).tools)
        return n, await client.call_tool(tool, {})


async def test_the_documented_config_lists_tools_and_answers_from_the_sandbox(
    catalog: Catalog, calm_sandbox: str
) -> None:
    entry = snippet()
    tool = next(t.name for t in catalog if t.spec.response == "json" and t.examples[0] == {})
    with anyio.fail_after(60):
        n, ok = await run(entry, calm_sandbox, tool)
        _, fault = await run(entry, f"{calm_sandbox}/_fault/429", tool)
    assert n == len(catalog)
    assert ok.is_error is False and ok.structured_content
    assert fault.is_error is True
    block = fault.content[0]
    assert isinstance(block, TextContent)
    assert block.text.startswith("RATE_LIMIT_ERROR (HTTP 429)")
    assert "Retry may help: yes, after" in block.text
