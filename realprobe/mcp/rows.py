"""Calls served over MCP as probe rows (source="mcp"), built by the store's shared `probe_row`
so MCP traffic feeds the same statistics as scheduled probes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from realprobe.adapters.tool import Tool
from realprobe.errors import ErrorCode
from realprobe.result import ToolResult
from realprobe.store import default_vantage, iso_utc
from realprobe.store import probe_row as _store_row
from realprobe.target import Target

__all__ = ["default_vantage", "iso_utc", "new_run_id", "probe_row", "reached_the_api"]


def new_run_id() -> str:
    """`mcp-<UTC stamp>-<hex>`: one run per server session, apart from probe runs at a glance."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"mcp-{stamp}-{uuid.uuid4().hex[:8]}"


def reached_the_api(result: ToolResult) -> bool:
    """False for arguments rejected before anything was sent: not the API's behaviour."""
    return not (result.code is ErrorCode.INVALID_INPUT and result.http_status is None)


def probe_row(
    result: ToolResult,
    tool: Tool,
    *,
    run_id: str,
    started_wall: float,
    round_no: int,
    timeout_s: float,
    vantage: str,
    args: Any = None,
    source: str = "mcp",
    target: Target | None = None,
    virtual_s: float | None = None,
) -> dict[str, Any]:
    return _store_row(
        result,
        run_id=run_id,
        tool=tool.name,
        api=tool.api_id,
        round_no=round_no,
        started_wall=started_wall,
        timeout_s=timeout_s,
        vantage=vantage,
        args=args,
        source=source,
        target=target,
        virtual_s=virtual_s,
    )
