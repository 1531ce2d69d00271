"""Per-host politeness: the one limiter that probes, task runs and the MCP server share.

A free public API is one host that many things in realprobe may want at once: a probe run,
an agent in a loop behind the MCP server, ten concurrent task runs, the sandbox proxying
to a live upstream. Each host gets one
`HostLimiter`, on an injectable clock (a virtual clock advances instead of sleeping):

- at most `max_in_flight` calls in flight (`slot`),
- call *starts* at least `min_interval_s` apart, plus a random jitter in [0, `jitter_s`]
  when the limiter has a random source (probe runs: probes from many machines must not
  synchronise; an agent's calls are paced by the agent),
- a `Retry-After` (429, 503) pauses the host for that long; a 429 without one backs off
  exponentially (`note`).

Probe runs wait as long as their turn takes (`wait_turn`); an agent's call has a deadline,
so it waits only when its turn comes within that deadline and otherwise gets `HeldBack`
saying when to retry, with nothing sent (`HostGates.turn`). Everything holding the same
`HostGates` shares the limits. Hosts are keyed by `host_key` (`api.example.com:443`), so
APIs on one host share its limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import httpx

from realprobe.clock import Clock
from realprobe.errors import ErrorCode, RealprobeError
from realprobe.result import ToolError, ToolResult


class HeldBack(RealprobeError):
    """No turn within the deadline: retry after `retry_after_s`; nothing was sent."""

    def __init__(self, host: str, retry_after_s: float, why: str) -> None:
        super().__init__(f"realprobe holds back calls to {host}: {why}")
        self.host = host
        self.retry_after_s = retry_after_s
        self.why = why


@dataclass(frozen=True)
class Backoff:
    """How a host's limiter reacts to being told to slow down."""

    honour_retry_after: bool = True
    #: first pause after a 429 without Retry-After (doubles per consecutive 429)
    backoff_429_s: float = 5.0


class Politeness(Protocol):
    """What a limiter reads of an API's politeness (the catalogue's `Politeness` model)."""

    @property
    def max_in_flight(self) -> int: ...
    @property
    def min_interval_s(self) -> float: ...
    @property
    def jitter_s(self) -> float: ...
    @property
    def daily_budget(self) -> int: ...


class ApiSpec(Protocol):
    """What the gates read of a catalogue API (named by shape: the kernel imports no room)."""

    @property
    def name(self) -> str: ...
    @property
    def base_url(self) -> str: ...
    @property
    def politeness(self) -> Politeness: ...


@dataclass(frozen=True)
class Strictest:
    """The strictest combination of several APIs' politeness (they share one host)."""

    max_in_flight: int
    min_interval_s: float
    jitter_s: float
    daily_budget: int


def host_key(api: ApiSpec) -> str:
    """The host an API lives on (`api.example.com:443`); APIs on one host share its limits."""
    url = httpx.URL(api.base_url)
    port = url.port or (443 if url.scheme == "https" else 80)
    return f"{url.host}:{port}"


def merge(policies: Iterable[Politeness]) -> Politeness:
    """The strictest combination, for APIs sharing one host."""
    ps = list(policies)
    return Strictest(
        max_in_flight=min(p.max_in_flight for p in ps),
        min_interval_s=max(p.min_interval_s for p in ps),
        jitter_s=max(p.jitter_s for p in ps),
        daily_budget=min(p.daily_budget for p in ps),
    )


async def sleep_or_stop(clock: Clock, seconds: float, stop: asyncio.Event | None) -> bool:
    """Sleep on `clock`; return early (True) when `stop` is set."""
    if seconds <= 0:
        return bool(stop and stop.is_set())
    if stop is None:
        await clock.sleep(seconds)
        return False
    if stop.is_set():
        return True
    if clock.virtual:
        await clock.sleep(seconds)
        return stop.is_set()
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sleeper, stopper):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    return stop.is_set()


