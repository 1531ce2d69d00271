"""Per-tool statistics over stored probe rows: success with uncertainty, error mix, latency
(censored lognormal fit), the burst chain, and variability across periods.

Rows are loaded with one SQL query into numpy arrays and every statistic is vectorised, so a
million rows take about a second. All estimands are *per attempt*: one stored call is one trial;
rows with `excluded=1` (the prober's own outages) are left out before anything is counted.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from realprobe.errors import RealprobeError
from realprobe.probes.latency_fit import (
    Z95,
    LognormalFit,
    fit_lognormal,
    ks_pvalue,
)
from realprobe.probes.lazy_special import special
from realprobe.probes.loading import (
    _TIMEOUT,
    CODES,
    BoolArray,
    FloatArray,
    IntArray,
    ProbeArrays,
    load_probes,
)
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

#: consecutive calls further apart than this are not a transition of the burst chain
BURST_MAX_GAP_S = 3600.0
#: a period (day by default) needs this many attempts to count for the variability flags
VARIABILITY_MIN_N = 10
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
    return (max(0.0, centre - half), min(1.0, centre + half))


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


class ErrorMix(BaseModel):
    failures: int
    counts: dict[str, int]
    share_of_failures: dict[str, float]
    share_of_attempts: dict[str, float]


class LatencyStats(BaseModel):
    """Latency of successes in ms. When the deadline bites (the fit puts S(T) >= 0.001 of calls
    beyond it) the successes are the fast part of the distribution only, so mean and
    percentiles come from the censored fit (`percentiles: "censored-fit"`, what calls would
    take without the deadline) and `observed` keeps the successes' own, which are then lower
    bounds. Otherwise they are the successes' empirical values (`"empirical"`)."""

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


class Transition(BaseModel):
    p: float | None
    n: int
    ci95: tuple[float, float] | None


class BurstStats(BaseModel):
    p_fail_after_fail: Transition
    p_fail_after_ok: Transition
    rho: float | None
    #: P(fail | the previous call failed with a code other than TIMEOUT). Such a failure was
    #: surely a fault, never a slow call cut by the deadline, so calibration reads the chain
    #: behind the deadline from it (see calibrate.generative_chain)
    p_fail_after_coded_fail: Transition | None = None


class Variability(BaseModel):
    period_s: float
    periods: int
    success_sd: float | None = None
    success_pvalue: float | None = None
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


# -- per-tool pieces ---------------------------------------------------------------------------


def burst_chain(
    fail: BoolArray,
    ts: FloatArray,
    max_gap_s: float = BURST_MAX_GAP_S,
    code: IntArray | None = None,
) -> BurstStats:
    """Two-state chain from consecutive calls (time-ordered) no more than max_gap_s apart."""
    if fail.shape[0] < 2:
        empty = Transition(p=None, n=0, ci95=None)
        return BurstStats(p_fail_after_fail=empty, p_fail_after_ok=empty, rho=None)
    linked = np.diff(ts) <= max_gap_s
    coded = None
    if code is not None:
        prev_coded = ((code >= 0) & (code != _TIMEOUT))[:-1][linked]
        n_c = int(np.count_nonzero(prev_coded))
        n_cf = int(np.count_nonzero(prev_coded & fail[1:][linked]))
        coded = Transition(
            p=n_cf / n_c if n_c else None, n=n_c, ci95=wilson(n_cf, n_c) if n_c else None
        )
    prev, nxt = fail[:-1][linked], fail[1:][linked]
    n_ff = int(np.count_nonzero(prev & nxt))
    n_f = int(np.count_nonzero(prev))
    n_of = int(np.count_nonzero(~prev & nxt))
    n_o = int(prev.shape[0] - n_f)
    ff = Transition(p=n_ff / n_f if n_f else None, n=n_f, ci95=wilson(n_ff, n_f) if n_f else None)
    fo = Transition(p=n_of / n_o if n_o else None, n=n_o, ci95=wilson(n_of, n_o) if n_o else None)
    rho = ff.p - fo.p if ff.p is not None and fo.p is not None else None
    return BurstStats(
        p_fail_after_fail=ff, p_fail_after_ok=fo, rho=rho, p_fail_after_coded_fail=coded
    )


def success_stats(n: int, k: int, rho: float | None) -> SuccessStats:
    r = 0.0 if rho is None else min(max(rho, 0.0), 0.98)
    n_eff = n * (1 - r) / (1 + r)
    return SuccessStats(
        n=n,
        successes=k,
        rate=k / n if n else 0.0,
        wilson95=wilson(k, n),
        jeffreys95=jeffreys(k, n),
        burst_adjusted95=wilson(k / n * n_eff if n else 0, n_eff),
        n_effective=n_eff,
    )


