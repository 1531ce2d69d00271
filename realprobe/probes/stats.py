"""Per-tool statistics over stored probe rows: success with uncertainty, error mix, latency
(censored lognormal fit), the burst chain, and variability across periods.

Rows are loaded with one SQL query into numpy arrays and every statistic is vectorised, so a
million rows take about a second. All estimands are *per attempt*: one stored call is one trial;
rows with `excluded=1` (the prober's own outages) are left out before anything is counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel

from realprobe.errors import Unavailable
from realprobe.probes.classic_tests import chi2_contingency, midranks
from realprobe.probes.implicit import IMPLICIT_EXTRA, implicit_counts
from realprobe.probes.latency_fit import (
    PROFILE_CI_MIN_EXCEED,
    Z95,
    LognormalFit,
    fit_lognormal,
    ks_pvalue,
)
from realprobe.probes.latency_mixture import Component as MixtureComponent
from realprobe.probes.latency_mixture import fit_mixture
from realprobe.probes.lazy_special import special
from realprobe.probes.loading import (
    _TIMEOUT,
    CODES,
    PHASE_EXTRA,
    BoolArray,
    FloatArray,
    IntArray,
    ProbeArrays,
    load_probes,
)
from realprobe.probes.numeric import one_blas_thread, sorted_quantiles
from realprobe.probes.provenance import (
    EMPTY_SELECTION_PARAMS,
    Group,
    Provenance,
    describe,
    empty_selection_error,
    kinds_present,
    pick_kinds,
    survey,
)
from realprobe.probes.windows import iso
from realprobe.store import Database

#: consecutive calls further apart than this are not a transition of the burst chain
BURST_MAX_GAP_S = 3600.0
#: a chain's correlation is clipped here wherever it sets an effective sample size (the
#: success interval, the day-to-day and drift tests) or a profile's generative chain
RHO_MAX = 0.98
#: a period (day by default) needs this many attempts to count for the variability flags
VARIABILITY_MIN_N = 10
#: a period needs this many attempts to count for the long-run interval
LONG_RUN_MIN_N = 5
#: below this many failures over the periods, their cluster-robust variance is mostly binomial
#: noise: the long-run interval is then random effects over the days, and says so
LONG_RUN_MIN_FAILURES = 20
SUCCESS_SD_FLAG = 0.10
LATENCY_CV_FLAG = 0.25
VARIABILITY_ALPHA = 0.01


# -- proportions -------------------------------------------------------------------------------


def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials (n may be an effective, fractional n)."""
    if n <= 0:
        return (0.0, 1.0)
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(max(p * (1 - p) / n + z2 / (4 * n * n), 0.0))
    return _holding(p, centre - half, centre + half)


def _holding(p: float, lo: float, hi: float) -> tuple[float, float]:
    """An interval clipped to [0, 1] that never excludes its own point p (rounding would put
    the upper end of a share of 1.0 at 0.9999999999999999)."""
    lo = 0.0 if p <= 0 else min(max(0.0, lo), p)
    hi = 1.0 if p >= 1 else max(min(1.0, hi), p)
    return (lo, hi)


#: above this many trials `mid_p` is Wilson's interval
MID_P_MAX_N = 500


