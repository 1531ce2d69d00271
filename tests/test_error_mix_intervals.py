"""The error mix's intervals: each code's share of failures at the effective number of
failures (outages repeat one code, so failures are not independent draws of the mix), in the
statistics, the calibrated profile (`errors_ci95`) and the `realprobe stats` output."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_runner import main
from probe_helpers import synthetic_rows

from realprobe import (
    Burst,
    ErrorCode,
    LatencyModel,
    Lognormal,
    Profile,
    ProfileError,
    Store,
    ToolProfile,
    load_profile,
)
from realprobe.probes.calibrate import calibrate
from realprobe.probes.stats import code_design_effect, compute_stats, error_mix, wilson
from realprobe.probes.synthetic import fault_model_arrays

MIX = {ErrorCode.SERVER_ERROR: 0.5, ErrorCode.NETWORK_ERROR: 0.3, ErrorCode.RATE_LIMIT_ERROR: 0.2}
LAT = LatencyModel(lognormal=Lognormal(mu=5.0, sigma=0.5))
T0 = 1_790_000_000.0


def _truth(fail: float, p_ff: float | None, persistence: float | None) -> Profile:
    burst = None
    if p_ff is not None:
        burst = Burst(p_fail_after_fail=p_ff, p_fail_after_ok=fail * (1 - p_ff) / (1 - fail))
    tp = ToolProfile(success_rate=1 - fail, errors=MIX, latency_ms=LAT, burst=burst,
                     code_persistence=persistence)  # fmt: skip
    return Profile(tools={"a": tp})


def _coverage(prof: Profile, seeds: int, n: int) -> tuple[float, float, float]:
    """(share of code shares inside the interval, inside a plain multinomial Wilson interval
    at the failures' count, mean design effect) over seeded runs."""
    ours = plain = 0
    deffs = []
    for seed in range(seeds):
        arr = fault_model_arrays(prof, ["a"], n, seed=seed, step_s=60.0)
        mix = compute_stats(arr).tools[0].errors
        deffs.append(mix.design_effect)
        for code, w in MIX.items():
            lo, hi = mix.share_of_failures_ci95.get(code.value, (1.0, 0.0))
            ours += lo <= w <= hi
            p_lo, p_hi = wilson(mix.counts.get(code.value, 0), mix.failures)
            plain += p_lo <= w <= p_hi
    trials = seeds * len(MIX)
    return ours / trials, plain / trials, float(np.mean(deffs))


def test_share_interval_covers_under_independent_failures() -> None:
    ours, plain, deff = _coverage(_truth(0.1, None, None), seeds=60, n=1500)
    assert deff < 1.1  # chance repeats are no clustering
    assert 0.88 <= ours <= 0.99
    assert abs(ours - plain) < 0.05  # nothing to correct: about the multinomial interval


def test_share_interval_covers_same_code_outages_where_the_plain_one_fails() -> None:
    ours, plain, deff = _coverage(_truth(0.1, 0.8, 0.8), seeds=60, n=1500)
    assert deff > 3  # runs of about five failures that mostly keep their code
    assert ours >= 0.87
    assert plain <= 0.75  # the multinomial interval treats an outage's failures as independent


def test_design_effect_of_runs_that_keep_one_code() -> None:
    # two runs of four failures, each one code throughout: c = 1, deff = sum B^2 / sum B = 4
    code = np.array([-1, 3, 3, 3, 3, -1, -1, 1, 1, 1, 1, -1])
    ts = np.arange(code.shape[0], dtype=np.float64) * 60.0
    assert code_design_effect([(ts, code)]) == pytest.approx(4.0)
    # calls hours apart are not one run: nothing is clustered
    assert code_design_effect([(ts * 1000.0, code)]) == pytest.approx(1.0)
    mix = error_mix(code, ts)
    assert mix.n_effective == pytest.approx(2.0)
    assert mix.share_of_failures_ci95["SERVER_ERROR"] == pytest.approx(wilson(1.0, 2.0))
    # without the times the failures count as independent
    assert error_mix(code).n_effective == pytest.approx(8.0)


def test_profile_carries_the_intervals_and_round_trips(tmp_path: Path) -> None:
    arr = fault_model_arrays(_truth(0.1, 0.6, 0.7), ["a"], 2000, seed=3, step_s=60.0)
    rep = compute_stats(arr)
    prof = calibrate(rep)
    tp = prof.tools["a"]
    assert tp.errors_ci95 is not None and set(tp.errors_ci95) == set(tp.errors)
    for code, (lo, hi) in tp.errors_ci95.items():
        assert lo <= tp.errors[code] <= hi
        assert (lo, hi) == pytest.approx(rep.tools[0].errors.share_of_failures_ci95[code.value])
    path = prof.save(tmp_path / "p.json")
    assert load_profile(path).tools["a"].errors_ci95 == tp.errors_ci95
    # an older profile without the field still loads
    raw = json.loads(path.read_text())
    del raw["tools"]["a"]["errors_ci95"]
    path.write_text(json.dumps(raw))
    assert load_profile(path).tools["a"].errors_ci95 is None


def test_scaling_keeps_a_measured_mix_interval_and_drops_it_with_the_dial_mix() -> None:
    ci = {ErrorCode.TIMEOUT: (0.0, 1.0)}
    measured = ToolProfile(success_rate=0.9, errors=MIX, errors_ci95=ci)
    assert Profile(tools={"a": measured}).scaled(0.2).tools["a"].errors_ci95 == ci
    no_mix = ToolProfile(success_rate=1.0, errors_ci95=ci)
    scaled = Profile(tools={"a": no_mix}).scaled(0.2).tools["a"]
    assert scaled.errors and scaled.errors_ci95 is None


def test_profile_intervals_behind_a_deadline_hold_the_point_estimates() -> None:
    errors = {**MIX, ErrorCode.TIMEOUT: 0.25}
    tp = ToolProfile(success_rate=0.9, errors=errors, latency_ms=LAT)
    arr = fault_model_arrays(Profile(tools={"a": tp}), ["a"], 3000, seed=1, step_s=60.0,
                             deadline_s=0.2)  # fmt: skip
    got = calibrate(compute_stats(arr)).tools["a"]
    assert got.hang_rate_ci95 is not None and got.errors_ci95 is not None
    assert ErrorCode.TIMEOUT in got.errors_ci95
    for code, (lo, hi) in got.errors_ci95.items():
        assert 0 <= lo <= got.errors.get(code, 0.0) <= hi <= 1
    # the TIMEOUT share's upper end is the hang interval's upper end among the failures
    t_hi = got.errors_ci95[ErrorCode.TIMEOUT][1]
    assert t_hi > got.errors.get(ErrorCode.TIMEOUT, 0.0)


@pytest.mark.parametrize(("bad", "says"), [
    ([0.6, 0.2], "low <= high"), ([-0.1, 0.2], "0 <= low"), ([0.1, 1.5], "high <= 1"),
    (["NaN", 0.2], "finite"),
])  # fmt: skip
def test_bad_share_intervals_are_refused_with_one_line(
    tmp_path: Path, bad: list, says: str
) -> None:
    raw = {"format": "realprobe-profile/1", "tools": {"a": {
        "success_rate": 0.9, "errors": {"SERVER_ERROR": 1.0},
        "errors_ci95": {"SERVER_ERROR": bad}}}}  # fmt: skip
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw).replace('"NaN"', "NaN"))
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    msg = str(err.value)
    assert "errors_ci95" in msg and says in msg and "\n" not in msg


