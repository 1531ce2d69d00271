"""Which tools changed between a baseline window and a current window?

Per tool, three tests, each corrected across tools (Holm by default, or Benjamini-Hochberg):
- success: two-proportion z-test (pooled) on the burst-adjusted effective sample sizes (calls
  that fail in runs carry less information than independent ones); flagged only if
  |change| >= min_success_change;
- latency of successes: Mann-Whitney U; flagged only if the median moved by at least
  min_latency_change (relative), an effect-size gate as in Kayenta, so a tiny but
  "significant" shift on a big sample does not page anyone;
- error mix: chi-square on the code x window table of failures, divided by the design effect
  of failures that repeat their code within a run (an outage answers with one code, and its
  calls are not independent draws of the mix); flagged if Cramer's V >= 0.1.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel

from realprobe.probes.classic_tests import chi2_contingency, mann_whitney_p
from realprobe.probes.lazy_special import special
from realprobe.probes.loading import CODES, ProbeArrays
from realprobe.probes.numeric import median
from realprobe.probes.provenance import Provenance
from realprobe.probes.stats import RHO_MAX, burst_chain, code_design_effect
from realprobe.probes.windows import iso

Correction = Literal["holm", "bh"]
MIN_N = 20


class SuccessDrift(BaseModel):
    baseline: float
    current: float
    change: float
    #: lag-one correlation of the tool's failures (both windows' chains pooled) and the
    #: variance inflation (1+rho)/(1-rho) the test applied: n_eff = n / design_effect
    rho: float = 0.0
    design_effect: float = 1.0
    pvalue: float
    p_adjusted: float | None = None
    flagged: bool = False


class LatencyDrift(BaseModel):
    baseline_p50: float
    current_p50: float
    ratio: float
    pvalue: float
    p_adjusted: float | None = None
    flagged: bool = False


class MixDrift(BaseModel):
    baseline: dict[str, int]
    current: dict[str, int]
    cramers_v: float
    #: the variance inflation of the code counts from failures that repeat their code within
    #: a run (see `stats.code_design_effect`); the chi-square is divided by it, as the calls
    #: of one outage are not independent draws of the mix
    design_effect: float = 1.0
    pvalue: float
    p_adjusted: float | None = None
    flagged: bool = False


class ToolDrift(BaseModel):
    tool: str
    n_baseline: int
    n_current: int
    verdict: str  # worse | better | changed | stable | insufficient data
    success: SuccessDrift | None = None
    latency: LatencyDrift | None = None
    error_mix: MixDrift | None = None


class DriftReport(BaseModel):
    baseline: tuple[str | None, str | None]
    current: tuple[str | None, str | None]
    alpha: float
    correction: str
    min_success_change: float
    min_latency_change: float
    tools: list[ToolDrift]


class Drift(DriftReport):
    """A DriftReport plus which rows each window held (keys `baseline` and `current`)."""

    provenance: dict[str, Provenance]


def adjust(pvalues: list[float], method: Correction = "holm") -> list[float]:
    """Holm step-down or Benjamini-Hochberg adjusted p-values, in the input order."""
    m = len(pvalues)
    if m == 0:
        return []
    p = np.asarray(pvalues, dtype=np.float64)
    order = np.argsort(p)
    ranked = p[order]
    if method == "holm":
        adj = np.maximum.accumulate(np.minimum((m - np.arange(m)) * ranked, 1.0))
    elif method == "bh":
        adj = np.minimum.accumulate(m / np.arange(m, 0, -1) * ranked[::-1])[::-1]
        adj = np.minimum(adj, 1.0)
    else:
        raise ValueError(method)
    out = np.empty(m)
    out[order] = adj
    return [float(v) for v in out]


def two_proportion(k1: int, n1: float, k2: int, n2: float, design_effect: float = 1.0) -> float:
    """Two-sided p-value of the pooled two-proportion z-test. With a design effect d > 1 each
    window counts as n/d independent calls (the effective sample size of a two-state chain
    with lag-one correlation rho is n(1-rho)/(1+rho))."""
    p = (k1 + k2) / (n1 + n2)
    se = math.sqrt(p * (1 - p) * design_effect * (1 / n1 + 1 / n2))
    if se == 0:
        return 1.0
    z = (k2 / n2 - k1 / n1) / se
    return float(2 * special.ndtr(-abs(z)))


def pooled_rho(a: ProbeArrays, b: ProbeArrays) -> float:
    """rho = P(fail|fail) - P(fail|ok) from the transitions of both windows' chains (each
    window's calls are linked only among themselves, as in `stats`). Under "no change" both
    windows share one chain, so pooling halves the noise of the estimate."""
    ff = nf = fo = no = 0
    for arr in (a, b):
        chain = burst_chain(arr.code >= 0, arr.ts)
        x, y = chain.p_fail_after_fail, chain.p_fail_after_ok
        if x.p is not None:
            ff, nf = ff + round(x.p * x.n), nf + x.n
        if y.p is not None:
            fo, no = fo + round(y.p * y.n), no + y.n
    if not nf or not no:
        return 0.0
    return ff / nf - fo / no


def success_drift(a: ProbeArrays, b: ProbeArrays) -> SuccessDrift:
    n1, n2 = len(a), len(b)
    k1, k2 = int((a.code < 0).sum()), int((b.code < 0).sum())
    rho = pooled_rho(a, b)
    r = min(max(rho, 0.0), RHO_MAX)
    deff = (1 + r) / (1 - r)
    return SuccessDrift(
        baseline=k1 / n1,
        current=k2 / n2,
        change=k2 / n2 - k1 / n1,
        rho=rho,
        design_effect=deff,
        pvalue=two_proportion(k1, n1, k2, n2, deff),
    )


def _latency(a: ProbeArrays, b: ProbeArrays) -> LatencyDrift | None:
    x = a.latency_ms[(a.code < 0) & np.isfinite(a.latency_ms)]
    y = b.latency_ms[(b.code < 0) & np.isfinite(b.latency_ms)]
    if x.shape[0] < MIN_N // 2 or y.shape[0] < MIN_N // 2:
        return None
    m1, m2 = median(x), median(y)
    p = mann_whitney_p(x, y)
    return LatencyDrift(
        baseline_p50=m1, current_p50=m2, ratio=m2 / m1 if m1 > 0 else math.inf, pvalue=p
    )


def _mix(a: ProbeArrays, b: ProbeArrays) -> MixDrift | None:
    ca = np.bincount(a.code[a.code >= 0], minlength=len(CODES))
    cb = np.bincount(b.code[b.code >= 0], minlength=len(CODES))
    keep = (ca + cb) > 0
    if keep.sum() < 2 or ca.sum() < 5 or cb.sum() < 5:
        return None
    table = np.vstack([ca[keep], cb[keep]])
    chi2, _ = chi2_contingency(table)
    deff = max(1.0, code_design_effect([(a.ts, a.code), (b.ts, b.code)]))
    dof = int(table.shape[1] - 1)
    v = math.sqrt(chi2 / (table.sum() * (min(table.shape) - 1)))
    names = [c.value for c, k in zip(CODES, keep, strict=True) if k]
    return MixDrift(
        baseline={n: int(c) for n, c in zip(names, table[0], strict=True)},
        current={n: int(c) for n, c in zip(names, table[1], strict=True)},
        cramers_v=v,
        design_effect=deff,
        pvalue=float(special.chdtrc(dof, chi2 / deff)),
    )


def _tool_tests(name: str, a: ProbeArrays | None, b: ProbeArrays | None) -> ToolDrift:
    """One tool's three tests on its rows in each window, uncorrected (or "insufficient
    data")."""
    na, nb = (len(a) if a else 0), (len(b) if b else 0)
    if a is None or b is None or na < MIN_N or nb < MIN_N:
        return ToolDrift(tool=name, n_baseline=na, n_current=nb, verdict="insufficient data")
    return ToolDrift(
        tool=name, n_baseline=na, n_current=nb, verdict="stable",
        success=success_drift(a, b), latency=_latency(a, b), error_mix=_mix(a, b),
    )


