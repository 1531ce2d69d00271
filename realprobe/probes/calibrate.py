"""Statistics into a simulator Profile (DESIGN.md format), and export views for other benchmarks.

The profile is what the sandbox and the simulate transport read, so the numbers in it are the
generative parameters: the per-attempt success rate, the failure mix, the fitted latency of
successes (censored fit), and the burst chain.
"""

from __future__ import annotations

from typing import Any

from realprobe.errors import RESILIBENCH_CODES, ErrorCode, RealprobeError
from realprobe.probes.stats import StatsReport, ToolStats
from realprobe.simulator.profile import (
    Burst,
    LatencyModel,
    Lognormal,
    Profile,
    ToolProfile,
)

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
RELIABILITYBENCH_KINDS = (
    "timeout",
    "rate_limit",
    "partial_response",
    "schema_drift",
    "server_error",
    "client_error",
    "other",
)
LAMBDAS = (0.0, 0.5, 1.0, 2.0)


#: below this share of calls slower than the deadline, the deadline adjustment is noise
DEADLINE_ADJUST_MIN = 1e-3


def deadline_share(ts: ToolStats) -> float:
    """S(T): the fitted share of calls slower than the probes' deadline."""
    fit = ts.latency.lognormal
    if fit is None or fit.p_exceed_timeout is None:
        return 0.0
    return fit.p_exceed_timeout if fit.p_exceed_timeout >= DEADLINE_ADJUST_MIN else 0.0


def tool_profile(ts: ToolStats) -> ToolProfile:
    """The generative parameters for one tool.

    The simulator draws an outcome, then applies the caller's deadline to the latency it
    draws (a slow answer becomes a TIMEOUT). When the probes' deadline T cut into the latency
    distribution, some observed TIMEOUTs were slow calls, and copying the observed rates would
    count them twice. With S = S(T) from the censored fit, every observed non-timeout outcome
    is scaled by 1/(1-S) and the TIMEOUT (hang) share is what remains:
    P(ok) = (1-p)(1-S), P(code) = p w_code (1-S), P(TIMEOUT) = p w_T + (1 - p w_T) S.
    The burst chain keeps its observed correlation rho and gets the adjusted failure rate.
    """
    lat = ts.latency
    fit = lat.lognormal
    n = ts.success.n
    s_t = deadline_share(ts)
    keep = 1.0 / (1.0 - s_t)
    counts = {ErrorCode(k): float(v) for k, v in ts.errors.counts.items()}
    success = ts.success.rate
    ci = ts.success.burst_adjusted95
    if s_t > 0 and n:
        success = min(1.0, success * keep)
        ci = (min(1.0, ci[0] * keep), min(1.0, ci[1] * keep))
        for code in counts:
            counts[code] = (
                max(0.0, (counts[code] - s_t * n) * keep)
                if code is ErrorCode.TIMEOUT
                else counts[code] * keep
            )
    total = sum(counts.values())
    errors = {c: v / total for c, v in counts.items() if v > 0} if total > 0 else {}
    if not errors:
        success = 1.0 if s_t > 0 else success
    burst = None
    ff, fo = ts.burst.p_fail_after_fail.p, ts.burst.p_fail_after_ok.p
    if ff is not None and fo is not None:
        if s_t > 0:
            rho, fail = ff - fo, 1.0 - success
            fo = min(1.0, max(0.0, fail * (1 - rho)))
            ff = min(1.0, max(0.0, fo + rho))
        burst = Burst(p_fail_after_fail=ff, p_fail_after_ok=fo)
    return ToolProfile(
        n=n,
        success_rate=success,
        success_ci95=ci,
        errors=errors,
        latency_ms=LatencyModel(
            p50=lat.p50,
            p90=lat.p90,
            p95=lat.p95,
            p99=lat.p99,
            mean=lat.mean,
            lognormal=Lognormal(mu=fit.mu, sigma=fit.sigma) if fit and fit.sigma > 0 else None,
            ks_pvalue=lat.ks_pvalue,
        ),
        burst=burst,
    )


