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

import hashlib
import itertools
import math
import random
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Protocol

from realprobe.errors import ErrorCode
from realprobe.simulator.profile import (
    IMPLICIT_VARIANTS,
    RB_CLAMP,
    RB_FAILED_DEP,
    RB_PENALTY,
    RB_RULES,
    RB_UNCALLED,
    RB_WINDOW,
    Profile,
    ToolProfile,
    chain_with_rate,
)


@dataclass(frozen=True, slots=True)
class Outcome:
    code: ErrorCode | None  # None: success (an implicit fault is a success to the client)
    latency_s: float  # time before the answer (for TIMEOUT: how long it would hang)
    pick: int  # a random integer for choosing among variants of this code
    #: Retry-After (s) drawn from the profile's measured distribution; None: no header (when
    #: `retry_after_measured`) or the renderer's default (when not)
    retry_after_s: float | None = None
    retry_after_measured: bool = False
    #: a named variant to play (set by a fault plan or an implicit fault); None: the
    #: renderer picks one for the code
    variant: str | None = None
    #: who put the fault there: profile | plan (None: no fault)
    injected_by: str | None = None
    #: the fault lasts for the rest of the run (a dead tool, a permanent implicit fault)
    permanent: bool = False

    @property
    def ok(self) -> bool:
        return self.code is None

    @property
    def implicit(self) -> bool:
        return self.variant in IMPLICIT_VARIANTS

    @property
    def injected(self) -> bool:
        return self.injected_by is not None


@dataclass(slots=True)
class Injection:
    """One injected fault, as an evaluator reads it (never shown to the agent)."""

    tool: str
    call: int  # the tool's n-th call (1-based)
    variant: str | None  # None: the renderer picked the variant for `code`
    code: str | None  # the error code the client should see (None: implicit, looks ok)
    kind: str  # explicit | implicit
    persistence: str  # transient | permanent
    by: str  # profile | plan
    note: str = ""  # what an implicit fault did to the body

    def as_json(self) -> dict[str, object]:
        return {
            "tool": self.tool, "call": self.call, "variant": self.variant, "code": self.code,
            "kind": self.kind, "persistence": self.persistence, "by": self.by, "note": self.note,
        }  # fmt: skip


def injection_of(tool: str, call: int, out: Outcome) -> Injection | None:
    if not out.injected:
        return None
    return Injection(
        tool, call, out.variant, out.code.value if out.code else None,
        "implicit" if out.implicit else "explicit",
        "permanent" if out.permanent else "transient", out.injected_by or "profile",
    )  # fmt: skip


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
        self._mix = profile.latency_ms.components() if profile.latency_ms.mixture else []
        self._mix_cum = list(itertools.accumulate(w for w, _, _ in self._mix))
        self._codes = sorted(profile.errors, key=lambda c: c.value)
        self._cum = list(itertools.accumulate(profile.errors[c] for c in self._codes))

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
        chain = chain_with_rate(self.profile.burst, f)
        self._day_chain = (f, chain.p_fail_after_fail, chain.p_fail_after_ok)

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

    def draw(self, now_s: float | None = None, p_fail: float | None = None) -> Outcome:
        """One call's outcome; `now_s` (epoch seconds of the call) picks the day's effect when
        the profile has day-to-day variability; `p_fail` replaces the chain's chance (a rule
        over the task's history decides it)."""
        rng = self.rng
        if now_s is not None and self.profile.daily_logit_sd:
            self._set_day(now_s)
        p = self.p_fail() if p_fail is None else p_fail
        failed = rng.random() < p if self._codes else False
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


class ImplicitStream:
    """Whether a successful answer of one tool is quietly wrong (its own random stream, so
    profiles without implicit faults keep the exact outcomes they always had)."""

    def __init__(self, profile: Profile, seed: int | str, tool: str) -> None:
        self.spec = profile.implicit_for(tool)
        self.rng = random.Random(f"{seed}:{tool}:implicit")
        self.stuck: str | None = None  # a permanent implicit fault met earlier

    def apply(self, out: Outcome) -> Outcome:
        if self.spec is None or not out.ok:
            return out
        if self.stuck is not None:
            return replace(out, variant=self.stuck, injected_by="profile", permanent=True)
        u = self.rng.random()
        edge = 0.0
        for variant, rate in sorted(self.spec.rates.items()):
            edge += rate
            if u < edge:
                permanent = self.rng.random() < self.spec.permanent
                if permanent:
                    self.stuck = variant
                return replace(out, variant=variant, injected_by="profile", permanent=permanent)
        return out