def mid_p(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The mid-p exact interval for k of n: each end is the p at which the binomial tail beyond
    k, with half the probability of k itself, is (1 - level) / 2. Near 0 or 1 and at small n
    it holds its level where Wilson's falls short; for the burst chain's transitions, whose
    counts are small and often near 1 (P(fail|fail) 0.8 at N = 50), it covers 94-98% where
    Wilson's covered 82-90% (bench/interval_coverage.py --bursts)."""
    if n <= 0:
        return (0.0, 1.0)
    if n > MID_P_MAX_N:  # the two agree to a tenth of a point there; Wilson's is closed form
        return wilson(k, n, float(special.ndtri(1 - (1 - level) / 2)))
    a = (1 - level) / 2
    target = np.array([a, 1 - a])
    # P(X > k) + P(X = k) / 2 rises with p from the Clopper-Pearson end for k (where P(X >= k)
    # is the target) to the one for k + 1 (where P(X > k) is): bisect between them, both
    # ends at once
    lo = special.betaincinv(k, n - k + 1, target) if k > 0 else np.zeros(2)
    hi = special.betaincinv(k + 1, n - k, target) if k < n else np.ones(2)
    for _ in range(24):  # the bracket is at most 1 wide: 2^-24 is far below a display digit
        mid = (lo + hi) / 2
        above = special.betainc(k + 1, n - k, mid) if k < n else np.zeros(2)
        from_k = special.betainc(k, n - k + 1, mid) if k > 0 else np.ones(2)
        low = (above + from_k) / 2 < target
        lo, hi = np.where(low, mid, lo), np.where(low, hi, mid)
    ends = (lo + hi) / 2
    return _holding(k / n, float(ends[0]) if k > 0 else 0.0, float(ends[1]) if k < n else 1.0)


def jeffreys(k: float, n: float, level: float = 0.95) -> tuple[float, float]:
    """Jeffreys interval: quantiles of Beta(k+1/2, n-k+1/2); ends pinned at 0 / 1 when k=0 / n."""
    if n <= 0:
        return (0.0, 1.0)
    a = (1 - level) / 2
    lo = 0.0 if k <= 0 else float(special.betaincinv(k + 0.5, n - k + 0.5, a))
    hi = 1.0 if k >= n else float(special.betaincinv(k + 0.5, n - k + 0.5, 1 - a))
    return (lo, hi)


# -- the models --------------------------------------------------------------------------------


class SuccessStats(BaseModel):
    denominator: str = "per attempt"
    n: int
    successes: int
    rate: float
    wilson95: tuple[float, float]
    jeffreys95: tuple[float, float]
    #: Wilson on the effective sample size n(1-rho)/(1+rho) of a two-state chain: failures in
    #: runs carry less information than independent ones, so this is the honest interval
    burst_adjusted95: tuple[float, float]
    n_effective: float
    #: where the chain behind burst_adjusted95 comes from: "own" (this tool's transitions),
    #: "borrowed" (too few failures here: P(fail|fail) shrunk towards the chain pooled over
    #: the selection's tools, empirical Bayes) or "assumed independent" (no failure anywhere
    #: to learn from)
    burst_source: str = "own"
    rho_used: float | None = None
    note: str | None = None
    #: the long-run rate's interval: days are a random sample of days (cluster-robust over
    #: the periods, Student t), so day-to-day variation is in it; burst_adjusted95 is the
    #: interval for the probed days only
    long_run95: tuple[float, float] | None = None
    long_run_periods: int = 0
    long_run_note: str | None = None
    #: True when too few failures were seen to estimate day-to-day variation: long_run95 then
    #: rests on the probed days' interval (conservative when days vary little)
    long_run_too_few_failures: bool = False

    @property
    def quoted95(self) -> tuple[float, float]:
        """The interval to quote: burst-adjusted Wilson. Every surface that shows a success
        interval (stats, report, /status, the exporter, alerts) shows and decides on this
        one; one that shows another names it."""
        return self.burst_adjusted95


def interval_text(ci: tuple[float, float] | None) -> str:
    """An interval as every surface prints it: `[33.2, 78.7]` (percent)."""
    return "-" if ci is None else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


class ErrorMix(BaseModel):
    failures: int
    counts: dict[str, int]
    share_of_failures: dict[str, float]
    share_of_attempts: dict[str, float]
    #: variance inflation of the code counts from failures that repeat their code within a
    #: run of failures (`code_design_effect`; 1 when codes are drawn independently)
    design_effect: float = 1.0
    #: the effective number of independent failures, failures / design_effect
    n_effective: float = 0.0
    #: per code, the 95% interval of its share of failures: Wilson at n_effective, each code
    #: on its own (per-code, not simultaneous: each covers its share 95% of the time)
    share_of_failures_ci95: dict[str, tuple[float, float]] = {}
    #: the interval of the share of any one code never seen among these failures
    unseen_code_ci95: tuple[float, float] | None = None


class LatencyStats(BaseModel):
    """Latency of successes in ms. When the deadline bites (the fit puts S(T) >= 0.001 of calls
    beyond it) the successes are the fast part of the distribution only, so mean and
    percentiles come from the censored fit (`percentiles: "censored-fit"`, or
    `"censored-mixture"` for two lognormals: what calls would take without the deadline) and
    `observed` keeps the successes' own, which are then lower bounds. Otherwise they are the
    successes' empirical values (`"empirical"`)."""

    n: int
    percentiles: str = "empirical"
    observed: dict[str, float] | None = None
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    lognormal: LognormalFit | None = None
    ks_pvalue: float | None = None
    timeout_s: float | None = None
    #: two lognormals, tried whenever the KS test rejects one (p < 0.05) and kept when BIC
    #: prefers them; then the percentiles, the mean and p_exceed_timeout come from it
    mixture: list[MixtureComponent] | None = None
    mixture_fit: dict[str, Any] | None = None
    #: S(T): the share of calls slower than the deadline under the model in use (mixture or
    #: lognormal), with a 95% interval (profile likelihood of the censored fit, either one)
    p_exceed_timeout: float | None = None
    p_exceed_timeout_ci95: tuple[float, float] | None = None
    #: True when p99 is the successes' own 99th percentile over fewer than P99_MIN_N of
    #: them: it then tends to fall short of the true one, so read it as a lower bound
    p99_lower_bound: bool = False

    @property
    def extrapolated(self) -> bool:
        """Whether the percentiles come from a censored fit (one lognormal or a mixture) past
        the deadline rather than the successes' own: the one decision every surface marks
        (with EXTRAPOLATED)."""
        return self.percentiles != "empirical"


#: the mark of an extrapolated percentile, on every surface
EXTRAPOLATED = "*"
#: below this many successes, an empirical p99 is marked as a lower bound: fewer than four
#: calls lie beyond the true p99 on average, and the empirical one is short by a median of
#: 3% (lognormal sigma 0.5) to 6% (sigma 1) at 400, 5-11% at 200 and 13-23% at 50
#: (bench/interval_coverage.py --p99)
P99_MIN_N = 400
#: the mark of a percentile that is a lower bound, before it, on every surface
LOWER_BOUND = "≥"


def p99_text(lat: LatencyStats) -> str:
    """p99 in ms as every surface quotes it: `≥340` when it is a lower bound."""
    if lat.p99 is None:
        return "-"
    return f"{LOWER_BOUND if lat.p99_lower_bound else ''}{lat.p99:.0f}"


class Transition(BaseModel):
    p: float | None
    n: int
    #: mid-p exact interval (`mid_p`)
    ci95: tuple[float, float] | None
    #: True under TRANSITION_FEW_N pairs: so few that no interval on them can hold its level
    #: closely (a handful of pairs allows only a handful of intervals); marked `~`
    approximate: bool = False


#: pairs below which a transition's interval is marked approximate
TRANSITION_FEW_N = 10
#: the mark of an approximate interval or estimate, on every surface
APPROXIMATE = "~"


class BurstStats(BaseModel):
    p_fail_after_fail: Transition
    p_fail_after_ok: Transition
    rho: float | None
    #: P(fail | the previous call failed with a code other than TIMEOUT). Such a failure was
    #: surely a fault, never a slow call cut by the deadline
    p_fail_after_coded_fail: Transition | None = None
    #: among consecutive failures, the share whose code repeats the previous one (an outage
    #: keeps one code); calibration turns it into the profile's code persistence
    p_same_code_after_fail: Transition | None = None
    #: pairs of calls k = 1..PAIR_LAGS apart (element k-1; all calls between them linked) by
    #: outcome, rows the first call and columns the later one: success, a failure with another
    #: code, TIMEOUT. Calibration fits the chain behind a deadline to them
    pairs: list[list[list[int]]] | None = None


class Variability(BaseModel):
    period_s: float
    periods: int
    success_sd: float | None = None
    success_pvalue: float | None = None
    #: the chi-square above divided by the burst chain's design effect (1+rho)/(1-rho), so
    #: runs of failures inside a day are not read as days that differ
    design_effect: float = 1.0
    #: estimated sd of the period effect on the logit of the failure rate (method of
    #: moments: spread of the period rates beyond what the calls within a period explain)
    success_logit_sd: float | None = None
    #: its 95% interval (chi-square on the D-1 degrees of freedom of the period rates'
    #: variance, the within-period part taken off); a note when it reaches 0
    success_logit_sd_ci95: tuple[float, float] | None = None
    success_logit_sd_note: str | None = None
    variable_success: bool | None = None
    latency_cv: float | None = None
    latency_pvalue: float | None = None
    variable_latency: bool | None = None
    reason: str | None = None


class ToolStats(BaseModel):
    tool: str
    first: str | None
    last: str | None
    success: SuccessStats
    errors: ErrorMix
    latency: LatencyStats
    burst: BurstStats
    variability: Variability


class StatsReport(BaseModel):
    window: tuple[str | None, str | None]
    rows: int
    tools: list[ToolStats]
    overall: SuccessStats | None = None
    #: which rows: target kind(s), targets, vantage(s), sources, counts (set by stats_from_db)
    provenance: Provenance | None = None
    #: per tool: successful calls and their implicit-fault signs (set by stats_from_db)
    implicit: dict[str, dict[str, Any]] | None = None


#: the success rate a verdict measures each tool against unless told otherwise
THRESHOLD = 0.95


def success_text(t: ToolStats) -> str:
    """A tool's success as every surface quotes it: `80.0% [32.1, 97.1]`."""
    rate = "-" if t.success.rate is None else f"{100 * t.success.rate:.1f}%"
    return f"{rate} {interval_text(t.success.quoted95)}"


def verdict(rep: StatsReport, threshold: float = THRESHOLD) -> str:
    """One paragraph: which tools are surely below `threshold` (the whole quoted interval
    under it), which cannot be told from it yet, which are surely above; worst first.

    The tools surely below lead with the lowest rate (a tool that never succeeded first,
    whatever its interval's width), ties by how surely they are below; the undecided ones
    lead with the one most likely below (the smallest `chance_above`)."""
    by_risk = sorted(rep.tools, key=lambda t: (chance_above(t.success, threshold),
                                               t.success.rate, t.tool))
    below = sorted((t for t in by_risk if t.success.quoted95[1] < threshold),
                   key=lambda t: t.success.rate)  # stable: ties keep the order by risk
    above = [t for t in by_risk if t.success.quoted95[0] >= threshold]
    unsure = [t for t in by_risk if t not in below and t not in above]

    def some(ts: list[ToolStats], k: int = 3) -> str:
        named = ", ".join(f"{t.tool} {success_text(t)}" for t in ts[:k])
        return named + (f" and {len(ts) - k} more" if len(ts) > k else "")

    parts = [f"Verdict at a {100 * threshold:g}% success threshold (95% intervals):",
             f"{len(below)} of {len(rep.tools)} tools are below it"
             + (f", worst {some(below)}." if below else ".")]
    if unsure:
        calls = sorted({t.success.n for t in unsure})
        each = f"{calls[0]}" if len(calls) == 1 else f"{calls[0]}-{calls[-1]}"
        parts.append(f"{len(unsure)} cannot be told from it with {each} calls each "
                     f"({some(unsure, 2)}): more rounds narrow the interval.")
    parts.append(f"{len(above) or 'None'} {'is' if len(above) < 2 else 'are'} surely above it"
                 + (f": {some(above, 2)}." if above else "."))
    return " ".join(parts)


def chance_above(s: SuccessStats, threshold: float) -> float:
    """How likely the true rate is at least `threshold`: the upper tail of the Jeffreys
    posterior Beta(k + 1/2, n - k + 1/2) on the burst-adjusted effective counts (the ones the
    quoted interval rests on). 0 successes give a smaller tail than any other count at the
    same effective n, so the verdict names tools that never succeeded first."""
    n = s.n_effective
    if n <= 0:
        return 1.0 - threshold
    k = s.rate * n
    return float(special.betaincc(k + 0.5, n - k + 0.5, threshold))


# -- per-tool pieces ---------------------------------------------------------------------------


def burst_chain(fail: BoolArray, ts: FloatArray, code: IntArray | None = None) -> BurstStats:
    """Two-state chain from consecutive calls (time-ordered) no more than BURST_MAX_GAP_S
    apart."""
    if fail.shape[0] < 2:
        empty = Transition(p=None, n=0, ci95=None)
        return BurstStats(p_fail_after_fail=empty, p_fail_after_ok=empty, rho=None)
    linked = np.diff(ts) <= BURST_MAX_GAP_S
    every = bool(linked.all())

    def count(pair: BoolArray) -> int:  # over the linked pairs of consecutive calls
        return int(np.count_nonzero(pair if every else pair & linked))

    prev, nxt = fail[:-1], fail[1:]
    both = prev & nxt
    coded = same = pairs = None
    if code is not None:
        pairs = lagged_pairs(code, linked)
        prev_coded = ((code >= 0) & (code != _TIMEOUT))[:-1]
        coded = _transition(count(prev_coded & nxt), count(prev_coded))
        same = _transition(count(both & (code[:-1] == code[1:])), count(both))
    n_ff, n_f, n_of = count(both), count(prev), count(~prev & nxt)
    n_o = (prev.shape[0] if every else int(np.count_nonzero(linked))) - n_f
    ff, fo = _transition(n_ff, n_f), _transition(n_of, n_o)
    rho = ff.p - fo.p if ff.p is not None and fo.p is not None else None
    return BurstStats(
        p_fail_after_fail=ff,
        p_fail_after_ok=fo,
        rho=rho,
        p_fail_after_coded_fail=coded,
        p_same_code_after_fail=same,
        pairs=pairs,
    )


#: the largest distance between two calls in `BurstStats.pairs`
PAIR_LAGS = 8


def lagged_pairs(code: IntArray, linked: BoolArray) -> list[list[list[int]]]:
    """Counts of (outcome, outcome k calls later) for k = 1..PAIR_LAGS, outcomes 0 success,
    1 a failure with a code other than TIMEOUT, 2 TIMEOUT; only calls in one linked run.

    Each count is a dot product of two outcome indicators, one shifted by k (exact in
    float64); PAIR_LAGS empty calls put at every break keep pairs from spanning it. Without
    breaks the rows and columns with a success follow from the totals, so four products
    per lag do."""
    breaks = np.flatnonzero(~linked)
    ind = [code < 0, (code >= 0) & (code != _TIMEOUT), code == _TIMEOUT]
    if breaks.shape[0]:
        ind = [np.insert(v, np.repeat(breaks + 1, PAIR_LAGS), False) for v in ind]
    ind = [v.astype(np.float64) for v in ind]
    n = ind[0].shape[0]
    tot = [float(v.sum()) for v in ind]
    out = []
    for k in range(1, PAIR_LAGS + 1):
        if k >= n:
            out.append([[0] * 3 for _ in range(3)])
            continue
        cells = np.zeros((3, 3))
        both = ((1, 1), (1, 2), (2, 1), (2, 2))
        for a, b in both if not breaks.shape[0] else np.ndindex(3, 3):
            cells[a, b] = ind[a][:-k] @ ind[b][k:]
        if not breaks.shape[0]:
            for a in (1, 2):  # the rest from the totals: all pairs (i, i+k) are linked
                cells[a, 0] = tot[a] - float(ind[a][n - k :].sum()) - cells[a, 1:].sum()
                cells[0, a] = tot[a] - float(ind[a][:k].sum()) - cells[1:, a].sum()
            cells[0, 0] = (n - k) - cells.sum()
        out.append(cells.astype(np.int64).tolist())
    return out


def _transition(k: int, n: int) -> Transition:
    return Transition(p=k / n if n else None, n=n, ci95=mid_p(k, n) if n else None,
                      approximate=0 < n < TRANSITION_FEW_N)


def quoted_success(arr: ProbeArrays, prior: ChainPrior | None = None) -> dict[str, SuccessStats]:
    """Each tool's success with its interval to quote, computed as `compute_stats` computes
    it (each tool's chain, borrowing the chain pooled over all tools when it has few
    failures): for surfaces that need only the success interval (alerts, /status, the exporter).
    `prior`: the chains of every tool of the selection when `arr` holds only some of them."""
    parts = arr.per_tool()
    bursts = [burst_chain(a.code >= 0, a.ts) for _, a in parts]
    pooled = prior or ChainPrior.of([t for t, _ in parts], bursts)
    return {
        t: success_stats(len(a), int(np.count_nonzero(a.code < 0)), *chain_rho(b, pooled, t))
        for (t, a), b in zip(parts, bursts, strict=True)
    }


def success_stats(
    n: int, k: int, rho: float | None, source: str = "own", note: str | None = None,
    *, n_eff: float | None = None,
) -> SuccessStats:
    """k successes of n calls; the quoted interval is Wilson at the effective n of a chain
    with lag-one correlation `rho` (clipped to [0, RHO_MAX]), or at `n_eff` when given."""
    if n_eff is None:
        r = 0.0 if rho is None else min(max(rho, 0.0), RHO_MAX)
        n_eff = n * (1 - r) / (1 + r)
    return SuccessStats(
        n=n,
        successes=k,
        rate=k / n if n else 0.0,
        wilson95=wilson(k, n),
        jeffreys95=jeffreys(k, n),
        burst_adjusted95=wilson(k / n * n_eff if n else 0, n_eff),
        n_effective=n_eff,
        burst_source=source,
        rho_used=rho,
        note=note,
    )


#: a tool needs this many transitions after a failure for its chain to rest on its own data
BORROW_MIN_N = 10
#: the P(fail|fail) pooled over all tools counts as this many transitions in a tool's estimate
PRIOR_STRENGTH = 10.0


@dataclass(frozen=True)
class ChainPrior:
    """The fail->fail pairs and the pairs after a failure of every tool of a selection (the
    window, target kinds and vantages a surface reads), whichever of its tools are shown: a
    tool with few failures borrows the chain pooled over all of them, so its interval is the
    same in `stats --tools X`, plain `stats`, alerts and /status."""

    pairs: dict[str, tuple[float, int]]  # tool -> (fail->fail pairs, pairs after a failure)

    @classmethod
    def of(cls, tools: list[str], bursts: list[BurstStats]) -> ChainPrior:
        return cls({t: ((b.p_fail_after_fail.p or 0.0) * b.p_fail_after_fail.n,
                        b.p_fail_after_fail.n) for t, b in zip(tools, bursts, strict=True)})

    @classmethod
    def of_rows(cls, arr: ProbeArrays) -> ChainPrior:
        """From rows of every tool of the selection."""
        parts = arr.per_tool()
        return cls.of([t for t, _ in parts], [burst_chain(a.code >= 0, a.ts) for _, a in parts])

    def pooled(self, tool: str) -> tuple[float, list[str]] | None:
        """(P(fail|fail) pooled over every tool that saw a failure, those tools), or None when
        no tool other than `tool` saw one: nothing to borrow."""
        seen = sorted(t for t, (_, nf) in self.pairs.items() if nf > 0)
        if not [t for t in seen if t != tool]:
            return None
        return sum(self.pairs[t][0] for t in seen) / sum(self.pairs[t][1] for t in seen), seen


def _named(tools: list[str], k: int = 4) -> str:
    """`a, b and c` or `a, b, c and 29 more`."""
    if len(tools) <= k:
        return ", ".join(tools[:-1]) + (" and " if len(tools) > 1 else "") + tools[-1]
    return f"{', '.join(tools[:k])} and {len(tools) - k} more"


def chain_rho(
    b: BurstStats, prior: ChainPrior | None, tool: str = ""
) -> tuple[float | None, str, str | None]:
    """(rho, source, note) for the success interval. With fewer than BORROW_MIN_N pairs after
    a failure (none at all when no failure was seen) a tool's own rho is mostly noise and,
    under rare bursts, far too small: its P(fail|fail) is then shrunk towards the one pooled
    over every tool of the selection (a beta prior worth PRIOR_STRENGTH pairs: empirical
    Bayes). With no other tool to borrow from, its own rho is used and called rough."""
    ff, fo = b.p_fail_after_fail, b.p_fail_after_ok
    if ff.n >= BORROW_MIN_N:
        return b.rho, "own", None
    pooled = prior.pooled(tool) if prior is not None else None
    if pooled is None:
        if ff.n == 0:
            return (
                None,
                "assumed independent",
                (
                    "no failure seen in any tool, so nothing says whether failures come in runs; "
                    "the interval assumes independent calls and is too narrow if they do"
                ),
            )
        said = "unknown" if b.rho is None else f"{b.rho:.2f}"
        return b.rho, "own", f"only {ff.n} pairs after a failure: rho {said} is rough"
    p_prior, others = pooled
    p_ff = ((ff.p or 0.0) * ff.n + PRIOR_STRENGTH * p_prior) / (ff.n + PRIOR_STRENGTH)
    rho = p_ff - (fo.p or 0.0)
    return (
        rho,
        "borrowed",
        (
            f"{ff.n} pairs after a failure here: P(fail|fail) {p_ff:.2f} borrows the chain "
            f"pooled over the {len(others)} tools with failures in these rows "
            f"({_named(others)}: {p_prior:.2f}, worth {PRIOR_STRENGTH:g} pairs)"
        ),
    )


def _periods(ts: FloatArray, ok: BoolArray, period_s: float) -> tuple[Any, Any, Any, Any]:
    """(period index of each call, calls and successes per period, periods kept)."""
    per = np.floor(ts / period_s).astype(np.int64)
    if per.shape[0] and bool(np.all(per[1:] >= per[:-1])):  # in time order: no sort
        first = np.empty(per.shape[0], dtype=bool)
        first[0] = True
        np.not_equal(per[1:], per[:-1], out=first[1:])
        inv = np.cumsum(first) - 1
        count = int(inv[-1]) + 1
    else:
        uniq, inv = np.unique(per, return_inverse=True)
        count = uniq.shape[0]
    n_p = np.bincount(inv, minlength=count)
    k_p = np.bincount(inv, weights=ok.astype(np.float64), minlength=count)
    return inv, n_p, k_p, n_p >= VARIABILITY_MIN_N


def between_period_variance(
    rates: FloatArray, n_d: FloatArray | IntArray, deff: float = 1.0
) -> float:
    """tau^2, the variance of the periods' true rates by the method of moments: the spread of
    the period rates beyond the within-period variance p(1-p) deff / n_d (`deff` the burst
    chain's design effect), truncated at 0."""
    if rates.shape[0] < 2:
        return 0.0
    p = float(rates.mean())
    within = float((p * (1 - p) * deff / n_d).mean())
    return max(0.0, float(rates.var(ddof=1)) - within)


def long_run(
    s: SuccessStats, ts: FloatArray, ok: BoolArray, period_s: float, periods: Any = None
) -> None:
    """Fill `s.long_run95`: the probed periods (days) are a sample of days, so the long-run
    rate's interval carries the day-to-day variance. With >= LONG_RUN_MIN_FAILURES failures:
    the cluster-robust variance D/(D-1) sum (k_d - p n_d)^2 / N^2 over the D periods with
    >= LONG_RUN_MIN_N calls and Student t on D-1 degrees of freedom, never narrower than the
    probed days' (burst-adjusted) interval. With fewer failures that variance is mostly the
    binomial noise of a handful of failures (and t on D-1 degrees of freedom inflates it):
    the probed days' interval is widened, side by side in quadrature, by t times the
    standard error the day effects add to the pooled rate, tau^2 sum n_d^2 / N^2 (tau^2 by
    `between_period_variance`). `periods`: `_periods` of these calls, when already known."""
    if ts.shape[0] == 0:
        return
    _, n_p, k_p, _ = periods or _periods(ts, ok, period_s)
    keep = n_p >= LONG_RUN_MIN_N
    d = int(keep.sum())
    s.long_run_periods = d
    if d < 2:
        s.long_run_note = (
            f"needs >= 2 periods of {period_s / 3600:g} h with >= {LONG_RUN_MIN_N} calls: "
            "the interval holds for the probed period only"
        )
        return
    n_k, k_k = n_p[keep].astype(np.float64), k_p[keep]
    big_n = float(n_k.sum())
    p = float(k_k.sum()) / big_n
    t = float(special.stdtrit(d - 1, 0.975))
    lo, hi = s.burst_adjusted95
    fails = round(big_n - float(k_k.sum()))
    if fails >= LONG_RUN_MIN_FAILURES:
        var = d / (d - 1) * float(((k_k - p * n_k) ** 2).sum()) / big_n**2
        half = t * math.sqrt(var)
        s.long_run95 = (max(0.0, min(lo, p - half)), min(1.0, max(hi, p + half)))
        s.long_run_note = (
            f"over {d} periods of {period_s / 3600:g} h, day-to-day variation included"
        )
        return
    deff = s.n / s.n_effective if s.n_effective > 0 else 1.0
    tau2 = between_period_variance(k_k / n_k, n_k, deff)
    half = t * math.sqrt(tau2 * float((n_k**2).sum()) / big_n**2)
    r = s.rate
    s.long_run95 = (max(0.0, r - math.hypot(r - lo, half)), min(1.0, r + math.hypot(hi - r, half)))
    s.long_run_too_few_failures = True
    s.long_run_note = (
        f"rests on {fails} failure(s) over {d} periods of {period_s / 3600:g} h: too few to "
        "estimate day-to-day variation well, so it is the probed days' interval widened by "
        "what little the days' spread shows (too narrow if days vary a lot)"
    )


def failure_runs(ts: FloatArray, code: IntArray) -> tuple[IntArray, int, int]:
    """(lengths of the runs of consecutive linked failures, fail->fail pairs, of which with
    the same code); calls further apart than BURST_MAX_GAP_S are not linked."""
    fail = code >= 0
    if code.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), 0, 0
    linked = np.diff(ts) <= BURST_MAX_GAP_S
    pair = fail[:-1] & fail[1:] & linked
    same = int(np.count_nonzero(pair & (code[:-1] == code[1:])))
    # a run starts at a failure not paired with the one before, ends at one not paired on
    first, last = fail.copy(), fail.copy()
    first[1:] &= ~pair
    last[:-1] &= ~pair
    lengths = np.flatnonzero(last) - np.flatnonzero(first) + 1
    return lengths, int(np.count_nonzero(pair)), same


