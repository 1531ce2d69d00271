"""Catalogue tools as MCP `Tool` definitions: title, description, schemas, read-only hints."""

from __future__ import annotations

from mcp.types import Tool as McpTool
from mcp.types import ToolAnnotations

from realprobe.adapters.tool import Tool

META_KEY = "realprobe/api"


def mcp_tool(tool: Tool) -> McpTool:
    """The wire definition of one tool.

    Every catalogue tool only reads a public API: read-only, not destructive, open world.
    Not idempotent: most answer something different each call (a random joke, a fresh quote).
    """
    api = tool.api
    return McpTool(
        name=tool.name,
        title=tool.spec.title,
        description=f"{tool.spec.description} (API: {api.name}, {api.base_url})",
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=ToolAnnotations(
            title=tool.spec.title,
            read_only_hint=True,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=True,
        ),
        _meta={META_KEY: {"id": api.id, "name": api.name, "docs_url": api.docs_url}},
    )
