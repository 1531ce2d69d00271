"""The latency fit and the pooled interval against a known truth, before and after.

- KS null distribution: p-values of lognormal samples tested against their own fit. The
  Kolmogorov p-value (parameters treated as known) against the bootstrapped one, with no
  deadline (n = 120) and with a 200 ms deadline cutting ln N(5, 0.5) at its 73rd percentile
  (300 calls). A valid p-value has 5% of its mass below 0.05.
- Percentiles at a 0.5 s deadline (ln N(5.5, 0.8): 19% of calls slower than the deadline,
  1000 calls): relative error of p50/p90/p99 taken from the successes against the ones the
  censored fit gives.
- mu / sigma coverage at 17 successes (20 calls, 3 hangs at a 10 s deadline): z intervals on
  the MLE (sigma with n) against sigma with n-1 and t / chi-square intervals. Also at 17
  successes under the 200 ms deadline (profile-likelihood intervals).
- The profile-likelihood interval for mu when the hang share sits at 0: how often none came
  back (200 runs of 200 calls at the 200 ms deadline).
- The pooled `overall` interval over a solid tool (1% failures) and a flaky bursty one (40%,
  P(fail|fail) 0.8), 200 calls each: one rho from summed transitions against stratified.

    python bench/latency_fit_checks.py [--reps 400] [--save]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
from scipy import special, stats

from realprobe.probes.latency_fit import fit_lognormal, ks_pvalue
from realprobe.probes.stats import (
    SuccessStats,
    burst_chain,
    pooled_success,
    success_stats,
    wilson,
)

RESULTS = Path(__file__).parent / "results"
Z95 = 1.959963984540054


def null_summary(p: list[float]) -> dict[str, float]:
    a = np.array(p, dtype=np.float64)
    return {"share_below_0.05": round(float((a < 0.05).mean()), 4),
            "share_below_0.01": round(float((a < 0.01).mean()), 4),
            "5th_percentile": round(float(np.quantile(a, 0.05)), 4),
            "median": round(float(np.median(a)), 4)}


def ks_null(reps: int, censored: bool) -> dict:
    rng = np.random.default_rng(1 if censored else 2)
    ours, naive = [], []
    for _ in range(reps):
        if censored:
            lat = np.exp(rng.normal(5.0, 0.5, 300))
            ok, cens, t_ms = lat[lat < 200], np.full(int((lat >= 200).sum()), 200.0), 200.0
        else:
            ok, cens, t_ms = np.exp(rng.normal(5.0, 0.5, 120)), np.array([]), 10_000.0
        fit = fit_lognormal(ok, cens)
        assert fit is not None
        p = ks_pvalue(ok, fit, t_ms)
        assert p is not None
        ours.append(p)
        top = float(special.ndtr((math.log(t_ms) - fit.mu) / fit.sigma))
        naive.append(stats.kstest(np.log(ok), lambda v, f=fit, top=top: np.minimum(
            special.ndtr((v - f.mu) / f.sigma) / top, 1.0)).pvalue)
    return {"replicates": reps, "kolmogorov_pvalue": null_summary(naive),
            "bootstrap_pvalue": null_summary(ours)}


def percentiles(reps: int) -> dict:
    mu, sigma, t_ms = 5.5, 0.8, 500.0
    rng = np.random.default_rng(3)
    qs = (50, 90, 99)
    truth = {q: math.exp(mu + sigma * float(special.ndtri(q / 100))) for q in qs}
    emp: dict[int, list[float]] = {q: [] for q in qs}
    fitq: dict[int, list[float]] = {q: [] for q in qs}
    for _ in range(reps):
        lat = np.exp(rng.normal(mu, sigma, 1000))
        ok = lat[lat < t_ms]
        fit = fit_lognormal(ok, np.full(int((lat >= t_ms).sum()), t_ms))
        assert fit is not None and fit.bites
        for q in qs:
            emp[q].append(float(np.percentile(ok, q)) / truth[q] - 1)
            fitq[q].append(fit.quantile(q / 100) / truth[q] - 1)
    return {
        "replicates": reps, "mu": mu, "sigma": sigma, "deadline_ms": t_ms,
        "slow_share": round(float(special.ndtr(-(math.log(t_ms) - mu) / sigma)), 4),
        "truth_ms": {f"p{q}": round(v, 1) for q, v in truth.items()},
        "mean_relative_error_successes": {f"p{q}": round(float(np.mean(v)), 4)
                                          for q, v in emp.items()},
        "mean_relative_error_censored_fit": {f"p{q}": round(float(np.mean(v)), 4)
                                             for q, v in fitq.items()},
        "rmse_relative_censored_fit": {f"p{q}": round(float(np.sqrt(np.mean(np.square(v)))), 4)
                                       for q, v in fitq.items()},
    }


def small_samples(reps: int) -> dict:
    rng = np.random.default_rng(4)
    hits = {"z_mle_mu": 0, "z_mle_sigma": 0, "t_mu": 0, "chi2_sigma": 0}
    for _ in range(reps):
        lat = np.exp(rng.normal(5.0, 0.5, 17))
        fit = fit_lognormal(lat, np.full(3, 10_000.0))
        assert fit is not None and fit.mu_ci95 and fit.sigma_ci95
        x = np.log(lat)
        m, s0 = float(x.mean()), float(x.std())  # the old point estimates (sigma with n)
        hits["z_mle_mu"] += abs(m - 5.0) <= Z95 * s0 / math.sqrt(17)
        se_ls = 1 / math.sqrt(2 * 17)
        hits["z_mle_sigma"] += abs(math.log(s0) - math.log(0.5)) <= Z95 * se_ls
        hits["t_mu"] += fit.mu_ci95[0] <= 5.0 <= fit.mu_ci95[1]
        hits["chi2_sigma"] += fit.sigma_ci95[0] <= 0.5 <= fit.sigma_ci95[1]
    censored = {"mu": 0, "sigma": 0, "none": 0}
    done = 0
    while done < reps // 2:
        lat = np.exp(rng.normal(5.0, 0.5, 24))  # about 17 successes under 200 ms
        ok = lat[lat < 200]
        if ok.shape[0] != 17:
            continue
        fit = fit_lognormal(ok, np.full(24 - 17, 200.0))
        assert fit is not None
        done += 1
        if fit.mu_ci95 is None or fit.sigma_ci95 is None:
            censored["none"] += 1
            continue
        censored["mu"] += fit.mu_ci95[0] <= 5.0 <= fit.mu_ci95[1]
        censored["sigma"] += fit.sigma_ci95[0] <= 0.5 <= fit.sigma_ci95[1]
    return {
        "replicates": reps,
        "17_successes_3_hangs_far_deadline": {k: round(v / reps, 4) for k, v in hits.items()},
        "17_successes_of_24_calls_200ms_deadline": {
            "replicates": done, "profile_mu": round(censored["mu"] / done, 4),
            "profile_sigma": round(censored["sigma"] / done, 4),
            "no_interval": censored["none"]},
    }


def profile_nulls(reps: int) -> dict:
    rng = np.random.default_rng(5)
    none = at_zero = covered = 0
    for _ in range(reps):
        lat = np.exp(rng.normal(5.0, 0.5, 200))
        ok = lat[lat < 200]
        fit = fit_lognormal(ok, np.full(int((lat >= 200).sum()), 200.0))
        assert fit is not None
        at_zero += fit.hang_share == 0.0
        if fit.mu_ci95 is None or fit.sigma_ci95 is None:
            none += 1
        else:
            covered += fit.mu_ci95[0] <= 5.0 <= fit.mu_ci95[1]
    return {"replicates": reps, "hang_share_at_0": at_zero, "no_interval": none,
            "mu_coverage": round(covered / reps, 4)}


def markov_fails(k: int, n: int, fail: float, p_ff: float | None,
                 rng: np.random.Generator) -> np.ndarray:
    p_fo = fail if p_ff is None else fail * (1 - p_ff) / (1 - fail)
    ff = fail if p_ff is None else p_ff
    out = np.empty((k, n), dtype=bool)
    out[:, 0] = rng.random(k) < fail
    for j in range(1, n):
        out[:, j] = rng.random(k) < np.where(out[:, j - 1], ff, p_fo)
    return out


def old_pooled(parts: list[tuple[SuccessStats, object]]) -> tuple[float, float]:
    """The previous `overall`: one rho from the summed transition counts of all tools."""
    n = sum(s.n for s, _ in parts)
    k = sum(s.successes for s, _ in parts)
    ff = fo = nf = no = 0.0
    for _, b in parts:
        a, c = b.p_fail_after_fail, b.p_fail_after_ok  # type: ignore[attr-defined]
        if a.p is not None:
            ff, nf = ff + a.p * a.n, nf + a.n
        if c.p is not None:
            fo, no = fo + c.p * c.n, no + c.n
    rho = ff / nf - fo / no if nf and no else 0.0
    r = min(max(rho, 0.0), 0.98)
    n_eff = n * (1 - r) / (1 + r)
    return wilson(k / n * n_eff, n_eff)


def pooled(reps: int) -> dict:
    rng = np.random.default_rng(6)
    solid = markov_fails(reps, 200, 0.01, None, rng)
    flaky = markov_fails(reps, 200, 0.4, 0.8, rng)
    ts = np.arange(200, dtype=np.float64)
    truth = (0.99 + 0.6) / 2
    new = old = 0
    w_new = w_old = 0.0
    for i in range(reps):
        parts = []
        for f in (solid[i], flaky[i]):
            b = burst_chain(f, ts)
            parts.append((success_stats(200, int((~f).sum()), b.rho), b))
        o = pooled_success([s for s, _ in parts])
        assert o is not None
        lo, hi = o.burst_adjusted95
        new += lo <= truth <= hi
        w_new += hi - lo
        lo, hi = old_pooled(parts)
        old += lo <= truth <= hi
        w_old += hi - lo
    return {"replicates": reps, "truth": truth,
            "coverage": {"one_rho_over_mixed_tools": round(old / reps, 4),
                         "stratified_by_tool": round(new / reps, 4)},
            "mean_width": {"one_rho_over_mixed_tools": round(w_old / reps, 4),
                           "stratified_by_tool": round(w_new / reps, 4)}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--save", action="store_true", help="write bench/results/ (else print)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    out: dict[str, object] = {
        "ks_null_no_deadline": ks_null(args.reps, False),
        "ks_null_200ms_deadline": ks_null(max(args.reps // 2, 20), True),
        "percentiles_500ms_deadline": percentiles(args.reps // 2),
        "small_samples": small_samples(args.reps),
        "profile_interval_hang_share_at_0": profile_nulls(max(args.reps // 2, 20)),
        "overall_interval_mixed_tools": pooled(args.reps * 2),
    }
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out, indent=2))
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "latency_fit_checks.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