def code_design_effect(parts: list[tuple[FloatArray, IntArray]]) -> float:
    """The variance inflation of the code counts when failures in a run repeat their code,
    over one or more (ts, code) series (a drift test's two windows, say).

    c (code persistence beyond chance) comes from the fail->fail pairs of all series:
    P(same code) = c + (1-c) sum w^2. Within a run of B failures the codes at lag k then
    agree beyond chance with correlation c^k, so the counts' variance grows by
    sum_runs [B + 2 sum_k (B-k) c^k] / sum_runs B (1 when c = 0: chance repeats are no
    clustering; sum B^2 / sum B when c = 1: an outage is one draw). With a single code seen,
    c cannot be measured and is taken as 1 (the conservative end)."""
    runs = [failure_runs(ts, code) for ts, code in parts]
    pairs, same = sum(r[1] for r in runs), sum(r[2] for r in runs)
    codes = np.concatenate([np.compress(code >= 0, code) for _, code in parts])
    if pairs == 0 or codes.shape[0] == 0:
        return 1.0
    w = np.bincount(codes) / codes.shape[0]
    chance = float((w**2).sum())
    c = 1.0 if chance >= 1 - 1e-9 else min(1.0, max(0.0, (same / pairs - chance) / (1 - chance)))
    total = extra = 0.0
    lengths = np.concatenate([r[0] for r in runs])
    for length, count in zip(*np.unique(lengths, return_counts=True), strict=True):
        k = np.arange(1, int(length))
        extra += count * 2.0 * float(((length - k) * c**k).sum())
        total += count * float(length)
    return 1.0 + extra / total if total else 1.0


