"""Statistics that hold for real outages: rare bursts, day-to-day variation, mixtures behind a
deadline, same-code outages, Retry-After. Seeded coverage checks over a few dozen experiments
each (the long sweeps are `bench/stats_coverage.py`)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

import realprobe
from realprobe import ErrorCode, Profile, load_profile, open_db
from realprobe.probes.calibrate import AtDeadline, calibrate
from realprobe.probes.drift import drift
from realprobe.probes.stats import compute_stats, long_run, stats_from_db, success_stats
from realprobe.probes.synthetic import fault_model_arrays
from realprobe.simulator.faults import FaultModel, _expit, day_centre
from realprobe.simulator.profile import (
    Burst,
    LatencyModel,
    Lognormal,
    MixtureComponent,
    ProfileError,
    RetryAfter,
    ToolProfile,
)
from tests.loopback_api import catfact_on_loopback
from tests.probe_helpers import probe

RATES = {"t97": 0.97, "t90": 0.90, "t70": 0.70}
MIX = {ErrorCode.SERVER_ERROR: 0.4, ErrorCode.NETWORK_ERROR: 0.3, ErrorCode.RATE_LIMIT_ERROR: 0.3}
LAT = LatencyModel(lognormal=Lognormal(mu=5.0, sigma=0.5))
T0 = 1_789_948_800.0  # a UTC midnight
WEEK = 7 * 86400.0


def chain(success: float, p_ff: float) -> Burst:
    f = 1 - success
    return Burst(p_fail_after_fail=p_ff, p_fail_after_ok=f * (1 - p_ff) / (1 - f))


def profile(**extra: object) -> Profile:
    return Profile(tools={
        name: ToolProfile(success_rate=s, errors=dict(MIX), latency_ms=LAT, **extra)  # type: ignore[arg-type]
        for name, s in RATES.items()
    })  # fmt: skip


def bursty(p_ff: float, persistence: float = 0.8) -> Profile:
    return Profile(tools={
        name: ToolProfile(success_rate=s, errors=dict(MIX), latency_ms=LAT,
                          burst=chain(s, p_ff), code_persistence=persistence)
        for name, s in RATES.items()
    })  # fmt: skip


def test_rare_bursts_borrow_the_chain_and_cover() -> None:
    """P(fail|fail) 0.8 at N = 200: the 0.97 tool often shows no failure at all; Wilson at the
    full n then excludes the truth. Borrowing the other tools' chain keeps coverage."""
    prof, hits, borrowed, own_hits = bursty(0.8), 0, 0, 0
    runs = 40
    for seed in range(runs):
        rep = compute_stats(fault_model_arrays(prof, list(RATES), 200, seed=seed, step_s=60))
        t97 = next(t for t in rep.tools if t.tool == "t97").success
        lo, hi = t97.burst_adjusted95
        hits += lo <= 0.97 <= hi
        own_hits += t97.wilson95[0] <= 0.97 <= t97.wilson95[1]
        if t97.burst_source == "borrowed":
            borrowed += 1
            assert t97.note and "borrows" in t97.note
    assert borrowed >= runs // 2
    assert hits / runs >= 0.88
    assert own_hits / runs < 0.80  # the plain interval does not hold here


def test_no_failure_anywhere_says_the_interval_assumes_independence() -> None:
    prof = Profile(tools={"a": ToolProfile(success_rate=1.0, latency_ms=LAT)})
    rep = compute_stats(fault_model_arrays(prof, ["a"], 100, seed=1))
    s = rep.tools[0].success
    assert s.burst_source == "assumed independent" and s.note and "independent" in s.note


def test_long_run_interval_covers_day_to_day_variation() -> None:
    """7 days, logit sd 0.5, N = 1,000: the long-run interval covers the long-run rate (the
    profile's success_rate: the fault model centres the day effects on it); the interval of
    the probed days does not."""
    prof = profile(daily_logit_sd=0.5)
    runs, long_hits, day_hits = 30, 0, 0
    for seed in range(runs):
        arr = fault_model_arrays(prof, ["t90"], 1000, seed=seed, t0=T0, step_s=WEEK / 1000)
        s = compute_stats(arr).tools[0].success
        assert s.long_run95 is not None and s.long_run_periods == 7
        long_hits += s.long_run95[0] <= 0.90 <= s.long_run95[1]
        day_hits += s.burst_adjusted95[0] <= 0.90 <= s.burst_adjusted95[1]
    assert long_hits / runs >= 0.86
    assert day_hits / runs < 0.80


