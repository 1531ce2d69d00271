"""Mann-Whitney U (normal approximation) and Pearson's chi-square test of homogeneity, written
with numpy and scipy.special: the same formulas scipy.stats uses for these sample sizes, without
scipy.stats' import cost (about a second), which `report` and `drift` would otherwise pay on
every run. Tested against scipy.stats."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from realprobe.probes.lazy_special import special
from realprobe.probes.loading import FloatArray


def midranks(ordered: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Mid-ranks (1-based, ties share their mean rank) of values already sorted, and the size
    of each run of ties. Mid-ranks are multiples of 1/2, so sums of them are exact in any
    order of addition."""
    n = ordered.shape[0]
    first = np.empty(n, dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    start = np.flatnonzero(first)  # where each run of equal values starts
    counts = np.diff(np.append(start, n))
    return np.repeat(start + counts - (counts - 1) / 2.0, counts), counts.astype(np.float64)


def mann_whitney_p(x: FloatArray, y: FloatArray) -> float:
    """Two-sided p-value of the Mann-Whitney U test, normal approximation with tie and
    continuity corrections (scipy.stats.mannwhitneyu's `asymptotic` method, which it picks
    itself when both samples have more than 8 values)."""
    n1, n2 = int(x.shape[0]), int(y.shape[0])
    if n1 <= 8 or n2 <= 8:
        from scipy import stats  # exact distribution for tiny samples

        return float(stats.mannwhitneyu(x, y, alternative="two-sided").pvalue)
    values = np.concatenate([x, y])
    order = np.argsort(values, kind="mergesort")
    ranks, ties = midranks(values[order])
    u1 = float(ranks[order < n1].sum()) - n1 * (n1 + 1) / 2
    u = max(u1, n1 * n2 - u1)
    n = n1 + n2
    s = math.sqrt(n1 * n2 / 12 * ((n + 1) - float((ties**3 - ties).sum()) / (n * (n - 1))))
    if s == 0:
        return 1.0
    z = (u - n1 * n2 / 2 - 0.5) / s
    return float(min(1.0, 2 * special.ndtr(-z)))


def chi2_contingency(table: Any, correction: bool = True) -> tuple[float, float]:
    """(chi2, p) of Pearson's test on a contingency table, its all-zero rows and columns left
    out, with Yates' correction when there is one degree of freedom (as
    scipy.stats.chi2_contingency; never with `correction=False`)."""
    observed = np.asarray(table, dtype=np.float64)
    observed = observed[:, observed.sum(axis=0) > 0]
    observed = observed[observed.sum(axis=1) > 0]
    if min(observed.shape) < 2:
        return 0.0, 1.0
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    dof = (observed.shape[0] - 1) * (observed.shape[1] - 1)
    if dof == 1 and correction:
        diff = expected - observed
        observed = observed + np.minimum(0.5, np.abs(diff)) * np.sign(diff)
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    return chi2, float(special.chdtrc(dof, chi2))
