"""Catalogue tools as MCP `Tool` definitions (the wire shape lives in `adapters.exports`)."""

from __future__ import annotations

from mcp.types import Tool as McpTool

from realprobe.adapters.exports import MCP_META_KEY, mcp_definition
from realprobe.adapters.tool import Tool

META_KEY = MCP_META_KEY


def mcp_tool(tool: Tool) -> McpTool:
    """The wire definition of one tool, identical to `realprobe catalog --format mcp`."""
    return McpTool.model_validate(mcp_definition(tool))
