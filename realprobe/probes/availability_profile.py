"""A simulator profile from imported monitor histories (`calibrate --kinds imported`).

A monitor's history is time, not calls, so the profile is made for a stated call spacing s
(default: the cadence the monitor really had). Per call, success = the availability (the
share of observed time up). The burst chain reproduces the outages in time: a run of failed
calls at spacing s lasts 1 / (1 - P(fail|fail)) calls on average, so
P(fail|fail) = 1 - s / (mean outage duration), and P(fail|ok) follows from the long-run
failure share f = 1 - availability: P(fail|ok) = f (1 - P(fail|fail)) / (1 - f). The chain's
long-run success is then the availability exactly. The error mix is the codes the monitor
recorded while down; latency only where it measured one per check.
"""

from __future__ import annotations

import math
import re
from typing import Any

from realprobe.errors import ErrorCode
from realprobe.probes.availability import ImportedStats, MonitorAvailability
from realprobe.simulator.profile import Z90, Burst, LatencyModel, Lognormal, Profile, ToolProfile

#: used when a monitor recorded no code while down (no answer)
DEFAULT_ERROR = ErrorCode.NETWORK_ERROR


def chain(availability: float, mean_outage_s: float | None, spacing_s: float
          ) -> tuple[Burst, list[str]]:
    """The two-state chain at `spacing_s` whose failure runs last `mean_outage_s` on average
    and whose long-run success is `availability`; notes where it had to give way."""
    notes: list[str] = []
    f = 1.0 - availability
    if f <= 0:
        return Burst(p_fail_after_fail=0.0, p_fail_after_ok=0.0), notes
    if f >= 1:
        return Burst(p_fail_after_fail=1.0, p_fail_after_ok=1.0), notes
    ff = 0.0
    if mean_outage_s is None:
        notes.append("no outage seen from start to end: failures drawn independently")
    elif mean_outage_s <= spacing_s:
        notes.append(f"outages ({mean_outage_s:.0f} s on average) are shorter than the call "
                     f"spacing ({spacing_s:.0f} s): failures drawn independently")
    else:
        ff = 1.0 - spacing_s / mean_outage_s
    fo = f * (1.0 - ff) / (1.0 - f)
    if fo > 1.0:  # outages so long at this spacing that the chain cannot also meet f
        fo = 1.0
        notes.append("the failure share and outage length cannot both be met at this spacing")
    return Burst(p_fail_after_fail=ff, p_fail_after_ok=fo), notes


def _latency(m: MonitorAvailability) -> LatencyModel:
    lat = m.latency_ms
    if lat is None or lat.n < 2 or lat.p50 <= 0 or lat.p90 <= lat.p50:
        return LatencyModel()
    mu = math.log(lat.p50)
    sigma = (math.log(lat.p90) - mu) / Z90
    return LatencyModel(p50=lat.p50, p90=lat.p90, p99=lat.p99,
                        lognormal=Lognormal(mu=mu, sigma=max(sigma, 1e-3)))


def tool_profile(m: MonitorAvailability, spacing_s: float) -> ToolProfile:
    assert m.availability is not None
    burst, notes = chain(m.availability, m.outages.mean_s, spacing_s)
    errors = {ErrorCode(c): share for c, share in m.errors.items() if c in ErrorCode.__members__}
    if m.availability < 1.0 and not errors:
        errors = {DEFAULT_ERROR: 1.0}
    notes.append(f"calibrated from an imported {m.monitor_kind} history ({m.source}) at a "
                 f"call spacing of {spacing_s:.0f} s: success per call is the availability "
                 "in time")
    if m.latency_ms is None:
        notes.append(f"latency not measured per check by this monitor ({m.latency_note})")
    return ToolProfile(
        n=m.checks_recorded + m.checks_implied,
        success_rate=round(1.0 - burst.stationary_fail, 9),
        success_ci95=m.availability_ci95,
        errors=errors, latency_ms=_latency(m), burst=burst, notes=notes,
    )


def tool_name(text: str) -> str:
    """A monitor's name as a tool name (`^[a-zA-Z0-9_-]{1,64}$`)."""
    name = re.sub(r"[^a-zA-Z0-9_-]+", "_", text).strip("_")[:64]
    return name or "monitor"


def profile_from_imported(stats: ImportedStats, spacing_s: float | None = None,
                          name: str | None = None) -> Profile:
    """One tool per imported monitor (its name made a valid tool name), at `spacing_s`
    (None: each monitor's real cadence); monitors with no observed time are left out. With
    one monitor it is also the profile's default, so the sandbox and the simulator serve
    every tool as that endpoint behaved."""
    tools: dict[str, ToolProfile] = {}
    sources: dict[str, Any] = {}
    for m in stats.monitors:
        if m.availability is None:
            continue
        spacing = spacing_s or m.cadence_s or m.cadence_configured_s or 300.0
        tool = tool_name(m.monitor)
        while tool in tools:
            tool = tool_name(f"{tool}_{len(tools)}")
        tools[tool] = tool_profile(m, spacing)
        sources[tool] = {
            "monitor": m.key, "monitor_kind": m.monitor_kind, "source": m.source,
            "vantage": m.vantage, "window": [m.first, m.last], "spacing_s": spacing,
            "spacing_how": ("as asked" if spacing_s else f"the monitor's real cadence "
                            f"({m.cadence_how})"),
            "availability": m.availability, "availability_ci95": m.availability_ci95,
            "outages": m.outages.count, "mean_outage_s": m.outages.mean_s,
        }
    return Profile(
        # one monitor: every tool the simulator or sandbox serves behaves as that endpoint did
        default=next(iter(tools.values())) if len(tools) == 1 else None,
        name=name or "imported",
        description="Calibrated from imported uptime-monitor histories, not from realprobe's "
                    "own probes: success per call at the stated spacing is the availability "
                    "in time; the burst chain reproduces the outage durations.",
        source={"imported": sources, "kind": "imported", "db": stats.db,
                "window": list(stats.window),
                "warning": "calibrated from an imported monitor history (not realprobe's own "
                           "probes)"},
        tools=tools,
    )
