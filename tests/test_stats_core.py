"""The statistics themselves: intervals, the censored fit, KS, burst chain, variability, loading."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from probe_helpers import arrays_from_rows, synthetic_rows
from scipy import stats as sps

from realprobe import RealprobeError, Store, open_db
from realprobe.probes import stats as stats_mod
from realprobe.probes.latency_fit import fit_lognormal
from realprobe.probes.loading import ProbeArrays, load_probes
from realprobe.probes.stats import (
    burst_chain,
    compute_stats,
    error_mix,
    jeffreys,
    variability,
    wilson,
)
from realprobe.ranges import parse_time, parse_window

NOW = 1_800_000_000.0


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (70, 100), (512, 1000)])
def test_wilson_and_jeffreys_match_scipy(k: int, n: int) -> None:
    ref = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson(k, n) == pytest.approx((ref.low, ref.high), abs=1e-9)
    lo, hi = jeffreys(k, n)
    exp_lo = 0.0 if k == 0 else sps.beta.ppf(0.025, k + 0.5, n - k + 0.5)
    exp_hi = 1.0 if k == n else sps.beta.ppf(0.975, k + 0.5, n - k + 0.5)
    assert (lo, hi) == pytest.approx((exp_lo, exp_hi), abs=1e-9)


def test_parse_time_forms() -> None:
    assert parse_time("7d", NOW) == NOW - 7 * 86400
    assert parse_time("24h", NOW) == NOW - 86400
    assert parse_time("30m", NOW) == NOW - 1800
    # an age is a duration ago, in the one duration grammar
    assert parse_time("1h30m", NOW) == NOW - 5400 and parse_time("500ms", NOW) == NOW - 0.5
    assert parse_time("1w", NOW) == NOW - 604_800 and parse_time("90", NOW) == NOW - 90
    assert parse_time("now", NOW) == NOW
    assert parse_time("2026-11-01", NOW) == parse_time("2026-11-01T00:00:00Z", NOW)
    assert parse_time("2026-11-01T02:00:00+02:00", NOW) == parse_time("2026-11-01T00:00Z", NOW)
    for bad in ("yesterday", "7 days", "2026-13-01", "-3d", ""):
        with pytest.raises(RealprobeError, match="expected an ISO date"):
            parse_time(bad, NOW)


def test_parse_window() -> None:
    assert parse_window("14d..7d", NOW) == (NOW - 14 * 86400, NOW - 7 * 86400)
    assert parse_window("..7d", NOW) == (None, NOW - 7 * 86400)
    with pytest.raises(RealprobeError, match=r"START\.\.END"):
        parse_window("7d", NOW)
    with pytest.raises(RealprobeError, match="not before"):
        parse_window("7d..14d", NOW)


def test_uncensored_fit_is_the_closed_form() -> None:
    rng = np.random.default_rng(1)
    lat = np.exp(rng.normal(5.0, 0.5, 4000))
    fit = fit_lognormal(lat, np.array([]))
    assert fit is not None and fit.method == "mle" and fit.n_censored == 0
    assert fit.mu == pytest.approx(np.log(lat).mean())
    assert fit.sigma == pytest.approx(np.log(lat).std(ddof=1))  # n-1
    assert fit.mu_ci95 is not None and fit.mu_ci95[0] < 5.0 < fit.mu_ci95[1]


def test_censored_fit_recovers_what_dropping_timeouts_gets_wrong() -> None:
    """The deadline (200 ms) cuts the distribution at its 73rd percentile."""
    rng = np.random.default_rng(2)
    lat = np.exp(rng.normal(5.0, 0.5, 6000))
    deadline = 200.0
    ok = lat[lat < deadline]
    censored = np.full(int((lat >= deadline).sum()), deadline)
    naive = fit_lognormal(ok, np.array([]))
    fit = fit_lognormal(ok, censored)
    assert naive is not None and fit is not None
    assert naive.mu < 4.85 and naive.sigma < 0.42  # biased: the slow calls are gone
    assert abs(fit.mu - 5.0) < 0.04 and abs(fit.sigma - 0.5) < 0.03
    assert fit.mu_ci95 is not None and fit.mu_ci95[0] < 5.0 < fit.mu_ci95[1]
    assert fit.sigma_ci95 is not None and fit.sigma_ci95[0] < 0.5 < fit.sigma_ci95[1]
    assert fit.intervals == "profile-likelihood"
    assert fit.hang_share < 0.05  # truth 0; a boundary estimate carries some noise
    assert fit.p_exceed_timeout == pytest.approx(censored.size / lat.size, abs=0.03)


def test_hangs_do_not_stretch_the_tail() -> None:
    """15% of calls hang (a TIMEOUT fault) at a 1 s deadline: with the hang mass the fit stays
    on the successes; a plain censored fit is dragged towards the deadline."""
    rng = np.random.default_rng(3)
    ok = np.exp(rng.normal(5.0, 0.5, 3000))
    ok = ok[ok < 1000]
    hangs = np.full(530, 1000.0)
    fit = fit_lognormal(ok, hangs)
    plain = fit_lognormal(ok, hangs, hang_mass=False)
    assert fit is not None and plain is not None
    assert abs(fit.mu - 5.0) < 0.04 and abs(fit.sigma - 0.5) < 0.03
    assert fit.hang_share == pytest.approx(530 / (ok.size + 530), abs=0.01)
    assert fit.intervals == "t"  # the deadline is 3.2 sigma out: the successes carry the fit
    assert plain.sigma > 0.7  # the wrong model: hangs read as a fat tail


def test_kruskal_matches_scipy() -> None:
    rng = np.random.default_rng(5)
    groups = [np.round(rng.normal(m, 1, 40), 1) for m in (0, 0.3, 0.8)]  # rounded: ties
    values = np.concatenate(groups)
    order = np.argsort(values)
    of = np.repeat(np.arange(3), [g.shape[0] for g in groups])[order]
    assert stats_mod._kruskal(values[order], of, [0, 1, 2]) == pytest.approx(
        sps.kruskal(*groups).pvalue)


def test_burst_chain_counts_and_gap() -> None:
    fail = np.array([0, 1, 1, 0, 0, 1, 0, 1, 1, 1], dtype=bool)
    ts = np.arange(10.0)
    b = burst_chain(fail, ts)
    # pairs from a failure: 1-1, 1-0, 1-0, 1-1, 1-1 => 3 of 5 stay failed
    # pairs from a success: 0-1, 0-0, 0-1, 0-1 => 3 of 4 fail next
    assert b.p_fail_after_fail.n == 5 and b.p_fail_after_fail.p == pytest.approx(3 / 5)
    assert b.p_fail_after_ok.n == 4 and b.p_fail_after_ok.p == pytest.approx(3 / 4)
    assert b.rho == pytest.approx(0.6 - 0.75)
    ts_gap = ts.copy()
    ts_gap[5:] += 7200  # the 4 -> 5 pair is two hours apart: not a transition
    assert burst_chain(fail, ts_gap).p_fail_after_ok.n == 3


def test_error_mix_shares() -> None:
    code = np.array([-1, -1, 0, 0, 3, -1, 0, -1])
    mix = error_mix(code)
    assert mix.failures == 4
    assert mix.counts == {"TIMEOUT": 3, "SERVER_ERROR": 1}
    assert mix.share_of_failures == {"TIMEOUT": 0.75, "SERVER_ERROR": 0.25}
    assert mix.share_of_attempts["TIMEOUT"] == pytest.approx(3 / 8)


def _day_rows(day: int, n: int, p_fail: float, mu: float, seed: int) -> list[dict]:
    return synthetic_rows("t", n, p_fail=p_fail, mu=mu, t0=NOW + day * 86400, step_s=60,
                          seed=seed)


def test_variability_flags() -> None:
    steady = arrays_from_rows(_day_rows(0, 200, 0.1, 5, 1) + _day_rows(1, 200, 0.1, 5, 2)
                                   + _day_rows(2, 200, 0.1, 5, 3))
    v = variability(steady.ts, steady.code, steady.latency_ms)
    assert v.periods == 3 and v.variable_success is False and v.variable_latency is False
    shaky = arrays_from_rows(_day_rows(0, 200, 0.05, 5, 1) + _day_rows(1, 200, 0.5, 5.7, 2)
                                  + _day_rows(2, 200, 0.1, 5, 3))
    v = variability(shaky.ts, shaky.code, shaky.latency_ms)
    assert v.variable_success is True and v.variable_latency is True
    assert v.success_sd is not None and v.success_sd > 0.2
    one_day = arrays_from_rows(_day_rows(0, 200, 0.1, 5, 1))
    v = variability(one_day.ts, one_day.code, one_day.latency_ms)
    assert v.variable_success is None and v.reason and "2 periods" in v.reason


def _store_rows(path: Path, rows: list[dict]) -> None:
    with Store(path) as store:
        for r in rows:
            store.insert_probe(r)


def test_sql_loader_matches_rows_and_leaves_out_excluded(tmp_path: Path) -> None:
    rows = synthetic_rows("b_tool", 50, seed=1) + synthetic_rows("a_tool", 30, seed=2)
    outage = synthetic_rows("a_tool", 20, p_fail=1.0, codes=("NETWORK_ERROR",), seed=3)
    for r in outage:
        r["excluded"] = 1
    rows[0]["outcome"] = "error"
    _store_rows(tmp_path / "p.db", rows + outage)
    # a code the store refuses today, written by an older tool: it reads as OPERATION_FAILED
    rows[0]["error_code"] = "SOMETHING_NEW"
    with Store(tmp_path / "p.db") as store, store.conn:
        store.conn.execute("UPDATE probes SET error_code = 'SOMETHING_NEW' WHERE id = 1")
    arr = load_probes(open_db(tmp_path / "p.db"))
    ref = arrays_from_rows(rows + outage)
    assert arr.tools == ["a_tool", "b_tool"] == ref.tools
    assert list(arr.bounds) == [0, 30, 80]
    for a, b in ((arr.ts, ref.ts), (arr.latency_ms, ref.latency_ms),
                 (arr.code, ref.code), (arr.timeout_s, ref.timeout_s)):
        assert np.array_equal(a, b)
    assert arr.code[30] == 8  # OPERATION_FAILED
    sub = load_probes(open_db(tmp_path / "p.db"), since=NOW - 1e9, until=rows[10]["started_ts"],
                      tools=["b_tool"])
    assert sub.tools == ["b_tool"] and len(sub) == 10


def test_compute_stats_numbers(tmp_path: Path) -> None:
    rows = synthetic_rows("x", 1000, p_fail=0.2, seed=7)
    rep = compute_stats(arrays_from_rows(rows))
    t = rep.tools[0]
    fails = sum(r["outcome"] == "error" for r in rows)
    assert t.success.n == 1000 and t.success.successes == 1000 - fails
    assert t.success.denominator == "per attempt"
    ok_lat = np.array([r["latency_ms"] for r in rows if r["outcome"] == "ok"])
    assert t.latency.p50 == pytest.approx(np.percentile(ok_lat, 50))
    assert t.latency.p99 == pytest.approx(np.percentile(ok_lat, 99))
    assert t.latency.mean == pytest.approx(ok_lat.mean())
    assert t.latency.lognormal is not None and abs(t.latency.lognormal.mu - 5) < 0.06
    assert t.latency.ks_pvalue is not None and t.latency.ks_pvalue > 0.01
    # independent draws: both transition probabilities near 0.2, rho near 0
    assert t.burst.rho is not None and abs(t.burst.rho) < 0.08
    assert rep.overall is not None and rep.overall.n == 1000
    assert math.isclose(t.success.n_effective, 1000, rel_tol=0.2)


def test_degenerate_tools_do_not_break_stats_or_calibration() -> None:
    from realprobe.probes.calibrate import calibrate

    rows = synthetic_rows("always_down", 30, p_fail=1.0, codes=("NETWORK_ERROR",), seed=1)
    rows += synthetic_rows("one_call", 1, p_fail=0.0, seed=2)
    rows += synthetic_rows("no_deadline", 40, p_fail=0.3, seed=3)
    for r in rows[-40:]:
        r["timeout_s"] = None  # older rows without a recorded deadline
    rep = compute_stats(arrays_from_rows(rows))
    t = {x.tool: x for x in rep.tools}
    down = t["always_down"]
    assert down.success.rate == 0.0 and down.latency.n == 0 and down.latency.lognormal is None
    assert down.burst.p_fail_after_ok.p is None and down.burst.p_fail_after_fail.p == 1.0
    assert down.success.wilson95[0] == 0.0 and down.success.wilson95[1] < 0.15
    one = t["one_call"]
    assert one.success.n == 1 and one.latency.lognormal is None and one.burst.rho is None
    nd = t["no_deadline"]
    assert nd.latency.timeout_s is None
    assert nd.latency.lognormal is not None and nd.latency.lognormal.n_censored == 0
    prof = calibrate(rep)
    assert prof.tools["always_down"].success_rate == 0.0
    assert prof.tools["always_down"].burst is None
    assert prof.tools["one_call"].errors == {}


def test_the_fits_run_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stats and calibrate run their many tiny optimisations on one BLAS thread (OpenBLAS
    threads spinning for a busy core made them several times slower), and put the caller's
    setting back afterwards."""
    from threadpoolctl import threadpool_info

    import realprobe.probes.calibrate as calibrate_mod
    import realprobe.probes.stats as stats_mod

    def blas_threads() -> set[int]:
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    seen: list[set[int]] = []
    real_tool_stats, real_profiles = stats_mod.tool_stats, calibrate_mod._one_profile

    def tool_stats(*a, **k):  # type: ignore[no-untyped-def]
        seen.append(blas_threads())
        return real_tool_stats(*a, **k)

    def tool_profiles(*a, **k):  # type: ignore[no-untyped-def]
        seen.append(blas_threads())
        return real_profiles(*a, **k)

    monkeypatch.setattr(stats_mod, "tool_stats", tool_stats)
    monkeypatch.setattr(calibrate_mod, "_one_profile", tool_profiles)
    before = blas_threads()
    rows = synthetic_rows("catfact_fact", 50, p_fail=0.2, seed=1)
    calibrate_mod.calibrate(stats_mod.compute_stats(arrays_from_rows(rows)))
    assert len(seen) == 2 and all(s == {1} for s in seen), seen
    assert blas_threads() == before