def error_mix(code: IntArray, ts: FloatArray | None = None) -> ErrorMix:
    """Counts and shares of the failure codes, with each share's 95% interval at the effective
    number of failures (`ts`, the calls' times, tells runs of failures apart; without it the
    failures count as independent)."""
    counts = np.bincount(np.compress(code >= 0, code), minlength=len(CODES))
    fails = int(counts.sum())
    n = int(code.shape[0])
    named = {CODES[i].value: int(c) for i, c in enumerate(counts) if c}
    deff = max(1.0, code_design_effect([(ts, code)])) if ts is not None and fails else 1.0
    n_eff = fails / deff
    return ErrorMix(
        failures=fails,
        counts=named,
        share_of_failures={k: v / fails for k, v in named.items()} if fails else {},
        share_of_attempts={k: v / n for k, v in named.items()} if n else {},
        design_effect=deff,
        n_effective=n_eff,
        share_of_failures_ci95={k: wilson(v / deff, n_eff) for k, v in named.items()},
        unseen_code_ci95=wilson(0, n_eff) if fails else None,
    )


def _kruskal(ordered: FloatArray, group: IntArray, used: list[int]) -> float:
    """The Kruskal-Wallis H test's p-value (with the tie correction) across the groups
    `used`, of values already sorted, `group` each one's group, the groups' terms added in
    the order of `used`."""
    n = ordered.shape[0]
    ranks, counts = midranks(ordered)
    rank_sum = np.bincount(group, weights=ranks)
    size = np.bincount(group)
    h = 0.0
    for j in used:
        h += float(rank_sum[j]) ** 2 / int(size[j])
    h = 12.0 / (n * (n + 1)) * h - 3 * (n + 1)
    ties = 1.0 - float((counts**3 - counts).sum()) / (n**3 - n)
    if ties <= 0:
        return 1.0
    return float(special.chdtrc(len(used) - 1, h / ties))


