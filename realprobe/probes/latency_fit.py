"""The latency model: ln(latency ms) ~ Normal(mu, sigma) fitted by censored maximum likelihood
(TIMEOUTs right-censored at their deadline, with a share of hangs), its intervals, and the KS
goodness of fit against the deadline-truncated fit."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import BaseModel
from scipy import optimize, special

from realprobe.probes.loading import FloatArray

Z95 = 1.959963984540054
#: above this share of calls slower than the deadline, lognormal intervals are profiled
PROFILE_CI_MIN_EXCEED = 1e-3


class LognormalFit(BaseModel):
    """ln(latency_ms) ~ Normal(mu, sigma), fitted to successes with TIMEOUTs right-censored.

    `hang_share` is the fitted mass of calls that would never answer (a TIMEOUT fault), among
    successes and timeouts; the other timeouts are slow calls cut by the deadline.
    """

    mu: float
    sigma: float
    mu_ci95: tuple[float, float] | None = None
    sigma_ci95: tuple[float, float] | None = None
    hang_share: float = 0.0
    n_uncensored: int
    n_censored: int
    p_exceed_timeout: float | None = None
    method: str
    intervals: str = "wald"  # or "profile-likelihood" when the deadline cuts the distribution


def _norm_logsf(z: FloatArray | float) -> Any:
    return special.log_ndtr(-np.asarray(z))


def fit_lognormal(
    latency_ok_ms: FloatArray, censor_ms: FloatArray, *, hang_mass: bool = True
) -> LognormalFit | None:
    """Maximum likelihood for ln(latency) ~ N(mu, sigma) from uncensored successes and calls
    right-censored at their deadline (TIMEOUTs).

    With `hang_mass`, a timeout is a hang with probability pi or a slow call (latency > deadline)
    otherwise: L = prod (1-pi) f(x_i) * prod [pi + (1-pi) S(c_j)]. Without it (pi = 0) a burst of
    injected hangs would drag the fitted tail out to the deadline. The successes' likelihood
    needs only n, sum(ln x), sum(ln x^2), so each evaluation is O(number of distinct deadlines).
    """
    x = np.log(latency_ok_ms[np.isfinite(latency_ok_ms) & (latency_ok_ms > 0)])
    c_all = censor_ms[np.isfinite(censor_ms) & (censor_ms > 0)]
    n = int(x.shape[0])
    if n < 2:
        return None
    s1, s2 = float(x.sum()), float((x * x).sum())
    mu0 = s1 / n
    sig0 = math.sqrt(max(s2 / n - mu0 * mu0, 1e-12))
    m = int(c_all.shape[0])
    if m == 0 or sig0 <= 1e-9:
        se_mu, se_sig = sig0 / math.sqrt(n), sig0 / math.sqrt(2 * n)
        return LognormalFit(
            mu=mu0,
            sigma=sig0,
            mu_ci95=(mu0 - Z95 * se_mu, mu0 + Z95 * se_mu),
            sigma_ci95=(max(sig0 - Z95 * se_sig, 0.0), sig0 + Z95 * se_sig),
            n_uncensored=n,
            n_censored=0,
            method="mle",
        )
    cvals, cnt = np.unique(np.log(c_all), return_counts=True)
    cw = cnt.astype(np.float64)

    def _nll(theta: FloatArray) -> float:
        mu, log_sig = float(theta[0]), float(theta[1])
        sig = math.exp(log_sig)
        ll_ok = -n * log_sig - (s2 - 2 * mu * s1 + n * mu * mu) / (2 * sig * sig)
        logsf = _norm_logsf((cvals - mu) / sig)
        if hang_mass:
            lp = -float(np.logaddexp(0.0, -theta[2]))  # ln pi
            l1p = -float(np.logaddexp(0.0, theta[2]))  # ln (1 - pi)
            ll_ok += n * l1p
            ll_c = np.logaddexp(lp, l1p + logsf)
        else:
            ll_c = logsf
        return float(-(ll_ok + float(np.dot(cw, ll_c))))

    nll: Any = _nll
    if cvals.shape[0] == 1:  # one deadline (the usual case): the same sum on plain floats
        nll = _single_deadline_nll(n, s1, s2, float(cvals[0]), float(cw[0]), hang_mass)

    start = [mu0, math.log(sig0)]
    if hang_mass:
        share = min(max(m / (n + m), 1e-3), 1 - 1e-3)
        start.append(math.log(share / (1 - share)))
    res = optimize.minimize(
        nll,
        np.array(start),
        method="Nelder-Mead",
        options={"xatol": 1e-6, "fatol": 1e-8, "maxiter": 4000},
    )
    theta = res.x
    mu, sig = float(theta[0]), float(math.exp(theta[1]))
    pi = float(special.expit(theta[2])) if hang_mass else 0.0
    t_med = float(np.median(c_all))
    s_t = float(np.exp(_norm_logsf((math.log(t_med) - mu) / sig)))
    if s_t >= PROFILE_CI_MIN_EXCEED:
        # the deadline cuts into the distribution: the likelihood is far from quadratic (and
        # the hang share may sit at its boundary), so Wald intervals under-cover; profile it
        mu_ci = _profile_interval(nll, theta, 0)
        ls_ci = _profile_interval(nll, theta, 1)
        sig_ci = (math.exp(ls_ci[0]), math.exp(ls_ci[1])) if ls_ci else None
    else:
        mu_ci, sig_ci = _wald_intervals(nll, theta)
    t_med = float(np.median(c_all))
    return LognormalFit(
        mu=mu,
        sigma=sig,
        mu_ci95=mu_ci,
        sigma_ci95=sig_ci,
        hang_share=pi,
        n_uncensored=n,
        n_censored=m,
        p_exceed_timeout=s_t,
        intervals="profile-likelihood" if s_t >= PROFILE_CI_MIN_EXCEED else "wald",
        method="censored-mle+hang-mass" if hang_mass else "censored-mle",
    )


def _log1pexp(x: float) -> float:
    """ln(1 + e^x) without overflow (numpy's logaddexp(0, x))."""
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


def _single_deadline_nll(
    n: int, s1: float, s2: float, c: float, w: float, hang_mass: bool
) -> Any:
    """`fit_lognormal`'s negative log-likelihood when every censored call shares one deadline
    `c` (log ms, weight `w`): scalar arithmetic, several times faster than the array form in
    the optimiser's inner loop (the profile intervals call it tens of thousands of times)."""

    def nll(theta: FloatArray) -> float:
        mu, log_sig = float(theta[0]), float(theta[1])
        sig = math.exp(log_sig)
        ll_ok = -n * log_sig - (s2 - 2 * mu * s1 + n * mu * mu) / (2 * sig * sig)
        logsf = float(special.log_ndtr((mu - c) / sig))
        if hang_mass:
            t = float(theta[2])
            lp, l1p = -_log1pexp(-t), -_log1pexp(t)  # ln pi, ln (1 - pi)
            ll_ok += n * l1p
            a, b = lp, l1p + logsf
            ll_c = max(a, b) + math.log1p(math.exp(-abs(a - b)))
        else:
            ll_c = logsf
        return -(ll_ok + w * ll_c)

    return nll


def _profile_interval(
    nll: Any, theta: FloatArray, index: int, level_chi2: float = 3.841458820694124
) -> tuple[float, float] | None:
    """95% profile-likelihood interval for parameter `index`: where twice the rise of the
    negative log-likelihood, minimised over the other parameters, reaches chi2(1, 0.95)."""
    best = nll(theta)
    others = [i for i in range(theta.shape[0]) if i != index]
    warm = {"x": theta[others].copy()}

    def rise(v: float) -> float:
        def inner(rest: FloatArray) -> float:
            full = theta.copy()
            full[index] = v
            full[others] = rest
            return float(nll(full))

        res = optimize.minimize(
            inner,
            warm["x"],
            method="Nelder-Mead",
            options={"xatol": 1e-5, "fatol": 1e-7, "maxiter": 2000},
        )
        warm["x"] = res.x
        return 2.0 * (float(res.fun) - best) - level_chi2

    ends = []
    for direction in (-1.0, 1.0):
        warm["x"] = theta[others].copy()
        step, inside = 0.05, float(theta[index])
        outside = inside + direction * step
        tries = 0
        while rise(outside) < 0:
            inside, step = outside, step * 2
            outside = inside + direction * step
            tries += 1
            if tries > 12:
                return None
        warm["x"] = theta[others].copy()
        try:
            ends.append(
                float(optimize.brentq(rise, min(inside, outside), max(inside, outside), xtol=1e-4))
            )
        except ValueError:
            return None
    return (ends[0], ends[1])


def _wald_intervals(
    nll: Any, theta: FloatArray
) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """95% Wald intervals from a finite-difference Hessian (sigma via its log, so it stays > 0)."""
    k = theta.shape[0]
    h = 1e-4
    hess = np.zeros((k, k))
    f0 = nll(theta)
    for i in range(k):
        for j in range(i, k):
            ei, ej = np.eye(k)[i] * h, np.eye(k)[j] * h
            if i == j:
                v = (nll(theta + ei) - 2 * f0 + nll(theta - ei)) / (h * h)
            else:
                v = (
                    nll(theta + ei + ej)
                    - nll(theta + ei - ej)
                    - nll(theta - ei + ej)
                    + nll(theta - ei - ej)
                ) / (4 * h * h)
            hess[i, j] = hess[j, i] = v
    try:
        cov = np.linalg.inv(hess)
    except np.linalg.LinAlgError:
        return None, None
    if cov[0, 0] <= 0 or cov[1, 1] <= 0:
        return None, None
    se_mu, se_ls = math.sqrt(cov[0, 0]), math.sqrt(cov[1, 1])
    mu, ls = float(theta[0]), float(theta[1])
    return (
        (mu - Z95 * se_mu, mu + Z95 * se_mu),
        (math.exp(ls - Z95 * se_ls), math.exp(ls + Z95 * se_ls)),
    )


def ks_test(x: FloatArray, cdf: Any) -> float:
    """Two-sided one-sample KS p-value (Stephens' approximation to the Kolmogorov law;
    good from n >= 5, and it keeps `stats` free of scipy.stats' import time)."""
    x = np.sort(x)
    n = x.shape[0]
    f = cdf(x)
    i = np.arange(1, n + 1)
    d = float(max(np.max(i / n - f), np.max(f - (i - 1) / n)))
    rn = math.sqrt(n)
    return float(min(1.0, max(0.0, special.kolmogorov((rn + 0.12 + 0.11 / rn) * d))))


def ks_pvalue(
    latency_ok_ms: FloatArray, fit: LognormalFit, timeout_ms: float | None
) -> float | None:
    """KS of ln(successes) against the fit, truncated at the deadline when there is one (a
    success is by definition faster than its deadline). Parameters come from the same data,
    so the p-value is conservative (Lilliefors)."""
    x = np.log(latency_ok_ms[np.isfinite(latency_ok_ms) & (latency_ok_ms > 0)])
    if x.shape[0] < 5:
        return None
    mu, sig = fit.mu, fit.sigma
    top = 1.0
    if timeout_ms is not None and timeout_ms > 0:
        top = float(special.ndtr((math.log(timeout_ms) - mu) / sig))
        if top <= 0:
            return None

    def cdf(v: FloatArray) -> FloatArray:
        return np.minimum(special.ndtr((v - mu) / sig) / top, 1.0)

    return ks_test(x, cdf)