# -- the shared, sort-free paths give the numbers of the direct computations -------------------


def test_sorted_quantiles_and_median_are_numpys() -> None:
    from realprobe.probes.numeric import median, sorted_quantiles

    rng = np.random.default_rng(7)
    pct = np.true_divide([50, 90, 95, 99], 100)
    pairs = [(0.25, 0.75), (0.1, 0.6), (0.4, 0.9)]
    for n in [*range(1, 40), 1000, 1001, 18_000]:
        for _ in range(5):
            v = rng.lognormal(5, 1, n)
            v = np.round(v) if rng.random() < 0.3 else v  # ties
            ordered = np.sort(v)
            want = np.percentile(v, [50, 90, 95, 99]).tolist()
            assert sorted_quantiles(ordered, pct).tolist() == want
            got = sorted_quantiles(ordered, pairs)
            assert np.array_equal(got, np.quantile(v, np.asarray(pairs)))
            assert median(v) == float(np.median(v))


def _direct_pairs(code: np.ndarray, linked: np.ndarray) -> list[list[list[int]]]:
    """The lagged pair counts by walking the calls."""
    kind = [0 if c < 0 else (2 if c == stats_mod._TIMEOUT else 1) for c in code]
    out = []
    for k in range(1, stats_mod.PAIR_LAGS + 1):
        cells = [[0] * 3 for _ in range(3)]
        for i in range(len(kind) - k):
            if linked[i : i + k].all():
                cells[kind[i]][kind[i + k]] += 1
        out.append(cells)
    return out


