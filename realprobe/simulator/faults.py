"""The seeded fault model: a Profile turned into a reproducible stream of outcomes per tool.

Each tool has its own random stream derived from (seed, tool), so the outcomes one tool sees
do not depend on which other tools were called in between. Same seed, same sequence.

Beyond the success rate, the error mix and the burst chain, a profile may set three things,
and only then does the stream draw the extra random numbers they need (profiles without them
keep the exact streams they always had):
- `code_persistence` c: a failure right after a failure repeats the previous code with
  probability c (else its code is drawn from the mix), so an outage keeps one code;
- `daily_logit_sd`: each UTC day shifts the logit of the failure rate by an effect drawn once
  per (seed, tool, day), when the caller passes the time of the call;
- `retry_after`: per code, whether the answer carries Retry-After and its value.
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
    #: Retry-After (s) drawn from the profile's measured distribution; None: no header (when
    #: `retry_after_measured`) or the renderer's default (when not)
    retry_after_s: float | None = None
    retry_after_measured: bool = False

    @property
    def ok(self) -> bool:
        return self.code is None


#: standard normal grid for the mean of expit over the day effects (midpoint rule on +-6 sd)
_Z = [-6.0 + 12.0 * (i + 0.5) / 121 for i in range(121)]
_ZW = [math.exp(-z * z / 2) for z in _Z]


def _logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


def _expit(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


def day_centre(mean_fail: float, sd: float) -> float:
    """The logit centre c whose mean failure rate over day effects N(0, sd) is `mean_fail`."""
    if sd <= 0 or mean_fail <= 0 or mean_fail >= 1:
        return _logit(mean_fail)
    total = sum(_ZW)

    def mean(c: float) -> float:
        return sum(w * _expit(c + sd * z) for z, w in zip(_Z, _ZW, strict=True)) / total

    lo, hi = -40.0, 40.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean(mid) < mean_fail else (lo, mid)
    return (lo + hi) / 2


class ToolStream:
    def __init__(self, profile: ToolProfile, seed: int | str, tool: str) -> None:
        self.profile = profile
        self.rng = random.Random(f"{seed}:{tool}")
        self._day_key = f"{seed}:{tool}:day"
        self.prev_failed: bool | None = None
        self.prev_code: ErrorCode | None = None
        self._day: int | None = None
        self._day_chain: tuple[float, float, float] | None = None  # (stationary, ff, fo)
        sd = profile.daily_logit_sd or 0.0
        self._centre = day_centre(self._fail_rate(), sd) if sd > 0 else 0.0
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

    def _fail_rate(self) -> float:
        b = self.profile.burst
        return b.stationary_fail if b is not None else 1.0 - self.profile.success_rate

    def _set_day(self, now_s: float) -> None:
        """This UTC day's chain: the failure rate's logit shifted by the day's effect, the
        chain's correlation kept (P(fail|ok) = f(1-rho), P(fail|fail) = P(fail|ok) + rho)."""
        day = math.floor(now_s / 86400.0)
        if day == self._day:
            return
        self._day = day
        sd = self.profile.daily_logit_sd or 0.0
        f = _expit(self._centre + random.Random(f"{self._day_key}:{day}").gauss(0.0, sd))
        b = self.profile.burst
        rho = b.p_fail_after_fail - b.p_fail_after_ok if b is not None else 0.0
        rho = min(max(rho, -f / (1 - f) if f < 1 else 0.0, 1 - 1 / f if f > 0 else 0.0), 1.0)
        fo = min(1.0, max(0.0, f * (1 - rho)))
        self._day_chain = (f, min(1.0, max(0.0, fo + rho)), fo)

    def p_fail(self) -> float:
        if self._day_chain is not None:
            f, ff, fo = self._day_chain
            if self.prev_failed is None:
                return f
            return ff if self.prev_failed else fo
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

    def _code(self, rng: random.Random, after_failure: bool) -> ErrorCode:
        """The failure's code: the previous one again with probability `code_persistence`
        when the previous call failed too, else a draw from the mix."""
        c = self.profile.code_persistence
        if after_failure and c and self.prev_code is not None and rng.random() < c:
            return self.prev_code
        u = rng.random() * self._cum[-1]
        for code, edge in zip(self._codes, self._cum, strict=True):
            if u < edge:
                return code
        return self._codes[-1]

    def _retry_after(self, rng: random.Random, code: ErrorCode) -> tuple[float | None, bool]:
        model = self.profile.retry_after.get(code)
        if model is None:
            return None, False
        if not model.values or rng.random() >= model.share:
            return None, True
        u, acc = rng.random(), 0.0
        for seconds, weight in model.values:
            acc += weight
            if u < acc:
                return seconds, True
        return model.values[-1][0], True

    def draw(self, now_s: float | None = None) -> Outcome:
        """One call's outcome; `now_s` (epoch seconds of the call) picks the day's effect when
        the profile has day-to-day variability."""
        rng = self.rng
        if now_s is not None and self.profile.daily_logit_sd:
            self._set_day(now_s)
        failed = rng.random() < self.p_fail() if self._codes else False
        latency = self._latency_s(rng)
        pick = rng.getrandbits(30)
        after_failure = bool(self.prev_failed)
        self.prev_failed = failed
        if not failed:
            self.prev_code = None
            return Outcome(None, latency, pick)
        code = self._code(rng, after_failure)
        self.prev_code = code
        if code is ErrorCode.TIMEOUT:
            latency = math.inf
        wait, measured = self._retry_after(rng, code)
        return Outcome(code, latency, pick, wait, measured)


class FaultModel:
    def __init__(self, profile: Profile, seed: int | str = 0) -> None:
        self.profile = profile
        self.seed = seed
        self._streams: dict[str, ToolStream] = {}

    def draw(self, tool: str, now_s: float | None = None) -> Outcome:
        stream = self._streams.get(tool)
        if stream is None:
            stream = self._streams[tool] = ToolStream(self.profile.for_tool(tool), self.seed, tool)
        return stream.draw(now_s)
