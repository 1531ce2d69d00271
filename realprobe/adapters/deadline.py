"""The one deadline guard: a backstop around work that has its own deadline.

The client already ends every call at its deadline; the guard matters only if something
below it does not (a custom transport, an agent that loops), so that nothing is held past
deadline + GRACE_S in real time. On a virtual clock nothing may wait for real, so the guard
stands aside. The probe runner, the MCP server and the task runner all use this one class
and its one synthetic TIMEOUT result.
"""

from __future__ import annotations

from types import TracebackType

import anyio

from realprobe.errors import ErrorCode
from realprobe.result import ToolError, ToolResult

#: seconds past a deadline before the guard gives up on the work it guards
GRACE_S = 2.0


class DeadlineGuard:
    """`with DeadlineGuard(deadline_s) as guard:` ... then `guard.expired`.

    The block is cancelled (not raised out of) at deadline + grace; `timeout_result` is the
    TIMEOUT a guarded tool call reports then."""

    def __init__(self, deadline_s: float, *, virtual: bool = False, grace_s: float = GRACE_S):
        self.deadline_s = deadline_s
        self.grace_s = grace_s
        self.virtual = virtual
        self.expired = False
        self._scope: anyio.CancelScope | None = None

    def __enter__(self) -> DeadlineGuard:
        if not self.virtual:
            self._scope = anyio.move_on_after(self.deadline_s + self.grace_s)
            self._scope.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if self._scope is None:
            return False
        suppressed = bool(self._scope.__exit__(exc_type, exc, tb))
        self.expired = self._scope.cancelled_caught
        return suppressed

    def timeout_result(self, tool: str) -> ToolResult:
        return ToolResult(
            tool=tool,
            ok=False,
            error=ToolError(
                code=ErrorCode.TIMEOUT,
                message=f"no complete answer within the {self.deadline_s:g}s deadline",
            ),
            latency_ms=(self.deadline_s + self.grace_s) * 1000.0,
        )