def test_long_run_interval_says_when_too_few_failures_to_see_days_vary() -> None:
    """A 0.97 tool probed 50 times over a week fails once or twice: the long-run interval is
    then the probed days' one, and says in words that it cannot estimate the day effect; at
    1,000 calls (about 30 failures) it does not."""
    prof = profile(daily_logit_sd=0.5)
    arr = fault_model_arrays(prof, ["t97"], 50, seed=4, t0=T0, step_s=WEEK / 50)
    s = compute_stats(arr).tools[0].success
    assert s.long_run_too_few_failures and s.long_run95 is not None
    assert s.long_run95[0] <= s.burst_adjusted95[0] and s.long_run95[1] >= s.burst_adjusted95[1]
    assert s.long_run_note and "too few to estimate day-to-day variation" in s.long_run_note
    arr = fault_model_arrays(prof, ["t97"], 1000, seed=4, t0=T0, step_s=WEEK / 1000)
    s = compute_stats(arr).tools[0].success
    assert not s.long_run_too_few_failures and "included" in (s.long_run_note or "")


def test_between_period_variance_by_moments() -> None:
    """tau^2 by the method of moments: 0 when the days' spread is no more than binomial noise,
    the excess over it otherwise (two days of 100 calls at 0.8 and 0.6: the rates' variance
    0.02, binomial part 0.21 / 100, tau^2 0.0179)."""
    from realprobe.probes.stats import between_period_variance

    n = np.array([100.0, 100.0])
    assert between_period_variance(np.array([0.7, 0.7]), n) == 0.0
    tau2 = between_period_variance(np.array([0.8, 0.6]), n)
    assert tau2 == pytest.approx(0.02 - 0.0021)
    # a burst design effect explains more of the spread as noise
    assert between_period_variance(np.array([0.8, 0.6]), n, deff=3.0) == pytest.approx(0.0137)


def test_long_run_with_few_failures_is_the_days_interval_when_days_agree() -> None:
    """A handful of failures spread evenly over the days shows no day-to-day variation: the
    long-run interval is then the probed days' interval, not a Student t inflation of it."""
    ts = T0 + np.arange(70) * (WEEK / 70)
    ok = np.ones(70, dtype=bool)
    ok[::10] = False  # one failure a day
    s = success_stats(70, int(ok.sum()), None)
    long_run(s, ts, ok, 86400.0)
    assert s.long_run_too_few_failures
    assert s.long_run95 == pytest.approx(s.burst_adjusted95)


def test_the_day_effect_is_centred_on_the_success_rate() -> None:
    centre = day_centre(0.1, 0.5)
    days = [_expit(centre + random.Random(f"s:{d}").gauss(0, 0.5)) for d in range(4000)]
    assert sum(days) / len(days) == pytest.approx(0.1, abs=0.004)
    # the simulator uses it: per-day failure rates differ when the caller gives the time
    model = FaultModel(profile(daily_logit_sd=1.0), seed=3)
    per_day = [
        sum(model.draw("t70", T0 + d * 86400 + i).code is not None for i in range(400)) / 400
        for d in range(6)
    ]
    assert max(per_day) - min(per_day) > 0.15


def test_daily_variability_is_calibrated() -> None:
    arr = fault_model_arrays(profile(daily_logit_sd=0.8), ["t70"], 2800, seed=2, t0=T0,
                             step_s=WEEK / 2800)  # fmt: skip
    tp = calibrate(compute_stats(arr)).tools["t70"]
    assert tp.daily_logit_sd is not None and 0.3 < tp.daily_logit_sd < 1.6
    assert tp.success_long_run_ci95 is not None