def error_mix(code: IntArray) -> ErrorMix:
    counts = np.bincount(code[code >= 0], minlength=len(CODES))
    fails = int(counts.sum())
    n = int(code.shape[0])
    named = {CODES[i].value: int(c) for i, c in enumerate(counts) if c}
    return ErrorMix(
        failures=fails,
        counts=named,
        share_of_failures={k: v / fails for k, v in named.items()} if fails else {},
        share_of_attempts={k: v / n for k, v in named.items()} if n else {},
    )


def chi2_homogeneity(table: FloatArray) -> tuple[float, float]:
    """Pearson chi-square of a contingency table (rows x columns): (statistic, p-value)."""
    table = table[:, table.sum(axis=0) > 0]
    table = table[table.sum(axis=1) > 0]
    if table.shape[0] < 2 or table.shape[1] < 2:
        return 0.0, 1.0
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / table.sum()
    stat = float(((table - expected) ** 2 / expected).sum())
    dof = (table.shape[0] - 1) * (table.shape[1] - 1)
    return stat, float(special.chdtrc(dof, stat))


def kruskal_pvalue(groups: list[FloatArray]) -> float:
    """Kruskal-Wallis H test across groups, with the tie correction."""
    allv = np.concatenate(groups)
    n = allv.shape[0]
    _uniq, inv, counts = np.unique(allv, return_inverse=True, return_counts=True)
    upper = np.cumsum(counts)
    ranks = (upper - (counts - 1) / 2.0)[inv]  # mid-ranks
    h = 0.0
    start = 0
    for g in groups:
        r = ranks[start : start + g.shape[0]]
        h += float(r.sum()) ** 2 / g.shape[0]
        start += g.shape[0]
    h = 12.0 / (n * (n + 1)) * h - 3 * (n + 1)
    ties = 1.0 - float((counts.astype(np.float64) ** 3 - counts).sum()) / (n**3 - n)
    if ties <= 0:
        return 1.0
    return float(special.chdtrc(len(groups) - 1, h / ties))


def latency_stats(latency_ms: FloatArray, code: IntArray, timeout_s: FloatArray) -> LatencyStats:
    ok = code < 0
    lat = latency_ms[ok]
    lat = lat[np.isfinite(lat)]
    timed_out = code == _TIMEOUT
    censor_ms = timeout_s[timed_out] * 1000.0
    deadlines = timeout_s[np.isfinite(timeout_s)]
    t_ms = float(np.max(deadlines)) * 1000.0 if deadlines.shape[0] else None
    if lat.shape[0] == 0:
        return LatencyStats(n=0, timeout_s=t_ms / 1000 if t_ms else None)
    q = np.percentile(lat, [50, 90, 95, 99])
    fit = fit_lognormal(lat, censor_ms)
    empirical = {
        "mean": float(lat.mean()),
        "p50": float(q[0]),
        "p90": float(q[1]),
        "p95": float(q[2]),
        "p99": float(q[3]),
    }
    shown, how, observed = empirical, "empirical", None
    if fit is not None and fit.bites:
        shown = {"mean": fit.mean(), **{f"p{k}": fit.quantile(k / 100) for k in (50, 90, 95, 99)}}
        how, observed = "censored-fit", empirical
    return LatencyStats(
        n=int(lat.shape[0]),
        percentiles=how,
        observed=observed,
        mean=shown["mean"],
        p50=shown["p50"],
        p90=shown["p90"],
        p95=shown["p95"],
        p99=shown["p99"],
        lognormal=fit,
        ks_pvalue=ks_pvalue(lat, fit, t_ms) if fit else None,
        timeout_s=t_ms / 1000 if t_ms else None,
    )


