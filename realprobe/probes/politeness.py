"""Per-host politeness: how hard a probe run may hit one host.

By default (from the catalogue's `api.politeness`, overridable per run):
- at most `max_in_flight` calls in flight per host (1),
- consecutive call *starts* on one host at least `min_interval_s` apart, plus a random
  jitter in [0, `jitter_s`] so probes from many machines do not synchronise,
- a `Retry-After` (429, 503) pauses the host for that long; a 429 without one backs off
  exponentially; a pause longer than `max_pause_s` ends the host's probing for this run,
- a daily budget of calls per API, counted in the database so it holds across runs and
  processes. Budgets protect real providers, so by default they count only calls that
  leave the machine for a real API (live and record modes), not sandbox or simulated calls.

Hosts are keyed by the canonical host of the API's base URL. Request URLs stay canonical
above the SandboxRouter, so against the sandbox each emulated API is its own host and a
sandbox run is as parallel as a live one. Waits use the client's clock: under simulation
(a virtual clock) they advance time without sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from realprobe.adapters.spec import ApiSpec, Politeness
from realprobe.clock import Clock
from realprobe.errors import ErrorCode
from realprobe.store import Store

#: politeness when it is switched off (sandbox/simulate benchmarks): no waits, no budget
UNLIMITED_IN_FLIGHT = 1_000_000


class PolitenessConfig(BaseModel):
    """What a probe run applies on top of the catalogue's per-API politeness."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    #: replaces every API's politeness (tests: `Politeness(min_interval_s=0, jitter_s=0)`)
    override: Politeness | None = None
    #: replaces the politeness of the named APIs
    per_api: dict[str, Politeness] = Field(default_factory=dict)
    honour_retry_after: bool = True
    #: a Retry-After (or backoff) longer than this ends the host's probing in this run
    max_pause_s: float = 300.0
    #: first backoff after a 429 without Retry-After (doubles per consecutive 429)
    backoff_429_s: float = 5.0
    #: None: budgets count only for live/record runs; True/False forces them on/off
    budgets: bool | None = None

    @classmethod
    def off(cls) -> PolitenessConfig:
        """No interval, no jitter, no in-flight limit, no budget (sandbox/simulate only)."""
        return cls(enabled=False, budgets=False)

    def for_api(self, api: ApiSpec) -> Politeness:
        if not self.enabled:
            return Politeness(
                max_in_flight=UNLIMITED_IN_FLIGHT,
                min_interval_s=0.0,
                jitter_s=0.0,
                daily_budget=2**62,
            )
        if api.id in self.per_api:
            return self.per_api[api.id]
        if self.override is not None:
            return self.override
        return api.politeness


def merge(policies: Iterable[Politeness]) -> Politeness:
    """The strictest combination, for APIs sharing one host."""
    ps = list(policies)
    return Politeness(
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
    """Start spacing, jitter and pauses for one host (in-flight limits are the runner's workers)."""

    key: str
    policy: Politeness
    clock: Clock
    config: PolitenessConfig
    rng: random.Random = field(default_factory=random.Random)
    next_start: float = float("-inf")
    pause_until: float = float("-inf")
    given_up: str | None = None  # why this host gets no more calls in this run
    _consecutive_429: int = 0

    def ready_at(self) -> float:
        """Clock time at which the next call may start."""
        return max(self.next_start, self.pause_until)

    async def wait_turn(self, stop: asyncio.Event | None = None) -> bool:
        """Wait until a call may start; False if the host was given up or the run stopped."""
        while True:
            if self.given_up is not None or (stop is not None and stop.is_set()):
                return False
            now = self.clock.now()
            start = max(now, self.next_start, self.pause_until)
            if start <= now:
                gap = self.policy.min_interval_s
                if self.policy.jitter_s > 0:
                    gap += self.rng.uniform(0.0, self.policy.jitter_s)
                self.next_start = now + gap
                return True
            if await sleep_or_stop(self.clock, start - now, stop):
                return False

    def note(self, code: ErrorCode | None, retry_after_s: float | None) -> None:
        """Learn from a finished call: Retry-After and 429 back-off pause the host."""
        if not self.config.enabled or not self.config.honour_retry_after:
            return
        pause: float | None = None
        if retry_after_s is not None and retry_after_s > 0:
            pause = retry_after_s
        if code is ErrorCode.RATE_LIMIT_ERROR:
            self._consecutive_429 += 1
            if pause is None:
                pause = self.config.backoff_429_s * 2 ** (self._consecutive_429 - 1)
        elif code is None:
            self._consecutive_429 = 0
        if pause is None:
            return
        if pause > self.config.max_pause_s:
            self.given_up = (
                f"asked to wait {pause:g}s (over the {self.config.max_pause_s:g}s limit); "
                "no more calls to this host in this run"
            )
            return
        self.pause_until = max(self.pause_until, self.clock.now() + pause)


class Budget:
    """The daily call budget per API, kept in the store (UTC days on the client's clock)."""

    def __init__(self, store: Store, target: str, clock: Clock, enabled: bool) -> None:
        self.store = store
        self.target = target
        self.clock = clock
        self.enabled = enabled

    def day(self) -> str:
        return dt.datetime.fromtimestamp(self.clock.wall(), dt.UTC).strftime("%Y-%m-%d")

    def take(self, api: str, limit: int) -> bool:
        if not self.enabled:
            return True
        return self.store.budget_take(self.day(), api, self.target, limit)