def test_deadline_interval_carries_the_deadline_share_uncertainty() -> None:
    """A 200 ms deadline on ln N(5.0, 0.5) (S = 0.276): the profile's interval covers the
    success before the deadline; the observed interval times 1/(1-S) alone does not."""
    errors = {**MIX, ErrorCode.TIMEOUT: 0.25}
    prof = Profile(tools={n: ToolProfile(success_rate=s, errors=errors, latency_ms=LAT)
                          for n, s in RATES.items()})  # fmt: skip
    runs, hits, naive = 25, 0, 0
    for seed in range(runs):
        arr = fault_model_arrays(prof, ["t90"], 400, seed=seed, deadline_s=0.2)
        rep = compute_stats(arr)
        ts = rep.tools[0]
        assert ts.latency.p_exceed_timeout_ci95 is not None
        lo, hi = calibrate(rep).tools["t90"].success_ci95 or (0, 1)
        hits += lo <= 0.90 <= hi
        keep = 1 / (1 - (ts.latency.p_exceed_timeout or 0))
        b = ts.success.burst_adjusted95
        naive += b[0] * keep <= 0.90 <= min(1.0, b[1] * keep)
    assert hits / runs >= 0.88
    assert naive < hits


def test_day_effect_sd_has_an_interval_and_says_when_it_reaches_zero() -> None:
    """7 days at N = 1,000: the day-effect sd's interval covers 0.5 when days vary with sd 0.5,
    and with no day effect it starts at 0 and says in words the days may not vary at all."""
    runs, hits = 20, 0
    for seed in range(runs):
        arr = fault_model_arrays(profile(daily_logit_sd=0.5), ["t70"], 1000, seed=seed, t0=T0,
                                 step_s=WEEK / 1000)  # fmt: skip
        v = compute_stats(arr).tools[0].variability
        assert v.success_logit_sd_ci95 is not None
        hits += v.success_logit_sd_ci95[0] <= 0.5 <= v.success_logit_sd_ci95[1]
    assert hits >= 17
    arr = fault_model_arrays(profile(), ["t70"], 1000, seed=1, t0=T0, step_s=WEEK / 1000)
    rep = compute_stats(arr)
    v = rep.tools[0].variability
    assert v.success_logit_sd_ci95 is not None and v.success_logit_sd_ci95[0] == 0.0
    assert v.success_logit_sd_note and "cannot be told from 0" in v.success_logit_sd_note
    tp = calibrate(rep).tools["t70"]
    assert tp.daily_logit_sd_ci95 == v.success_logit_sd_ci95
    assert any("cannot be told from 0" in note for note in tp.notes)


def test_hang_share_behind_a_biting_deadline_has_an_interval() -> None:
    """200 ms deadline on ln N(5.0, 0.5) (S = 0.276), a fifth of failures hangs: the profile's
    P(hang) interval covers the truth, and when it reaches 0 the profile says in words that
    hangs cannot be told from slow calls there."""
    errors = {**MIX, ErrorCode.TIMEOUT: 0.25}
    prof = Profile(tools={n: ToolProfile(success_rate=s, errors=errors, latency_ms=LAT)
                          for n, s in RATES.items()})  # fmt: skip
    runs, hits, said = 10, 0, 0
    for seed in range(runs):
        arr = fault_model_arrays(prof, list(RATES), 400, seed=seed, deadline_s=0.2)
        for name, tp in calibrate(compute_stats(arr)).tools.items():
            assert tp.hang_rate is not None and tp.hang_rate_ci95 is not None
            lo, hi = tp.hang_rate_ci95
            hits += lo <= (1 - RATES[name]) * 0.2 <= hi
            if lo <= 0:
                said += 1
                assert any("hangs cannot be told from slow calls" in n for n in tp.notes)
    assert hits >= 27 and said > 0


def mixture_profile() -> Profile:
    lat = LatencyModel(mixture=[MixtureComponent(weight=0.6, mu=4.5, sigma=0.3),
                                MixtureComponent(weight=0.4, mu=6.5, sigma=0.4)])  # fmt: skip
    return Profile(tools={"m": ToolProfile(success_rate=0.9, errors=dict(MIX), latency_ms=lat)})


