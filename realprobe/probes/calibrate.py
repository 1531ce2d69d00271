"""Statistics into a simulator Profile (`realprobe-profile/1`), and export views for other
benchmarks.

The profile is what the sandbox and the simulate transport read, so the numbers in it are the
generative parameters: the per-attempt success rate, the failure mix, the fitted latency of
successes (censored fit), and the burst chain.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from scipy import optimize, special

from realprobe.errors import RESILIBENCH_CODES, ErrorCode, RealprobeError, Unavailable
from realprobe.probes.loading import (
    FloatArray,
    ProbeArrays,
    load_mcp_failures,
    load_probes,
    load_retry_after,
)
from realprobe.probes.numeric import one_blas_thread
from realprobe.probes.stats import RHO_MAX, StatsReport, ToolStats, wilson
from realprobe.simulator.profile import (
    Z90,
    Burst,
    ImplicitFaults,
    LatencyModel,
    Lognormal,
    McpFailureForms,
    MixtureComponent,
    Profile,
    RetryAfter,
    ToolProfile,
    chain_with_rate,
    resilibench_base,
)

if TYPE_CHECKING:
    from realprobe.store import Database

T = TypeVar("T")

VIEWS = ("profile", "resilibench", "reliabilitybench")

#: our codes onto the fault kinds ReliabilityBench / AgentDisruptBench profiles use
RELIABILITYBENCH_FAULTS: dict[ErrorCode, str] = {
    ErrorCode.TIMEOUT: "timeout",
    ErrorCode.RATE_LIMIT_ERROR: "rate_limit",
    ErrorCode.NETWORK_ERROR: "partial_response",
    ErrorCode.INVALID_RESPONSE: "schema_drift",
    ErrorCode.SERVER_ERROR: "server_error",
    ErrorCode.INVALID_INPUT: "client_error",
    ErrorCode.NOT_FOUND: "client_error",
    ErrorCode.AUTH_ERROR: "client_error",
    ErrorCode.OPERATION_FAILED: "other",
}
#: its fault kinds, in the order the view lists them
RELIABILITYBENCH_KINDS = tuple(dict.fromkeys(RELIABILITYBENCH_FAULTS.values()))
#: ReliabilityBench's fault-injection intensities: the share of tool calls that meet a fault
LAMBDAS = (0.0, 0.075, 0.175, 0.275)


#: below this share of calls slower than the deadline, the deadline adjustment is noise
DEADLINE_ADJUST_MIN = 1e-3


def deadline_share(ts: ToolStats, latency: LatencyModel | None = None) -> float:
    """S(T): the fitted share of calls slower than the probes' deadline, under the latency
    model the simulator will draw from (`latency`'s mixture when it has one, else the one the
    statistics chose: their mixture or the censored lognormal)."""
    t = ts.latency.timeout_s
    if latency is not None and latency.mixture and t:
        s_t = latency.survival(t * 1000.0)
    else:
        s_t = ts.latency.p_exceed_timeout or 0.0
    return s_t if s_t >= DEADLINE_ADJUST_MIN else 0.0


def _deadline_interval(ts: ToolStats, s_t: float) -> tuple[tuple[float, float] | None, bool]:
    """S's interval around `s_t`, and whether its errors largely cancel the observed rate's
    (the one-lognormal profile interval: True). A mixture's S (also a profile-likelihood
    interval) is False: with two components the slow calls' count and S are less tied, and
    the larger half-width covered 83%, quadrature 92-93%. A mixture calibrate fitted itself
    borrows the width of the lognormal's interval on the probit scale."""
    lat = ts.latency
    s_ci = lat.p_exceed_timeout_ci95
    if s_ci is None:
        return s_ci, False
    if lat.mixture is not None:
        return s_ci, False  # a mixture: added in quadrature
    own = lat.p_exceed_timeout or 0.0
    if abs(own - s_t) < 1e-12:
        return s_ci, True
    z, z0 = float(special.ndtri(s_t)), float(special.ndtri(min(max(own, 1e-12), 1 - 1e-12)))
    lo, hi = (float(special.ndtri(min(max(v, 1e-12), 1 - 1e-12))) for v in s_ci)
    return (float(special.ndtr(z - (z0 - lo))), float(special.ndtr(z + (hi - z0)))), False


def _with_deadline_uncertainty(
    ci: tuple[float, float],
    rate: float,
    s_t: float,
    s_ci: tuple[float, float] | None,
    exact: bool = True,
) -> tuple[float, float]:
    """The interval of rate / (1-S): on the log scale, each side's half-width is the larger
    of the observed rate's and -ln(1-S)'s. Their errors are not independent: a call that
    happened to be slow lowers the observed rate and raises S alike, so they largely cancel
    (adding them in quadrature covered 98-100%, the larger one 93-96%). For a mixture's S
    they add in quadrature (see `_deadline_interval`)."""
    keep = 1.0 / (1.0 - s_t)
    if rate <= 0:
        return (0.0, min(1.0, ci[1] * keep))
    lo_s, hi_s = s_ci if s_ci is not None else (s_t, s_t)
    u, u_lo, u_hi = -math.log1p(-s_t), -math.log1p(-lo_s), -math.log1p(-min(hi_s, 0.999999))
    combine = max if exact else math.hypot
    d_lo = combine(math.log(rate) - math.log(max(ci[0], 1e-12)), u - u_lo)
    d_hi = combine(math.log(max(ci[1], 1e-12)) - math.log(rate), u_hi - u)
    centre = math.log(rate) + u
    return (min(1.0, math.exp(centre - d_lo)), min(1.0, math.exp(centre + d_hi)))


def holding(ci: tuple[float, float], v: float) -> tuple[float, float]:
    """`ci` widened, if needed, to hold the estimate `v` it belongs to (an estimate that rests
    on a prior where the likelihood is flat can sit outside the likelihood's interval)."""
    return (min(ci[0], v), max(ci[1], v))


def code_persistence(ts: ToolStats) -> tuple[float | None, tuple[float, float] | None]:
    """c in P(same code | fail after fail) = c + (1-c) sum w^2 (the fault model's rule),
    solved from the observed share of repeated codes, and its interval (the Wilson interval
    of that share mapped the same way); None with fewer than 5 such pairs or a single code
    (nothing to repeat but itself)."""
    same = ts.burst.p_same_code_after_fail
    if same is None or same.p is None or same.n < 5 or same.ci95 is None:
        return None, None
    chance = sum(w * w for w in ts.errors.share_of_failures.values())
    if chance >= 1 - 1e-9:
        return None, None

    def solve(q: float) -> float:
        return min(1.0, max(0.0, (q - chance) / (1 - chance)))

    return solve(same.p), (solve(same.ci95[0]), solve(same.ci95[1]))


