"""Calibration: stats -> Profile (DESIGN format), export views, the CLI, and the round trip
profile -> simulate -> calibrate -> the same numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from probe_helpers import (
    TRUE_MU,
    TRUE_SIGMA,
    TRUE_SUCCESS,
    arrays_from_rows,
    distinct_host_tools,
    probe,
    simulate_opts,
    synthetic_rows,
    truth_profile,
)
from test_stats_cli import make_db, one_line_error, run_cli

from realprobe import Catalog, ErrorCode, Profile, Store, load_profile, open_db
from realprobe.errors import RESILIBENCH_CODES
from realprobe.probes.calibrate import (
    DeadlineChain,
    _start_method,
    calibrate,
    export,
    reliabilitybench_view,
    resilibench_view,
)
from realprobe.probes.loading import load_probes
from realprobe.probes.stats import compute_stats
from realprobe.probes.synthetic import fault_model_arrays
from realprobe.simulator.profile import ToolProfile, resilibench_marginal


def _report(p_fail: float = 0.3):
    rows = synthetic_rows("catfact_fact", 400, p_fail=p_fail, seed=3,
                          codes=("TIMEOUT", "SERVER_ERROR", "NOT_FOUND", "NETWORK_ERROR"))
    rows += synthetic_rows("agify_age", 200, p_fail=0.0, seed=4)
    return compute_stats(arrays_from_rows(rows))


def test_profile_carries_the_stats() -> None:
    rep = _report()
    prof = calibrate(rep, name="t")
    cat = prof.tools["catfact_fact"]
    st = next(t for t in rep.tools if t.tool == "catfact_fact")
    assert cat.n == 400 and cat.success_rate == st.success.rate
    assert cat.success_ci95 == st.success.burst_adjusted95
    assert sum(cat.errors.values()) == pytest.approx(1.0)
    assert cat.errors[ErrorCode.TIMEOUT] == pytest.approx(st.errors.share_of_failures["TIMEOUT"])
    assert cat.latency_ms.lognormal is not None
    assert cat.latency_ms.lognormal.mu == st.latency.lognormal.mu  # type: ignore[union-attr]
    assert cat.burst is not None
    # the chain keeps the observed correlation and agrees with the counted success rate
    b = st.burst
    assert cat.burst.p_fail_after_fail - cat.burst.p_fail_after_ok == pytest.approx(b.rho)
    assert 1 - cat.burst.stationary_fail == pytest.approx(cat.success_rate)
    assert cat.burst.p_fail_after_fail == pytest.approx(b.p_fail_after_fail.p, abs=0.01)
    perfect = prof.tools["agify_age"]
    assert perfect.success_rate == 1.0 and perfect.errors == {}
    assert prof.source["probes"] == 600 and prof.source["denominator"] == "per attempt"


def test_profile_file_round_trip(tmp_path: Path) -> None:
    prof = calibrate(_report())
    path = tmp_path / "p.json"
    prof.dump(path)
    again = load_profile(path)
    assert again == Profile.model_validate_json(path.read_text())
    assert again.tools["catfact_fact"].success_rate == prof.tools["catfact_fact"].success_rate


def test_resilibench_view_maps_onto_six_codes() -> None:
    view = resilibench_view(calibrate(_report()))
    cat = view["tools"]["catfact_fact"]
    assert list(cat["error_weights"]) == list(RESILIBENCH_CODES)
    assert sum(cat["error_weights"].values()) == pytest.approx(1.0)
    # SERVER_ERROR and NOT_FOUND fold into OPERATION_FAILED
    st = next(t for t in _report().tools if t.tool == "catfact_fact").errors.share_of_failures
    assert cat["error_weights"]["OPERATION_FAILED"] == pytest.approx(
        st.get("SERVER_ERROR", 0) + st.get("NOT_FOUND", 0))
    assert view["tools"]["agify_age"]["error_weights"]["TIMEOUT"] == 0.0


def test_reliabilitybench_view_has_lambda_levels() -> None:
    prof = calibrate(_report(p_fail=0.6))
    view = reliabilitybench_view(prof)
    levels = view["profiles"]
    # the paper's lambda: the share of calls that meet a fault, whatever was measured
    assert set(levels) == {"LAMBDA_0", "LAMBDA_0_075", "LAMBDA_0_175", "LAMBDA_0_275"}
    fr = 1 - prof.tools["catfact_fact"].success_rate
    measured = view["measured"]["tools"]["catfact_fact"]
    assert measured["failure_rate"] == pytest.approx(fr)
    assert view["measured"]["lambda"] == pytest.approx(
        sum(t["failure_rate"] for t in view["measured"]["tools"].values()) / len(prof.tools)
    )
    assert levels["LAMBDA_0"]["tools"]["catfact_fact"]["failure_rate"] == 0.0
    assert levels["LAMBDA_0_175"]["tools"]["catfact_fact"]["failure_rate"] == 0.175
    w = levels["LAMBDA_0_275"]["tools"]["catfact_fact"]["fault_weights"]
    assert w == measured["fault_weights"]
    assert sum(w.values()) == pytest.approx(1.0) and w["timeout"] > 0


def test_views_of_a_builtin_profile() -> None:
    published = load_profile("published")
    view = export(published, "resilibench")
    star = view["tools"]["*"]
    assert star["success_per_attempt"] == pytest.approx(0.527) and star["deadline_s"] is None
    # plugged in as ResiliBench's base rate, its penalties bring it back down to 0.527
    assert star["tool_success_rate"] > 0.56
    assert resilibench_marginal(star["tool_success_rate"]) == pytest.approx(0.527, abs=1e-6)
    # the file's shares (71.1% TIMEOUT ...) sum to 0.945; the model renormalises them
    raw = {"TIMEOUT": 0.711, "OPERATION_FAILED": 0.0865, "INVALID_INPUT": 0.057,
           "INVALID_RESPONSE": 0.0443, "NETWORK_ERROR": 0.0443, "RATE_LIMIT_ERROR": 0.0021}
    for code, share in raw.items():
        assert star["error_weights"][code] == pytest.approx(share / sum(raw.values()))


def test_calibrate_cli(tmp_path: Path, monkeypatch, capsys) -> None:
    db = make_db(tmp_path / "p.db")
    out = tmp_path / "profile.json"
    code, _, err = run_cli(["calibrate", "--db", str(db), "-o", str(out)], monkeypatch, capsys)
    assert code == 0, err
    prof = load_profile(out)
    assert set(prof.tools) == {"catfact_fact", "agify_age"}
    code, text, _ = run_cli(["calibrate", "--db", str(db), "--view", "reliabilitybench"],
                            monkeypatch, capsys)
    assert code == 0 and "LAMBDA_0_075" in json.loads(text)["profiles"]
    code, text, _ = run_cli(["calibrate", "--source", str(out), "--view", "resilibench"],
                            monkeypatch, capsys)
    assert code == 0 and set(json.loads(text)["tools"]) == {"catfact_fact", "agify_age"}


def test_calibrate_cli_bad_input(tmp_path: Path, monkeypatch, capsys) -> None:
    db = make_db(tmp_path / "p.db")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "realprobe-profile/1",
                               "tools": {"x": {"success_rate": 1.7}}}))
    wrong_format = tmp_path / "v9.json"
    wrong_format.write_text(json.dumps({"format": "realprobe-profile/9"}))
    not_json = tmp_path / "nj.json"
    not_json.write_text("{ nope")
    cases = [
        (["--source", str(bad)], "invalid profile at tools.x.success_rate"),
        (["--source", str(wrong_format)], "unsupported profile format"),
        (["--source", str(not_json)], "the profile is not valid JSON"),
        (["--source", "nonesuch"], "neither a file nor a built-in"),
        (["--db", str(db), "--view", "toolbench"], "choose resilibench or reliabilitybench"),
        (["--db", str(db), "--since", "2031-01-01"], "no probe rows"),
        (["--db", str(db), "-o", str(tmp_path / "no" / "such" / "dir.json")], "cannot write"),
    ]
    for args, needle in cases:
        code, _, err = run_cli(["calibrate", *args], monkeypatch, capsys)
        assert needle in one_line_error(code, err), args


def test_profile_simulate_calibrate_round_trip(catalog: Catalog, tmp_path: Path) -> None:
    """Calibrate from a known profile's output, then simulate the calibrated profile: the second
    generation's estimates match the first within their intervals."""
    tools = distinct_host_tools(catalog, 3)
    probe(catalog, tools, 400, simulate_opts(truth_profile(), 5), tmp_path / "a.db", 10.0)
    first = calibrate(compute_stats(load_probes(open_db(tmp_path / "a.db"))))
    for tp in first.tools.values():
        assert tp.success_ci95 is not None
        assert tp.success_ci95[0] <= TRUE_SUCCESS <= tp.success_ci95[1]
        assert tp.latency_ms.lognormal is not None
        assert abs(tp.latency_ms.lognormal.mu - TRUE_MU) < 0.1
        assert abs(tp.latency_ms.lognormal.sigma - TRUE_SIGMA) < 0.06
    probe(catalog, tools, 400, simulate_opts(first, 6), tmp_path / "b.db", 10.0)
    second = calibrate(compute_stats(load_probes(open_db(tmp_path / "b.db"))))
    for name, tp in second.tools.items():
        a: ToolProfile = first.tools[name]
        lo, hi = a.success_ci95  # type: ignore[misc]
        margin = (hi - lo) / 2
        assert abs(tp.success_rate - a.success_rate) < 2 * margin, name
        assert set(tp.errors) <= set(a.errors)


