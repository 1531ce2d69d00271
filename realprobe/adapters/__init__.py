"""Adapters: the declarative catalogue of public APIs as MCP-shaped tools."""

from realprobe.adapters.adapter import call_tool, call_tool_sync
from realprobe.adapters.catalog import Catalog, CatalogError, default_catalog
from realprobe.adapters.tool import Tool
from realprobe.result import ToolError, ToolResult

__all__ = [
    "Catalog",
    "CatalogError",
    "Tool",
    "ToolError",
    "ToolResult",
    "call_tool",
    "call_tool_sync",
    "default_catalog",
]
