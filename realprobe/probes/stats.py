"""Per-tool statistics over stored probe rows: success with uncertainty, error mix, latency
(censored lognormal fit), the burst chain, and variability across periods.

Rows are loaded with one SQL query into numpy arrays and every statistic is vectorised, so a
million rows take about a second. All estimands are *per attempt*: one stored call is one trial;
rows with `excluded=1` (the prober's own outages) are left out before anything is counted.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel
from scipy import optimize, special

from realprobe.errors import ErrorCode, RealprobeError
from realprobe.store import BUSY_TIMEOUT_MS

Z95 = 1.959963984540054
#: error codes in a fixed order; a row's code is an index into this tuple, -1 for success
CODES: tuple[ErrorCode, ...] = tuple(ErrorCode)
_TIMEOUT = CODES.index(ErrorCode.TIMEOUT)
_OTHER = CODES.index(ErrorCode.OPERATION_FAILED)

#: consecutive calls further apart than this are not a transition of the burst chain
BURST_MAX_GAP_S = 3600.0
#: a period (day by default) needs this many attempts to count for the variability flags
VARIABILITY_MIN_N = 10
SUCCESS_SD_FLAG = 0.10
LATENCY_CV_FLAG = 0.25
VARIABILITY_ALPHA = 0.01
#: above this share of calls slower than the deadline, lognormal intervals are profiled
PROFILE_CI_MIN_EXCEED = 1e-3

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


# -- time windows ------------------------------------------------------------------------------

_REL = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_time(text: str, now: float | None = None) -> float:
    """Epoch seconds from an ISO date/datetime (naive means UTC), `now`, or `7d`/`24h`/`30m` ago."""
    now = datetime.now(UTC).timestamp() if now is None else now
    s = text.strip()
    if s.lower() == "now":
        return now
    m = _REL.match(s.lower())
    if m:
        return now - float(m.group(1)) * _UNIT_S[m.group(2)]
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise RealprobeError(
            f"time {text!r}: expected an ISO date or datetime (2026-11-01, 2026-11-01T02:00Z), "
            "`now`, or an age like 7d, 24h, 30m"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def parse_duration(text: str) -> float:
    """Seconds from `30m`, `6h`, `1d`, `2w`."""
    m = _REL.match(text.strip().lower())
    if not m or float(m.group(1)) <= 0:
        raise RealprobeError(f"duration {text!r}: expected a length like 30m, 6h, 1d or 1w")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def parse_window(text: str, now: float | None = None) -> tuple[float | None, float | None]:
    """`T1..T2` (either end may be empty: open) as epoch seconds; checks T1 < T2."""
    if ".." not in text:
        raise RealprobeError(
            f"window {text!r}: expected START..END, e.g. 14d..7d or 2026-11-01..now"
        )
    a, _, b = text.partition("..")
    start = parse_time(a, now) if a.strip() else None
    end = parse_time(b, now) if b.strip() else None
    if start is not None and end is not None and start >= end:
        raise RealprobeError(f"window {text!r}: the start is not before the end")
    return start, end


def iso(ts: float | None) -> str | None:
    if ts is None or not math.isfinite(ts):
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# -- loading -----------------------------------------------------------------------------------


@dataclass
class ProbeArrays:
    """Columns of the selected rows, sorted by (tool, started_ts).

    Tool `i` owns rows `bounds[i]:bounds[i+1]`. `code` is -1 for success, else an index
    into CODES. `timeout_s` is NaN when the row did not record its deadline.
    """

    tools: list[str]
    bounds: IntArray
    ts: FloatArray
    latency_ms: FloatArray
    code: IntArray
    timeout_s: FloatArray

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    def slice(self, i: int) -> ProbeArrays:
        a, b = int(self.bounds[i]), int(self.bounds[i + 1])
        return ProbeArrays(
            [self.tools[i]],
            np.array([0, b - a], dtype=np.int64),
            self.ts[a:b],
            self.latency_ms[a:b],
            self.code[a:b],
            self.timeout_s[a:b],
        )

    def where(self, mask: BoolArray) -> ProbeArrays:
        """The rows where `mask` holds, keeping the per-tool layout (tools left empty stay)."""
        idx = np.repeat(np.arange(len(self.tools)), np.diff(self.bounds))
        counts = np.bincount(idx[mask], minlength=len(self.tools))
        bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return ProbeArrays(
            list(self.tools),
            bounds,
            self.ts[mask],
            self.latency_ms[mask],
            self.code[mask],
            self.timeout_s[mask],
        )

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]]) -> ProbeArrays:
        """Build from row dicts (tests, in-memory runs): same rules as the SQL loader."""
        kept = [r for r in rows if not r.get("excluded")]
        kept.sort(key=lambda r: (r["tool"], r["started_ts"]))
        tools = sorted({r["tool"] for r in kept})
        counts = [sum(1 for r in kept if r["tool"] == t) for t in tools]
        codes = []
        for r in kept:
            if r.get("outcome") == "ok":
                codes.append(-1)
            else:
                try:
                    codes.append(CODES.index(ErrorCode(str(r.get("error_code")))))
                except ValueError:
                    codes.append(_OTHER)
        return cls(
            tools,
            np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            np.array([r["started_ts"] for r in kept], dtype=np.float64),
            np.array([_num(r.get("latency_ms")) for r in kept], dtype=np.float64),
            np.array(codes, dtype=np.int64),
            np.array([_num(r.get("timeout_s")) for r in kept], dtype=np.float64),
        )


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


def busy_timeout_s() -> float:
    """How long a reader waits on a lock (WAL readers only wait on a non-WAL writer)."""
    env = os.environ.get("REALPROBE_BUSY_TIMEOUT_S")
    try:
        return float(env) if env else BUSY_TIMEOUT_MS / 1000
    except ValueError:
        return BUSY_TIMEOUT_MS / 1000


def connect_readonly(path: str | Path) -> sqlite3.Connection:
    """A read-only connection that waits for writers instead of failing (WAL: readers never
    block a writer and are not blocked by one)."""
    p = Path(path)
    if not p.exists():
        raise RealprobeError(f"no database at {p}; run `realprobe probe` first or pass --db FILE")
    if p.is_dir():
        raise RealprobeError(f"{p} is a directory, not a database file")
    wait = busy_timeout_s()
    try:
        conn = sqlite3.connect(
            f"file:{quote(str(p.resolve()))}?mode=ro",
            uri=True,
            timeout=wait,
            check_same_thread=False,
        )
        conn.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise RealprobeError(f"{p}: not a readable realprobe database ({_why(exc, wait)})") from exc
    if "probes" not in names:
        conn.close()
        raise RealprobeError(f"{p}: has no `probes` table; run `realprobe probe` first")
    return conn


def tool_counts(
    db: str | Path, since: float | None = None, until: float | None = None
) -> dict[str, int]:
    """{tool: rows} in the window (excluded rows left out); uses the (tool, started_ts) index."""
    conn = connect_readonly(db)
    where, params = ["coalesce(excluded, 0) = 0"], []
    if since is not None:
        where.append("started_ts >= ?")
        params.append(since)
    if until is not None:
        where.append("started_ts < ?")
        params.append(until)
    try:
        rows = conn.execute(
            f"SELECT tool, count(*) FROM probes WHERE {' AND '.join(where)} GROUP BY tool", params
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise RealprobeError(f"cannot read probes ({_why(exc, busy_timeout_s())})") from exc
    finally:
        conn.close()
    return {str(t): int(c) for t, c in rows}


def _why(exc: sqlite3.DatabaseError, wait: float) -> str:
    if "locked" in str(exc):
        return (
            f"database is locked: another process held an exclusive lock for over {wait:g} s; "
            "retry later"
        )
    return str(exc)


def load_probes(
    db: str | Path | sqlite3.Connection,
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
) -> ProbeArrays:
    """Rows with excluded != 1 in [since, until), as arrays, in one read transaction."""
    own = not isinstance(db, sqlite3.Connection)
    conn = connect_readonly(db) if not isinstance(db, sqlite3.Connection) else db
    where = ["coalesce(excluded, 0) = 0"]
    params: list[Any] = []
    if since is not None:
        where.append("started_ts >= ?")
        params.append(since)
    if until is not None:
        where.append("started_ts < ?")
        params.append(until)
    if tools:
        where.append(f"tool IN ({','.join('?' * len(tools))})")
        params.extend(tools)
    cond = " AND ".join(where)
    code_case = " ".join(f"WHEN '{c.value}' THEN {i}" for i, c in enumerate(CODES))
    try:
        conn.execute("BEGIN")  # one snapshot for both queries, even while a prober writes
        try:
            groups = conn.execute(
                f"SELECT tool, count(*) FROM probes WHERE {cond} GROUP BY tool ORDER BY tool",
                params,
            ).fetchall()
            cur = conn.execute(
                "SELECT started_ts, coalesce(latency_ms, 'NaN'), "
                f"CASE WHEN outcome = 'ok' THEN -1 ELSE CASE error_code {code_case} "
                f"ELSE {_OTHER} END END, coalesce(timeout_s, 'NaN') "
                f"FROM probes WHERE {cond} ORDER BY tool, started_ts",
                params,
            )
            n = sum(c for _, c in groups)
            flat = (
                np.fromiter(chain.from_iterable(cur), dtype=np.float64, count=4 * n).reshape(n, 4)
                if n
                else np.zeros((0, 4))
            )
        finally:
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise RealprobeError(f"cannot read probes ({_why(exc, busy_timeout_s())})") from exc
    finally:
        if own:
            conn.close()
    counts = [c for _, c in groups]
    return ProbeArrays(
        [t for t, _ in groups],
        np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        np.ascontiguousarray(flat[:, 0]),
        np.ascontiguousarray(flat[:, 1]),
        flat[:, 2].astype(np.int64),
        np.ascontiguousarray(flat[:, 3]),
    )


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


class LatencyStats(BaseModel):
    n: int
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


# -- per-tool pieces ---------------------------------------------------------------------------


def burst_chain(fail: BoolArray, ts: FloatArray, max_gap_s: float = BURST_MAX_GAP_S) -> BurstStats:
    """Two-state chain from consecutive calls (time-ordered) no more than max_gap_s apart."""
    if fail.shape[0] < 2:
        empty = Transition(p=None, n=0, ci95=None)
        return BurstStats(p_fail_after_fail=empty, p_fail_after_ok=empty, rho=None)
    linked = np.diff(ts) <= max_gap_s
    prev, nxt = fail[:-1][linked], fail[1:][linked]
    n_ff = int(np.count_nonzero(prev & nxt))
    n_f = int(np.count_nonzero(prev))
    n_of = int(np.count_nonzero(~prev & nxt))
    n_o = int(prev.shape[0] - n_f)
    ff = Transition(p=n_ff / n_f if n_f else None, n=n_f, ci95=wilson(n_ff, n_f) if n_f else None)
    fo = Transition(p=n_of / n_o if n_o else None, n=n_o, ci95=wilson(n_of, n_o) if n_o else None)
    rho = ff.p - fo.p if ff.p is not None and fo.p is not None else None
    return BurstStats(p_fail_after_fail=ff, p_fail_after_ok=fo, rho=rho)


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

    def nll(theta: FloatArray) -> float:
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

        res = optimize.minimize(inner, warm["x"], method="Nelder-Mead",
                                options={"xatol": 1e-5, "fatol": 1e-7, "maxiter": 2000})
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
            ends.append(float(optimize.brentq(rise, min(inside, outside), max(inside, outside),
                                              xtol=1e-4)))
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
    return LatencyStats(
        n=int(lat.shape[0]),
        mean=float(lat.mean()),
        p50=float(q[0]),
        p90=float(q[1]),
        p95=float(q[2]),
        p99=float(q[3]),
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
    groups = [latency_ms[ok & (inv == j)] for j in np.flatnonzero(keep)]
    groups = [g[np.isfinite(g)] for g in groups]
    groups = [g for g in groups if g.shape[0] >= VARIABILITY_MIN_N]
    if len(groups) >= 2:
        meds = np.array([np.median(g) for g in groups])
        out.latency_cv = float(meds.std(ddof=1) / meds.mean()) if meds.mean() > 0 else None
        out.latency_pvalue = kruskal_pvalue(groups)
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
    burst = burst_chain(fail, arr.ts)
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
    return StatsReport(window=(iso(since), iso(until)), rows=len(arr), tools=out,
                       overall=pooled_success(out))


def pooled_success(tools: list[ToolStats]) -> SuccessStats | None:
    """All tools together: k and n summed; the burst correlation from the summed transition
    counts of each tool's own chain (calls of different tools are never a transition)."""
    if not tools:
        return None
    n = sum(t.success.n for t in tools)
    k = sum(t.success.successes for t in tools)
    ff = fo = nf = no = 0.0
    for t in tools:
        a, b = t.burst.p_fail_after_fail, t.burst.p_fail_after_ok
        if a.p is not None:
            ff, nf = ff + a.p * a.n, nf + a.n
        if b.p is not None:
            fo, no = fo + b.p * b.n, no + b.n
    rho = ff / nf - fo / no if nf and no else None
    return success_stats(n, k, rho)



def stats_from_db(
    db: str | Path,
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    period_s: float = 86400.0,
) -> tuple[ProbeArrays, StatsReport]:
    """Load and compute; a clear error when the window holds nothing."""
    arr = load_probes(db, since, until, tools)
    if len(arr) == 0:
        where = f" between {iso(since) or 'the beginning'} and {iso(until) or 'now'}"
        sel = f" for {', '.join(tools)}" if tools else ""
        raise RealprobeError(
            f"no probe rows{sel}{where} in {db}; widen --since/--until or probe first"
        )
    if tools:
        missing = sorted(set(tools) - set(arr.tools))
        if missing:
            raise RealprobeError(f"no probe rows for {', '.join(missing)} in this window")
    return arr, compute_stats(arr, since, until, period_s)
