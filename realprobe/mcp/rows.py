"""Runs of calls served over MCP: their ids, and which calls make probe rows (built by the
store's shared `probe_row`, so MCP traffic feeds the same statistics as scheduled probes)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from realprobe.errors import ErrorCode
from realprobe.result import ToolResult


def new_run_id() -> str:
    """`mcp-<UTC stamp>-<hex>`: one run per server session, apart from probe runs at a glance."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"mcp-{stamp}-{uuid.uuid4().hex[:8]}"


def reached_the_api(result: ToolResult) -> bool:
    """False for arguments rejected before anything was sent: not the API's behaviour."""
    return not (result.code is ErrorCode.INVALID_INPUT and result.http_status is None)
