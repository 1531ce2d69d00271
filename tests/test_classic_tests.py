"""The scipy.stats-free Mann-Whitney and chi-square tests give scipy.stats' answers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from realprobe.probes.classic_tests import chi2_contingency, mann_whitney_p


@pytest.mark.parametrize("seed", range(6))
def test_mann_whitney_matches_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n1, n2 = rng.integers(3, 400, size=2)
    x = np.round(rng.lognormal(5, 0.5, n1), int(seed % 3))  # rounding makes ties
    y = np.round(rng.lognormal(5 + 0.1 * seed, 0.5, n2), int(seed % 3))
    want = stats.mannwhitneyu(x, y, alternative="two-sided").pvalue
    assert mann_whitney_p(x, y) == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_mann_whitney_all_equal_is_no_evidence() -> None:
    assert mann_whitney_p(np.ones(20), np.ones(30)) == 1.0


@pytest.mark.parametrize("correction", [True, False])
@pytest.mark.parametrize(
    "table",
    [[[10, 5], [3, 12]], [[40, 10, 5], [30, 20, 9]], [[1, 0, 7, 3], [2, 5, 1, 9]], [[5], [9]],
     [[30, 70], [50, 50], [45, 60]]],
)
def test_chi2_matches_scipy(table: list[list[int]], correction: bool) -> None:
    t = np.array(table, dtype=float)
    chi2, p = chi2_contingency(t, correction)
    want = stats.chi2_contingency(t, correction)
    assert chi2 == pytest.approx(want[0], rel=1e-9, abs=1e-12)
    assert p == pytest.approx(want[1], rel=1e-9)

