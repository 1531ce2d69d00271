"""Latency as a mixture of one or two lognormals (a cache hit and a miss, say), chosen by BIC.

Same data and censoring as the one-lognormal fit: successes are exact observations of
ln(latency ms); TIMEOUTs are right-censored at their deadline, with a share `pi` of hangs
(calls that would never answer):

    L = prod_i (1-pi) f(x_i) * prod_j [pi + (1-pi) S(c_j)],   f = sum_k w_k N(mu_k, s_k)

Each K is fitted by maximum likelihood: EM from several starts on the successes, then, when
there are censored TIMEOUTs, a Newton polish of the full censored likelihood from the best
start (analytic gradient; BFGS where Newton finds no way down), which needs no
scipy.optimize. The K with the lower BIC
(2 NLL + params * ln(n + m)) wins. Above `MAX_POINTS` successes a seeded subsample is used
(the fit is for the shape, and that keeps calibrate fast on a million rows).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel

from realprobe.probes.lazy_special import special
from realprobe.probes.loading import _TIMEOUT, FloatArray, ProbeArrays
from realprobe.probes.numeric import sorted_quantiles

if TYPE_CHECKING:  # `stats` fits mixtures without loading the simulator
    from realprobe.simulator.profile import MixtureComponent

MAX_POINTS = 3_000
MIN_POINTS_FOR_TWO = 50
MIN_WEIGHT = 0.02
MIN_SIGMA = 0.02
LOG_2PI = math.log(2 * math.pi)


class Component(BaseModel):
    weight: float
    mu: float
    sigma: float


class MixtureFit(BaseModel):
    """The chosen mixture (components sorted by mu) and what the choice rested on."""

    components: list[Component]
    hang_share: float = 0.0
    n_uncensored: int
    n_censored: int
    criterion: str = "bic"
    bic: dict[str, float]
    aic: dict[str, float]
    subsampled: bool = False
    #: S(T) at the largest deadline under the chosen mixture, with a 95% interval (profile
    #: likelihood of probit(S) under the censored likelihood)
    p_exceed_timeout: float | None = None
    p_exceed_ci95: tuple[float, float] | None = None

    @property
    def k(self) -> int:
        return len(self.components)

    def summary(self) -> dict[str, Any]:
        return {
            "components": self.k,
            "criterion": self.criterion,
            "bic": {k: round(v, 2) for k, v in self.bic.items()},
            "aic": {k: round(v, 2) for k, v in self.aic.items()},
            "hang_share": round(self.hang_share, 6),
            "n": self.n_uncensored,
            "censored": self.n_censored,
            "subsampled": self.subsampled,
        }


def _lse(a: Any) -> Any:
    """log-sum-exp over the (one or two) columns: cheaper than scipy's general one."""
    return a[:, 0] if a.shape[1] == 1 else np.logaddexp(a[:, 0], a[:, 1])


def _unpack(theta: FloatArray, k: int, censored: bool) -> tuple[Any, Any, Any, float]:
    """theta -> (weights, mus, sigmas, pi)."""
    if k == 1:
        w = np.array([1.0])
        mus = np.array([theta[0]])
        sig = np.array([math.exp(theta[1])])
        rest = theta[2:]
    else:
        w1 = float(special.expit(theta[0]))
        w = np.array([w1, 1.0 - w1])
        mus = np.array([theta[1], theta[3]])
        sig = np.exp(np.array([theta[2], theta[4]]))
        rest = theta[5:]
    pi = float(special.expit(rest[0])) if censored else 0.0
    return w, mus, sig, pi


def _nll(
    theta: FloatArray, k: int, x: FloatArray, cvals: FloatArray, cw: FloatArray
) -> float:
    return _nll_grad(theta, k, x, cvals, cw)[0]