@pytest.mark.parametrize("n", [50, 400])
def test_mixture_behind_a_deadline_is_not_counted_twice(n: int) -> None:
    """Two lognormals, 1 s deadline (S = 0.062): the statistics try two components because the
    KS test rejects one (whatever N), the deadline share comes from the mixture, and the
    profile exported at the probes' deadline gives back the observed success."""
    arr = fault_model_arrays(mixture_profile(), ["m"], n, seed=5, deadline_s=1.0)
    rep = compute_stats(arr)
    ts = rep.tools[0]
    assert ts.latency.mixture_fit is not None  # two components were tried
    if n == 400:
        assert ts.latency.mixture is not None
        assert ts.latency.p_exceed_timeout == pytest.approx(0.062, abs=0.03)
        prof = calibrate(rep)  # from the statistics alone: the mixture comes with them
        tp = prof.tools["m"]
        assert tp.latency_ms.mixture is not None
        at = AtDeadline(tp, 1.0)
        assert at.success == pytest.approx(ts.success.rate, abs=1e-9)
        again = compute_stats(fault_model_arrays(prof, ["m"], 4000, seed=6, deadline_s=1.0))
        assert again.tools[0].success.rate == pytest.approx(ts.success.rate, abs=0.03)


def test_same_code_outages_raise_no_false_drift() -> None:
    """Bursts whose failures share one code, nothing changed: no error-mix flag, and the day
    variability flag stays quiet."""
    prof = Profile(tools={
        f"t{i}": ToolProfile(success_rate=0.8, errors=dict(MIX), latency_ms=LAT,
                             burst=chain(0.8, 0.9), code_persistence=1.0)
        for i in range(6)
    })  # fmt: skip
    names = list(prof.tools)
    mix_flags = var_flags = 0
    for seed in range(6):
        a = fault_model_arrays(prof, names, 300, seed=seed, t0=T0, step_s=600)
        b = fault_model_arrays(prof, names, 300, seed=100 + seed, t0=T0 + WEEK, step_s=600)
        rep = drift(a, b)
        mix_flags += sum(bool(t.error_mix and t.error_mix.flagged) for t in rep.tools)
        var_flags += sum(bool(t.variability.variable_success) for t in compute_stats(a).tools)
    assert mix_flags == 0
    assert var_flags <= 1


def test_code_persistence_round_trips() -> None:
    arr = fault_model_arrays(bursty(0.8, persistence=0.7), ["t70"], 4000, seed=9, step_s=60)
    tp = calibrate(compute_stats(arr)).tools["t70"]
    assert tp.code_persistence == pytest.approx(0.7, abs=0.1)
    # and without persistence in the truth, none is read into the rows
    arr = fault_model_arrays(bursty(0.8, persistence=0.0), ["t70"], 4000, seed=9, step_s=60)
    assert (calibrate(compute_stats(arr)).tools["t70"].code_persistence or 0) < 0.1


def test_a_contradicting_chain_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "p.json"
    bad.write_text(
        '{"tools": {"a": {"success_rate": 0.9, "errors": {"SERVER_ERROR": 1},'
        ' "burst": {"p_fail_after_fail": 0.9, "p_fail_after_ok": 0.1}}}}'
    )
    with pytest.raises(ProfileError, match="contradicts the burst chain"):
        load_profile(bad)


def test_retry_after_drawn_from_the_profile() -> None:
    ra = RetryAfter(n=4, share=0.5, values=[(3.0, 1.0), (8.0, 3.0)])
    tp = ToolProfile(success_rate=0.0, errors={ErrorCode.RATE_LIMIT_ERROR: 1.0},
                     retry_after={ErrorCode.RATE_LIMIT_ERROR: ra})  # fmt: skip
    model = FaultModel(Profile(tools={"a": tp}), seed=1)
    waits = [model.draw("a").retry_after_s for _ in range(4000)]
    with_header = [w for w in waits if w is not None]
    assert len(with_header) / len(waits) == pytest.approx(0.5, abs=0.03)
    assert set(with_header) == {3.0, 8.0}
    assert with_header.count(8.0) / len(with_header) == pytest.approx(0.75, abs=0.03)


# 429s with known Retry-After values: 3 s once, 7 s twice, no header once, per 8 calls
ANSWERS: list[tuple[int, str | None]] = [
    (200, None), (429, "3"), (200, None), (429, "7"),
    (200, None), (429, None), (200, None), (429, "7"),
]  # fmt: skip


