"""The catalogue as a real Model Context Protocol server (official `mcp` SDK, 2.x).

The names below load on first use, so a light module of this room (the pytest fixture that
every pytest session with realprobe installed registers) does not import the SDK's server."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from realprobe.mcp.definitions import mcp_tool
    from realprobe.mcp.rendering import render_result
    from realprobe.mcp.service import McpService, ServiceOptions

_HOMES = {"mcp_tool": "definitions", "render_result": "rendering", "McpService": "service",
          "ServiceOptions": "service"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'realprobe.mcp' has no attribute {name!r}")
    return getattr(import_module(f"realprobe.mcp.{home}"), name)


__all__ = ["McpService", "ServiceOptions", "mcp_tool", "render_result"]
