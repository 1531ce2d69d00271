"""Statistics in time of imported monitor histories (beside the per-call statistics).

An uptime monitor's headline is availability over time: the share of the time it watched
that the endpoint was up. Each record's state holds until the next record (Upptime: the
stored `observed` intervals; monitors that record every check: from one check to the next
within the monitor's gap limit); time it did not watch is censored out of numerator and
denominator, never counted as up. Degraded time counts as up (the endpoint answered).

The 95% interval of the availability is a Wilson score interval on the down share over an
effective number of independent units, n_eff = T / (2 * mean outage duration): up and down
periods alternate, and for exponential periods the variance of the down share over a window
T is about 2 f d / T (f the down share, d the mean outage), the binomial variance at that
n_eff. Real outages spread wider than exponential ones, so from five outages seen whole the
renewal-reward variance n ((1-f)^2 Var(D) + f^2 Var(U)) / T^2 of the periods actually seen
gives n_eff too, and the smaller n_eff (the wider interval) is used. With no outage, d is
taken as one check spacing (the shortest outage the monitor can see). The mean outage
duration's interval is the exponential one (chi-square with 2n degrees of freedom), widened
from five outages to Student's t on the durations where that is wider.
"""

from __future__ import annotations

import datetime as dt
import math
import sqlite3
import statistics
from collections import Counter
from itertools import pairwise
from typing import Any

from pydantic import BaseModel, Field

from realprobe.errors import RealprobeError
from realprobe.probes.lazy_special import special
from realprobe.probes.stats import wilson
from realprobe.probes.windows import iso
from realprobe.store import IMPORTED_KIND, Database

INTERVAL_METHOD = (
    "Wilson score interval on the down share over n_eff = observed time / (2 x mean outage "
    "duration) effective units (alternating up and down periods), or fewer when the periods' "
    "own spread says so (renewal-reward variance, from 5 outages); with no outage, one check "
    "spacing stands for the outage length"
)
LABEL = ("IMPORTED HISTORY: these numbers come from what uptime monitors recorded, not from "
         "realprobe's own probes")
#: monitors that measured a response time per check (Upptime keeps one a day: never fitted)
LATENCY_PER_CHECK = frozenset({"kuma", "gatus", "prometheus"})
_DOWN = frozenset({"down", "pending"})
#: from this many outages seen whole, their own spread widens the intervals where it must
SPREAD_MIN_OUTAGES = 5
_UP = frozenset({"up", "degraded"})


class Outages(BaseModel):
    count: int = 0
    #: outages whose start or end was not seen (a censored gap, the window's edge, still open)
    censored: int = 0
    still_open: bool = False
    mean_s: float | None = None
    mean_ci95: tuple[float, float] | None = None
    median_s: float | None = None
    longest_s: float | None = None
    longest_start: str | None = None
    #: durations of the outages seen from start to end, in order (seconds)
    durations_s: list[float] = Field(default_factory=list)


class Latency(BaseModel):
    n: int
    p50: float
    p90: float
    p99: float


class MonitorAvailability(BaseModel):
    monitor: str
    key: str
    monitor_kind: str
    name: str
    url: str | None = None
    source: str
    vantage: str
    kind: str = IMPORTED_KIND
    first: str | None = None
    last: str | None = None
    observed_s: float = 0.0
    censored_s: float = 0.0
    up_s: float = 0.0
    down_s: float = 0.0
    degraded_s: float = 0.0
    availability: float | None = None
    availability_ci95: tuple[float, float] | None = None
    checks_recorded: int = 0
    checks_implied: int = 0
    outages: Outages = Field(default_factory=Outages)
    downtime_by_day_min: dict[str, float] = Field(default_factory=dict)
    #: failed checks by error code (0 = no answer: NETWORK_ERROR, or TIMEOUT when said so)
    errors: dict[str, float] = Field(default_factory=dict)
    errors_n: int = 0
    http_codes_down: dict[str, int] = Field(default_factory=dict)
    latency_ms: Latency | None = None
    latency_note: str = ""
    cadence_configured_s: float | None = None
    cadence_s: float | None = None
    cadence_how: str = ""
    #: the monitor's own figures, as it published them (a cross-check, not truth)
    published: dict[str, Any] | None = None
    incidents: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class ImportedStats(BaseModel):
    kind: str = IMPORTED_KIND
    label: str = LABEL
    db: str
    window: tuple[str | None, str | None] = (None, None)
    interval_method: str = INTERVAL_METHOD
    monitors: list[MonitorAvailability] = Field(default_factory=list)