@pytest.mark.parametrize("breaks", [0, 1, 7])
def test_lagged_pairs_match_a_direct_count(breaks: int) -> None:
    rng = np.random.default_rng(breaks)
    for n in (1, 2, 5, 9, 300):
        code = rng.choice([-1, -1, -1, 0, 3, stats_mod._TIMEOUT], n)
        linked = np.ones(max(n - 1, 0), dtype=bool)
        if n > 1 and breaks:
            linked[rng.choice(n - 1, min(breaks, n - 1), replace=False)] = False
        assert stats_mod.lagged_pairs(code, linked) == _direct_pairs(code, linked)


def test_periods_in_time_order_match_np_unique() -> None:
    rng = np.random.default_rng(3)
    ts = NOW + np.cumsum(rng.exponential(3000.0, 500))
    ok = rng.random(500) < 0.8
    inv, n_p, k_p, _ = stats_mod._periods(ts, ok, 86400.0)
    uniq, inv_ref = np.unique(np.floor(ts / 86400.0).astype(np.int64), return_inverse=True)
    assert np.array_equal(inv, inv_ref)
    assert np.array_equal(n_p, np.bincount(inv_ref, minlength=uniq.shape[0]))
    assert np.array_equal(k_p, np.bincount(inv_ref, weights=ok.astype(float)))
    shuffled = rng.permutation(ts)  # out of time order: np.unique itself
    assert np.array_equal(stats_mod._periods(shuffled, ok, 86400.0)[0],
                          np.unique(np.floor(shuffled / 86400.0).astype(np.int64),
                                    return_inverse=True)[1])  # fmt: skip


