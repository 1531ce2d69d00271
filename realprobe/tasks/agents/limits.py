"""Limits on the LLM endpoint, shared by every run of a batch that talks to it.

- `concurrency`: requests in flight at once,
- `rpm`: request starts per rolling minute,
- `tpm`: tokens per rolling minute (the tokens a request used are counted when it ends;
  a request waits while the last minute already holds `tpm` tokens),
- a 429 (or 503) with `Retry-After` pauses every request to the endpoint for that long; one
  without it backs off exponentially. A request is retried after the pause up to
  `max_retries` times; past that the run ends as an infrastructure error (`llm_error`),
  which is excluded from scores and retried by `--resume`.

Waits run on the limiter's clock, so a test can drive it with a virtual clock.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from realprobe.clock import Clock, RealClock
from realprobe.errors import BadArgument

WINDOW_S = 60.0


@dataclass
class LlmLimits:
    rpm: float | None = None
    tpm: float | None = None
    concurrency: int | None = None
    max_retries: int = 5
    backoff_s: float = 2.0
    max_pause_s: float = 120.0

    def check(self) -> LlmLimits:
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise BadArgument(f"llm_{name}", f"llm_{name} must be positive (got {value:g})")
        if self.concurrency is not None and self.concurrency < 1:
            raise BadArgument(
                "llm_concurrency", f"llm_concurrency must be at least 1 (got {self.concurrency})"
            )
        return self


@dataclass
class LlmLimiter:
    """One per endpoint (base URL), shared across concurrent runs."""

    limits: LlmLimits
    clock: Clock = field(default_factory=RealClock)
    starts: collections.deque[float] = field(default_factory=collections.deque)
    tokens: collections.deque[tuple[float, int]] = field(default_factory=collections.deque)
    paused_until: float = float("-inf")
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _slots: asyncio.Semaphore | None = None

    def __post_init__(self) -> None:
        if self.limits.concurrency is not None:
            self._slots = asyncio.Semaphore(self.limits.concurrency)

    def _trim(self, now: float) -> None:
        while self.starts and self.starts[0] <= now - WINDOW_S:
            self.starts.popleft()
        while self.tokens and self.tokens[0][0] <= now - WINDOW_S:
            self.tokens.popleft()

    def _ready_at(self, now: float) -> float:
        at = max(now, self.paused_until)
        lim = self.limits
        if lim.rpm is not None and len(self.starts) >= lim.rpm:
            at = max(at, self.starts[int(len(self.starts) - lim.rpm)] + WINDOW_S)
        if lim.tpm is not None:
            used = sum(n for _, n in self.tokens)
            if used >= lim.tpm:
                # wait until enough of the window's tokens have aged out
                drop = used - lim.tpm
                for ts, n in self.tokens:
                    drop -= n
                    if drop < 0:
                        at = max(at, ts + WINDOW_S)
                        break
        return at

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Wait for the limits, then hold one request slot."""
        slots = self._slots
        if slots is not None:
            await slots.acquire()
        try:
            async with self._lock:  # waiters take turns in order
                while True:
                    now = self.clock.now()
                    self._trim(now)
                    at = self._ready_at(now)
                    if at <= now:
                        self.starts.append(now)
                        break
                    await self.clock.sleep(at - now)
            yield
        finally:
            if slots is not None:
                slots.release()

    def used_tokens(self, n: int) -> None:
        if n > 0:
            self.tokens.append((self.clock.now(), n))

    def pause(self, seconds: float) -> None:
        """Hold every request to this endpoint for `seconds` (a Retry-After)."""
        self.paused_until = max(self.paused_until, self.clock.now() + seconds)


class LimiterRegistry:
    """One limiter per (endpoint, model), shared by every run that uses it."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or RealClock()
        self._by_endpoint: dict[str, LlmLimiter] = {}

    def for_endpoint(self, base_url: str, model: str, limits: LlmLimits | None) -> LlmLimiter:
        key = f"{base_url.rstrip('/')} {model}"
        limiter = self._by_endpoint.get(key)
        if limiter is None:
            limiter = self._by_endpoint[key] = LlmLimiter(limits or LlmLimits(), self.clock)
        return limiter
