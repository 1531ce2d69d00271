"""The one error taxonomy (nine codes, and their view as the ResiliBench paper's six), shared by
every room."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


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
    """The root of every error realprobe raises on purpose.

    Its message names the cause in the library's terms (never a CLI flag). `params` lists the
    Python parameters the message names (as whole words, `name` or `name=value`); the CLI
    prints the message on one line with each of them spelled as its flag (`kinds` becomes
    `--kinds`, `fault_rate` `--fault-rate`) and exits 2.
    """

    def __init__(self, *args: object, param: str | tuple[str, ...] | None = None) -> None:
        super().__init__(*args)
        self.params: tuple[str, ...] = (
            () if param is None else (param,) if isinstance(param, str) else tuple(param)
        )


_RENAMED: set[str] = set()


def renamed_keyword(given: dict[str, Any], old: str, new: str, value: Any = None) -> Any:
    """A keyword's old name taken as its new one in `given` (one notice per process; both
    at once is an error). Flags and keywords share their names; the old ones keep working.
    Returns the value given under either name (else `value`)."""
    if old not in given:
        return given.get(new, value)
    if new in given:
        raise BadArgument((new, old), f"give {new} only ({old} is its old name)")
    given[new] = given.pop(old)
    if old not in _RENAMED:
        import warnings

        _RENAMED.add(old)
        warnings.warn(f"{old}= is deprecated: use {new}= (same meaning)", DeprecationWarning,
                      stacklevel=4)
    return given[new]


def no_other_keywords(given: dict[str, Any], *known: str) -> None:
    """What `**old` holds beyond the old names a function still takes is a TypeError."""
    for name in given:
        if name not in known:
            raise TypeError(f"unexpected keyword argument {name!r}")


class BadArgument(RealprobeError, ValueError):
    """A value passed to a function (or, on the command line, an option) is unusable; the
    message starts with the parameter's name: `target 'x': choose one of ...`."""

    def __init__(self, param: str | tuple[str, ...], message: str) -> None:
        super().__init__(message, param=param)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.params, str(self)))


class Unavailable(RealprobeError):
    """What the work needs does not answer or holds nothing: nothing was reachable, the LLM
    endpoint is down, no rows in the window. Not a usage error (a missing file or a bad value
    is one): the command line exits 3 for it, 2 for bad input."""


class NoDatabase(RealprobeError):
    """The probe database to read does not exist (the command line adds how to make one)."""

    def __init__(self, path: object) -> None:
        super().__init__(f"no database at {path}")
        self.path = path
        self.advised = False

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path,))


class CallFailed(RealprobeError):
    """One tool call failed; carries the taxonomy code to report. Never escapes `call_tool`."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class FetchFailure(CallFailed):
    """The call ended without a usable HTTP response (timeout, reset, cap, refused redirect).

    `phase` says where it was: `connect` (resolving, connecting, TLS), `send`, `headers`,
    `body`, or `policy` (refused by realprobe itself); `reached` says whether a server
    accepted the connection (True), certainly did not (False: refused, unresolvable, connect
    timeout), or it cannot be told (None: e.g. a transport that does not report its progress).
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        elapsed_s: float = 0.0,
        redirects: list[str] | None = None,
        received: int = 0,
        *,
        phase: str = "connect",
        reached: bool | None = None,
    ) -> None:
        super().__init__(code, message)
        self.elapsed_s = elapsed_s
        self.redirects = redirects or []
        self.received = received
        self.phase = phase
        self.reached = reached
        #: phase timings and TLS facts (`replay.phases.Phases` as a dict), if measured
        self.phases: dict[str, Any] | None = None


class BadResponse(CallFailed):
    """The body does not hold what the tool promises (unparseable, over a parsing limit, wrong
    shape, or a soft failure the API reports with HTTP 200)."""


class DeadlineExceeded(RealprobeError):
    """A call's total deadline passed (reported as TIMEOUT)."""