#: deviance rise that bounds the chain's 95% interval (chi-square(1))
CHAIN_LEVEL = 3.841458820694124
#: the values of rho where the chain's profile likelihood is evaluated
CHAIN_RHOS = (-0.6, -0.3, 0.0, 0.15, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.94, 0.97,
              0.99)  # fmt: skip
_EDGE = 1e-6


class DeadlineChain:
    """The two-state chain seen through a deadline that bites, fitted to the stats' counts of
    pairs of calls 1..k apart by outcome (success, a failure with another code, TIMEOUT).

    The chain X fails with stationary rate f and lag-one correlation rho, so a call j later
    fails with f + (1-f) rho^j after a failure and f (1 - rho^j) after a success. A failure
    hangs with probability w; every call is also slower than the deadline with probability S,
    independently. A success says X was ok and a failure with another code that it had
    failed; after a TIMEOUT X had failed with probability f e / (f e + (1-f) S),
    e = w + (1-w) S. Maximised: the composite likelihood sum over lags and pairs of
    n(y, y') ln P(y' | y), with S's own uncertainty (its interval from the shape of the
    successes, a normal on the probit scale) as a penalty. One lag alone cannot tell a tool
    that fails rarely in long runs from one that fails more often in short ones when its
    failures are all TIMEOUTs (the slow calls' noise moves f): the decay over lags can."""

    def __init__(
        self, pairs: list[list[list[int]]], s_t: float, s_ci: tuple[float, float] | None
    ) -> None:
        #: counts by (outcome, lag, previous outcome)
        self.n = np.ascontiguousarray(np.moveaxis(np.asarray(pairs, dtype=np.float64), 2, 0))
        self.lags = np.arange(1, self.n.shape[1] + 1, dtype=np.float64)
        self.z0 = float(special.ndtri(min(max(s_t, 1e-9), 1 - 1e-9)))
        lo, hi = (float(special.ndtri(min(max(v, 1e-9), 1 - 1e-9))) for v in (s_ci or (s_t, s_t)))
        self.below = max((self.z0 - lo) / 1.959964, 1e-3)
        self.above = max((hi - self.z0) / 1.959964, 1e-3)

    def decay(self, rho: float) -> FloatArray:
        """rho ** lag at each lag."""
        return np.sign(rho) ** self.lags * np.abs(rho) ** self.lags

    def nll_grad(self, x: FloatArray, decay: FloatArray) -> tuple[float, FloatArray]:
        """The penalised negative log-likelihood at x = (f, w, z) and its gradient (analytic,
        so the optimiser needs one evaluation per step), rho entering through `decay`. With
        p the failure probability after each previous outcome (after a TIMEOUT it mixes
        a and b by tau = f e / (f e + (1-f) S)), q the outcome probabilities, and G = n / q:
        the derivatives go through p, S and w into q."""
        f, w, z = (float(v) for v in x)
        s = 0.5 * math.erfc(-z / math.sqrt(2.0))
        u, e = 1 - s, w + (1 - w) * s
        big_a, big_b = f * e, (1 - f) * s
        den = big_a + big_b
        tau = big_a / den
        p = np.multiply.outer(decay, (0.0, 1.0, tau))  # (lags, previous outcome)
        p += (f * (1 - decay))[:, None]
        pu = p * u
        q = np.empty((3, *p.shape))  # (outcome, lags, previous outcome)
        np.subtract(u, pu, out=q[0])
        np.multiply(pu, 1 - w, out=q[1])
        np.multiply(pu, w, out=q[2])
        q[2] += s
        np.maximum(q, 1e-300, out=q)
        g = self.n / q  # d(ll)/dq
        g0, g1, g2 = g
        h = (1 - w) * g1 + w * g2 - g0  # d(ll)/dp over u, per lag and previous outcome
        sums = g.reshape(3, -1).sum(axis=1)
        d_s = float(sums[2] - sums[0] - np.vdot(p, h))
        d_w = u * float(np.vdot(p, g2 - g1))
        tail = u * float(np.dot(h[:, 2], decay))  # through tau, after a TIMEOUT
        den2 = den * den
        d_f = u * float(np.dot(h.sum(axis=1), 1 - decay)) + tail * e * s / den2
        d_w += tail * big_b * f * (1 - s) / den2
        d_s += tail * (big_b * f * (1 - w) - big_a * (1 - f)) / den2
        side = self.below if z < self.z0 else self.above
        penalty = 0.5 * ((z - self.z0) / side) ** 2
        dens = math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
        ll = float(np.vdot(self.n, np.log(q)))
        grad = np.array([-d_f, -d_w, (z - self.z0) / side**2 - d_s * dens])
        return penalty - ll, grad

    def _at(self, rho: float, start: list[float]) -> tuple[float, list[float]]:
        """The smallest nll over (f, w, z) at this rho, from `start` and from a few failure
        rates (the likelihood has a ridge at f = 0, where every TIMEOUT is slow)."""
        f_lo = max(_EDGE, -rho / (1 - rho) + _EDGE) if rho < 0 else _EDGE
        bounds = [(f_lo, 1 - _EDGE), (_EDGE, 1 - _EDGE),
                  (self.z0 - 6 * self.below, self.z0 + 6 * self.above)]  # fmt: skip
        decay = self.decay(rho)
        best: tuple[float, list[float]] = (math.inf, start)
        for x0 in (start, [0.05, 0.5, self.z0]):
            x0 = [min(max(v, lo), hi) for v, (lo, hi) in zip(x0, bounds, strict=True)]
            res = optimize.minimize(
                self.nll_grad, np.array(x0), args=(decay,), jac=True, method="L-BFGS-B",
                bounds=bounds, options={"ftol": 1e-10, "maxiter": 200},
            )  # fmt: skip
            if float(res.fun) < best[0]:
                best = (float(res.fun), [float(v) for v in res.x])
            if best[1][0] > 1e-4:  # off the ridge at f = 0: the warm start found it
                break
        return best

    def curve(self) -> tuple[FloatArray, FloatArray]:
        """The profile nll at CHAIN_RHOS (swept upwards, each fit also from the last one)."""
        rhos = np.array(CHAIN_RHOS)
        prof = np.empty(rhos.shape[0])
        x = [0.03, 0.5, self.z0]
        for i, r in enumerate(rhos):
            prof[i], x = self._at(float(r), x)
        return rhos, prof

    def best(self) -> float:
        """rho at the minimum of the profile over CHAIN_RHOS, refined by a parabola through
        its neighbours."""
        rhos, prof = self.curve()
        j = int(np.argmin(prof))
        if not 0 < j < rhos.shape[0] - 1:
            return float(rhos[j])
        (x0, x1, x2), (y0, y1, y2) = rhos[j - 1 : j + 2], prof[j - 1 : j + 2]
        den = (x1 - x0) * (y1 - y2) - (x1 - x2) * (y1 - y0)
        if den == 0:
            return float(x1)
        top = x1 - 0.5 * ((x1 - x0) ** 2 * (y1 - y2) - (x1 - x2) ** 2 * (y1 - y0)) / den
        return float(min(max(top, x0), x2))

    def interval(self) -> tuple[float, float]:
        """rho's 95% profile-likelihood interval, its ends interpolated between CHAIN_RHOS.
        Meant for one lag: pairs at several lags share their calls, so their composite
        likelihood is sharper than the information it holds (at 8 lags the truth sat
        inside 45% of the time, at one lag 95%)."""
        rhos, prof = self.curve()
        j = int(np.argmin(prof))
        rise = 2.0 * (prof - prof[j]) - CHAIN_LEVEL
        return self._end(rhos, rise, j, -1), self._end(rhos, rise, j, 1)

    @staticmethod
    def _end(rhos: FloatArray, rise: FloatArray, j: int, step: int) -> float:
        i = j
        while 0 <= i + step < rhos.shape[0] and rise[i + step] <= 0:
            i += step
        if not 0 <= i + step < rhos.shape[0]:
            return float(step)  # no rise to the level on this side: the end of the range
        k = i + step
        t = -rise[i] / (rise[k] - rise[i])
        return float(rhos[i] + t * (rhos[k] - rhos[i]))


