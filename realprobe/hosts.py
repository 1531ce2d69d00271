"""Per-host politeness: the one limiter that probes, task runs and the MCP server share.

A free public API is one host that many things in realprobe may want at once: a probe run,
an agent in a loop behind the MCP server, ten concurrent task runs, the sandbox proxying
to a live upstream. Each host gets one
`HostLimiter`, on an injectable clock (a virtual clock advances instead of sleeping):

- at most `max_in_flight` calls in flight (`slot`),
- call *starts* at least `min_interval_s` apart, plus a random jitter in [0, `jitter_s`]
  when the limiter has a random source (probe runs: probes from many machines must not
  synchronise; an agent's calls are paced by the agent),
- a `Retry-After` (on any answer that carries one) pauses the host for that long; a 429
  without one backs off exponentially (`note`).

Probe runs wait as long as their turn takes (`wait_turn`); an agent's call has a deadline,
so it waits only when its turn comes within that deadline and otherwise gets `HeldBack`
saying when to retry, with nothing sent (`HostGates.turn`). Everything holding the same
`HostGates` shares the limits. Hosts are keyed by `host_key` (`api.example.com:443`), so
APIs on one host share its limits.

Across processes (task runs on Ray workers) the state lives in one `GateState` (a Ray actor
holds it) and each process holds `SharedGates` talking to it: the same claims, slots and
pauses, with start times on the wall clock. On one machine every process reads the same
clock, so the spacing is exact; across machines it holds to within their clock offset
(NTP keeps it to milliseconds) plus nothing else, since each call sleeps until its claimed
start by its own clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import AsyncIterator, Awaitable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import httpx

from realprobe.clock import Clock, WallClock
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
        """Wait for this host's next turn; yields the seconds waited. Raises HeldBack.

        The in-flight slot first, then the start: a start claimed before waiting for a slot
        could be passed while the slot is busy, and the next call, spaced from the claim
        rather than from the real start, would then go out too soon after it."""
        lim = self.for_api(api)
        now = self.clock.now()
        with anyio.move_on_after(max(0.0, budget_s)) as scope:
            await lim.slots.acquire()
        if scope.cancelled_caught:
            raise _no_slot(lim.key, lim.policy, api)
        try:
            wait = lim.reserve(budget_s - (self.clock.now() - now))
            if wait > 0:
                await self.clock.sleep(wait)
            yield self.clock.now() - now
        finally:
            lim.slots.release()

    def note(self, api: ApiSpec, result: ToolResult) -> None:
        """Let the host's limiter learn from a finished call (Retry-After, 429s)."""
        self.for_api(api).note(result.code, result.error.retry_after_s if result.error else None)


def _no_slot(key: str, policy: Politeness, api: ApiSpec) -> HeldBack:
    """No in-flight slot came free before the call's deadline."""
    return HeldBack(key, policy.min_interval_s or 1.0, f"{policy.max_in_flight} call(s) "
                    f"already in flight to {api.name} until the deadline")


def strictest(policy: Politeness) -> Strictest:
    """A policy as plain data (it travels to another process)."""
    return Strictest(policy.max_in_flight, policy.min_interval_s, policy.jitter_s,
                     policy.daily_budget)


#: (the wall-clock time the call may start, or None when held back; seconds to retry after;
#: why it is held back)
Claim = tuple[float | None, float, str]