def test_store_is_untouched_by_readers(tmp_path: Path, monkeypatch, capsys) -> None:
    """stats/calibrate/report open the database read-only."""
    db = make_db(tmp_path / "p.db")
    before = db.stat().st_mtime_ns
    run_cli(["calibrate", "--db", str(db), "-o", str(tmp_path / "x.json")], monkeypatch, capsys)
    assert db.stat().st_mtime_ns == before
    with Store(db) as store:
        assert store.db["probes"].count == 200


def test_a_deadline_that_bites_is_not_counted_twice(catalog: Catalog, tmp_path: Path) -> None:
    """Probing with a 200 ms deadline cuts the latency (median 148 ms) at its 73rd percentile:
    observed success is about 0.70 x 0.73. The profile must hold the rates *before* the
    deadline, so that simulating it at the same deadline gives back what was observed (a
    plain copy would give about 0.70 x 0.73 x 0.73)."""
    tools = distinct_host_tools(catalog, 3)
    deadline = 0.2
    probe(catalog, tools, 600, simulate_opts(truth_profile(), 8), tmp_path / "a.db", deadline)
    first = compute_stats(load_probes(open_db(tmp_path / "a.db")))
    prof = calibrate(first)
    assert set(prof.source["deadline_adjusted"]["tools"]) == {t.name for t in tools}
    observed = np.mean([t.success.rate for t in first.tools])
    generative = np.mean([tp.success_rate for tp in prof.tools.values()])
    assert 0.45 < observed < 0.57
    assert abs(generative - TRUE_SUCCESS) < 0.05
    timeout_share = np.mean([tp.errors[ErrorCode.TIMEOUT] for tp in prof.tools.values()])
    assert abs(timeout_share - 0.3) < 0.08  # the injected hangs, not the slow calls
    for tp in prof.tools.values():
        assert tp.burst is not None
        assert abs(tp.burst.stationary_fail - (1 - tp.success_rate)) < 1e-9
    probe(catalog, tools, 600, simulate_opts(prof, 9), tmp_path / "b.db", deadline)
    second = compute_stats(load_probes(open_db(tmp_path / "b.db")))
    again = np.mean([t.success.rate for t in second.tools])
    assert abs(again - observed) < 0.04, (observed, again)