def generative_chain(
    ts: ToolStats, fail: float, s_t: float, fail_ci: tuple[float, float] | None = None
) -> tuple[float, float, tuple[float, float] | None]:
    """(P(fail|fail), P(fail|ok), P(fail|fail)'s 95% interval) of the chain behind a deadline
    that adds independent slow-call timeouts with probability s_t; `fail` is the generative
    failure rate. rho = a - b comes from `DeadlineChain`; the chain keeps it with the
    stationary rate `fail` (P(fail|ok) = f(1-rho), P(fail|fail) = P(fail|ok) + rho), and the
    interval is rho's mapped the same way. Statistics without pair counts (written by an
    older version) fall back on the correlation: Cov(Y_t, Y_t+1) = (1-s)^2 Cov(X_t, X_t+1)
    gives rho_X = rho_Y g / ((1-s) f), g the observed failure rate, with no interval."""
    if fail <= 0:
        return 0.0, 0.0, None
    if fail >= 1:
        return 1.0, 1.0, None
    b = ts.burst
    ci: tuple[float, float] | None = None
    if b.pairs is not None:
        s_ci = _deadline_interval(ts, s_t)[0]
        rho = DeadlineChain(b.pairs, s_t, s_ci).best()
        lo, hi = DeadlineChain(b.pairs[:1], s_t, s_ci).interval()
        f_lo, f_hi = fail_ci or (fail, fail)
        ci = (max(0.0, f_lo + lo * (1 - f_lo)), min(1.0, f_hi + hi * (1 - f_hi)))
    elif b.p_fail_after_ok.p is not None and b.p_fail_after_fail.p is not None:
        rho_obs = b.p_fail_after_fail.p - b.p_fail_after_ok.p
        rho = rho_obs * (1 - ts.success.rate) / ((1 - s_t) * fail)
    else:
        rho = 0.0
    # keep both transition probabilities inside [0, 1]: -f/(1-f) <= rho, and rho <= 0.98
    rho = min(max(rho, -fail / (1 - fail), 1 - 1 / fail), RHO_MAX)
    fo = min(1.0, max(0.0, fail * (1 - rho)))
    return min(1.0, max(0.0, fo + rho)), fo, ci


def latency_model(ts: ToolStats, mixture: list[MixtureComponent] | None = None) -> LatencyModel:
    """What the simulator draws latency from: the statistics' percentiles and fit, with the
    mixture of the statistics (or the one calibrate fitted to the rows) when there is one."""
    lat = ts.latency
    fit = lat.lognormal
    comps = mixture or (
        [MixtureComponent(weight=c.weight, mu=c.mu, sigma=c.sigma) for c in lat.mixture]
        if lat.mixture
        else None
    )
    return LatencyModel(
        p50=lat.p50,
        p90=lat.p90,
        p95=lat.p95,
        p99=lat.p99,
        mean=lat.mean,
        lognormal=Lognormal(mu=fit.mu, sigma=fit.sigma) if fit and fit.sigma > 0 else None,
        mixture=comps,
        mixture_fit=lat.mixture_fit,
        ks_pvalue=lat.ks_pvalue,
    )


def _before_deadline(
    ts: ToolStats, s_t: float
) -> tuple[float, tuple[float, float], tuple[float, float] | None, dict[ErrorCode, float]]:
    """(success, its interval, the long-run interval, error mix) before the deadline. Behind a
    deadline that bites the TIMEOUT share is `hang_share`'s and the other codes share the
    rest in their observed proportions."""
    counts = {ErrorCode(k): float(v) for k, v in ts.errors.counts.items() if v > 0}
    success = ts.success.rate
    ci, long_ci = ts.success.burst_adjusted95, ts.success.long_run95
    if not (s_t > 0 and ts.success.n):
        total = sum(counts.values())
        return success, ci, long_ci, {c: v / total for c, v in counts.items()} if total else {}
    s_ci, exact = _deadline_interval(ts, s_t)
    ci = _with_deadline_uncertainty(ci, success, s_t, s_ci, exact)
    if long_ci is not None:
        long_ci = _with_deadline_uncertainty(long_ci, success, s_t, s_ci, exact)
    success = min(1.0, success / (1.0 - s_t))
    others = {c: v for c, v in counts.items() if c is not ErrorCode.TIMEOUT}
    rest = sum(others.values())
    if not rest and counts:  # TIMEOUTs only: the failure rate is the hang rate
        success = 1.0 - hang_rate_alone(ts, s_t, s_ci)
        ci = holding(ci, success)
    w = hang_share(ts, s_t, s_ci) if success < 1 else 0.0
    errors: dict[ErrorCode, float] = {}
    if rest:
        errors = {c: (1.0 - w) * v / rest for c, v in others.items()}
    if w > 0:
        errors[ErrorCode.TIMEOUT] = w
    return success, ci, long_ci, {c: v for c, v in errors.items() if v > 0}


#: points of the grids behind `hang_share`: S on the probit scale, and P(hang)
HANG_GRID = 201