def test_tool_stats_shares_its_sorts_without_changing_a_number() -> None:
    """tool_stats computes the periods and the latency order once; the statistics are those
    of latency_stats and variability left to compute their own."""
    rows = synthetic_rows("t", 3000, p_fail=0.3, step_s=97.0, seed=5, timeout_s=0.4)
    arr = arrays_from_rows(rows)
    t = stats_mod.tool_stats("t", arr.slice(0))
    a = arr.slice(0)
    assert t.latency == stats_mod.latency_stats(a.latency_ms, a.code, a.timeout_s)
    v = variability(a.ts, a.code, a.latency_ms, 86400.0, t.success.rho_used)
    assert t.variability == v
    ok = a.latency_ms[(a.code < 0) & np.isfinite(a.latency_ms)]
    days = np.floor(a.ts[(a.code < 0) & np.isfinite(a.latency_ms)] / 86400.0)
    groups = [ok[days == d] for d in np.unique(days) if (days == d).sum() >= 10]
    assert v.latency_pvalue == pytest.approx(sps.kruskal(*groups).pvalue, rel=1e-9)


def test_implicit_counts_without_any_sign_match_the_counting() -> None:
    """Rows none of which carries an implicit sign skip counting the bits: the answer is the
    one counting them gives (the same JSON bytes), and a single sign is counted."""
    import json

    from realprobe.dbfacts import IMPLICIT_KINDS
    from realprobe.probes.implicit import implicit_counts

    code = np.array([-1, -1, 3, -1, 5, -1, 3])
    bits = np.zeros(7)

    def arrays(bits: np.ndarray) -> ProbeArrays:
        return ProbeArrays(["a", "b", "c"], np.array([0, 3, 5, 7]), np.arange(7.0),
                           np.ones(7), code, np.full(7, 10.0), {"implicit": bits})

    def counted(bits: np.ndarray) -> dict[str, object]:  # bit by bit, by hand
        out: dict[str, object] = {}
        for tool, a, b in (("a", 0, 3), ("b", 3, 5), ("c", 5, 7)):
            mine = [int(v) for v, c in zip(bits[a:b], code[a:b], strict=True) if c < 0]
            counts = {k: sum((v >> j) & 1 for v in mine) for j, k in enumerate(IMPLICIT_KINDS)}
            out[tool] = {"ok": len(mine), **counts,
                         "rates": {k: counts[k] / len(mine) for k in IMPLICIT_KINDS}}
        return out

    assert json.dumps(implicit_counts(arrays(bits))) == json.dumps(counted(bits))
    signed = bits.copy()
    signed[5] = 2.0  # tool c's success: empty
    assert json.dumps(implicit_counts(arrays(signed))) == json.dumps(counted(signed))
    assert implicit_counts(arrays(signed))["c"]["empty"] == 1