def _nll_grad(
    theta: FloatArray, k: int, x: FloatArray, cvals: FloatArray, cw: FloatArray
) -> tuple[float, FloatArray]:
    """The negative log-likelihood and its gradient in theta (analytic: the optimisers then
    need one evaluation per step instead of one per parameter and step). With r the
    components' responsibilities for a success, u theirs for a censored call's survival,
    h the hazard phi(z)/Q(z) and g the share of a TIMEOUT that is a slow call (not a hang):
    d/dmu = sum r z / s + sum g u h / s, d/dln s = sum r (z^2 - 1) + sum g u h z,
    d/dlogit w1 = sum (r_1 - w1) + sum g (u_1 - w1), d/dlogit pi = -n pi + sum (hang - pi)."""
    censored = cvals.shape[0] > 0
    flat = np.zeros_like(theta)
    if not np.all(np.abs(theta) < 50):  # an optimiser's step far outside: exp would overflow
        return 1e300, flat
    w, mus, sig, pi = _unpack(theta, k, censored)
    if np.any(sig < MIN_SIGMA) or np.any(w < MIN_WEIGHT / 2) or pi >= 1:
        return 1e300, flat
    log_w = np.log(w)
    z = (x[:, None] - mus[None, :]) / sig[None, :]
    logf = -0.5 * z * z - np.log(sig)[None, :] - 0.5 * LOG_2PI + log_w[None, :]
    norm = _lse(logf)
    ll = float(norm.sum())
    r = np.exp(logf - norm[:, None]) if k > 1 else np.ones_like(logf)
    g_mu = (r * z).sum(axis=0) / sig
    g_ls = (r * (z * z - 1.0)).sum(axis=0)
    g_w = float(r[:, 0].sum()) - x.shape[0] * w[0]
    g_pi = 0.0
    if censored:
        ll += x.shape[0] * math.log1p(-pi)
        zc = (cvals[:, None] - mus[None, :]) / sig[None, :]
        log_q = special.log_ndtr(-zc)
        a = log_q + log_w[None, :]
        log_s = _lse(a)
        log_pi = math.log(max(pi, 1e-300))
        lc = np.logaddexp(log_pi, math.log1p(-pi) + log_s)
        ll += float(np.dot(cw, lc))
        hang = np.exp(log_pi - lc)
        slow = cw * (1.0 - hang)
        uh = np.exp(a - log_s[:, None] - 0.5 * zc * zc - 0.5 * LOG_2PI - log_q) * slow[:, None]
        g_mu += uh.sum(axis=0) / sig
        g_ls += (uh * zc).sum(axis=0)
        if k > 1:
            g_w += float(np.dot(slow, np.exp(a[:, 0] - log_s) - w[0]))
        g_pi = -x.shape[0] * pi + float(np.dot(cw, hang - pi))
    if not math.isfinite(ll):
        return 1e300, flat
    head = [g_w] if k > 1 else []
    tail = [g_pi] if censored else []
    grad = [*head, *(v for pair in zip(g_mu, g_ls, strict=True) for v in pair), *tail]
    return -ll, -np.array(grad, dtype=np.float64)


