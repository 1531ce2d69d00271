"""The latency model: ln(latency ms) ~ Normal(mu, sigma) fitted by censored maximum likelihood
(TIMEOUTs right-censored at their deadline, with a share of hangs), its intervals, the
percentiles it implies, and a KS goodness of fit whose null distribution accounts for the
parameters being estimated from the same data (parametric bootstrap, seeded)."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
from pydantic import BaseModel

from realprobe.probes.lazy_special import special
from realprobe.probes.loading import FloatArray
from realprobe.probes.numeric import median

Z95 = 1.959963984540054
#: above this share of calls slower than the deadline, the deadline "bites": lognormal
#: intervals are profiled and percentiles come from the fit instead of the successes
PROFILE_CI_MIN_EXCEED = 1e-3
#: parametric bootstrap of the KS statistic: replicates and the largest simulated sample
KS_BOOT_UNCENSORED = 400
KS_BOOT_CENSORED = 100
KS_BOOT_MAX_N = 1000
KS_BOOT_SEED = 20261122


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
    #: 95% profile-likelihood interval of hang_share (mu and sigma refitted for each share;
    #: chi-square(1) threshold); starts at 0 when hangs cannot be told from slow calls
    hang_share_ci95: tuple[float, float] | None = None
    n_uncensored: int
    n_censored: int
    p_exceed_timeout: float | None = None
    #: 95% interval of S(T) when the deadline bites: profile likelihood of the probit
    #: z = (mu - ln T) / sigma, with the same t^2(n-1) threshold as mu and sigma
    p_exceed_ci95: tuple[float, float] | None = None
    method: str
    #: "t" (Student t for mu, chi-square for sigma: exact for uncensored normal data, and used
    #: whenever the deadline does not bite) or "profile-likelihood" (when it does)
    intervals: str = "t"

    @property
    def bites(self) -> bool:
        """Does the deadline cut into the latency distribution (S(T) >= 0.001)?"""
        return (self.p_exceed_timeout or 0.0) >= PROFILE_CI_MIN_EXCEED

    def quantile(self, q: float) -> float:
        """The q-quantile (0 < q < 1) of the fitted latency in ms, deadline or not."""
        return math.exp(self.mu + self.sigma * float(special.ndtri(q)))

    def mean(self) -> float:
        return math.exp(self.mu + self.sigma * self.sigma / 2)


def _norm_logsf(z: FloatArray | float) -> Any:
    return special.log_ndtr(-np.asarray(z))


def _hang_share(logsf: FloatArray, cw: FloatArray, n: int) -> float:
    """The hang share pi maximising n ln(1-pi) + sum_j w_j ln(pi + (1-pi) S_j) for fixed
    (mu, sigma). The function is concave in pi, so this profiles pi out exactly: closed form for
    one distinct deadline, a bracketed root of the derivative otherwise. Profiling it out (rather
    than optimising a logit that runs to -inf when the share is 0) keeps every optimiser
    away from a boundary."""
    s = np.exp(logsf)
    m = float(cw.sum())
    if s.shape[0] == 1:
        one_minus = 1.0 - float(s[0])
        if one_minus <= 0:
            return 0.0
        return min(max(1.0 - n / ((n + m) * one_minus), 0.0), 1.0 - 1e-12)
    with np.errstate(divide="ignore"):
        slope0 = -n + float(np.dot(cw, (1 - s) / s))
    if slope0 <= 0:
        return 0.0

    def slope(pi: float) -> float:
        return -n / (1 - pi) + float(np.dot(cw, (1 - s) / (pi + (1 - pi) * s)))

    hi = 1.0 - 1e-12
    if slope(hi) >= 0:
        return hi
    from scipy import optimize  # imported where needed: a third of a second

    return float(optimize.brentq(slope, 1e-15, hi, xtol=1e-12))


class _Censored:
    """The negative log-likelihood of (mu, ln sigma), with the hang share profiled out (or
    held at a given share). The successes enter through n, sum(ln x), sum(ln x^2), so one
    evaluation costs O(number of distinct deadlines)."""

    def __init__(
        self,
        x: FloatArray,
        c_logs: FloatArray,
        hang_mass: bool,
        counts: FloatArray | None = None,
    ) -> None:
        """`c_logs` are the censoring points (ln ms), one per timeout; or, with `counts`,
        the distinct points and how many timeouts each."""
        self.n = int(x.shape[0])
        self.s1, self.s2 = float(x.sum()), float(np.dot(x, x))
        if counts is None:
            self.cvals, cnt = np.unique(c_logs, return_counts=True)
            self.cw = cnt.astype(np.float64)
        else:
            self.cvals, self.cw = c_logs, counts
        self.m = int(self.cw.sum())
        self.hang_mass = hang_mass

    def pi(self, mu: float, log_sig: float) -> float:
        if not self.hang_mass:
            return 0.0
        logsf = _norm_logsf((self.cvals - mu) / math.exp(log_sig))
        return _hang_share(logsf, self.cw, self.n)

    def __call__(self, theta: FloatArray, pi: float | None = None) -> float:
        """At theta = (mu, ln sigma); `pi`: the hang share held there instead of profiled."""
        mu, log_sig = float(theta[0]), float(theta[1])
        if not (math.isfinite(mu) and -30.0 < log_sig < 30.0):
            return math.inf  # an optimiser's probe far outside any plausible latency
        sig = math.exp(log_sig)
        n = self.n
        ll = -n * log_sig - (self.s2 - 2 * mu * self.s1 + n * mu * mu) / (2 * sig * sig)
        if pi is None and self.cvals.shape[0] == 1:  # one deadline: scalar arithmetic
            return -(ll + self._one_deadline(mu, sig))
        logsf = _norm_logsf((self.cvals - mu) / sig)
        if self.hang_mass or pi is not None:
            pi = _hang_share(logsf, self.cw, n) if pi is None else pi
            lp = math.log(pi) if pi > 0 else -math.inf
            l1p = math.log1p(-pi)
            ll += n * l1p + float(np.dot(self.cw, np.logaddexp(lp, l1p + logsf)))
        else:
            ll += float(np.dot(self.cw, logsf))
        return -ll

    def _one_deadline(self, mu: float, sig: float) -> float:
        w, n = float(self.cw[0]), self.n
        logsf = float(special.log_ndtr((mu - float(self.cvals[0])) / sig))
        if not self.hang_mass:
            return w * logsf
        one_minus = -math.expm1(logsf)
        pi = 0.0 if one_minus <= 0 else min(max(1.0 - n / ((n + w) * one_minus), 0.0), 1 - 1e-12)
        if pi <= 0:
            return w * logsf
        l1p = math.log1p(-pi)
        a, b = math.log(pi), l1p + logsf
        hi = max(a, b)
        return n * l1p + w * (hi + math.log1p(math.exp(min(a, b) - hi)))

    def mle(self, start: tuple[float, float], xatol: float = 1e-6) -> FloatArray:
        from scipy import optimize

        res = optimize.minimize(
            self,
            np.array(start),
            method="Nelder-Mead",
            options={"xatol": xatol, "fatol": xatol * 1e-3, "maxiter": 4000},
        )
        return np.asarray(res.x, dtype=np.float64)


def _t_intervals(mu: float, s: float, n: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """Exact 95% intervals for a normal sample of size n with mean mu and sd s (n-1): Student t
    for mu, chi-square for sigma."""
    df = n - 1
    t = float(special.stdtrit(df, 0.975))
    half = t * s / math.sqrt(n)
    lo_q, hi_q = float(special.chdtri(df, 0.025)), float(special.chdtri(df, 0.975))
    return (mu - half, mu + half), (s * math.sqrt(df / lo_q), s * math.sqrt(df / hi_q))



Interval = tuple[float, float] | None


def _intervals(model: _Censored, theta: Any, n: int, sig: float, log_t: float, *,
               hang_mass: bool, profile: bool,
               ) -> tuple[float, Interval, Interval, Interval, Interval, str]:
    """(sigma, mu, sigma, P(exceed) and hang-share intervals, their kind) of a censored fit.
    `profile`: the deadline cuts into the distribution, so the likelihood is far from
    quadratic and Wald intervals under-cover: profile it. Else the deadline sits far in the
    tail and the successes carry the fit (Student t and chi-square)."""
    mu = float(theta[0])
    if not profile:
        sig = sig * math.sqrt(n / (n - 1))
        mu_ci, sig_ci = _t_intervals(mu, sig, n)
        return sig, mu_ci, sig_ci, None, None, "t"
    level = float(special.stdtrit(max(n - 1, 1), 0.975)) ** 2
    ls_ci = _profile_interval(model, theta, 1, level)
    return (sig, _profile_interval(model, theta, 0, level),
            (math.exp(ls_ci[0]), math.exp(ls_ci[1])) if ls_ci else None,
            _exceed_interval(model, theta, log_t, level),
            _hang_interval(model, theta) if hang_mass else None, "profile-likelihood")


def fit_lognormal(
    latency_ok_ms: FloatArray, censor_ms: FloatArray, *, hang_mass: bool = True
) -> LognormalFit | None:
    """Maximum likelihood for ln(latency) ~ N(mu, sigma) from uncensored successes and calls
    right-censored at their deadline (TIMEOUTs).

    With `hang_mass`, a timeout is a hang with probability pi or a slow call (latency > deadline)
    otherwise: L = prod (1-pi) f(x_i) * prod [pi + (1-pi) S(c_j)]. Without it (pi = 0) a burst of
    injected hangs would drag the fitted tail out to the deadline.

    Small samples: when the deadline does not bite, sigma is the sample sd with n-1 and the
    intervals are Student t (mu) and chi-square (sigma), exact for normal ln-latencies. When it
    bites, sigma is the censored MLE and the profile-likelihood threshold is the F(1, n-1)
    quantile t^2 instead of chi2(1), the usual small-sample calibration.
    """
    x = np.log(np.compress(np.isfinite(latency_ok_ms) & (latency_ok_ms > 0), latency_ok_ms))
    c_all = np.compress(np.isfinite(censor_ms) & (censor_ms > 0), censor_ms)
    n = int(x.shape[0])
    if n < 2:
        return None
    mu0 = float(x.mean())
    sd1 = float(x.std(ddof=1))
    m = int(c_all.shape[0])
    if sd1 <= 1e-9:
        return LognormalFit(
            mu=mu0, sigma=max(sd1, 1e-9), n_uncensored=n, n_censored=m, method="mle"
        )
    if m == 0:
        mu_t, sig_t = _t_intervals(mu0, sd1, n)
        return LognormalFit(
            mu=mu0,
            sigma=sd1,
            mu_ci95=mu_t,
            sigma_ci95=sig_t,
            n_uncensored=n,
            n_censored=0,
            method="mle",
        )
    lo, hi = float(c_all.min()), float(c_all.max())
    if lo == hi:  # one deadline (the usual case): its log once, not once per timeout
        model = _Censored(x, np.log(c_all[:1]), hang_mass, np.array([float(m)]))
    else:
        model = _Censored(x, np.log(c_all), hang_mass)
    sig0 = float(x.std(ddof=0))
    theta = _newton2(model, (mu0, math.log(sig0)))
    mu, sig = float(theta[0]), float(math.exp(theta[1]))
    pi = model.pi(mu, float(theta[1]))
    t_med = lo if lo == hi else median(c_all)
    s_t = float(np.exp(_norm_logsf((math.log(t_med) - mu) / sig)))
    method = "censored-mle+hang-mass" if hang_mass else "censored-mle"
    sig, mu_ci, sig_ci, s_ci, hang_ci, intervals = _intervals(
        model, theta, n, sig, math.log(t_med), hang_mass=hang_mass,
        profile=s_t >= PROFILE_CI_MIN_EXCEED)
    return LognormalFit(
        mu=mu,
        sigma=sig,
        mu_ci95=mu_ci,
        sigma_ci95=sig_ci,
        hang_share=pi,
        hang_share_ci95=hang_ci,
        n_uncensored=n,
        n_censored=m,
        p_exceed_timeout=s_t,
        p_exceed_ci95=s_ci,
        intervals=intervals,
        method=method,
    )


def _hang_interval(
    model: _Censored, theta: FloatArray, level: float = 3.841458820694124
) -> tuple[float, float] | None:
    """95% profile-likelihood interval of the hang share: the shares where twice the rise of
    the negative log-likelihood (mu, sigma refitted) reaches `level`; 0 is the lower end when
    a share of 0 is inside (the TIMEOUTs are all explained by slow calls)."""
    from scipy import optimize

    pi_hat = model.pi(float(theta[0]), float(theta[1]))
    best = model(theta)

    def rise(pi: float) -> float:  # the likelihood with the share held at pi, mu and sigma refitted
        res = optimize.minimize(model, theta, args=(pi,), method="Nelder-Mead",
                                options={"xatol": 1e-6, "fatol": 1e-8, "maxiter": 2000})
        return 2.0 * (float(res.fun) - best) - level

    hi_cap = 1.0 - 1e-9
    try:
        lo = 0.0 if pi_hat <= 0 or rise(0.0) <= 0 else optimize.brentq(rise, 0.0, pi_hat, xtol=1e-6)
        hi = hi_cap if rise(hi_cap) <= 0 else optimize.brentq(rise, pi_hat, hi_cap, xtol=1e-6)
    except ValueError:
        return None
    return float(lo), float(hi)


def _exceed_interval(
    nll: _Censored, theta: FloatArray, log_t: float, level: float
) -> tuple[float, float] | None:
    """S(T) = Phi(z), z = (mu - ln T) / sigma: the profile-likelihood interval of z (the
    likelihood reparametrised in (z, ln sigma), the hang share profiled out), mapped through
    Phi. The delta method on z covered S only 79% of the time at 200 calls."""

    def by_z(th: FloatArray) -> float:
        return nll(np.array([log_t + float(th[0]) * math.exp(float(th[1])), float(th[1])]))

    z = (float(theta[0]) - log_t) / math.exp(float(theta[1]))
    ends = _profile_interval(by_z, np.array([z, float(theta[1])]), 0, level)
    if ends is None:
        return None
    return float(special.ndtr(ends[0])), float(special.ndtr(ends[1]))


def _profile_interval(
    nll: Callable[[FloatArray], float],
    theta: FloatArray,
    index: int,
    level: float = 3.841458820694124,
) -> tuple[float, float] | None:
    """95% profile-likelihood interval for parameter `index` (0: mu, 1: ln sigma): where twice
    the rise of the negative log-likelihood, minimised over the other parameter (and the hang
    share, profiled out exactly), reaches `level`."""
    from scipy import optimize

    best = nll(theta)
    other = 1 - index

    def rise(v: float) -> float:
        def inner(w: float) -> float:
            full = np.empty(2)
            full[index], full[other] = v, w
            return nll(full)

        w0 = float(theta[other])
        res = optimize.minimize_scalar(inner, bracket=(w0 - 0.05, w0 + 0.05))
        return 2.0 * (float(res.fun) - best) - level

    ends = []
    for direction in (-1.0, 1.0):
        step, inside = 0.02, float(theta[index])
        outside = inside + direction * step
        tries = 0
        while rise(outside) < 0:
            inside, step = outside, step * 2
            outside = inside + direction * step
            tries += 1
            if tries > 16:
                return None
        try:
            ends.append(
                float(optimize.brentq(rise, min(inside, outside), max(inside, outside), xtol=1e-5))
            )
        except ValueError:
            return None
    return (ends[0], ends[1])


# -- goodness of fit ---------------------------------------------------------------------------


def ks_statistic(x: FloatArray, cdf: Any) -> float:
    """The two-sided one-sample KS distance D of the sample x to cdf."""
    if not bool(np.all(x[1:] >= x[:-1])):  # callers often hand it sorted already
        x = np.sort(x)
    return float(_ks_distance(cdf(x)))


def _ks_distance(f: Any) -> Any:
    """D of sorted samples (along the last axis) from their values of the cdf."""
    n = f.shape[-1]
    i = np.arange(1, n + 1)
    return np.maximum(np.max(i / n - f, axis=-1), np.max(f - (i - 1) / n, axis=-1))


@lru_cache(maxsize=128)
def _lilliefors_null(n: int) -> FloatArray:
    """sqrt(n) D of normal samples of size n against their own fitted normal (mean, sd n-1),
    sorted: the null distribution of the KS statistic with estimated parameters. Cached per
    n (callers cap n, so this is computed for few sizes); at the cap, where every large
    sample lands, the shipped table of the same draw (`lilliefors_table`) is read instead."""
    from realprobe.probes import lilliefors_table as shipped

    if (n, KS_BOOT_SEED, KS_BOOT_UNCENSORED) == (shipped.N, shipped.SEED, shipped.REPLICATES):
        return np.array(shipped.TABLE, dtype=np.float64)
    return _lilliefors_draw(n)


def _lilliefors_draw(n: int) -> FloatArray:
    """The seeded, vectorised draw behind `_lilliefors_null`."""
    rng = np.random.default_rng(KS_BOOT_SEED + n)
    z = rng.standard_normal((KS_BOOT_UNCENSORED, n))
    z.sort(axis=1)
    m = z.mean(axis=1, keepdims=True)
    s = z.std(axis=1, ddof=1, keepdims=True)
    return np.sort(_ks_distance(special.ndtr((z - m) / s)) * math.sqrt(n))


def _newton2(f: _Censored, start: tuple[float, float], max_iter: int = 20) -> FloatArray:
    """Minimise f over two parameters from a start near the optimum (a bootstrap replicate
    starts at the parameters that generated it): damped Newton on finite differences, a few
    dozen evaluations where Nelder-Mead needs about 70 plus its overhead. Unless capped at a
    few steps (bootstrap replicates), falls back to Nelder-Mead when the curvature is not
    positive or a step does not go downhill."""
    x = np.array(start, dtype=np.float64)
    h = 1e-4
    e = (np.array([h, 0.0]), np.array([0.0, h]))
    fx = f(x)
    for _ in range(max_iter):
        fp = [f(x + e[i]) for i in range(2)]
        fm = [f(x - e[i]) for i in range(2)]
        g = np.array([(fp[i] - fm[i]) / (2 * h) for i in range(2)])
        h00 = (fp[0] - 2 * fx + fm[0]) / (h * h)
        h11 = (fp[1] - 2 * fx + fm[1]) / (h * h)
        h01 = (f(x + e[0] + e[1]) - fp[0] - fp[1] + fx) / (h * h)
        det = h00 * h11 - h01 * h01
        if h00 <= 0 or det <= 0:
            break
        step = -np.array([h11 * g[0] - h01 * g[1], h00 * g[1] - h01 * g[0]]) / det
        big = float(np.max(np.abs(step)))
        if not math.isfinite(big):
            break
        if big > 1.0:  # a trust region of one unit of ln ms and ln sigma
            step /= big
        t = 1.0
        while t > 1e-3:
            fn = f(x + t * step)
            if fn <= fx:
                break
            t /= 2
        else:
            if big < 1e-6:  # at the optimum: rounding keeps so small a step from going downhill
                return x
            break
        x, fx = x + t * step, fn
        if float(np.max(np.abs(t * step))) < 1e-6:
            return x
    if max_iter < 20:  # a bootstrap replicate: a step or two from the truth is the estimate
        return x
    return f.mle((float(x[0]), float(x[1])), xatol=1e-5)


def _truncated_cdf(mu: float, sig: float, top_log: float | None) -> Any:
    top = 1.0 if top_log is None else float(special.ndtr((top_log - mu) / sig))

    def cdf(v: FloatArray) -> FloatArray:
        return np.minimum(special.ndtr((v - mu) / sig) / top, 1.0)

    return cdf


def _censored_null(
    n_total: int, mu: float, sig: float, pi: float, top_log: float, replicates: int
) -> FloatArray:
    """sqrt(n) D of successes simulated from the censored model (hang share pi, deadline at
    top_log) against the model re-fitted to each simulated sample."""
    rng = np.random.default_rng(KS_BOOT_SEED + n_total)
    out = []
    c_log = np.array([top_log])
    for _ in range(replicates):
        lat = rng.normal(mu, sig, n_total)
        hang = rng.random(n_total) < pi
        ok = ~hang & (lat < top_log)
        x = lat[ok]
        if x.shape[0] < 5:
            continue
        model = _Censored(x, c_log, True, np.array([float(n_total - x.shape[0])]))
        # two Newton steps from the generating parameters: asymptotically the MLE itself
        # (a one-step estimator), at a tenth of the cost of iterating to convergence
        th = _newton2(model, (mu, math.log(sig)), max_iter=2)
        d = ks_statistic(x, _truncated_cdf(float(th[0]), math.exp(float(th[1])), top_log))
        out.append(d * math.sqrt(x.shape[0]))
    return np.sort(np.array(out))


def ks_pvalue(
    latency_ok_ms: FloatArray, fit: LognormalFit, timeout_ms: float | None
) -> float | None:
    """KS of ln(successes) against the fit, truncated at the deadline when there is one (a
    success is by definition faster than its deadline).

    mu and sigma come from the same data, which makes the Kolmogorov p-value far too large
    (its 5th percentile under the null was 0.40). The p-value here is from a seeded
    parametric bootstrap of sqrt(n) D: for normal samples with both parameters estimated
    (Lilliefors) when the deadline does not bite, else from the censored model with its hang
    share, re-fitted to each replicate. Samples over 1000 successes are compared on the
    sqrt(n) D scale with replicates of 1000, whose law has settled by then.
    """
    x = np.log(np.compress(np.isfinite(latency_ok_ms) & (latency_ok_ms > 0), latency_ok_ms))
    n = int(x.shape[0])
    if n < 5:
        return None
    mu, sig = fit.mu, fit.sigma
    top_log = None
    if timeout_ms is not None and timeout_ms > 0:
        top_log = math.log(timeout_ms)
        if float(special.ndtr((top_log - mu) / sig)) <= 0:
            return None
    d = ks_statistic(x, _truncated_cdf(mu, sig, top_log)) * math.sqrt(n)
    if fit.bites and top_log is not None:
        n_total = n + fit.n_censored
        scale = min(1.0, KS_BOOT_MAX_N / n)
        null = _censored_null(
            max(int(n_total * scale), 10), mu, sig, fit.hang_share, top_log, KS_BOOT_CENSORED
        )
    else:
        null = _lilliefors_null(min(n, KS_BOOT_MAX_N))
    if null.shape[0] == 0:
        return None
    exceed = null.shape[0] - int(np.searchsorted(null, d, side="left"))
    return (exceed + 1) / (null.shape[0] + 1)