#: the KS p-value below which two lognormal components are tried, whatever the sample size
GOF_ALPHA = 0.05
#: fewest successes a two-component fit is tried on (five parameters)
MIXTURE_MIN_N = 10
#: successes the statistics fit a mixture to (a seeded subsample above: the fit is for the
#: shape, and it keeps `stats` quick when many tools fail the KS test)
MIXTURE_MAX_POINTS = 1000


def mixture_quantile(comps: list[MixtureComponent], q: float) -> float:
    """The q-quantile (ms) of a mixture of lognormals: bisection on ln ms."""
    lo = min(c.mu - 10 * c.sigma for c in comps)
    hi = max(c.mu + 10 * c.sigma for c in comps)
    for _ in range(60):
        mid = (lo + hi) / 2
        f = sum(c.weight * float(special.ndtr((mid - c.mu) / c.sigma)) for c in comps)
        lo, hi = (mid, hi) if f < q else (lo, mid)
    return math.exp((lo + hi) / 2)


def mixture_sf(comps: list[MixtureComponent], t_ms: float) -> float:
    lt = math.log(t_ms)
    return sum(c.weight * float(special.ndtr((c.mu - lt) / c.sigma)) for c in comps)


def _shown(
    lat: FloatArray, ordered: FloatArray, fit: LognormalFit | None,
    comps: list[MixtureComponent] | None, s_t: float,
) -> tuple[dict[str, float], str, dict[str, float] | None]:
    """(mean and percentiles shown, how, the successes' own when those are not shown);
    `ordered` is `lat` sorted."""
    q = sorted_quantiles(ordered, np.true_divide([50, 90, 95, 99], 100)).tolist()
    empirical = {"mean": float(lat.mean()), "p50": q[0], "p90": q[1], "p95": q[2], "p99": q[3]}
    if s_t < PROFILE_CI_MIN_EXCEED:
        return empirical, "empirical", None
    if comps:
        mean = sum(c.weight * math.exp(c.mu + c.sigma**2 / 2) for c in comps)
        pct = {f"p{k}": mixture_quantile(comps, k / 100) for k in (50, 90, 95, 99)}
        return {"mean": mean, **pct}, "censored-mixture", empirical
    assert fit is not None
    shown = {"mean": fit.mean(), **{f"p{k}": fit.quantile(k / 100) for k in (50, 90, 95, 99)}}
    return shown, "censored-fit", empirical