def _em(x: FloatArray, pairs: list[tuple[float, float]], iters: int = 150) -> list[list[float]]:
    """Two components by uncensored EM from each pair of quantiles (lo, hi) in `pairs`, run
    side by side, each stopping when its own log-likelihood stops rising (theta layout of
    `_unpack`)."""
    mus = sorted_quantiles(np.sort(x), pairs)  # (starts, 2)
    sd = float(np.std(x)) or 1.0
    sig, w = np.full_like(mus, sd / 2), np.full_like(mus, 0.5)
    prev, active = np.full(len(pairs), -math.inf), np.ones(len(pairs), dtype=bool)
    xx = x[None, :, None]
    powers = np.stack([np.ones_like(x), x, x * x])  # the moments' weights, one product each
    for _ in range(iters):
        z = (xx - mus[:, None, :]) / sig[:, None, :]
        logp = (np.log(w) - np.log(sig))[:, None, :] - 0.5 * (z * z)
        norm = np.logaddexp(logp[..., 0], logp[..., 1])
        resp = np.exp(logp - norm[..., None])
        mom = powers @ resp  # (starts, [sum r, sum r x, sum r x^2], component)
        nk = mom[:, 0] + 1e-12
        new_w = np.clip(nk / x.shape[0], MIN_WEIGHT, 1 - MIN_WEIGHT)
        new_w /= new_w.sum(axis=1, keepdims=True)
        new_mu = mom[:, 1] / nk
        var = mom[:, 2] / nk - new_mu * new_mu
        new_sig = np.sqrt(np.maximum(var, (MIN_SIGMA * 2) ** 2))
        on = active[:, None]
        w, mus, sig = np.where(on, new_w, w), np.where(on, new_mu, mus), np.where(on, new_sig, sig)
        ll = norm.sum(axis=1)
        active &= ll - prev >= 1e-6 * np.abs(ll)
        prev = ll
        if not active.any():
            break
    return [[float(special.logit(w[i, 0])), float(mus[i, 0]), float(math.log(sig[i, 0])),
             float(mus[i, 1]), float(math.log(sig[i, 1]))] for i in range(len(pairs))]  # fmt: skip


def _fit_k(
    k: int, x: FloatArray, cvals: FloatArray, cw: FloatArray
) -> tuple[FloatArray, float] | None:
    censored = cvals.shape[0] > 0
    m = float(cw.sum())
    share = min(max(m / (x.shape[0] + m), 1e-3), 1 - 1e-3)
    tail = [math.log(share / (1 - share))] if censored else []
    if k == 1:
        starts = [[float(x.mean()), math.log(max(float(x.std()), MIN_SIGMA * 2)), *tail]]
    else:
        starts = [[*st, *tail] for st in _em(x, [(0.25, 0.75), (0.1, 0.6), (0.4, 0.9)])]
    scored = [(_nll(np.array(st), k, x, cvals, cw), st) for st in starts]
    fun, start = min(scored, key=lambda t: t[0])
    theta = np.array(start, dtype=np.float64)
    if censored:
        polished = _newton(theta, k, x, cvals, cw) or _bfgs(theta, k, x, cvals, cw)
        if polished is not None:  # else the best start stands, with its value
            theta, fun = polished
    if not math.isfinite(fun) or fun >= 1e299:
        return None
    return theta, fun


def _newton(
    theta: FloatArray, k: int, x: FloatArray, cvals: FloatArray, cw: FloatArray
) -> tuple[FloatArray, float] | None:
    """The censored likelihood's minimum by Newton's method from `theta`: the Hessian from
    forward differences of the analytic gradient, its eigenvalues taken in absolute value so
    every step goes downhill; steps at most one unit, halved until they do. It stops when the
    gradient is under 1e-6, a step under 1e-9 or the drop under 1e-12 of the value; None
    when no step goes downhill (BFGS then takes over). The same maximum BFGS finds,
    converged further (BFGS stops at a gradient of 1e-5), without loading scipy.optimize."""
    fun, grad = _nll_grad(theta, k, x, cvals, cw)
    for _ in range(60):
        if fun >= 1e299:
            return None
        if float(np.max(np.abs(grad))) < 1e-6:
            return theta, fun
        lam, vec = np.linalg.eigh(_hessian(theta, k, x, cvals, cw, grad))
        lam = np.maximum(np.abs(lam), 1e-8 * float(np.max(np.abs(lam))))
        step = -vec @ ((vec.T @ grad) / lam)
        big = float(np.max(np.abs(step)))
        if not math.isfinite(big):
            return None
        step /= max(big, 1.0)
        t, slope = 1.0, float(grad @ step)
        while True:
            new, new_grad = _nll_grad(theta + t * step, k, x, cvals, cw)
            if new <= fun + 1e-4 * t * slope:
                break
            t /= 2
            if t * big < 1e-12:
                return (theta, fun) if big < 1e-6 else None  # at the minimum, in rounding
        theta, fun, grad, drop = theta + t * step, new, new_grad, fun - new
        if t * big < 1e-9 or drop < 1e-12 * abs(fun):
            return theta, fun
    return None