def _significant(test: Any, alpha: float) -> bool:
    return test is not None and test.p_adjusted is not None and test.p_adjusted < alpha


def _verdict(
    t: ToolDrift, alpha: float, min_success_change: float, min_latency_change: float,
    min_cramers_v: float,
) -> str:
    """Flag the tests that are significant after correction and large enough to matter;
    worse beats better beats changed beats stable."""
    worse = better = changed = False
    s, lat, mix = t.success, t.latency, t.error_mix
    if s is not None and _significant(s, alpha) and abs(s.change) >= min_success_change:
        s.flagged = True
        worse |= s.change < 0
        better |= s.change > 0
    if lat is not None and _significant(lat, alpha) and abs(lat.ratio - 1) >= min_latency_change:
        lat.flagged = True
        worse |= lat.ratio > 1
        better |= lat.ratio < 1
    if mix is not None and _significant(mix, alpha) and mix.cramers_v >= min_cramers_v:
        mix.flagged = True
        changed = True
    return "worse" if worse else "better" if better else "changed" if changed else "stable"


def drift(
    base: ProbeArrays,
    cur: ProbeArrays,
    *,
    baseline_window: tuple[float | None, float | None] = (None, None),
    current_window: tuple[float | None, float | None] = (None, None),
    alpha: float = 0.05,
    correction: Correction = "holm",
    min_success_change: float = 0.05,
    min_latency_change: float = 0.2,
    min_cramers_v: float = 0.1,
) -> DriftReport:
    a, b = dict(base.per_tool()), dict(cur.per_tool())
    out = [_tool_tests(name, a.get(name), b.get(name))
           for name in sorted(set(base.tools) | set(cur.tools))]
    for attr in ("success", "latency", "error_mix"):
        tests = [getattr(t, attr) for t in out if getattr(t, attr) is not None]
        for test, padj in zip(tests, adjust([t.pvalue for t in tests], correction), strict=True):
            test.p_adjusted = padj
    for t in out:
        if t.verdict != "insufficient data":
            t.verdict = _verdict(t, alpha, min_success_change, min_latency_change, min_cramers_v)
    return DriftReport(
        baseline=(iso(baseline_window[0]), iso(baseline_window[1])),
        current=(iso(current_window[0]), iso(current_window[1])),
        alpha=alpha,
        correction=correction,
        min_success_change=min_success_change,
        min_latency_change=min_latency_change,
        tools=out,
    )