def test_mixture_behind_a_deadline_with_few_timeouts_says_its_interval_is_conservative() -> None:
    """Two latency components behind a 1 s deadline that cuts 6% of calls: at 200 calls a
    dozen TIMEOUTs carry S, and the profile says in words that its success interval is wider
    than 95%; the same tool without a biting deadline has no such note."""
    from realprobe import LatencyModel, MixtureComponent

    lat = LatencyModel(mixture=[MixtureComponent(weight=0.6, mu=4.5, sigma=0.3),
                                MixtureComponent(weight=0.4, mu=6.5, sigma=0.4)])  # fmt: skip
    truth = Profile(tools={"t": ToolProfile(
        success_rate=0.97, errors={ErrorCode.SERVER_ERROR: 1.0}, latency_ms=lat)})  # fmt: skip
    hits = 0
    for seed in range(3):
        rep = compute_stats(fault_model_arrays(truth, ["t"], 200, seed=seed, deadline_s=1.0))
        tp = calibrate(rep).tools["t"]
        hits += any("success_ci95 is conservative" in n for n in tp.notes)
    assert hits >= 2  # a mixture is fitted when the goodness-of-fit test rejects one lognormal
    rep = compute_stats(fault_model_arrays(truth, ["t"], 200, seed=0, deadline_s=60.0))
    assert not any("conservative" in n for n in calibrate(rep).tools["t"].notes)