def _bfgs(
    theta: FloatArray, k: int, x: FloatArray, cvals: FloatArray, cw: FloatArray
) -> tuple[FloatArray, float] | None:
    from scipy import optimize  # only when Newton's method fails: 0.25 s to import

    res = optimize.minimize(
        _nll_grad, theta, args=(k, x, cvals, cw), method="BFGS", jac=True,
        options={"maxiter": 100},
    )  # fmt: skip
    if math.isfinite(float(res.fun)) and float(res.fun) < 1e299:
        return np.asarray(res.x, dtype=np.float64), float(res.fun)
    return None


def fit_mixture(
    latency_ok_ms: FloatArray,
    censor_ms: FloatArray,
    *,
    min_points_for_two: int = MIN_POINTS_FOR_TWO,
    max_points: int = MAX_POINTS,
    interval: bool | Literal["two"] = True,
) -> MixtureFit | None:
    """One or two lognormal components for successes' latency, TIMEOUTs censored at their
    deadline; None with fewer than 5 successes. Two components are tried from
    `min_points_for_two` successes (`stats` lowers it when the KS test rejects one).
    `interval=False` skips S(T)'s profile-likelihood interval (most of the cost), for a
    caller that only wants the components; `"two"` computes it only when two components
    win (a caller that reads it from the one-lognormal fit otherwise)."""
    x = np.log(latency_ok_ms[np.isfinite(latency_ok_ms) & (latency_ok_ms > 0)])
    c_all = censor_ms[np.isfinite(censor_ms) & (censor_ms > 0)]
    if x.shape[0] < 5:
        return None
    subsampled = False
    if x.shape[0] > max_points:
        rng = np.random.default_rng(0)
        scale = max_points / x.shape[0]
        x = rng.choice(x, max_points, replace=False)
        if c_all.shape[0]:
            keep = max(1, round(c_all.shape[0] * scale))
            c_all = rng.choice(c_all, keep, replace=False)
        subsampled = True
    cvals, cnt = np.unique(np.log(c_all), return_counts=True)
    cw = cnt.astype(np.float64)
    n_total = x.shape[0] + int(cw.sum())
    censored = cvals.shape[0] > 0
    fits: dict[int, tuple[FloatArray, float]] = {}
    for k in (1, 2):
        if k == 2 and x.shape[0] < min_points_for_two:
            break
        got = _fit_k(k, x, cvals, cw)
        if got is not None:
            fits[k] = got
    if not fits:
        return None
    bic, aic = {}, {}
    for k, (_, nll) in fits.items():
        p = 3 * k - 1 + (1 if censored else 0)  # weights, mus and sigmas; the hang share
        bic[str(k)] = 2 * nll + p * math.log(n_total)
        aic[str(k)] = 2 * nll + 2 * p
    k_best = min(fits, key=lambda k: bic[str(k)])
    theta = fits[k_best][0]
    w, mus, sig, pi = _unpack(theta, k_best, censored)
    comps = sorted(
        (
            Component(weight=float(w[i]), mu=float(mus[i]), sigma=float(sig[i]))
            for i in range(k_best)
        ),
        key=lambda c: c.mu,
    )
    s_t, s_ci = (None, None)
    if censored and (interval is True or (interval == "two" and k_best > 1)):
        s_t, s_ci = _exceed(theta, k_best, x, cvals, cw)
    return MixtureFit(
        components=comps,
        hang_share=pi,
        n_uncensored=int(x.shape[0]),
        n_censored=int(cw.sum()),
        bic=bic,
        aic=aic,
        subsampled=subsampled,
        p_exceed_timeout=s_t,
        p_exceed_ci95=s_ci,
    )