def _segments(checks: list[tuple[Any, ...]], observed: list[tuple[Any, ...]], gap: float
              ) -> list[tuple[float, float, str]]:
    """(start, end, state) of the observed time: the stored intervals, else from each
    recorded check to the next within the gap limit (a maintenance check starts none)."""
    if observed:
        return [(s, e, st) for s, e, st in observed if e is not None and e > s]
    return [(a[0], b[0], a[1]) for a, b in pairwise(checks)
            if 0 < b[0] - a[0] <= gap and a[1] != "maintenance"]


def _clip(segs: list[tuple[float, float, str]], lo: float, hi: float
          ) -> list[tuple[float, float, str]]:
    return [(max(s, lo), min(e, hi), st) for s, e, st in segs if e > lo and s < hi]


def _runs(segs: list[tuple[float, float, str]], states: frozenset[str]) -> list[list[Any]]:
    """Maximal runs of adjacent time in `states`: [start, end, whether adjacent time of another
    state came just before, how it ended: True at adjacent time of another state, False at a
    break (censored time, the window's edge), None still going at the end]."""
    runs: list[list[Any]] = []
    prev_end: float | None = None
    for s, e, st in segs:
        adjacent = prev_end is not None and abs(s - prev_end) < 1e-6
        prev_end = e
        if runs and runs[-1][3] is None:
            if adjacent and st in states:
                runs[-1][1] = e
                continue
            runs[-1][3] = adjacent
        if st in states:
            runs.append([s, e, adjacent, None])
    return runs


def outages(segs: list[tuple[float, float, str]]) -> Outages:
    """Maximal runs of adjacent down time; a run that touches a break (censored time, the
    window's edge) at either end is censored and left out of the durations."""
    runs = _runs(segs, _DOWN)
    out = Outages(still_open=bool(runs) and runs[-1][3] is None)
    done = [e - s for s, e, before, after in runs if before and after]
    out.count, out.censored, out.durations_s = len(runs), len(runs) - len(done), done
    if done:
        n = len(done)
        out.mean_s = sum(done) / n
        out.median_s = float(statistics.median(done))
        out.longest_s = max(done)
        start = next(s for s, e, before, after in runs
                     if before and after and e - s == out.longest_s)
        out.longest_start = iso(start)
        total = 2 * n * out.mean_s
        # chi-square with 2n degrees of freedom: its quantile is 2 gammaincinv(n, q)
        lo, hi = (total / (2.0 * float(special.gammaincinv(n, q))) for q in (0.975, 0.025))
        if n >= SPREAD_MIN_OUTAGES:  # spread wider than exponential: Student's t is wider
            half = float(special.stdtrit(n - 1, 0.975)) * statistics.stdev(done) / math.sqrt(n)
            lo, hi = min(lo, max(out.mean_s - half, 0.0)), max(hi, out.mean_s + half)
        out.mean_ci95 = (lo, hi)
    return out


def up_runs(segs: list[tuple[float, float, str]]) -> list[float]:
    """Lengths of the maximal runs of up time that ended in an outage seen from its start."""
    return [e - s for s, e, _, after in _runs(segs, _UP) if after]