def test_calibrate_cli_prints_the_profile_notes(tmp_path: Path, monkeypatch, capsys) -> None:
    """What the profile could not estimate is said on the console, not only inside the JSON:
    a deadline at the median latency leaves hangs untold from slow calls."""
    db = tmp_path / "h.db"
    with Store(db) as store:
        for row in synthetic_rows("catfact_fact", 300, p_fail=0.0, seed=3, timeout_s=0.15):
            if row["latency_ms"] > 150.0:
                row.update(latency_ms=150.0, outcome="error", error_code="TIMEOUT")
            store.insert_probe(row)
    out = tmp_path / "p.json"
    code, _, err = run_cli(["calibrate", "--db", str(db), "-o", str(out)], monkeypatch, capsys)
    assert code == 0, err
    flat = " ".join(err.split())
    assert "1 tool: hangs cannot be told from slow calls at the 0.15 s deadline: " \
        "catfact_fact: " in flat
    assert load_profile(out).tools["catfact_fact"].notes


def test_many_tools_are_fitted_in_worker_processes_exactly_as_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import realprobe.probes.calibrate as calibrate_mod

    arr = fault_model_arrays(load_profile("harsh"), ["a", "b", "c", "d"], 300, seed=3,
                             deadline_s=0.3)
    rep = compute_stats(arr)
    here = calibrate(rep, arrays=arr).model_dump()
    pools: list[int] = []
    import concurrent.futures

    class Counting(concurrent.futures.ProcessPoolExecutor):
        def __init__(self, workers: int, *a, **k) -> None:  # type: ignore[no-untyped-def]
            pools.append(workers)
            super().__init__(workers, *a, **k)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Counting)
    monkeypatch.setattr(calibrate_mod, "PARALLEL_TOOLS", 2)
    monkeypatch.setattr(calibrate_mod, "_cores", lambda: 2)
    assert calibrate(rep, arrays=arr).model_dump() == here
    assert pools == [2]


def test_deadline_chain_gradient_is_the_likelihoods() -> None:
    """The chain's analytic gradient in (f, w, z) is its penalised likelihood's own, for
    negative, zero and strong correlations (central differences agree)."""
    from scipy import optimize

    arr = fault_model_arrays(load_profile("harsh"), ["a"], 2000, seed=3, deadline_s=0.3)
    pairs = compute_stats(arr).tools[0].burst.pairs
    assert pairs is not None
    chain = DeadlineChain(pairs, 0.05, (0.03, 0.08))
    for rho in (-0.3, 0.0, 0.6, 0.95):
        decay = chain.decay(rho)
        for x in ([0.3, 0.3, chain.z0 + 0.1], [0.6, 0.8, chain.z0 - 0.2]):  # f >= -rho/(1-rho)
            point = np.array(x)
            grad = chain.nll_grad(point, decay)[1]
            numeric = optimize.approx_fprime(point, lambda p, d=decay: chain.nll_grad(p, d)[0],
                                             1e-7)
            assert grad == pytest.approx(numeric, rel=1e-4, abs=1e-2)


def test_workers_fork_only_from_a_single_threaded_process() -> None:
    """A process with another thread spawns its workers (a forked child could inherit a lock
    that thread holds); a single-threaded one on Linux forks them."""
    import sys
    import threading

    alone = threading.active_count() == 1
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert _start_method() == "spawn"
    finally:
        release.set()
        other.join()
    if alone:
        assert _start_method() == ("fork" if sys.platform == "linux" else "spawn")