def latency_stats(
    latency_ms: FloatArray, code: IntArray, timeout_s: FloatArray,
    by_latency: IntArray | None = None,
) -> LatencyStats:
    """`by_latency`: the rows of the successes with a latency, fastest first, when already
    known (`tool_stats` shares one sort between this and `variability`)."""
    ok = code < 0
    # np.compress(mask, v) is v[mask], about twice as fast
    lat = np.compress(ok & np.isfinite(latency_ms), latency_ms)
    ordered = np.sort(lat) if by_latency is None else latency_ms[by_latency]
    censor_ms = np.compress(code == _TIMEOUT, timeout_s) * 1000.0
    deadlines = timeout_s[np.isfinite(timeout_s)]
    t_ms = float(np.max(deadlines)) * 1000.0 if deadlines.shape[0] else None
    if lat.shape[0] == 0:
        return LatencyStats(n=0, timeout_s=t_ms / 1000 if t_ms else None)
    fit = fit_lognormal(lat, censor_ms)
    ks = ks_pvalue(ordered, fit, t_ms) if fit else None
    comps, summary = None, None
    s_t = (fit.p_exceed_timeout or 0.0) if fit else 0.0
    s_ci = fit.p_exceed_ci95 if fit else None
    if ks is not None and ks < GOF_ALPHA and lat.shape[0] >= MIXTURE_MIN_N:
        mix = fit_mixture(lat, censor_ms, min_points_for_two=MIXTURE_MIN_N,
                          max_points=MIXTURE_MAX_POINTS, interval="two")
        if mix is not None:
            summary = mix.summary()
            if mix.k > 1:
                comps = mix.components
                if t_ms:
                    s_t, s_ci = mixture_sf(comps, t_ms), mix.p_exceed_ci95
    shown, how, observed = _shown(lat, ordered, fit, comps, s_t)
    return LatencyStats(
        p99_lower_bound=how == "empirical" and lat.shape[0] < P99_MIN_N,
        n=int(lat.shape[0]),
        percentiles=how,
        observed=observed,
        lognormal=fit,
        ks_pvalue=ks,
        timeout_s=t_ms / 1000 if t_ms else None,
        mixture=comps,
        mixture_fit=summary,
        p_exceed_timeout=s_t if t_ms else None,
        p_exceed_timeout_ci95=s_ci,
        **shown,
    )