def _probit_exceed(th: FloatArray, k: int, log_t: float) -> float:
    """probit(S(T)) under the mixture `th` (clipped as `_nll` refuses far-off steps)."""
    w, mus, sig, _ = _unpack(np.clip(th, -50.0, 50.0), k, True)
    sf = float(np.dot(w, special.ndtr((mus - log_t) / np.maximum(sig, 1e-12))))
    return float(special.ndtri(min(max(sf, 1e-12), 1 - 1e-12)))


def _probit_exceed_grad(th: FloatArray, k: int, log_t: float) -> FloatArray:
    """The gradient of `_probit_exceed` in theta (0 where it clips): with a = (mu - ln T)/s,
    dS/dmu = w phi(a)/s, dS/dln s = -w phi(a) a, dS/dlogit w1 = w1 w2 (Phi(a1) - Phi(a2)),
    each over phi(probit S)."""
    w, mus, sig, _ = _unpack(np.clip(th, -50.0, 50.0), k, True)
    a = (mus - log_t) / np.maximum(sig, 1e-12)
    tail = special.ndtr(a)
    sf = float(np.dot(w, tail))
    out = np.zeros_like(th)
    if not 1e-12 < sf < 1 - 1e-12:
        return out
    z = float(special.ndtri(sf))
    dens = w * np.exp(0.5 * (z * z - a * a))  # w phi(a) / phi(z)
    head = [w[0] * w[1] * float(tail[0] - tail[1]) * math.sqrt(2 * math.pi)
            * math.exp(0.5 * z * z)] if k > 1 else []  # fmt: skip
    pairs = [v for i in range(k) for v in (dens[i] / sig[i], -dens[i] * a[i])]
    out[: len(head) + 2 * k] = [*head, *pairs]
    return np.where(np.abs(th) < 50.0, out, 0.0)


def _hessian(
    theta: FloatArray, k: int, x: FloatArray, cvals: FloatArray, cw: FloatArray,
    grad: FloatArray | None = None,
) -> FloatArray:
    """The negative log-likelihood's Hessian: central differences of the analytic gradient,
    or forward differences from `grad`, the gradient at theta (half the evaluations)."""
    h = 1e-4 if grad is None else 1e-6
    eye = np.eye(theta.shape[0]) * h
    hess = np.array([(_nll_grad(theta + e, k, x, cvals, cw)[1]
                      - (_nll_grad(theta - e, k, x, cvals, cw)[1] if grad is None else grad))
                     / (2 * h if grad is None else h) for e in eye])  # fmt: skip
    return 0.5 * (hess + hess.T)


def _delta_sd(
    theta: FloatArray, k: int, x: FloatArray, cvals: FloatArray, cw: FloatArray, log_t: float
) -> float | None:
    """sd of probit(S) by the delta method (the Hessian from central differences of the
    analytic gradient): the first guess of the profile interval's ends."""
    hess = _hessian(theta, k, x, cvals, cw)
    grad = _probit_exceed_grad(theta, k, log_t)
    try:
        var = float(grad @ np.linalg.solve(hess, grad))
    except np.linalg.LinAlgError:
        return None
    return math.sqrt(var) if math.isfinite(var) and var > 0 else None


def _profile_end(
    theta: FloatArray, k: int, data: tuple[FloatArray, FloatArray, FloatArray], log_t: float,
    z_hat: float, step: float,
) -> float | None:
    """One end of the 95% profile-likelihood interval of z = probit(S): the z (beyond z_hat
    by `step`'s sign) where the signed root deviance, the negative log-likelihood minimised
    with z held fixed (SLSQP, an equality constraint), reaches 1.96. Secant steps on the
    root deviance, which is nearly linear in z."""
    x, cvals, cw = data
    f0 = _nll(theta, k, x, cvals, cw)
    warm = theta.copy()
    pts: list[tuple[float, float]] = [(z_hat, 0.0)]
    z = z_hat + step
    for _ in range(8):
        # from the last end and from the optimum: the held fit has more than one local
        # minimum, and which one a single start finds depends on rounding
        tries = [g for g in (_held_min(s, k, data, log_t, z) for s in (warm, theta)) if g]
        if not tries:
            return None
        warm, fun = min(tries, key=lambda g: g[1])
        rise = fun - f0
        r = math.sqrt(2 * max(rise, 0.0))
        if abs(r - 1.959963984540054) < 0.02:
            return z
        pts.append((z, r))
        (z1, r1), (z2, r2) = pts[-2], pts[-1]
        slope = (r2 - r1) / (z2 - z1) if r2 != r1 else 1.0 / step
        z = z2 + (1.959963984540054 - r2) / slope
        if not math.isfinite(z) or (z - z_hat) * step <= 0:
            z = z2 + step  # a flat stretch: keep walking out
    return None


