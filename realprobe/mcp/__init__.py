"""The catalogue as a real Model Context Protocol server (official `mcp` SDK, 2.x)."""

from realprobe.mcp.definitions import mcp_tool
from realprobe.mcp.rendering import render_result
from realprobe.mcp.service import McpService, ServiceOptions

__all__ = ["McpService", "ServiceOptions", "mcp_tool", "render_result"]