def availability_interval(up_s: float, observed_s: float, downs: list[float],
                          ups: list[float], spacing_s: float | None
                          ) -> tuple[float, float] | None:
    """The 95% interval of the share of time up (see the module docstring): Wilson on the
    down share over n_eff = T / (2 d), or over the n_eff the periods' own spread gives when
    that is smaller (outages spread wider than exponential ones)."""
    if observed_s <= 0:
        return None
    unit = (sum(downs) / len(downs)) if downs else (spacing_s or 300.0)
    n_eff = observed_s / (2.0 * unit)
    down = min(max(1.0 - up_s / observed_s, 0.0), 1.0)
    if len(downs) >= SPREAD_MIN_OUTAGES and len(ups) >= 2 and 0 < down < 1:
        # renewal-reward: Var(f) ~ n ((1-f)^2 Var(D) + f^2 Var(U)) / T^2 over n cycles
        var = len(downs) * ((1 - down) ** 2 * statistics.pvariance(downs)
                            + down ** 2 * statistics.pvariance(ups)) / observed_s ** 2
        if var > 0:
            n_eff = min(n_eff, down * (1 - down) / var)
    n_eff = max(n_eff, 1.0)
    lo, hi = wilson(down * n_eff, n_eff)
    return (1.0 - hi, 1.0 - lo)


def downtime_by_day(segs: list[tuple[float, float, str]]) -> dict[str, float]:
    """Minutes down per UTC date."""
    out: dict[str, float] = {}
    for s, e, st in segs:
        if st not in _DOWN:
            continue
        t = s
        while t < e:
            day = dt.datetime.fromtimestamp(t, dt.UTC).date()
            midnight = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.UTC)
            upto = min(e, midnight.timestamp())
            key = day.isoformat()
            out[key] = round(out.get(key, 0.0) + (upto - t) / 60.0, 3)
            t = upto
    return dict(sorted(out.items()))


def _latency(rows: list[tuple[Any, ...]]) -> Latency | None:
    import numpy as np

    lat = np.array([r[4] for r in rows if r[4] is not None and r[1] in _UP], dtype=float)
    if lat.size == 0:
        return None
    p50, p90, p99 = (float(x) for x in np.percentile(lat, [50, 90, 99]))
    return Latency(n=int(lat.size), p50=round(p50, 1), p90=round(p90, 1), p99=round(p99, 1))


