"""The one error taxonomy (nine codes, and their view as the ResiliBench paper's six), shared by
every room."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    TIMEOUT = "TIMEOUT"
    NETWORK_ERROR = "NETWORK_ERROR"
    RATE_LIMIT_ERROR = "RATE_LIMIT_ERROR"
    SERVER_ERROR = "SERVER_ERROR"
    INVALID_INPUT = "INVALID_INPUT"
    NOT_FOUND = "NOT_FOUND"
    AUTH_ERROR = "AUTH_ERROR"
    INVALID_RESPONSE = "INVALID_RESPONSE"
    OPERATION_FAILED = "OPERATION_FAILED"

    @property
    def retryable(self) -> bool:
        return self in RETRYABLE

    @property
    def resilibench(self) -> str:
        """The code in the ResiliBench paper's six-code view."""
        return RESILIBENCH_VIEW[self]


RETRYABLE = frozenset(
    {
        ErrorCode.TIMEOUT,
        ErrorCode.NETWORK_ERROR,
        ErrorCode.RATE_LIMIT_ERROR,
        ErrorCode.SERVER_ERROR,
    }
)

#: ResiliBench has six codes; ours split three of them finer.
RESILIBENCH_CODES = (
    "TIMEOUT",
    "OPERATION_FAILED",
    "INVALID_INPUT",
    "INVALID_RESPONSE",
    "NETWORK_ERROR",
    "RATE_LIMIT_ERROR",
)
RESILIBENCH_VIEW: dict[ErrorCode, str] = {
    ErrorCode.TIMEOUT: "TIMEOUT",
    ErrorCode.NETWORK_ERROR: "NETWORK_ERROR",
    ErrorCode.RATE_LIMIT_ERROR: "RATE_LIMIT_ERROR",
    ErrorCode.SERVER_ERROR: "OPERATION_FAILED",
    ErrorCode.INVALID_INPUT: "INVALID_INPUT",
    ErrorCode.NOT_FOUND: "OPERATION_FAILED",
    ErrorCode.AUTH_ERROR: "OPERATION_FAILED",
    ErrorCode.INVALID_RESPONSE: "INVALID_RESPONSE",
    ErrorCode.OPERATION_FAILED: "OPERATION_FAILED",
}


def code_for_status(status: int) -> ErrorCode | None:
    """Map an HTTP status to a code; None for statuses that are not failures (1xx-3xx)."""
    if status < 400:
        return None
    if status == 429:
        return ErrorCode.RATE_LIMIT_ERROR
    if status in (400, 422):
        return ErrorCode.INVALID_INPUT
    if status in (404, 410):
        return ErrorCode.NOT_FOUND
    if status in (401, 403):
        return ErrorCode.AUTH_ERROR
    if status >= 500:
        return ErrorCode.SERVER_ERROR
    return ErrorCode.OPERATION_FAILED


class RealprobeError(Exception):
    """A user-facing error: the CLI prints its message on one line and exits non-zero."""
