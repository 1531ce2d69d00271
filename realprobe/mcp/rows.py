"""Calls served over MCP as probe rows (the `probes` table of realprobe.store), source="mcp".

Kept here until the probe room exposes a shared row builder; the shape follows
`store.PROBES_COLUMNS` so MCP traffic feeds the same statistics as scheduled probes.
"""

from __future__ import annotations

import socket
import uuid
from datetime import UTC, datetime
from typing import Any

from realprobe.adapters.result import ToolResult
from realprobe.adapters.tool import Tool
from realprobe.errors import ErrorCode


def iso_utc(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )


#: like the prober's: long error messages are cut in the `detail` column
DETAIL_MAX = 500


def new_run_id() -> str:
    """`mcp-<UTC stamp>-<hex>`: one run per server session, apart from probe runs at a glance."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"mcp-{stamp}-{uuid.uuid4().hex[:8]}"


def default_vantage() -> str:
    return socket.gethostname() or "unknown"


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
) -> dict[str, Any]:
    err = result.error
    return {
        "run_id": run_id,
        "tool": tool.name,
        "api": tool.api_id,
        "round": round_no,
        "started_at": iso_utc(started_wall),
        "started_ts": started_wall,
        "latency_ms": round(result.latency_ms, 3),
        "outcome": "ok" if result.ok else "error",
        "error_code": err.code.value if err else None,
        "http_status": result.http_status,
        "bytes": result.bytes,
        "retry_after": err.retry_after_s if err else None,
        "rate_limit": result.rate_limit_headers,
        "redirects": result.redirects,
        "vantage": vantage,
        "detail": err.message[:DETAIL_MAX] if err else "",
        "timeout_s": timeout_s,
        "excluded": 0,
        "source": source,
        "args": args,
    }