def test_retry_after_round_trip_through_a_loopback_api(tmp_path: Path) -> None:
    """Probe a loopback API answering 429 with known Retry-After values; calibrate measures
    them per tool and code; the simulator draws them; probing the simulator and calibrating
    again gives them back."""
    db, db2 = tmp_path / "live.db", tmp_path / "sim.db"
    with catfact_on_loopback(min_interval_s=0.0, answers=ANSWERS) as api:
        tool = api.api.tools[0].name
        # Retry-After is recorded, not waited for (the helper's politeness does not honour it)
        probe(api.catalog, [api.catalog.get(tool)], 48, realprobe.TransportOptions(), db, 5.0)
    _, rep = stats_from_db(open_db(db))
    prof = calibrate(rep, db=open_db(db))
    # given the statistics and the database, calibrate reads the rows: mixtures tried too
    assert prof.tools[tool].latency_ms.mixture_fit is not None
    ra = prof.tools[tool].retry_after[ErrorCode.RATE_LIMIT_ERROR]
    assert ra.n == 24 and ra.share == pytest.approx(0.75)
    assert dict(ra.values) == pytest.approx({3.0: 1 / 3, 7.0: 2 / 3})
    # the simulator, through the real render path and the client's header parsing
    sim = realprobe.TransportOptions(mode=realprobe.Mode.SIMULATE, profile=prof, seed=4)
    realprobe.probe([tool], rounds=400, db=db2, target=sim, catalog=api.catalog, politeness="off")
    _, rep2 = stats_from_db(open_db(db2))
    again = calibrate(rep2, db=open_db(db2)).tools[tool].retry_after[ErrorCode.RATE_LIMIT_ERROR]
    assert again.share == pytest.approx(0.75, abs=0.1)
    values = dict(again.values)
    assert set(values) == {3.0, 7.0}
    assert values[7.0] == pytest.approx(2 / 3, abs=0.12)
    assert not math.isnan(again.share)


# server errors, 3 of 10 with Retry-After (on 500, 502 and 504: not only on 503), between 200s
SERVER_ANSWERS: list[tuple[int, str | None]] = [
    x for pair in zip([(200, None)] * 10, [
        (500, "4"), (503, None), (502, None), (500, None), (504, "4"),
        (500, None), (502, "9"), (503, None), (500, None), (502, None),
    ], strict=True) for x in pair
]  # fmt: skip


def test_a_5xx_retry_after_share_round_trips(tmp_path: Path) -> None:
    """Retry-After on any status: the client reads it on a 500 as on a 429, the sandbox sends
    the measured share on every SERVER_ERROR variant (52x included), so calibrate ->
    simulate -> calibrate keeps the share within the first profile's interval."""
    db, db2 = tmp_path / "live.db", tmp_path / "sim.db"
    with catfact_on_loopback(min_interval_s=0.0, answers=SERVER_ANSWERS) as api:
        tool = api.api.tools[0].name
        probe(api.catalog, [api.catalog.get(tool)], 200, realprobe.TransportOptions(), db, 5.0)
    _, rep = stats_from_db(open_db(db))
    ra = calibrate(rep, db=open_db(db)).tools[tool].retry_after[ErrorCode.SERVER_ERROR]
    assert ra.n == 100 and ra.share == pytest.approx(0.3)
    assert dict(ra.values) == pytest.approx({4.0: 2 / 3, 9.0: 1 / 3})
    assert ra.share_ci95 is not None
    prof = calibrate(rep, db=open_db(db))
    sim = realprobe.TransportOptions(mode=realprobe.Mode.SIMULATE, profile=prof, seed=5)
    realprobe.probe([tool], rounds=600, db=db2, target=sim, catalog=api.catalog, politeness="off")
    _, rep2 = stats_from_db(open_db(db2))
    again = calibrate(rep2, db=open_db(db2)).tools[tool].retry_after[ErrorCode.SERVER_ERROR]
    assert again.n > 200
    assert ra.share_ci95[0] <= again.share <= ra.share_ci95[1]
    assert set(dict(again.values)) == {4.0, 9.0}
