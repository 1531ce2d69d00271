"""ToolResult -> MCP CallToolResult: structured data on success, an actionable error otherwise.

An error's text starts with the taxonomy code and says whether a retry may help and after
how long, so a model reading only the text can act on it. The same facts ride in `_meta`
for programs.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server import ServerRequestContext
from mcp.types import CallToolResult, TextContent

from realprobe.errors import ErrorCode
from realprobe.result import ToolError, ToolResult

META_KEY = "realprobe/call"

#: A suggested wait when the API sent no Retry-After (seconds).
SUGGESTED_BACKOFF_S: dict[ErrorCode, float] = {
    ErrorCode.TIMEOUT: 1.0,
    ErrorCode.NETWORK_ERROR: 1.0,
    ErrorCode.SERVER_ERROR: 2.0,
    ErrorCode.RATE_LIMIT_ERROR: 5.0,
}

NOT_RETRYABLE_ADVICE: dict[ErrorCode, str] = {
    ErrorCode.INVALID_INPUT: "fix the arguments to match the tool's input schema",
    ErrorCode.NOT_FOUND: "the API has no such item; change the arguments or use another tool",
    ErrorCode.AUTH_ERROR: "the API refused access; the same call will be refused again",
    ErrorCode.INVALID_RESPONSE: "the API answered with something unusable; use another tool",
    ErrorCode.OPERATION_FAILED: "the same call will fail the same way; use another tool",
}


def retry_advice(err: ToolError, wait_from: str = "Retry-After from the API") -> str:
    """'Retry may help: yes, after 30 s (Retry-After from the API).' or a 'no' with what to do."""
    if err.code.retryable:
        if err.retry_after_s is not None:
            return f"Retry may help: yes, after {err.retry_after_s:g} s ({wait_from})."
        wait = SUGGESTED_BACKOFF_S.get(err.code, 1.0)
        return f"Retry may help: yes, after about {wait:g} s (suggested backoff; no Retry-After)."
    return f"Retry may help: no; {NOT_RETRYABLE_ADVICE.get(err.code, 'do not repeat this call')}."


def error_text(err: ToolError, wait_from: str = "Retry-After from the API") -> str:
    status = f" (HTTP {err.http_status})" if err.http_status else ""
    message = err.message.rstrip(". :") or "no detail"
    return f"{err.code.value}{status}: {message}. {retry_advice(err, wait_from)}"


def call_meta(result: ToolResult, api: str) -> dict[str, Any]:
    err = result.error
    return {
        META_KEY: {
            "tool": result.tool,
            "api": api,
            "ok": result.ok,
            "code": err.code.value if err else None,
            "retryable": err.retryable if err else None,
            "retry_after_s": err.retry_after_s if err else None,
            "http_status": result.http_status,
            "latency_ms": round(result.latency_ms, 3),
            "bytes": result.bytes,
        }
    }


def render_result(
    result: ToolResult, api: str, *, wait_from: str = "Retry-After from the API"
) -> CallToolResult:
    """`wait_from` names who set a retry-after: the API, or realprobe's own politeness."""
    meta = call_meta(result, api)
    if result.ok and result.data is not None:
        text = json.dumps(result.data, ensure_ascii=False, separators=(", ", ": "))
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content=result.data,
            _meta=meta,
        )
    err = result.error or ToolError(code=ErrorCode.OPERATION_FAILED, message="no data")
    return CallToolResult(
        content=[TextContent(type="text", text=error_text(err, wait_from))],
        is_error=True,
        _meta=meta,
    )


class ToolListCache:
    """Server middleware: `tools/list` answered from its wire form, made by the SDK's own
    pipeline the first time a request with the same protocol version and parameters came
    (validating and shaping a large listing cost more than the rest of the answer; the
    tools a service serves never change while it runs).

    A request with a cursor, or on a session that has not finished its handshake, goes the
    whole way; so does everything once `MAX_ENTRIES` different requests have been seen."""

    MAX_ENTRIES = 64

    def __init__(self) -> None:
        self.wire: dict[tuple[str, str], dict[str, Any]] = {}

    def _key(self, ctx: ServerRequestContext[Any, Any]) -> tuple[str, str] | None:
        if ctx.method != "tools/list" or ctx.request_id is None:
            return None
        params = dict(ctx.params or {})
        if "cursor" in params or ctx.session.client_params is None:
            return None
        try:
            return ctx.protocol_version, json.dumps(params, sort_keys=True)
        except (TypeError, ValueError):
            return None

    async def __call__(
        self,
        ctx: ServerRequestContext[Any, Any],
        call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]],
    ) -> Any:
        key = self._key(ctx)
        if key is None:
            return await call_next(ctx)
        cached = self.wire.get(key)
        if cached is not None:
            return cached
        result = await call_next(ctx)
        if isinstance(result, dict) and len(self.wire) < self.MAX_ENTRIES:
            self.wire[key] = result
        return result
