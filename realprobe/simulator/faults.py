"""The seeded fault model: a Profile turned into a reproducible stream of outcomes per tool.

Each tool has its own random stream derived from (seed, tool), so the outcomes one tool sees
do not depend on which other tools were called in between. Same seed, same sequence.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from realprobe.errors import ErrorCode
from realprobe.simulator.profile import Profile, ToolProfile


@dataclass(frozen=True, slots=True)
class Outcome:
    code: ErrorCode | None  # None: success
    latency_s: float  # time before the answer (for TIMEOUT: how long it would hang)
    pick: int  # a random integer for choosing among variants of this code

    @property
    def ok(self) -> bool:
        return self.code is None


class ToolStream:
    def __init__(self, profile: ToolProfile, seed: int | str, tool: str) -> None:
        self.profile = profile
        self.rng = random.Random(f"{seed}:{tool}")
        self.prev_failed: bool | None = None
        self.mu, self.sigma = profile.latency_ms.params()
        codes = sorted(profile.errors, key=lambda c: c.value)
        self._codes = codes
        self._cum: list[float] = []
        acc = 0.0
        for c in codes:
            acc += profile.errors[c]
            self._cum.append(acc)

    def p_fail(self) -> float:
        b = self.profile.burst
        if b is None:
            return 1.0 - self.profile.success_rate
        if self.prev_failed is None:
            return b.stationary_fail
        return b.p_fail_after_fail if self.prev_failed else b.p_fail_after_ok

    def draw(self) -> Outcome:
        rng = self.rng
        failed = rng.random() < self.p_fail() if self._codes else False
        latency = math.exp(self.mu + self.sigma * rng.gauss(0.0, 1.0)) / 1000.0
        pick = rng.getrandbits(30)
        self.prev_failed = failed
        if not failed:
            return Outcome(None, latency, pick)
        u = rng.random() * self._cum[-1]
        code = self._codes[-1]
        for c, edge in zip(self._codes, self._cum, strict=True):
            if u < edge:
                code = c
                break
        if code is ErrorCode.TIMEOUT:
            latency = math.inf
        return Outcome(code, latency, pick)


class FaultModel:
    def __init__(self, profile: Profile, seed: int | str = 0) -> None:
        self.profile = profile
        self.seed = seed
        self._streams: dict[str, ToolStream] = {}

    def draw(self, tool: str) -> Outcome:
        stream = self._streams.get(tool)
        if stream is None:
            stream = self._streams[tool] = ToolStream(self.profile.for_tool(tool), self.seed, tool)
        return stream.draw()