def calibrate(report: StatsReport, *, name: str | None = None, db: str | None = None) -> Profile:
    if not report.tools:
        raise RealprobeError("nothing to calibrate: no tool has probe rows in this window")
    tools = {t.tool: tool_profile(t) for t in report.tools}
    deadlines = sorted({t.latency.timeout_s for t in report.tools if t.latency.timeout_s})
    source: dict[str, Any] = {
        "kind": "calibrated",
        "probes": report.rows,
        "window": list(report.window),
        "first_probe": min((t.first for t in report.tools if t.first), default=None),
        "last_probe": max((t.last for t in report.tools if t.last), default=None),
        "denominator": "per attempt",
        "success_ci95": "Wilson on the burst-adjusted effective n",
        "latency": "lognormal fit of successes, TIMEOUTs right-censored at the deadline",
    }
    if deadlines:
        source["timeout_s"] = deadlines if len(deadlines) > 1 else deadlines[0]
    adjusted = {t.tool: round(deadline_share(t), 4) for t in report.tools if deadline_share(t)}
    if adjusted:
        source["deadline_adjusted"] = {
            "note": "share S(T) of calls slower than the probes' deadline, per tool; "
            "success_rate and errors are before the deadline (the simulator applies it)",
            "tools": adjusted,
        }
    if report.provenance is not None:
        prov = report.provenance
        source.update(
            target_kinds=prov.target_kinds,
            targets=prov.targets,
            vantages=prov.vantages,
            sources=prov.sources,
            rows_by_kind=prov.rows_by_kind,
            excluded_rows=prov.excluded_rows,
        )
        if prov.banner():
            source["warning"] = prov.banner()
    if db:
        source["db"] = db
    return Profile(
        name=name,
        description="Calibrated from stored probe rows by `realprobe calibrate`.",
        source=source,
        tools=tools,
    )


def _tool_items(profile: Profile) -> list[tuple[str, ToolProfile]]:
    items = list(profile.tools.items())
    if profile.default is not None:
        items.append(("*", profile.default))
    return items


def resilibench_view(profile: Profile) -> dict[str, Any]:
    """Base success rate and error-type weights over the ResiliBench paper's six codes."""
    tools: dict[str, Any] = {}
    for name, tp in _tool_items(profile):
        weights = dict.fromkeys(RESILIBENCH_CODES, 0.0)
        for code, share in tp.errors.items():
            weights[code.resilibench] += share
        tools[name] = {
            "n": tp.n,
            "success_rate": tp.success_rate,
            "success_ci95": tp.success_ci95,
            "error_weights": weights,
        }
    return {
        "format": "realprobe-resilibench-view/1",
        "codes": list(RESILIBENCH_CODES),
        "source": profile.source,
        "tools": tools,
    }


def reliabilitybench_view(profile: Profile) -> dict[str, Any]:
    """Failure rate and fault weights per tool, like ReliabilityBench's LAMBDA_* profiles: the
    calibrated rates at lambda=1, scaled (capped at 1) for the other intensities."""
    tools: dict[str, Any] = {}
    for name, tp in _tool_items(profile):
        weights = dict.fromkeys(RELIABILITYBENCH_KINDS, 0.0)
        for code, share in tp.errors.items():
            weights[RELIABILITYBENCH_FAULTS[code]] += share
        tools[name] = {"failure_rate": 1.0 - tp.success_rate, "fault_weights": weights}
    levels = {}
    for lam in LAMBDAS:
        key = f"LAMBDA_{lam:g}".replace(".", "_")
        levels[key] = {
            "lambda": lam,
            "tools": {
                n: {
                    "failure_rate": min(1.0, lam * t["failure_rate"]),
                    "fault_weights": t["fault_weights"],
                }
                for n, t in tools.items()
            },
        }
    return {
        "format": "realprobe-reliabilitybench-view/1",
        "fault_kinds": list(RELIABILITYBENCH_KINDS),
        "source": profile.source,
        "profiles": levels,
    }


def export(profile: Profile, view: str) -> dict[str, Any]:
    if view == "profile":
        return profile.model_dump(mode="json", exclude_none=True)
    if view == "resilibench":
        return resilibench_view(profile)
    if view == "reliabilitybench":
        return reliabilitybench_view(profile)
    raise RealprobeError(f"--as {view!r}: choose resilibench or reliabilitybench")