def test_the_command_line_refuses_a_bad_share_interval_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = {"format": "realprobe-profile/1", "tools": {"a": {
        "success_rate": 0.9, "errors": {"SERVER_ERROR": 1.0},
        "errors_ci95": {"SERVER_ERROR": [0.7, 0.3]}}}}  # fmt: skip
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw))
    monkeypatch.setattr(sys, "argv", ["realprobe", "calibrate", "--source", str(path),
                                      "--view", "resilibench"])  # fmt: skip
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code not in (0, None)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "tools.a.errors_ci95" in err and "SERVER_ERROR" in err and "low <= high" in err


def _run(args: list[str], monkeypatch: pytest.MonkeyPatch,
         capsys: pytest.CaptureFixture[str]) -> str:  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["realprobe", *args])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code in (0, None)
    return capsys.readouterr().out


def test_stats_console_and_json_show_the_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.db"
    with Store(db) as store:
        for row in synthetic_rows("catfact_fact", 300, p_fail=0.25, seed=4, t0=T0):
            store.insert_probe(row)
    mix = json.loads(_run(["stats", "--db", str(db), "--json"], monkeypatch, capsys))
    mix = mix["tools"][0]["errors"]
    lo, hi = mix["share_of_failures_ci95"]["SERVER_ERROR"]
    assert lo < mix["share_of_failures"]["SERVER_ERROR"] < hi
    assert mix["n_effective"] == pytest.approx(mix["failures"] / mix["design_effect"])
    # the console may wrap long lines: compare with the whitespace collapsed
    out = " ".join(_run(["stats", "--db", str(db)], monkeypatch, capsys).split())
    assert f"SERVER_ERROR {100 * mix['share_of_failures']['SERVER_ERROR']:.1f}% " \
        f"[{100 * lo:.1f}, {100 * hi:.1f}]" in out
    assert f"n_eff {mix['n_effective']:.1f} of {mix['failures']} failures" in out