def test_phase_medians_equal_the_masked_medians() -> None:
    """Each tool's phase medians are np.median over its successes that recorded a first byte
    (the connection phases: those that opened a connection), value for value."""
    import json

    from realprobe.dbfacts import CONNECTION_PHASES, PHASE_COLUMNS
    from realprobe.probes.phases import phase_medians

    rng = np.random.default_rng(3)
    n = 3000
    code = np.where(rng.random(n) < 0.7, -1, 2)
    extra = {p: np.where(rng.random(n) < 0.2, np.nan, rng.lognormal(3, 1, n))
             for p in PHASE_COLUMNS}
    extra["new_connection"] = (rng.random(n) < 0.05).astype(float)
    bounds = np.array([0, 1000, 1001, 2500, n])
    arr = ProbeArrays(["a", "b", "c", "d"], bounds, np.arange(float(n)), np.ones(n), code,
                      np.full(n, 10.0), extra)
    want: dict[str, object] = {}
    for i, tool in enumerate(arr.tools):
        s = slice(bounds[i], bounds[i + 1])
        keep = (code[s] < 0) & ~np.isnan(extra["ttfb_ms"][s])
        if not keep.any():
            continue
        new = keep & (extra["new_connection"][s] != 0)
        med, cnt = {}, {}
        for p in PHASE_COLUMNS:
            v = extra[p][s][(new if p in CONNECTION_PHASES else keep) & np.isfinite(extra[p][s])]
            cnt[p] = len(v)
            med[p] = round(float(np.median(v)), 2) if len(v) else None
        known = {p: m for p, m in med.items() if m is not None}
        want[tool] = {"n": cnt["ttfb_ms"], "new_connections": cnt["connect_ms"], **med,
                      "slowest": max(known, key=lambda p: known[p]) if known else None}
    assert json.dumps(phase_medians(arr)) == json.dumps(want)
    assert "b" not in want or want["b"]["n"] <= 1