#: callers a model keeps apart at once (the least recently seen go first)
MAX_CALLERS = 4096
#: outcomes a caller's model keeps per tool (the latest call numbers)
MAX_KEPT = 1024
#: call numbers a caller may give (a number is drawn up to: 10,000 take about 0.05 s); a
#: call numbered past them takes the next outcome, as an unnumbered one does
MAX_CALL_NUMBER = 10_000


def caller_seed(seed: int | str, key: str) -> int:
    """The seed of caller `key`'s own model under a model seeded `seed` (`draw_numbered`):
    64 bits of a hash, so it is also a seed any door takes."""
    digest = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


class PlanRun(Protocol):
    """A fault plan applied to one run's calls (`simulator.plans.PlanState`)."""

    def apply(self, tool: str, call: int, now: float | None, out: Outcome) -> Outcome: ...


class FaultPlanLike(Protocol):
    """A fault plan (`simulator.plans.FaultPlan`): named by shape, as plans build on this
    module's outcomes."""

    def start(self, seed: int | str) -> PlanRun: ...


class FaultModel:
    """Outcomes per tool from the profile, then implicit faults, then the fault plan's
    rules; every injected fault is also written to `ledger` for evaluators.

    One model serves one run (one task). Under the ResiliBench rules the success chance
    reads the task's history: every call of the run, and, once `bind` has told it the
    task's steps, the dependencies of the called tool."""

    def __init__(
        self, profile: Profile, seed: int | str = 0, plan: FaultPlanLike | None = None
    ) -> None:
        self.profile = profile
        self.seed = seed
        self.plan = plan
        self._streams: dict[str, ToolStream] = {}
        self._implicit: dict[str, ImplicitStream] = {}
        self._calls: dict[str, int] = {}
        #: a caller's model: the outcomes it drew, by tool and call number (`_nth`)
        self._kept: dict[str, dict[int, Outcome]] = {}
        #: the callers that number their calls, each with a model of its own (`draw_numbered`)
        self._callers: OrderedDict[str, FaultModel] = OrderedDict()
        self._plan_state: PlanRun | None = plan.start(seed) if plan is not None else None
        self.ledger: list[Injection] = []
        #: the task's history: (tool, failed) per call, in call order
        self.history: list[tuple[str, bool]] = []
        #: tool -> the groups of tools (a step and its alternatives) it reads from
        self.deps: dict[str, list[list[str]]] = {}

    def bind(self, path: list[list[str]], deps: dict[str, list[list[str]]]) -> None:
        """The task's preferred path (each step's tool first, then its alternatives) for the
        plan, and each tool's dependency groups for the ResiliBench rules."""
        self.deps = deps
        bind = getattr(self._plan_state, "bind", None)
        if bind is not None:
            bind(path)

    def p_fail(self, tool: str, base: float) -> float:
        """ResiliBench's failure chance for the next call of `tool` (success rate `base`):
        its paper (App. B.3) and its code (`_calculate_success_rate`) by `profile.rule`."""
        code = self.profile.rule == "resilibench-code"
        p = base
        for group in self.deps.get(tool, []):
            mine = [failed for t, failed in self.history if t in group]
            # the code counts a dependency as met once it succeeded; the paper once called
            met = (not all(mine)) if code else bool(mine)
            if not met:
                p *= RB_UNCALLED
            elif mine[-1]:
                p *= RB_FAILED_DEP
        if not code:
            return 1.0 - p * RB_PENALTY ** sum(f for _, f in self.history)
        if len(self.history) >= RB_WINDOW:
            p *= RB_PENALTY ** sum(f for _, f in self.history[-RB_WINDOW:])
        return 1.0 - min(max(p, RB_CLAMP[0]), RB_CLAMP[1])

    def draw_numbered(self, tool: str, key: str, n: int, now_s: float | None = None) -> Outcome:
        """The outcome of call `n` (from 0) of `tool` by the caller `key` (a probe run, a task
        run): the n-th outcome of that tool in a model of the caller's own, seeded by
        `caller_seed(seed, key)`. It depends on nothing else: not on the order calls arrive
        in, nor on other callers' calls, nor on how often it is asked (a run made again meets
        the same faults), so runs side by side meet what each would alone, and an in-process
        `FaultModel(profile, caller_seed(seed, key))` called in the same order meets the same
        outcomes. `n` from `MAX_CALL_NUMBER` on: the next outcome of the shared stream."""
        if not 0 <= n < MAX_CALL_NUMBER:
            return self.draw(tool, now_s)
        model = self._callers.get(key)
        if model is None:
            if len(self._callers) >= MAX_CALLERS:
                self._callers.popitem(last=False)
            model = self._callers[key] = FaultModel(self.profile, caller_seed(self.seed, key),
                                                    self.plan)
            model.ledger = self.ledger  # one ledger: what the whole server injected
        else:
            self._callers.move_to_end(key)
        return model._nth(tool, n, now_s)

    def _nth(self, tool: str, n: int, now_s: float | None) -> Outcome:
        """The tool's n-th outcome: kept, else drawn up to it (from the stream's start again
        when it was drawn too long ago to be kept)."""
        kept = self._kept.setdefault(tool, {})
        got = kept.get(n)
        if got is not None:
            return got
        if n < self._calls.get(tool, 0):  # let go of: the stream again from its start
            self._streams.pop(tool, None)
            self._calls[tool] = 0
            kept.clear()
        while (drawn := self._calls.get(tool, 0)) <= n:
            out = self.draw(tool, now_s)
            if n - drawn < MAX_KEPT:  # the rest are passed over: a far number costs no memory
                kept[drawn] = out
        while len(kept) > MAX_KEPT:
            del kept[min(kept)]
        return kept[n]

    def draw(self, tool: str, now_s: float | None = None) -> Outcome:
        """One call's outcome; `now_s` (epoch seconds of the call) picks the day's effect and
        places the call in a plan's time windows."""
        stream = self._streams.get(tool)
        if stream is None:
            stream = self._streams[tool] = ToolStream(
                self.profile.for_tool(tool), self.seed, tool
            )
            self._implicit[tool] = ImplicitStream(self.profile, self.seed, tool)
        call = self._calls[tool] = self._calls.get(tool, 0) + 1
        rule = self.profile.rule in RB_RULES
        out = stream.draw(now_s, self.p_fail(tool, stream.profile.success_rate) if rule else None)
        if out.code is not None:
            out = replace(out, injected_by="profile")
        out = self._implicit[tool].apply(out)
        limit = self.profile.call_timeout_s
        if limit is not None and out.ok and out.latency_s > limit:
            out = replace(out, code=ErrorCode.TIMEOUT, latency_s=math.inf, variant=None,
                          injected_by="profile", permanent=False)  # fmt: skip
        if self._plan_state is not None:
            out = self._plan_state.apply(tool, call, now_s, out)
        self.history.append((tool, not out.ok))
        injection = injection_of(tool, call, out)
        if injection is not None:
            self.ledger.append(injection)
        return out


def numbered_call_seconds(profile: Profile, seed: int | str, key: str, tool: str, calls: int,
                          deadline: float, now_s: float | None = None) -> list[float]:
    """What calls 0 to `calls` - 1 of `tool` by the caller `key` take on a sandbox seeded
    `seed` that serves `profile`: the outcomes `draw_numbered` will give them (their
    latency, or the `deadline` for a hang or an answer slower than that)."""
    model = FaultModel(profile, caller_seed(seed, key))
    return [min(model.draw(tool, now_s).latency_s, deadline)
            for _ in range(min(calls, MAX_CALL_NUMBER))]


def call_seconds(profile: ToolProfile, deadline: float, after_failure: bool | None = None,
                 n: int = 200, seed: str = "call-seconds") -> list[float]:
    """What the next call of a tool takes under its `profile`, `n` draws: its latency, or
    the `deadline` for a hang or an answer slower than that; after a failure or a success of
    the tool as its burst chain says (None: the chain's long run). Drawn from a stream of
    its own (`seed`): a target's own draws are never looked at."""
    stream = ToolStream(profile, seed, "next")
    out = []
    for _ in range(n):
        stream.prev_failed = after_failure
        out.append(min(stream.draw().latency_s, deadline))
    return out