def _held_min(
    start: FloatArray, k: int, data: tuple[FloatArray, FloatArray, FloatArray], log_t: float,
    z: float,
) -> tuple[FloatArray, float] | None:
    """The negative log-likelihood minimised with probit(S) held at `z` (SLSQP, an equality
    constraint), restarted from its own answer until a restart gains nothing: SLSQP's first
    run can stop "successfully" well above the minimum, and where it stops depends on the
    BLAS build's rounding, so one run made the interval differ between machines."""
    from scipy import optimize

    x, cvals, cw = data
    theta, best = start, math.inf
    for _ in range(6):
        res = optimize.minimize(
            _nll_grad, theta, args=(k, x, cvals, cw), method="SLSQP", jac=True,
            constraints=[{"type": "eq", "fun": lambda th: _probit_exceed(th, k, log_t) - z,
                          "jac": lambda th: _probit_exceed_grad(th, k, log_t)}],
            options={"maxiter": 200, "ftol": 1e-10},
        )  # fmt: skip
        fun = float(res.fun)
        if not (res.success and math.isfinite(fun) and fun < 1e299):
            return None if best == math.inf else (theta, best)
        gain, theta, best = best - fun, np.asarray(res.x, dtype=np.float64), min(best, fun)
        if gain < 1e-6:
            break
    return theta, best


def _exceed(
    theta: FloatArray, k: int, x: FloatArray, cvals: FloatArray, cw: FloatArray
) -> tuple[float, tuple[float, float] | None]:
    """S(T) at the largest deadline T and its 95% profile-likelihood interval (on the probit
    scale, every other parameter and the hang share profiled out). The delta method's
    interval from the curvature covered S only ~80% of the time at 1,000 calls; it now only
    seeds the search."""
    log_t = float(cvals.max())
    z = _probit_exceed(theta, k, log_t)
    s_t = float(special.ndtr(z))
    if _nll(theta, k, x, cvals, cw) >= 1e299:
        return s_t, None
    sd = _delta_sd(theta, k, x, cvals, cw, log_t) or 0.1
    data = (x, cvals, cw)
    lo = _profile_end(theta, k, data, log_t, z, -1.96 * sd)
    hi = _profile_end(theta, k, data, log_t, z, 1.96 * sd)
    if lo is None or hi is None:
        return s_t, None
    return s_t, (float(special.ndtr(lo)), float(special.ndtr(hi)))


Fitted = tuple[list["MixtureComponent"] | None, dict[str, Any]]


def fit_one(arr: ProbeArrays) -> Fitted | None:
    """One tool's mixture fit (successes; TIMEOUTs censored at their deadline): (the
    components when two win, else None; the choice, BIC per K, either way), None when its
    rows allow no fit."""
    from realprobe.simulator.profile import MixtureComponent

    censor_ms = arr.timeout_s[arr.code == _TIMEOUT] * 1000.0
    # the summary has no S(T)
    fit = fit_mixture(arr.latency_ms[arr.code < 0], censor_ms, interval=False) if len(arr) else None
    if fit is None:
        return None
    comps = (
        [MixtureComponent(weight=c.weight, mu=c.mu, sigma=c.sigma) for c in fit.components]
        if fit.k > 1
        else None
    )
    return comps, fit.summary()
