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
        comps = profile.latency_ms.components() if profile.latency_ms.mixture else []
        self._mix = comps
        self._mix_cum: list[float] = []
        edge = 0.0
        for w, _, _ in comps:
            edge += w
            self._mix_cum.append(edge)
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

    def _latency_s(self, rng: random.Random) -> float:
        """One latency draw; a mixture picks its component first (one extra random number,
        so single-lognormal profiles keep the exact streams they always had)."""
        mu, sigma = self.mu, self.sigma
        if self._mix:
            u = rng.random() * self._mix_cum[-1]
            for (_, m, s), edge in zip(self._mix, self._mix_cum, strict=True):
                mu, sigma = m, s
                if u < edge:
                    break
        return math.exp(mu + sigma * rng.gauss(0.0, 1.0)) / 1000.0

    def draw(self) -> Outcome:
        rng = self.rng
        failed = rng.random() < self.p_fail() if self._codes else False
        latency = self._latency_s(rng)
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