def variability(
    ts: FloatArray, code: IntArray, latency_ms: FloatArray, period_s: float = 86400.0
) -> Variability:
    """Does the tool change from period to period (UTC days by default)?

    success: sd of per-period success rates (periods with >= 10 attempts) and a chi-square
    homogeneity test; flagged when sd > 0.10 and p < 0.01.
    latency: coefficient of variation of per-period median success latency, and a
    Kruskal-Wallis test across periods; flagged when CV > 0.25 and p < 0.01.
    """
    if ts.shape[0] == 0:
        return Variability(period_s=period_s, periods=0, reason="no data")
    per = np.floor(ts / period_s).astype(np.int64)
    uniq, inv = np.unique(per, return_inverse=True)
    ok = code < 0
    n_p = np.bincount(inv, minlength=uniq.shape[0])
    k_p = np.bincount(inv, weights=ok.astype(np.float64), minlength=uniq.shape[0])
    keep = n_p >= VARIABILITY_MIN_N
    out = Variability(period_s=period_s, periods=int(keep.sum()))
    if keep.sum() < 2:
        out.reason = (
            f"needs >= 2 periods of {period_s / 3600:g} h with >= {VARIABILITY_MIN_N} calls"
        )
        return out
    rates = k_p[keep] / n_p[keep]
    out.success_sd = float(rates.std(ddof=1))
    table = np.vstack([k_p[keep], n_p[keep] - k_p[keep]])
    out.success_pvalue = chi2_homogeneity(table)[1]
    out.variable_success = bool(
        out.success_sd > SUCCESS_SD_FLAG and out.success_pvalue < VARIABILITY_ALPHA
    )
    # successes' latencies grouped by period with one sort (not one mask per period)
    sel = ok & np.isfinite(latency_ms) & keep[inv]
    g_of, lat = inv[sel], latency_ms[sel]
    order = np.lexsort((lat, g_of))
    g_of, lat = g_of[order], lat[order]
    size = np.bincount(g_of, minlength=uniq.shape[0])
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    used = np.flatnonzero(size >= VARIABILITY_MIN_N)
    if used.shape[0] >= 2:
        lo, hi = start[used] + (size[used] - 1) // 2, start[used] + size[used] // 2
        meds = (lat[lo] + lat[hi]) / 2  # each period's median, as np.median
        out.latency_cv = float(meds.std(ddof=1) / meds.mean()) if meds.mean() > 0 else None
        out.latency_pvalue = kruskal_pvalue([lat[start[j] : start[j] + size[j]] for j in used])
        out.variable_latency = bool(
            out.latency_cv is not None
            and out.latency_cv > LATENCY_CV_FLAG
            and out.latency_pvalue < VARIABILITY_ALPHA
        )
    return out


def tool_stats(name: str, arr: ProbeArrays, period_s: float = 86400.0) -> ToolStats:
    code = arr.code
    fail = code >= 0
    n = int(code.shape[0])
    burst = burst_chain(fail, arr.ts, code=code)
    return ToolStats(
        tool=name,
        first=iso(float(arr.ts[0])) if n else None,
        last=iso(float(arr.ts[-1])) if n else None,
        success=success_stats(n, n - int(fail.sum()), burst.rho),
        errors=error_mix(code),
        latency=latency_stats(arr.latency_ms, code, arr.timeout_s),
        burst=burst,
        variability=variability(arr.ts, code, arr.latency_ms, period_s),
    )


def compute_stats(
    arr: ProbeArrays,
    since: float | None = None,
    until: float | None = None,
    period_s: float = 86400.0,
) -> StatsReport:
    out = [
        tool_stats(t, arr.slice(i), period_s)
        for i, t in enumerate(arr.tools)
        if arr.bounds[i + 1] > arr.bounds[i]
    ]
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
    p = k / n
    p_c = (k + 2) / (n + 4) if k in (0, n) else p
    n_eff = p_c * (1 - p_c) / var if var > 0 else float(n)
    return SuccessStats(
        n=n,
        successes=k,
        rate=p,
        wilson95=wilson(k, n),
        jeffreys95=jeffreys(k, n),
        burst_adjusted95=wilson(p * n_eff, n_eff),
        n_effective=n_eff,
    )


def stats_from_db(
    db: str | Path,
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
    if groups is not None:
        kinds = kinds if kinds is not None else pick_kinds(kinds_present(db, groups=groups), None)
        arr = load_probes(db, since, until, tools, kinds=kinds, vantages=vantages)
    elif kinds is None:
        groups = survey(db, since, until, tools, vantages)
        kinds = pick_kinds(kinds_present(db, groups=groups), None)
        arr = load_probes(db, since, until, tools, kinds=kinds, vantages=vantages)
    else:
        # the survey (one aggregate scan, run by SQLite without the GIL) alongside the load
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(survey, db, since, until, tools, vantages)
            arr = load_probes(db, since, until, tools, kinds=kinds, vantages=vantages)
            groups = pending.result()
    prov = describe(db, kinds, since, until, tools, vantages, groups=groups)
    if len(arr) == 0:
        raise RealprobeError(empty_selection_error(prov, db, tools), param=EMPTY_SELECTION_PARAMS)
    if tools:
        missing = sorted(set(tools) - set(arr.tools))
        if missing:
            raise RealprobeError(f"no probe rows for {', '.join(missing)} in this window")
    rep = compute_stats(arr, since, until, period_s)
    rep.provenance = prov
    return arr, rep