def _slow_share_grid(s_t: float, s_ci: tuple[float, float] | None) -> tuple[FloatArray, FloatArray]:
    """S over +-5 of its standard errors (a normal on the probit scale whose sides are set by
    the two ends of S's 95% interval), and the log-density of each point."""
    z = float(special.ndtri(min(max(s_t, 1e-12), 1 - 1e-12)))
    lo, hi = (float(special.ndtri(min(max(v, 1e-12), 1 - 1e-12))) for v in (s_ci or (s_t, s_t)))
    below, above = max((z - lo) / 1.959964, 1e-4), max((hi - z) / 1.959964, 1e-4)
    half = HANG_GRID // 2
    zz = np.concatenate([z - below * np.linspace(5, 0, half, endpoint=False),
                         z + above * np.linspace(0, 5, HANG_GRID - half)])  # fmt: skip
    log_w = -0.5 * np.square((zz - z) / np.where(zz < z, below, above))
    return special.ndtr(zz), log_w


def _hang_likelihood(
    ts: ToolStats, s_t: float, s_ci: tuple[float, float] | None
) -> tuple[FloatArray, FloatArray]:
    """P(hang) h on a grid and the log-likelihood of the TIMEOUT count there: of n calls, k_T
    timed out, and a call does not time out with probability (1-h)(1-S), whatever else it
    does; S's uncertainty (its interval, from the shape of the successes) enters as a normal
    on the probit scale and is profiled out for each h."""
    n = ts.success.n
    k_t = ts.errors.counts.get(ErrorCode.TIMEOUT.value, 0)
    s, log_w = _slow_share_grid(s_t, s_ci)
    q = k_t / n
    s_low = float(s[0])
    top = (q + 6 * math.sqrt(q * (1 - q) / n) + 3 / n - s_low) / (1 - s_low)
    h = np.linspace(0.0, min(1.0 - 1e-9, max(top, 1e-6)), HANG_GRID)
    stay = np.clip((1 - h[None, :]) * (1 - s[:, None]), 1e-300, 1 - 1e-16)
    ll = k_t * np.log1p(-stay) + (n - k_t) * np.log(stay) + log_w[:, None]
    prof = ll.max(axis=0)
    return h, prof - prof.max()


def _median(values: FloatArray, weights: FloatArray) -> float:
    cdf = np.cumsum(weights)
    return float(np.interp(0.5 * cdf[-1], cdf, values))


def hang_share(ts: ToolStats, s_t: float, s_ci: tuple[float, float] | None) -> float:
    """The share w of failures that are hangs behind a deadline that bites: the posterior
    median under a uniform prior on w.

    The likelihood is `_hang_likelihood`'s. The calls that answered before the deadline say
    how the other failures compare: a share r = k_coded / (n - k_T) of them, so the other
    codes' probability is c = r(1-h) and w = h / (h + c). Subtracting S n from k_T (the
    moment estimate) went below 0 for 29-35% of rare-failure tools, and S's noise alone is
    larger than their hangs: where the likelihood cannot tell, the prior keeps w near 1/2
    instead of 0. A tool with no other code has w = 1 (see `hang_rate_alone`)."""
    n = ts.success.n
    k_t = ts.errors.counts.get(ErrorCode.TIMEOUT.value, 0)
    k_c = ts.errors.failures - k_t
    if k_c <= 0 or n - k_t <= 0:
        return 1.0
    r = k_c / (n - k_t)
    h, ll = _hang_likelihood(ts, s_t, s_ci)
    w = h / (h + r * (1 - h))
    return _median(w, np.exp(ll) * r / np.square(h + r * (1 - h)))  # times dw/dh: uniform w


def hang_rate_alone(ts: ToolStats, s_t: float, s_ci: tuple[float, float] | None) -> float:
    """P(hang) of a tool whose only failure code is TIMEOUT, behind a deadline that bites: the
    posterior median under a prior uniform on its square root (`_hang_likelihood`); a flat
    prior pushed tools with one or two failures up. Its failure rate is that: the moment
    estimate reached success 1 (no failure, no chain) for 18% of such tools at success 0.97
    behind a 200 ms deadline."""
    h, ll = _hang_likelihood(ts, s_t, s_ci)
    return _median(h, np.exp(ll) / np.sqrt(np.maximum(h, h[1] / 4)))


def hang_interval(ts: ToolStats, s_t: float) -> tuple[tuple[float, float], str | None]:
    """The 95% interval of P(a call hangs) behind a deadline that bites, and a note in words
    when it reaches 0 (hangs not told from slow calls). For the censored lognormal: the
    profile-likelihood interval of its hang share (among successes and TIMEOUTs) times their
    share of calls, less the other codes' failures the deadline cut. Otherwise (a mixture):
    (TIMEOUT share - S) / (1 - S), each end taking the far ends of the TIMEOUT share's
    Wilson interval and S's (conservative)."""
    n = ts.success.n
    k = float(ts.errors.counts.get(ErrorCode.TIMEOUT.value, 0))
    fit = ts.latency.lognormal
    s_lo, s_hi = ts.latency.p_exceed_timeout_ci95 or (s_t, s_t)
    if ts.latency.mixture is None and fit is not None and fit.hang_share_ci95 is not None:
        # the fit counts every TIMEOUT not explained by slow successes as a hang; failures
        # with another code were cut by the deadline too (S/(1-S) of those seen), take them off
        frac = (fit.n_uncensored + fit.n_censored) / n
        others = max(0.0, n - fit.n_uncensored - fit.n_censored) / n
        lo = max(0.0, fit.hang_share_ci95[0] * frac - others * s_hi / (1.0 - min(s_hi, 0.999)))
        hi = max(0.0, fit.hang_share_ci95[1] * frac - others * s_lo / (1.0 - min(s_lo, 0.999)))
    else:
        a, b = wilson(k, n)

        def share(t: float, s: float) -> float:
            return min(1.0, max(0.0, (t - s) / (1.0 - min(s, 0.999999))))

        lo, hi = share(a, s_hi), share(b, s_lo)
    note = None
    if lo <= 0:
        note = (
            f"hangs cannot be told from slow calls at the {ts.latency.timeout_s:g} s deadline: "
            f"{k:.0f} TIMEOUTs against {s_t * n:.1f} expected slow calls; P(hang) is between "
            f"0 and {hi:.3g}"
        )
    return (lo, hi), note


