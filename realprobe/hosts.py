"""Per-host gates for calls that agents make to the real APIs (MCP clients, task runs).

An agent in a loop can call one free API many times a second, and ten concurrent task runs
can all want the same API at once. For calls that leave the machine (live, or recording
live), each host gets the catalogue's politeness, shared by everything that holds the same
`HostGates`: at most `max_in_flight` calls in flight, and call starts at least
`min_interval_s` apart. A call waits for its turn when the turn comes within its budget;
otherwise `HeldBack` says when to retry, and nothing is sent. Sandbox, simulated and
replayed calls are not held back (nothing real is hit). Waits run on an injectable clock.

Probe runs keep their own per-run limiter (`probes.politeness`), which adds jitter,
Retry-After pauses and daily budgets; both key hosts with `host_key`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import httpx

from realprobe.adapters.result import ToolError, ToolResult
from realprobe.adapters.spec import ApiSpec
from realprobe.clock import Clock
from realprobe.errors import ErrorCode


class HeldBack(Exception):
    """No turn within the deadline: retry after `retry_after_s`."""

    def __init__(self, host: str, retry_after_s: float, why: str) -> None:
        super().__init__(f"realprobe holds back calls to {host}: {why}")
        self.host = host
        self.retry_after_s = retry_after_s


@dataclass
class _Gate:
    max_in_flight: int
    min_interval_s: float
    next_start: float = 0.0
    slots: asyncio.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self.slots = asyncio.Semaphore(self.max_in_flight)


def host_key(api: ApiSpec) -> str:
    """The host an API lives on (`api.example.com:443`); APIs on one host share its limits."""
    url = httpx.URL(api.base_url)
    port = url.port or (443 if url.scheme == "https" else 80)
    return f"{url.host}:{port}"


class HostGates:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._gates: dict[str, _Gate] = {}

    def _gate(self, api: ApiSpec) -> tuple[str, _Gate]:
        host = host_key(api)
        gate = self._gates.get(host)
        if gate is None:
            p = api.politeness
            gate = self._gates[host] = _Gate(max(1, p.max_in_flight), max(0.0, p.min_interval_s))
        return host, gate

    @asynccontextmanager
    async def turn(self, api: ApiSpec, budget_s: float) -> AsyncIterator[float]:
        """Wait for this host's next turn; yields the seconds waited. Raises HeldBack."""
        host, gate = self._gate(api)
        now = self.clock.now()
        start = max(now, gate.next_start)
        if start - now > budget_s:
            raise HeldBack(
                host, start - now,
                f"one call start every {gate.min_interval_s:g}s (the catalogue's politeness for "
                f"{api.name}), and the next turn is after this call's {budget_s:g}s deadline",
            )
        gate.next_start = start + gate.min_interval_s
        if start > now:
            await self.clock.sleep(start - now)
        left = budget_s - (self.clock.now() - now)
        with anyio.move_on_after(max(0.0, left)) as scope:
            await gate.slots.acquire()
        if scope.cancelled_caught:
            raise HeldBack(
                host, gate.min_interval_s or 1.0,
                f"{gate.max_in_flight} call(s) already in flight to {api.name} until the deadline",
            )
        try:
            yield self.clock.now() - now
        finally:
            gate.slots.release()


def held_back_result(tool: str, held: HeldBack) -> ToolResult:
    """What a held-back call answers: RATE_LIMIT_ERROR with when to retry; nothing was sent."""
    return ToolResult(
        tool=tool,
        ok=False,
        error=ToolError(
            code=ErrorCode.RATE_LIMIT_ERROR,
            message=f"{held} (nothing was sent)",
            retry_after_s=max(0.1, round(held.retry_after_s, 1)),
        ),
    )
