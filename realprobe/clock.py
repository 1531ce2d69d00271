"""Clocks. Latency is read from an injected clock so simulated runs never sleep for real."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Protocol


class Clock(Protocol):
    virtual: bool

    def now(self) -> float:
        """Seconds on a monotonic scale."""
        ...

    async def sleep(self, seconds: float) -> None: ...

    def wall(self) -> float:
        """Seconds since the epoch (for timestamps)."""
        ...


def utc_day(wall: float) -> tuple[str, float]:
    """Today at `wall` (an injected clock's `wall()`): the UTC date every daily budget is
    counted under, and the seconds left until the next one."""
    now = dt.datetime.fromtimestamp(wall, dt.UTC)
    midnight = (now + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return now.strftime("%Y-%m-%d"), (midnight - now).total_seconds()


class RealClock:
    virtual = False

    def now(self) -> float:
        return time.perf_counter()

    async def sleep(self, seconds: float) -> None:
        if seconds > 0:
            await asyncio.sleep(seconds)

    def wall(self) -> float:
        return time.time()


class WallClock(RealClock):
    """A real clock whose `now` is seconds since the epoch: one scale that every process on
    a machine reads alike (politeness shared across processes keeps time on it)."""

    def now(self) -> float:
        return time.time()


class VirtualClock:
    """A clock that only moves when told to: `sleep` and `advance` add to it, nothing waits."""

    virtual = True

    def __init__(self, start_wall: float | None = None) -> None:
        self._t = 0.0
        self._wall0 = time.time() if start_wall is None else start_wall

    def now(self) -> float:
        return self._t

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._t += seconds

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)

    def wall(self) -> float:
        return self._wall0 + self._t