def errors_interval(
    ts: ToolStats,
    s_t: float,
    hang_ci: tuple[float, float] | None,
    errors: dict[ErrorCode, float],
) -> dict[ErrorCode, tuple[float, float]] | None:
    """Per code, the 95% interval of its share in the profile's mix (None with no failure).

    Without a biting deadline: the statistics' intervals (Wilson at the effective number of
    failures). Behind one the mix is of generated failures: with K the other codes' failures
    and H = P(hang)(1-S) n the hangs among the calls, the TIMEOUT share is H / (K + H) and a
    code's is v (1 - that), v its share among the non-TIMEOUT failures. H's ends come from the
    hang interval, K's from the Wilson interval of its rate at the burst-adjusted n, v's from
    Wilson at the non-TIMEOUT failures' effective number; the ends are combined at their
    far sides (conservative), and each interval holds the profile's share `errors`."""
    mix = ts.errors
    if not mix.failures:
        return None
    if s_t <= 0 or hang_ci is None:
        return {ErrorCode(k): ci for k, ci in mix.share_of_failures_ci95.items()}
    n, deff = ts.success.n, mix.design_effect
    other = {ErrorCode(k): v for k, v in mix.counts.items() if k != ErrorCode.TIMEOUT.value}
    k_o = float(sum(other.values()))
    n_b = ts.success.n_effective
    k_lo, k_hi = (n * e for e in wilson(k_o / n * n_b, n_b))
    h_lo, h_hi = (v * (1 - s_t) * n for v in hang_ci)  # hangs among the n calls

    def share(hangs: float, others: float) -> float:
        return hangs / (others + hangs) if others + hangs > 0 else 1.0

    t_lo, t_hi = share(h_lo, k_hi), share(h_hi, k_lo)
    out = {ErrorCode.TIMEOUT: (min(t_lo, t_hi), t_hi)}
    for code, k in other.items():
        v_lo, v_hi = wilson(k / deff, k_o / deff)
        out[code] = (v_lo * (1 - t_hi), v_hi * (1 - t_lo))
    point = {c: errors.get(c, 0.0) for c in out}
    return {c: holding(ci, point[c]) for c, ci in out.items()}


#: below this many TIMEOUTs, a mixture's S behind the deadline rests on too few slow calls
#: for the success interval to be tight
MIXTURE_FEW_CENSORED = 100


def _mixture_deadline_note(ts: ToolStats) -> str | None:
    """Words for a success interval that is wider than it needs to be: behind a deadline under
    a two-component latency mixture with few TIMEOUTs, S's interval is wide (each TIMEOUT may
    be a hang or a slow call of the slow component) and adds to the observed rate's in
    quadrature, although the two errors partly cancel."""
    lat = ts.latency
    k = int(ts.errors.counts.get(ErrorCode.TIMEOUT.value, 0))
    s_t = lat.p_exceed_timeout or 0.0
    if not lat.mixture or s_t < DEADLINE_ADJUST_MIN or k >= MIXTURE_FEW_CENSORED:
        return None
    return (
        f"success_ci95 is conservative: S (the share of calls slower than the "
        f"{lat.timeout_s:g} s deadline) rests on {k} TIMEOUTs under a two-component latency "
        "mixture, so its uncertainty is added in full although it partly cancels the observed "
        "rate's; with rare failures such intervals held the truth 98-99% of the time, not 95%"
    )


#: a P(fail|fail) interval wider than this gets a note in words
CHAIN_NOTE_WIDTH = 0.5


def _notes(
    ts: ToolStats, hang_note: str | None, burst: Burst | None = None, s_t: float = 0.0
) -> list[str]:
    """The profile's notes in words: what could not be estimated, and why."""
    var = ts.variability
    out = [hang_note] if hang_note else []
    ci = burst.p_fail_after_fail_ci95 if burst is not None else None
    if ci is not None and ci[1] - ci[0] > CHAIN_NOTE_WIDTH:
        between = f"P(fail|fail) is between {ci[0]:.2f} and {ci[1]:.2f}"
        out.append(
            f"failures come in runs that calls slower than the {ts.latency.timeout_s:g} s "
            f"deadline ({s_t:.1%} of calls) blur: {between}; probe with a far deadline to pin "
            "it down"
            if s_t > 0
            else f"the burst chain is rough: {between}, only {ts.burst.p_fail_after_fail.n} "
            "calls followed a failure; probe longer to pin it down"
        )
    mixture_note = _mixture_deadline_note(ts)
    if mixture_note:
        out.append(mixture_note)
    if var.success_logit_sd_note:
        out.append(var.success_logit_sd_note)
    if ts.success.long_run_too_few_failures and ts.success.long_run_note:
        out.append(f"long-run interval, too few failures: {ts.success.long_run_note}")
    return out


def tool_profile(ts: ToolStats, mixture: list[MixtureComponent] | None = None) -> ToolProfile:
    """The generative parameters for one tool.

    The simulator draws an outcome, then applies the caller's deadline to the latency it
    draws (a slow answer becomes a TIMEOUT). When the probes' deadline T cut into the latency
    distribution, some observed TIMEOUTs were slow calls, and copying the observed rates would
    count them twice. With S = S(T) under the latency model the simulator draws from (the
    mixture when there is one), every observed non-timeout outcome is scaled by 1/(1-S) and
    the TIMEOUT (hang) share is what remains:
    P(ok) = (1-p)(1-S), P(code) = p w_code (1-S), P(TIMEOUT) = p w_T + (1 - p w_T) S.
    The interval adds S's own uncertainty to the success interval's; the TIMEOUT share is
    `hang_share`'s estimate (not the remainder, which goes below 0 for rare failures).
    The burst chain: the simulator runs its chain on the generated failures X and the deadline
    adds independent slow-call timeouts Z (probability S, on every call), so the observed
    failures are Y = X or Z; `generative_chain` fits rho_X through the deadline, and the
    profile's chain has it with the failure rate f: P(fail|ok) = f(1-rho_X),
    P(fail|fail) = P(fail|ok) + rho_X.
    """
    latency = latency_model(ts, mixture)
    s_t = deadline_share(ts, latency)
    success, ci, long_ci, errors = _before_deadline(ts, s_t)
    if not errors:
        success = 1.0 if s_t > 0 else success
    burst = _profile_burst(ts, success, ci, s_t)
    var = ts.variability
    persistence, persistence_ci = code_persistence(ts)
    hang_ci, hang_note = hang_interval(ts, s_t) if s_t > 0 and ts.success.n else (None, None)
    hang = None
    if hang_ci is not None:
        # the estimate rests on a prior where the likelihood is flat: never outside its interval
        hang = (1.0 - success) * errors.get(ErrorCode.TIMEOUT, 0.0)
        hang_ci = holding(hang_ci, hang)
    return ToolProfile(
        n=ts.success.n,
        success_rate=success,
        success_ci95=ci,
        success_long_run_ci95=long_ci,
        errors=errors,
        latency_ms=latency,
        burst=burst,
        code_persistence=persistence,
        code_persistence_ci95=persistence_ci,
        daily_logit_sd=var.success_logit_sd if var.success_logit_sd else None,
        daily_logit_sd_ci95=var.success_logit_sd_ci95,
        hang_rate=hang,
        hang_rate_ci95=hang_ci,
        errors_ci95=errors_interval(ts, s_t, hang_ci, errors),
        notes=_notes(ts, hang_note, burst, s_t),
    )