class GateState:
    """Every host's politeness in one place, for many processes: `HostGates`' limiters on
    the wall clock, with in-flight slots lent as leases that lapse if their holder dies."""

    def __init__(self, backoff: Backoff | None = None) -> None:
        self.gates = HostGates(WallClock(), backoff)
        self._leases: dict[int, tuple[HostLimiter, float]] = {}
        self._ids = itertools.count(1)

    def reserve(self, key: str, policy: Strictest, budget_s: float) -> Claim:
        """Claim the host's next start if it comes within `budget_s` (as `HostGates.turn`)."""
        try:
            wait = self.gates.limiter(key, policy).reserve(budget_s)
        except HeldBack as held:
            return None, held.retry_after_s, held.why
        return time.time() + wait, 0.0, ""

    async def acquire(self, key: str, policy: Strictest, timeout_s: float, lease_s: float) -> int:
        """An in-flight slot within `timeout_s` (0: none came), lent for at most `lease_s`."""
        self._lapse()
        lim = self.gates.limiter(key, policy)
        try:
            await asyncio.wait_for(lim.slots.acquire(), max(0.0, timeout_s))
        except TimeoutError:
            return 0
        lease = next(self._ids)
        self._leases[lease] = (lim, time.time() + lease_s)
        return lease

    def note_and_release(
        self, lease: int, key: str, policy: Strictest, code: str | None,
        retry_after_s: float | None, started: float | None = None,
    ) -> None:
        """What the call taught (Retry-After, 429s), then its slot back: in this order, as
        in one process, so no call starts between the two. `started`: when the call really
        went out; a late start pushes the next one back, so the spacing holds from it."""
        lim = self.gates.limiter(key, policy)
        if started is not None:
            lim.next_start = max(lim.next_start, started + policy.min_interval_s)
        if code != "-":  # "-": the call ended without a result to learn from
            lim.note(ErrorCode(code) if code else None, retry_after_s)
        self._release(lease)

    def _release(self, lease: int) -> None:
        held = self._leases.pop(lease, None)
        if held is not None:
            held[0].slots.release()

    def _lapse(self) -> None:
        now = time.time()
        for lease in [k for k, (_, until) in self._leases.items() if until < now]:
            self._release(lease)


class GateLink(Protocol):
    """How a process reaches the one `GateState`: `call` awaits a method's answer, `send`
    does not wait (a Ray actor handle, wrapped by the executor)."""

    def call(self, method: str, *args: Any) -> Awaitable[Any]: ...
    def send(self, method: str, *args: Any) -> None: ...


class SharedGates(HostGates):
    """`HostGates` whose limits live in a `GateState` shared with other processes."""

    #: a lease outlives the call's budget by this much before it lapses (a dead holder)
    LEASE_MARGIN_S = 30.0

    def __init__(self, link: GateLink) -> None:
        super().__init__(WallClock())
        self.link = link
        #: the slot (and real start) of each finished call per host, given back with its note
        self._pending: dict[str, list[tuple[int, float | None]]] = {}

    @asynccontextmanager
    async def turn(self, api: ApiSpec, budget_s: float) -> AsyncIterator[float]:
        """The in-flight slot first, then the start: no message to the state lies between
        the claimed start and the call, and the call's real start goes back with its slot."""
        key, policy, t0 = host_key(api), strictest(api.politeness), time.time()
        lease = await self.link.call("acquire", key, policy, budget_s,
                                     budget_s + self.LEASE_MARGIN_S)
        if not lease:
            raise _no_slot(key, policy, api)
        left = max(0.0, budget_s - (time.time() - t0))
        start, retry_after, why = await self.link.call("reserve", key, policy, left)
        if start is None:
            self.link.send("note_and_release", lease, key, policy, "-", None)
            raise HeldBack(key, retry_after, why)
        await asyncio.sleep(max(0.0, start - time.time()))
        started = time.time()
        try:
            yield started - t0
        except BaseException:
            self.link.send("note_and_release", lease, key, policy, "-", None, started)
            raise
        self._pending.setdefault(key, []).append((lease, started))

    def note(self, api: ApiSpec, result: ToolResult) -> None:
        key, policy = host_key(api), strictest(api.politeness)
        pending = self._pending.get(key)
        lease, started = pending.pop(0) if pending else (0, None)
        sent = sent_at(result)
        if sent is not None and started is not None:
            started = max(started, sent)
        code = result.code.value if result.code is not None else None
        retry = result.error.retry_after_s if result.error else None
        self.link.send("note_and_release", lease, key, policy, code, retry, started)


def sent_at(result: ToolResult, now: float | None = None) -> float | None:
    """When a just-finished call's request left (wall clock, a little late rather than
    early): the time to first byte and the transfer back from now, as its phases recorded
    them; without those, its start after the time its connection took to open."""
    now = time.time() if now is None else now
    phases = result.phases or {}
    ttfb, transfer = phases.get("ttfb_ms"), phases.get("transfer_ms")
    if ttfb is not None and transfer is not None:
        return now - (float(ttfb) + float(transfer)) / 1000.0
    if not result.latency_ms:
        return None
    opening = sum(float(phases.get(k) or 0.0) for k in ("dns_ms", "connect_ms", "tls_ms"))
    return now - (result.latency_ms - opening) / 1000.0


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