@dataclass
class HostLimiter:
    """Start spacing (with jitter), Retry-After pauses and in-flight slots for one host."""

    key: str
    policy: Politeness
    clock: Clock
    backoff: Backoff = field(default_factory=Backoff)
    rng: random.Random | None = None  # jitter only with a random source
    next_start: float = float("-inf")
    pause_until: float = float("-inf")
    _consecutive_429: int = 0
    _slots: asyncio.Semaphore | None = None

    def ready_at(self) -> float:
        """Clock time at which the next call may start."""
        return max(self.next_start, self.pause_until)

    def _claim(self, now: float) -> float:
        """Take the next start (at `now` or later) and space the one after it."""
        start = max(now, self.ready_at())
        gap = self.policy.min_interval_s
        if self.rng is not None and self.policy.jitter_s > 0:
            gap += self.rng.uniform(0.0, self.policy.jitter_s)
        self.next_start = start + gap
        return start

    async def wait_turn(
        self, stop: asyncio.Event | None = None, give_up_after: float | None = None
    ) -> bool:
        """Wait until a call may start. False when `stop` is set, or when the host's next
        turn is more than `give_up_after` seconds away (it asked for a long pause)."""
        while True:
            if stop is not None and stop.is_set():
                return False
            now = self.clock.now()
            wait = self.ready_at() - now
            if wait <= 0:
                self._claim(now)
                return True
            if give_up_after is not None and wait > give_up_after:
                return False
            if await sleep_or_stop(self.clock, wait, stop):
                return False

    def reserve(self, budget_s: float) -> float:
        """Claim the next start if it comes within `budget_s`; the seconds to wait for it.
        Raises HeldBack (nothing claimed) when the turn is later than that."""
        now = self.clock.now()
        wait = self.ready_at() - now
        if wait > budget_s:
            if self.pause_until > now and self.pause_until >= self.next_start:
                why = f"the API asked for a pause of {wait:.1f}s (Retry-After or 429 back-off)"
            else:
                why = (
                    f"one call start every {self.policy.min_interval_s:g}s (the catalogue's "
                    "politeness)"
                )
            raise HeldBack(
                self.key, wait, f"{why}, and the next turn is after this call's {budget_s:g}s "
                "deadline",
            )
        return self._claim(now) - now

    @property
    def slots(self) -> asyncio.Semaphore:
        """At most `max_in_flight` calls in flight (made on first use, inside a loop)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(max(1, self.policy.max_in_flight))
        return self._slots

    def note(self, code: ErrorCode | None, retry_after_s: float | None) -> float | None:
        """Learn from a finished call: Retry-After and 429 back-off pause the host. Returns
        the pause applied (seconds), if any."""
        if not self.backoff.honour_retry_after:
            return None
        pause: float | None = None
        if retry_after_s is not None and retry_after_s > 0:
            pause = retry_after_s
        if code is ErrorCode.RATE_LIMIT_ERROR:
            self._consecutive_429 += 1
            if pause is None:
                pause = self.backoff.backoff_429_s * 2 ** (self._consecutive_429 - 1)
        elif code is None:
            self._consecutive_429 = 0
        if pause is not None:
            self.pause_until = max(self.pause_until, self.clock.now() + pause)
        return pause


class HostGates:
    """The limiters of every host, shared by whatever holds this object."""

    def __init__(self, clock: Clock | None = None, backoff: Backoff | None = None) -> None:
        from realprobe.clock import RealClock

        self.clock: Clock = clock or RealClock()
        self.backoff = backoff or Backoff()
        self._limiters: dict[str, HostLimiter] = {}

    def limiter(
        self, key: str, policy: Politeness, rng: random.Random | None = None
    ) -> HostLimiter:
        """The limiter of host `key`; a stricter `policy` than the one it has tightens it."""
        lim = self._limiters.get(key)
        if lim is None:
            lim = self._limiters[key] = HostLimiter(key, policy, self.clock, self.backoff, rng)
        elif policy != lim.policy:
            lim.policy = merge([lim.policy, policy])
        return lim

    def for_api(self, api: ApiSpec) -> HostLimiter:
        return self.limiter(host_key(api), api.politeness)

    @asynccontextmanager
    async def turn(self, api: ApiSpec, budget_s: float) -> AsyncIterator[float]:
        """Wait for this host's next turn; yields the seconds waited. Raises HeldBack."""
        lim = self.for_api(api)
        now = self.clock.now()
        wait = lim.reserve(budget_s)
        if wait > 0:
            await self.clock.sleep(wait)
        left = budget_s - (self.clock.now() - now)
        with anyio.move_on_after(max(0.0, left)) as scope:
            await lim.slots.acquire()
        if scope.cancelled_caught:
            raise HeldBack(
                lim.key, lim.policy.min_interval_s or 1.0,
                f"{lim.policy.max_in_flight} call(s) already in flight to {api.name} until the "
                "deadline",
            )
        try:
            yield self.clock.now() - now
        finally:
            lim.slots.release()

    def note(self, api: ApiSpec, result: ToolResult) -> None:
        """Let the host's limiter learn from a finished call (Retry-After, 429s)."""
        self.for_api(api).note(result.code, result.error.retry_after_s if result.error else None)


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