def _profile_burst(
    ts: ToolStats, success: float, ci: tuple[float, float], s_t: float
) -> Burst | None:
    """The profile's chain at failure rate 1 - success, with both transitions' intervals:
    behind a deadline that bites, `generative_chain`'s fit and P(fail|fail)'s interval, and
    P(fail|ok) = f (1 - P(fail|fail)) / (1 - f) (the stationary chain) taken at the far ends
    of that interval and of the failure rate's; otherwise the observed transitions' Wilson
    intervals."""
    b = ts.burst
    ff, fo = b.p_fail_after_fail.p, b.p_fail_after_ok.p
    if ff is None or fo is None:
        return None
    ff_ci, fo_ci = b.p_fail_after_fail.ci95, b.p_fail_after_ok.ci95
    if s_t > 0:
        f_lo, f_hi = 1 - ci[1], 1 - ci[0]
        ff, fo, ff_ci = generative_chain(ts, 1.0 - success, s_t, (f_lo, f_hi))
        fo_ci = None
        if ff_ci is not None:
            fo_ci = (
                f_lo * (1 - ff_ci[1]) / (1 - f_lo) if f_lo < 1 else 0.0,
                min(1.0, f_hi * (1 - ff_ci[0]) / (1 - f_hi)) if f_hi < 1 else 1.0,
            )
    # the correlation rho = ff - fo (at most RHO_MAX) at the counted failure rate, so the
    # profile's success_rate and chain agree
    rho = min(ff - fo, RHO_MAX)
    burst = chain_with_rate(Burst(p_fail_after_fail=fo + rho, p_fail_after_ok=fo), 1.0 - success)
    return burst.model_copy(
        update={
            "p_fail_after_fail_ci95": ff_ci and holding(ff_ci, burst.p_fail_after_fail),
            "p_fail_after_ok_ci95": fo_ci and holding(fo_ci, burst.p_fail_after_ok),
        }
    )


#: from this many tools on, calibrate fits them in worker processes, one per core
PARALLEL_TOOLS = 16


def _one_profile(t: ToolStats, rows: ProbeArrays | None) -> ToolProfile:
    """One tool's profile; with its rows (when the statistics have no mixture), a mixture by
    BIC."""
    from realprobe.probes.latency_mixture import fit_one

    comps, summary = (fit_one(rows) if rows is not None else None) or (None, None)
    prof = tool_profile(t, comps)
    if summary is not None:
        prof.latency_ms.mixture_fit = summary
    return prof


def _cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _start_method() -> str:
    """fork where it is safe (Linux, and no other thread whose locks a child could inherit
    held): the workers start at once, without importing numpy and scipy again (0.85 s CPU
    each) or re-running the caller's script; else spawn."""
    import sys
    import threading

    return "fork" if sys.platform == "linux" and threading.active_count() == 1 else "spawn"