def variability(
    ts: FloatArray,
    code: IntArray,
    latency_ms: FloatArray,
    period_s: float = 86400.0,
    rho: float | None = None,
    *,
    periods: Any = None,
    by_latency: IntArray | None = None,
) -> Variability:
    """Does the tool change from period to period (UTC days by default)?

    success: sd of per-period success rates (periods with >= 10 attempts) and a chi-square
    homogeneity test, divided by the burst chain's design effect (1+rho)/(1-rho); flagged
    when sd > 0.10 and p < 0.01.
    latency: coefficient of variation of per-period median success latency, and a
    Kruskal-Wallis test across periods; flagged when CV > 0.25 and p < 0.01.
    `periods` (`_periods` of these calls) and `by_latency` (the rows of the successes with a
    latency, fastest first) when already known.
    """
    if ts.shape[0] == 0:
        return Variability(period_s=period_s, periods=0, reason="no data")
    ok = code < 0
    inv, n_p, k_p, keep = periods or _periods(ts, ok, period_s)
    r = 0.0 if rho is None else min(max(rho, 0.0), RHO_MAX)
    out = Variability(period_s=period_s, periods=int(keep.sum()), design_effect=(1 + r) / (1 - r))
    if keep.sum() < 2:
        out.reason = (
            f"needs >= 2 periods of {period_s / 3600:g} h with >= {VARIABILITY_MIN_N} calls"
        )
        return out
    rates = k_p[keep] / n_p[keep]
    out.success_sd = float(rates.std(ddof=1))
    table = np.vstack([k_p[keep], n_p[keep] - k_p[keep]])
    stat = chi2_contingency(table, correction=False)[0] / out.design_effect
    out.success_pvalue = float(special.chdtrc(int(keep.sum()) - 1, stat)) if stat > 0 else 1.0
    _logit_sd(out, rates, n_p[keep])
    out.variable_success = bool(
        out.success_sd > SUCCESS_SD_FLAG and out.success_pvalue < VARIABILITY_ALPHA
    )
    if by_latency is None:
        rows = np.flatnonzero(ok & np.isfinite(latency_ms))
        by_latency = rows[np.argsort(latency_ms[rows])]
    kept = by_latency if keep.all() else by_latency[keep[inv[by_latency]]]
    _latency_variability(out, kept, inv, latency_ms, n_p.shape[0])
    return out


def _logit_sd(out: Variability, rates: FloatArray, n_d: IntArray) -> None:
    """The day-effect sd by the method of moments: the spread of the D >= 2 period rates
    beyond the within-period variance p(1-p) deff / n_d, mapped to the logit scale by the
    delta method (1 / p(1-p)). Its 95% interval: (D-1) v / total variance ~ chi-square(D-1)
    for the period rates' variance v, the within-period variance subtracted from each end,
    mapped the same way. When the lower end is 0 the note says in words that the days
    cannot be told from chance."""
    d, p = rates.shape[0], float(rates.mean())
    if p <= 0 or p >= 1:
        out.success_logit_sd = 0.0
        return
    out.success_logit_sd = math.sqrt(
        between_period_variance(rates, n_d, out.design_effect)) / (p * (1 - p))
    v = float(rates.var(ddof=1))
    within = float((p * (1 - p) * out.design_effect / n_d).mean())
    ends = [(d - 1) * v / float(special.chdtri(d - 1, q)) for q in (0.025, 0.975)]
    lo, hi = (math.sqrt(max(e - within, 0.0)) / (p * (1 - p)) for e in ends)
    out.success_logit_sd_ci95 = (lo, hi)
    if lo <= 0:
        out.success_logit_sd_note = (
            f"the day-to-day sd cannot be told from 0 with {d} periods (95% CI [0, {hi:.2g}] "
            "on the logit scale): the days may not vary at all"
        )


