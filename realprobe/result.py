"""What a tool call returns: ok with structured data, or one error code with its context."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from realprobe.errors import ErrorCode

#: how the message of an MCP call answered with a JSON-RPC error (a protocol error, not an
#: `isError` result) begins; calibration tells the two failure forms apart by it
JSONRPC_ERROR_PREFIX = "JSON-RPC error "


class ToolError(BaseModel):
    code: ErrorCode
    message: str
    http_status: int | None = None
    retry_after_s: float | None = None
    #: for calls that got no HTTP response: where the fetch was when it failed (connect,
    #: send, headers, body, policy) and whether a server accepted the connection. Kept out
    #: of dumps: a replay (which has no connection to watch) must print what the live call did
    phase: str | None = Field(default=None, exclude=True)
    reached: bool | None = Field(default=None, exclude=True)
    #: set when realprobe's own server (the sandbox), not the API, made this answer: its
    #: `X-Realprobe-Error` label. Such failures are stored excluded from the API's statistics
    infrastructure: str | None = Field(default=None, exclude=True)

    @property
    def retryable(self) -> bool:
        return self.code.retryable


class ToolResult(BaseModel):
    tool: str
    ok: bool
    data: dict[str, Any] | None = None
    error: ToolError | None = None
    latency_ms: float = 0.0
    http_status: int | None = None
    bytes: int = 0
    redirects: list[str] = Field(default_factory=list)
    rate_limit_headers: dict[str, str] = Field(default_factory=dict)
    #: DNS/connect/TLS/first-byte/transfer milliseconds and TLS expiry, when measured. Stored
    #: on probe rows, left out of dumps: a replayed call makes no connection, and its output
    #: must equal the recorded one
    phases: dict[str, Any] | None = Field(default=None, exclude=True)
    #: the `X-Request-Id` a realprobe sandbox echoed (it pairs the call with a journal entry)
    request_id: str | None = Field(default=None, exclude=True)

    @property
    def code(self) -> ErrorCode | None:
        return self.error.code if self.error else None

    def summary(self) -> str:
        """One line for a human: the data's first fields, or the code and message."""
        if self.ok and self.data is not None:
            parts = []
            for k, v in self.data.items():
                text = v if isinstance(v, str) else repr(v)
                parts.append(f"{k}={text[:60]}")
                if len(parts) == 3:
                    break
            return ", ".join(parts)
        assert self.error is not None
        extra = f" (retry after {self.error.retry_after_s:g}s)" if self.error.retry_after_s else ""
        return f"{self.error.code.value}: {self.error.message}{extra}"


def answered(tool: str, data: dict[str, Any], http_status: int, latency_ms: float, bytes: int,
             redirects: list[str], rate_limit_headers: dict[str, str],
             phases: dict[str, Any] | None, request_id: str | None) -> ToolResult:
    """An ok result from what a call checked itself: `ToolResult(ok=True, ...)` without
    validating it again (what `model_construct` does, without its loop over the fields;
    every ok call ends here)."""
    result = _new(ToolResult)
    _set(result, "__dict__", {
        "tool": tool, "ok": True, "data": data, "error": None, "latency_ms": latency_ms,
        "http_status": http_status, "bytes": bytes, "redirects": redirects,
        "rate_limit_headers": rate_limit_headers, "phases": phases, "request_id": request_id,
    })
    _set(result, "__pydantic_fields_set__", _ANSWERED.copy())
    _set(result, "__pydantic_extra__", None)
    _set(result, "__pydantic_private__", None)
    return result


_new, _set = object.__new__, object.__setattr__
#: the fields `answered` sets (all but `error`)
_ANSWERED = set(ToolResult.model_fields) - {"error"}