def _monitor(conn: sqlite3.Connection, mon: dict[str, Any], since: float | None,
             until: float | None) -> MonitorAvailability:
    key = mon["monitor_key"]
    rep = MonitorAvailability(
        monitor=mon["monitor"], key=key, monitor_kind=mon["monitor_kind"], name=mon["name"],
        url=mon["url"], source=mon["source"], vantage=mon["vantage"],
        cadence_configured_s=mon["cadence_configured_s"], cadence_s=mon["cadence_s"],
        cadence_how=mon["cadence_how"] or "",
        notes=[n for n in (mon["detail"] or "").split("; ") if n])
    if mon["published"]:
        from realprobe.limits import load_json_text

        rep.published = load_json_text(mon["published"], f"{key}: published figures",
                                       max_bytes=2_000_000)
    lo = -math.inf if since is None else since
    hi = math.inf if until is None else until
    ivs = conn.execute("SELECT kind, state, start_ts, end_ts, count, recorded, reason, ref "
                       "FROM imported_intervals WHERE monitor_key = ? ORDER BY start_ts",
                       [key]).fetchall()
    if rep.monitor_kind == "statuspage":
        rep.incidents = [{"id": r[7], "impact": r[1], "name": r[6], "start": iso(r[2]),
                          "end": iso(r[3])} for r in ivs
                         if r[0] == "incident" and (r[3] or math.inf) >= lo and r[2] < hi]
        rep.latency_note = "declared incidents only: no checks, no availability"
        return rep
    checks = conn.execute(
        "SELECT ts, state, http_status, error_code, latency_ms FROM imported_checks "
        "WHERE monitor_key = ? AND ts >= ? AND ts < ? ORDER BY ts",
        [key, lo if since is not None else -1e18, hi if until is not None else 1e18]
    ).fetchall()
    observed = [(r[2], r[3], r[1]) for r in ivs if r[0] == "observed"]
    segs = _clip(_segments(checks, observed, mon["gap_limit_s"] or math.inf), lo, hi)
    censored = _clip([(r[2], r[3], "censored") for r in ivs if r[0] == "censored"
                      and r[3] is not None], lo, hi)
    rep.censored_s = sum(e - s for s, e, _ in censored)
    rep.observed_s = sum(e - s for s, e, _ in segs)
    rep.up_s = sum(e - s for s, e, st in segs if st in _UP)
    rep.degraded_s = sum(e - s for s, e, st in segs if st == "degraded")
    rep.down_s = sum(e - s for s, e, st in segs if st in _DOWN)
    rep.checks_recorded = len(checks)
    rep.checks_implied = sum(r[4] or 0 for r in ivs if r[0] == "observed" and not r[5]
                             and lo <= r[2] < hi)
    if segs:
        rep.first, rep.last = iso(segs[0][0]), iso(segs[-1][1])
    rep.outages = outages(segs)
    if rep.observed_s > 0:
        rep.availability = rep.up_s / rep.observed_s
        rep.availability_ci95 = availability_interval(
            rep.up_s, rep.observed_s, rep.outages.durations_s, up_runs(segs), rep.cadence_s)
    rep.downtime_by_day_min = downtime_by_day(segs)
    _checks(rep, checks)
    return rep


def _checks(rep: MonitorAvailability, checks: list[tuple[Any, ...]]) -> None:
    """The error mix of the failed checks, and latency where measured on every check."""
    failed = [r for r in checks if r[1] in _DOWN]
    codes = Counter(r[3] or "OPERATION_FAILED" for r in failed)
    rep.errors_n = len(failed)
    rep.errors = {c: n / len(failed) for c, n in codes.most_common()} if failed else {}
    rep.http_codes_down = {str(c): n for c, n in Counter(
        r[2] if r[2] is not None else "none" for r in failed).most_common()}
    if rep.monitor_kind in LATENCY_PER_CHECK:
        rep.latency_ms = _latency(checks)
        rep.latency_note = "measured by the monitor on every check (up checks)"
    else:
        rep.latency_note = ("not fitted: Upptime keeps one response time a day (the daily "
                            "re-commit near 23:00 UTC), not one per check")


def imported_stats(db: Database, since: float | None = None, until: float | None = None,
                   monitors: list[str] | None = None) -> ImportedStats:
    """Per imported monitor: availability in time, outages, downtime per day, error mix,
    latency where measured per check, cadence, and the monitor's published figures."""
    conn = db.read(need=None)
    try:
        have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "imported_monitors" not in have:
            raise RealprobeError(f"{db}: holds no imported history; import one with "
                                 "`realprobe history import SOURCE`", param="kinds")
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(
            "SELECT * FROM imported_monitors ORDER BY monitor_kind, monitor_key")]
        conn.row_factory = None
        if monitors:
            wanted = {m.strip() for m in monitors if m.strip()}
            unknown = wanted - {r["monitor"] for r in rows} - {r["monitor_key"] for r in rows}
            if unknown:
                known = ", ".join(sorted({r["monitor"] for r in rows})[:8])
                raise RealprobeError(f"no imported monitor named {', '.join(sorted(unknown))}"
                                     f" (imported: {known})", param="monitors")
            rows = [r for r in rows if r["monitor"] in wanted or r["monitor_key"] in wanted]
        out = ImportedStats(db=str(db), window=(iso(since), iso(until)))
        out.monitors = [_monitor(conn, r, since, until) for r in rows]
        return out
    finally:
        conn.close()