def _latency_variability(
    out: Variability, rows: IntArray, inv: IntArray, latency_ms: FloatArray, n_periods: int
) -> None:
    """The latency flags from the successes `rows` (fastest first) of the periods kept."""
    g_of, lat = inv[rows], latency_ms[rows]
    size = np.bincount(g_of, minlength=n_periods)
    used = np.flatnonzero(size >= VARIABILITY_MIN_N)
    if used.shape[0] < 2:
        return
    # each period's latencies in order: a stable sort by period keeps the latency order
    by_period = np.argsort(g_of.astype(np.int16 if n_periods < 2**15 else np.int64),
                           kind="stable")  # fmt: skip
    grouped = lat[by_period]
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    lo, hi = start[used] + (size[used] - 1) // 2, start[used] + size[used] // 2
    meds = (grouped[lo] + grouped[hi]) / 2  # each period's median, as np.median
    out.latency_cv = float(meds.std(ddof=1) / meds.mean()) if meds.mean() > 0 else None
    if used.shape[0] < n_periods:  # periods with too few successes sit the test out
        in_used = np.zeros(n_periods, dtype=bool)
        in_used[used] = True
        pick = in_used[g_of]
        lat, g_of = lat[pick], g_of[pick]
    out.latency_pvalue = _kruskal(lat, g_of, used.tolist())
    out.variable_latency = bool(
        out.latency_cv is not None
        and out.latency_cv > LATENCY_CV_FLAG
        and out.latency_pvalue < VARIABILITY_ALPHA
    )


def tool_stats(
    name: str, arr: ProbeArrays, period_s: float = 86400.0, prior: ChainPrior | None = None,
    burst: BurstStats | None = None,
) -> ToolStats:
    """One tool's statistics; `prior` holds the chains of every tool of the selection, whose
    pooled P(fail|fail) a tool with few failures borrows for its interval; `burst`, its
    `burst_chain` with codes when already computed. The periods and the sort of the
    successes' latencies are computed once for every statistic that needs them."""
    code = arr.code
    fail = code >= 0
    n = int(code.shape[0])
    burst = burst or burst_chain(fail, arr.ts, code=code)
    success = success_stats(n, n - int(fail.sum()), *chain_rho(burst, prior, name))
    periods = _periods(arr.ts, ~fail, period_s) if n else None
    long_run(success, arr.ts, ~fail, period_s, periods)
    rows = np.flatnonzero(~fail & np.isfinite(arr.latency_ms))
    by_latency = rows[np.argsort(arr.latency_ms[rows])]
    return ToolStats(
        tool=name,
        first=iso(float(arr.ts[0])) if n else None,
        last=iso(float(arr.ts[-1])) if n else None,
        success=success,
        errors=error_mix(code, arr.ts),
        latency=latency_stats(arr.latency_ms, code, arr.timeout_s, by_latency),
        burst=burst,
        variability=variability(arr.ts, code, arr.latency_ms, period_s, success.rho_used,
                                periods=periods, by_latency=by_latency),
    )


def compute_stats(
    arr: ProbeArrays,
    since: float | None = None,
    until: float | None = None,
    period_s: float = 86400.0,
    prior: ChainPrior | None = None,
) -> StatsReport:
    """`prior`: the chains of every tool of the selection when `arr` holds only some."""
    parts = arr.per_tool()
    with one_blas_thread():
        bursts = [burst_chain(a.code >= 0, a.ts, code=a.code) for _, a in parts]
        prior = prior or ChainPrior.of([t for t, _ in parts], bursts)
        out = [tool_stats(t, a, period_s, prior, b)
               for (t, a), b in zip(parts, bursts, strict=True)]
    return StatsReport(
        window=(iso(since), iso(until)),
        rows=len(arr),
        tools=out,
        overall=pooled_success([t.success for t in out]),
    )


def pooled_success(tools: list[SuccessStats]) -> SuccessStats | None:
    """All tools together, stratified by tool: k and n are summed, and the variance of the
    pooled rate sum(n_t p_t) / N is the sum of each tool's own burst-adjusted variance,
    sum(n_t^2 p_t(1-p_t) / n_eff_t) / N^2 (tools are independent strata; a tool's calls are
    one chain). The interval is Wilson on the n_eff that variance implies. One rho over
    mixed tools would read the difference between a flaky and a solid tool as burstiness."""
    if not tools:
        return None
    n = sum(s.n for s in tools)
    k = sum(s.successes for s in tools)
    if n == 0:
        return success_stats(0, 0, None)
    var = 0.0
    for s in tools:
        if s.n and s.n_effective > 0:
            # a tool with 0 or n successes still carries uncertainty: Wilson's centre
            p_t = (s.successes + 2) / (s.n + 4) if s.successes in (0, s.n) else s.rate
            var += s.n * s.n * p_t * (1 - p_t) / s.n_effective
    var /= n * n
    p_c = (k + 2) / (n + 4) if k in (0, n) else k / n
    return success_stats(n, k, None, n_eff=p_c * (1 - p_c) / var if var > 0 else float(n))


def stats_from_db(
    db: Database,
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    period_s: float = 86400.0,
    *,
    kinds: list[str] | None = None,
    vantages: list[str] | None = None,
    groups: list[Group] | None = None,
) -> tuple[ProbeArrays, StatsReport]:
    """Load the rows of `kinds` (target kinds) and `vantages` (default all) and compute; a clear
    error when the selection holds nothing. With no `kinds`: live when the window holds live
    rows, else the one kind present (several other kinds: an error asking to pick).
    `groups`: the window's provenance survey when the caller has already read it."""
    # one pass over the rows: the phase timings and implicit signs come along
    extra = {**PHASE_EXTRA, **IMPLICIT_EXTRA}
    if groups is None:
        groups = survey(db, since, until, tools, vantages)
    kinds = kinds if kinds is not None else pick_kinds(kinds_present(groups), None)
    arr = load_probes(db, since, until, tools, kinds=kinds, vantages=vantages, extra=extra)
    prov = describe(db, kinds, since, until, tools, vantages, groups=groups)
    if len(arr) == 0:
        raise Unavailable(empty_selection_error(prov, db, tools), param=EMPTY_SELECTION_PARAMS)
    if tools:
        missing = sorted(set(tools) - set(arr.tools))
        if missing:
            raise Unavailable(f"no probe rows for {', '.join(missing)} in this window")
    # a tool with few failures borrows from every tool of the window, kinds and vantages,
    # not only from those picked by `tools`: the same rows give the same interval
    prior = ChainPrior.of_rows(load_probes(db, since, until, None, kinds=kinds,
                                           vantages=vantages)) if tools else None
    rep = compute_stats(arr, since, until, period_s, prior)
    rep.provenance = prov
    rep.implicit = implicit_counts(arr)
    return arr, rep