def _tool_profiles(report: StatsReport, arrays: ProbeArrays | None) -> dict[str, ToolProfile]:
    """Every tool's profile. A tool's fits depend on its own statistics and rows only, so
    with many tools they run in worker processes (one BLAS thread each, one per core), each
    tool exactly as it would run here."""
    rows = dict(arrays.per_tool()) if arrays else {}
    jobs = [(t, None if t.latency.mixture else rows.get(t.tool)) for t in report.tools]
    workers = min(_cores(), len(jobs) // PARALLEL_TOOLS)
    if workers < 2:
        with one_blas_thread():
            return {t.tool: _one_profile(t, r) for t, r in jobs}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # one BLAS thread for each worker's whole life: its fits are tiny problems
    with ProcessPoolExecutor(workers, multiprocessing.get_context(_start_method()),
                             initializer=one_blas_thread) as pool:
        done = pool.map(_one_profile, *zip(*jobs, strict=True),
                        chunksize=max(1, len(jobs) // (8 * workers)))
        return {t.tool: prof for (t, _), prof in zip(jobs, done, strict=True)}


def calibrate(
    report: StatsReport,
    *,
    name: str | None = None,
    db: Database | None = None,
    arrays: ProbeArrays | None = None,
) -> Profile:
    """`arrays` (the rows behind the report; read from `db` when not given) adds each tool's
    latency mixture (one or two lognormals, chosen by BIC; see latency_mixture.py) where the
    statistics have none; `db` also gives each tool's Retry-After per failure code."""
    if not report.tools:
        raise Unavailable("nothing to calibrate: no tool has probe rows in this window")
    if arrays is None and db is not None:  # given only the statistics: their rows, if all there
        arrays = _behind(report, db, load_probes)
        arrays = arrays if arrays is not None and len(arrays) == report.rows else None
    tools = _tool_profiles(report, arrays)
    if db is not None:
        add_retry_after(tools, report, db)
        add_mcp_forms(tools, report, db)
    deadlines = sorted({t.latency.timeout_s for t in report.tools if t.latency.timeout_s})
    source: dict[str, Any] = {
        "kind": "calibrated",
        "probes": report.rows,
        "window": list(report.window),
        "first_probe": min((t.first for t in report.tools if t.first), default=None),
        "last_probe": max((t.last for t in report.tools if t.last), default=None),
        "denominator": "per attempt",
        "success_ci95": "Wilson on the burst-adjusted effective n (the chain borrowed from "
        "the other tools when a tool has few failures), widened by the deadline share's "
        "own interval when the deadline bites",
        "success_long_run_ci95": "over UTC days, day-to-day variation in (cluster-robust; "
        "random effects when fewer than 20 failures)",
        "latency": "lognormal fit of successes, TIMEOUTs right-censored at the deadline",
    }
    if deadlines:
        source["timeout_s"] = deadlines if len(deadlines) > 1 else deadlines[0]
    if len(deadlines) > 1:
        source["tool_timeout_s"] = {
            t.tool: t.latency.timeout_s for t in report.tools if t.latency.timeout_s
        }
    shares = {t.tool: deadline_share(t, tools[t.tool].latency_ms) for t in report.tools}
    adjusted = {name: round(v, 4) for name, v in shares.items() if v}
    if adjusted:
        source["deadline_adjusted"] = {
            "note": "share S(T) of calls slower than the probes' deadline, per tool; "
            "success_rate, errors and burst are before the deadline (the simulator applies "
            "it); latency mean and percentiles come from the censored fit",
            "tools": adjusted,
        }
    if (prov := report.provenance) is not None:
        source.update(prov.model_dump(include={"target_kinds", "targets", "vantages", "sources",
                                               "rows_by_kind", "excluded_rows"}))
        if prov.banner():
            source["warning"] = prov.banner()
    if db is not None:
        source["db"] = str(db)
    implicit = implicit_section(report.implicit or {}, source)
    return Profile(
        name=name,
        description="Calibrated from stored probe rows by `realprobe calibrate`.",
        source=source,
        tools=tools,
        implicit=implicit,
    )


def implicit_section(
    summary: dict[str, dict[str, Any]], source: dict[str, Any] | None = None
) -> dict[str, ImplicitFaults]:
    """The profile's implicit faults from the probes' signs: per tool, the share of its
    successful calls that showed each kind (measured as transient: probes cannot tell how
    long a quiet fault lasts); says so in `source` when there are any."""
    out = {}
    for tool, entry in sorted(summary.items()):
        rates = {k: r for k, r in entry.get("rates", {}).items() if r > 0}
        if rates:
            total = sum(rates.values())
            if total > 1:  # one answer can show several signs: keep the shares, cap at 1
                rates = {k: r / total for k, r in rates.items()}
            out[tool] = ImplicitFaults.model_validate({"rates": rates})
    if out and source is not None:
        source["implicit"] = "share of successful calls that showed drift, empty or stale signs"
    return out


#: distinct Retry-After values kept per tool and code (the most frequent ones)
RETRY_AFTER_VALUES = 50


def retry_after_model(count: int, values: list[float]) -> RetryAfter:
    """The share of `count` failures that carried Retry-After and the values' frequencies
    (rounded to the millisecond; the RETRY_AFTER_VALUES most frequent kept)."""
    seen = Counter(round(v, 3) for v in values)
    top = sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))[:RETRY_AFTER_VALUES]
    kept = sum(c for _, c in top)
    return RetryAfter(
        n=count,
        share=len(values) / count if count else 0.0,
        share_ci95=wilson(len(values), count) if count else None,
        values=[(v, float(c)) for v, c in sorted(top)],
        weights_ci95=[wilson(c, kept) for _, c in sorted(top)] if kept else None,
    )


def _behind(report: StatsReport, db: Database, read: Callable[..., T]) -> T | None:
    """`read(db, since, until, tools, kinds=...)` of the rows behind a report (its window,
    tools and target kinds), or None when the database cannot give them (a report that came
    without its database: nothing to measure from)."""
    from realprobe.ranges import parse_time

    since, until = (parse_time(w) if w else None for w in report.window)
    kinds = report.provenance.target_kinds if report.provenance else None
    try:
        return read(db, since, until, sorted(t.tool for t in report.tools), kinds=kinds)
    except RealprobeError:
        return None


def add_retry_after(tools: dict[str, ToolProfile], report: StatsReport,
                    db: Database) -> None:
    """Each tool's Retry-After per failure code, from the same rows as the report (a code
    whose failures never carried the header gets share 0, so the simulator sends none)."""
    for tool, by_code in (_behind(report, db, load_retry_after) or {}).items():
        tp = tools.get(tool)
        if tp is None:
            continue
        for code, (count, values) in by_code.items():
            if code not in ErrorCode.__members__:
                continue
            if values or code in (ErrorCode.RATE_LIMIT_ERROR, ErrorCode.SERVER_ERROR):
                tp.retry_after[ErrorCode(code)] = retry_after_model(count, values)


def mcp_forms(failures: list[tuple[bool, float, str]]) -> McpFailureForms:
    """An MCP tool's (or method's) failure forms from its failed calls: the JSON-RPC share
    with its Wilson interval, and a lognormal fit of the failures' latency (hangs, which
    only say the deadline passed, left out)."""
    n = len(failures)
    jsonrpc = sum(1 for j, _, _ in failures if j)
    times = np.log([ms for _, ms, code in failures
                    if ms > 0 and code != ErrorCode.TIMEOUT.value])
    latency = None
    if len(times):
        mu = float(np.mean(times))
        sigma = max(float(np.std(times, ddof=1)) if len(times) > 1 else 0.0, 0.01)
        latency = LatencyModel(p50=round(math.exp(mu), 3),
                               p90=round(math.exp(mu + Z90 * sigma), 3),
                               lognormal=Lognormal(mu=mu, sigma=sigma))
    return McpFailureForms(n=n, jsonrpc_share=jsonrpc / n, jsonrpc_share_ci95=wilson(jsonrpc, n),
                           error_latency_ms=latency)


def add_mcp_forms(tools: dict[str, ToolProfile], report: StatsReport,
                  db: Database) -> None:
    """Each MCP tool's failure forms, from the same rows as the report (tools whose rows
    are not MCP calls, or that never failed, get none)."""
    for tool, failures in (_behind(report, db, load_mcp_failures) or {}).items():
        if tool in tools and failures:
            tools[tool].mcp = mcp_forms(failures)


def profile_deadline(profile: Profile, tool: str) -> float | None:
    """The deadline (s) the profile's rates were measured at: the probes' deadline a calibrated
    profile records in its source (per tool when they differed), else None."""
    per_tool = profile.source.get("tool_timeout_s")
    if isinstance(per_tool, dict) and isinstance(per_tool.get(tool), int | float):
        return float(per_tool[tool])
    t = profile.source.get("timeout_s")
    if isinstance(t, int | float):
        return float(t)
    if isinstance(t, list) and t and all(isinstance(v, int | float) for v in t):
        return float(max(t))
    return None


class AtDeadline:
    """A tool's per-attempt outcome rates as a caller with deadline T sees them: the inverse of
    the deadline adjustment in `tool_profile`. With S = P(latency > T) under the profile's
    latency model (its mixture when it has one, as the simulator draws), p the failure rate
    and w the mix before the deadline:
    P(ok) = (1-p)(1-S), P(code) = p w(code) (1-S), P(TIMEOUT) = p w(TIMEOUT) + (1-p w(TIMEOUT)) S.
    """

    def __init__(self, tp: ToolProfile, deadline_s: float | None) -> None:
        self.deadline_s = deadline_s
        s_t = 0.0
        if deadline_s is not None and deadline_s > 0:
            # the model the simulator draws from: the mixture when there is one
            s_t = tp.latency_ms.survival(deadline_s * 1000.0)
            s_t = s_t if s_t >= DEADLINE_ADJUST_MIN else 0.0  # as in `tool_profile`
        self.slow_share = s_t
        p = 1.0 - tp.success_rate
        rates = {c: p * w * (1 - s_t) for c, w in tp.errors.items()}
        hang = p * tp.errors.get(ErrorCode.TIMEOUT, 0.0)
        if s_t > 0:
            rates[ErrorCode.TIMEOUT] = hang + (1 - hang) * s_t
        self.success = tp.success_rate * (1 - s_t)
        fails = sum(rates.values())
        self.mix = {c: v / fails for c, v in rates.items() if v > 0} if fails > 0 else {}
        ci = tp.success_ci95
        self.success_ci95 = (ci[0] * (1 - s_t), ci[1] * (1 - s_t)) if ci else None


def _at_deadlines(
    profile: Profile, deadline_s: float | None
) -> list[tuple[str, ToolProfile, AtDeadline]]:
    """Each tool (and the default, as `*`) at `deadline_s`, else at its probes' deadline."""
    items = list(profile.tools.items())
    if profile.default is not None:
        items.append(("*", profile.default))
    return [(name, tp, AtDeadline(tp, deadline_s if deadline_s is not None
                                  else profile_deadline(profile, name))) for name, tp in items]


def _deadline_note(tools: dict[str, Any]) -> tuple[float | None, str]:
    """The views' one deadline (None when unknown or the tools' differ), and what it means."""
    deadlines = {t["deadline_s"] for t in tools.values()}
    one = next(iter(deadlines)) if len(deadlines) == 1 else None
    if len(deadlines) > 1:
        return one, "per-tool deadlines differ: see each tool's deadline_s"
    if one is None:
        return one, (
            "no deadline known: rates before any deadline (export with a deadline in seconds "
            "for what a caller with that timeout sees)"
        )
    return one, (
        f"rates per attempt as a caller with a {one:g} s deadline sees them: calls "
        "slower than the deadline count as TIMEOUT"
    )


# -- ResiliBench: its simulator draws success with p = tool_success_rate, times 0.9 per
# failure among the last three calls, clamped to [0.1, 0.95] (and halved / times 0.7 for
# unmet / failed dependencies, which belong to the task, not the tool)
# (the rule's constants and its long-run chain, `resilibench_base`, live with the profile's
# failure rule in the simulator)


def resilibench_view(profile: Profile, deadline_s: float | None = None) -> dict[str, Any]:
    """What to plug into ResiliBench per tool: `tool_success_rate`, the base rate whose
    simulated long-run success (after its consecutive-failure penalty and clamp) equals the
    measured per-attempt success at the deadline, and error-type weights over the paper's six
    codes at that deadline."""
    tools: dict[str, Any] = {}
    for name, tp, at in _at_deadlines(profile, deadline_s):
        weights = dict.fromkeys(RESILIBENCH_CODES, 0.0)
        for code, share in at.mix.items():
            weights[code.resilibench] += share
        base, reachable = resilibench_base(at.success)
        ci = at.success_ci95
        entry: dict[str, Any] = {
            "n": tp.n,
            "tool_success_rate": base,
            "success_per_attempt": at.success,
            "success_per_attempt_ci95": ci,
            "tool_success_rate_ci95": (
                (resilibench_base(ci[0])[0], resilibench_base(ci[1])[0]) if ci else None
            ),
            "deadline_s": at.deadline_s,
            "slow_share": at.slow_share,
            "error_weights": weights,
        }
        if not reachable:
            entry["note"] = (
                "ResiliBench's clamp to [0.1, 0.95] cannot reproduce this success rate; "
                "tool_success_rate is the nearest end"
            )
        tools[name] = entry
    one, note = _deadline_note(tools)
    return {
        "format": "realprobe-resilibench-view/2",
        "codes": list(RESILIBENCH_CODES),
        "deadline_s": one,
        "note": note,
        "plug_in": "tool_success_rate (per tool) and error_weights",
        "arithmetic": (
            "success_per_attempt is P(ok) at deadline_s: (1-p)(1-S) with S the share of calls "
            "slower than the deadline; tool_success_rate b solves m(b) = success_per_attempt, "
            "where m(b) is the long-run success of p = clamp(b * 0.9^(failures among the last "
            "3 calls), 0.1, 0.95); dependency penalties are the task's and are not inverted"
        ),
        "source": profile.source,
        "tools": tools,
    }


def reliabilitybench_view(profile: Profile, deadline_s: float | None = None) -> dict[str, Any]:
    """Failure rate and fault weights per tool in ReliabilityBench's terms. Its lambda is the
    fault-injection rate, the share of tool calls that meet a fault: `LAMBDA_0`,
    `LAMBDA_0_075`, `LAMBDA_0_175` and `LAMBDA_0_275` give every tool that failure rate with
    its measured fault mix (what `Profile.scaled(lambda)` simulates); `measured` holds the
    per-attempt rates at the deadline and the lambda the measured APIs amount to (their
    mean failure rate)."""
    tools: dict[str, Any] = {}
    for name, _, at in _at_deadlines(profile, deadline_s):
        weights = dict.fromkeys(RELIABILITYBENCH_KINDS, 0.0)
        for code, share in at.mix.items():
            weights[RELIABILITYBENCH_FAULTS[code]] += share
        tools[name] = {
            "failure_rate": 1.0 - at.success,
            "fault_weights": weights,
            "deadline_s": at.deadline_s,
        }
    levels = {
        f"LAMBDA_{lam:g}".replace(".", "_"): {
            "lambda": lam,
            "tools": {n: {**t, "failure_rate": lam} for n, t in tools.items()},
        }
        for lam in LAMBDAS
    }
    one, note = _deadline_note(tools)
    rates = [t["failure_rate"] for t in tools.values()]
    return {
        "format": "realprobe-reliabilitybench-view/3",
        "plug_in": (
            "per intensity level and tool: failure_rate as the injector's fault probability "
            "per call and fault_weights as the weights of its fault kinds (independent draws: "
            "bursts and code persistence are not in this view)"
        ),
        "fault_kinds": list(RELIABILITYBENCH_KINDS),
        "deadline_s": one,
        "note": note,
        "lambda_meaning": "the share of tool calls that meet an injected fault",
        "source": profile.source,
        "measured": {"lambda": sum(rates) / len(rates) if rates else None, "tools": tools},
        "profiles": levels,
    }


def export(profile: Profile, view: str, deadline_s: float | None = None) -> dict[str, Any]:
    """The profile itself, or a view for another simulator. `deadline_s` overrides the deadline
    the views apply (default: the probes' own deadline recorded by `calibrate`)."""
    if deadline_s is not None and not deadline_s > 0:
        raise RealprobeError("deadline must be a positive number of seconds", param="deadline")
    if view == "profile":
        return profile.model_dump(mode="json", exclude_none=True)
    if view == "resilibench":
        return resilibench_view(profile, deadline_s)
    if view == "reliabilitybench":
        return reliabilitybench_view(profile, deadline_s)
    raise RealprobeError(f"view {view!r}: choose resilibench or reliabilitybench", param="view")
