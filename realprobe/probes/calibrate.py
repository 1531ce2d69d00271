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


def tool_profile(ts: ToolStats) -> ToolProfile:
    lat = ts.latency
    fit = lat.lognormal
    burst = None
    ff, fo = ts.burst.p_fail_after_fail.p, ts.burst.p_fail_after_ok.p
    if ff is not None and fo is not None:
        burst = Burst(p_fail_after_fail=ff, p_fail_after_ok=fo)
    errors = {ErrorCode(k): v for k, v in ts.errors.share_of_failures.items()}
    return ToolProfile(
        n=ts.success.n,
        success_rate=ts.success.rate,
        success_ci95=ts.success.burst_adjusted95,
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
