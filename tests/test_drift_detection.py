"""Drift between two windows: the tests, the corrections, the effect-size gates, the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from probe_helpers import arrays_from_rows, synthetic_rows
from scipy import stats as sps
from test_stats_cli import one_line_error, run_cli

from realprobe import Store
from realprobe.probes.drift import adjust, drift, two_proportion

WEEK = 7 * 86400
T_BASE = 1_790_000_000.0
T_CUR = T_BASE + WEEK


def test_holm_and_bh_by_hand() -> None:
    p = [0.01, 0.04, 0.03, 0.20]
    # Holm: sorted 0.01,0.03,0.04,0.20 times 4,3,2,1 -> 0.04,0.09,0.08->0.09,0.20
    assert adjust(p, "holm") == pytest.approx([0.04, 0.09, 0.09, 0.20])
    # BH: sorted times 4/1,4/2,4/3,4/4 -> 0.04,0.06,0.0533,0.20, then running min from the top
    assert adjust(p, "bh") == pytest.approx([0.04, 0.0533333, 0.0533333, 0.20])
    assert adjust([], "holm") == []
    assert adjust([0.9, 0.8], "holm") == [1.0, 1.0]


def test_two_proportion_is_the_chi_square_without_correction() -> None:
    table = np.array([[90, 10], [75, 25]])
    ref = sps.chi2_contingency(table, correction=False)[1]
    assert two_proportion(90, 100, 75, 100) == pytest.approx(ref)


def _tool(name: str, t0: float, n: int, *, p_fail: float = 0.1, mu: float = 5.0,
          codes: tuple[str, ...] = ("TIMEOUT", "SERVER_ERROR"), seed: int = 0) -> list[dict]:
    return synthetic_rows(name, n, p_fail=p_fail, mu=mu, t0=t0, step_s=300, codes=codes,
                          seed=seed)


def _windows() -> tuple[list[dict], list[dict]]:
    base, cur = [], []
    for i, name in enumerate(("steady_a", "steady_b", "steady_c")):
        base += _tool(name, T_BASE, 600, seed=i)
        cur += _tool(name, T_CUR, 600, seed=10 + i)
    base += _tool("got_flaky", T_BASE, 600, p_fail=0.05, seed=20)
    cur += _tool("got_flaky", T_CUR, 600, p_fail=0.35, seed=21)
    base += _tool("got_slow", T_BASE, 600, mu=5.0, seed=30)
    cur += _tool("got_slow", T_CUR, 600, mu=5.7, seed=31)  # median x2
    base += _tool("new_errors", T_BASE, 600, p_fail=0.2, codes=("TIMEOUT",), seed=40)
    # same seed: the same calls fail, only their codes differ
    cur += _tool("new_errors", T_CUR, 600, p_fail=0.2, codes=("SERVER_ERROR", "NOT_FOUND"),
                 seed=40)
    base += _tool("tiny_shift", T_BASE, 5000, mu=5.0, seed=50)
    cur += _tool("tiny_shift", T_CUR, 5000, mu=5.04, seed=51)  # 4% slower: real but small
    base += _tool("barely_probed", T_BASE, 8, seed=60)
    cur += _tool("barely_probed", T_CUR, 8, seed=61)
    return base, cur


def test_verdicts() -> None:
    base, cur = _windows()
    rep = drift(arrays_from_rows(base), arrays_from_rows(cur))
    v = {t.tool: t for t in rep.tools}
    assert v["got_flaky"].verdict == "worse" and v["got_flaky"].success.flagged  # type: ignore
    assert v["got_slow"].verdict == "worse" and v["got_slow"].latency.flagged  # type: ignore
    assert v["got_slow"].latency.ratio == pytest.approx(2.0, rel=0.15)  # type: ignore
    assert v["new_errors"].verdict == "changed" and v["new_errors"].error_mix.flagged  # type: ignore
    for name in ("steady_a", "steady_b", "steady_c"):
        assert v[name].verdict == "stable", v[name]
    tiny = v["tiny_shift"].latency
    assert tiny is not None and tiny.p_adjusted is not None
    assert tiny.p_adjusted < 0.05 and not tiny.flagged  # significant, but under the 20% gate
    assert v["tiny_shift"].verdict == "stable"
    assert v["barely_probed"].verdict == "insufficient data"
    # the reverse direction reads as better
    back = {t.tool: t for t in drift(arrays_from_rows(cur), arrays_from_rows(base)).tools}
    assert back["got_flaky"].verdict == "better"


def test_correction_is_across_tools() -> None:
    base, cur = _windows()
    rep = drift(arrays_from_rows(base), arrays_from_rows(cur), correction="bh")
    tests = [t.success for t in rep.tools if t.success is not None]
    raw = [t.pvalue for t in tests]
    assert [t.p_adjusted for t in tests] == pytest.approx(adjust(raw, "bh"))
    assert all(t.p_adjusted >= t.pvalue for t in tests)  # type: ignore[operator]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_drift_cli(tmp_path: Path, monkeypatch, capsys) -> None:
    base, cur = _windows()
    db = tmp_path / "p.db"
    with Store(db) as store:
        for r in base + cur:
            store.insert_probe(r)
    b = f"{_iso(T_BASE)}..{_iso(T_CUR)}"
    c = f"{_iso(T_CUR)}..{_iso(T_CUR + WEEK)}"
    code, out, err = run_cli(["drift", "--db", str(db), "--baseline", b, "--current", c,
                              "--json"], monkeypatch, capsys)
    assert code == 0, err
    data = json.loads(out)
    verdicts = {t["tool"]: t["verdict"] for t in data["tools"]}
    assert verdicts["got_flaky"] == "worse" and verdicts["steady_a"] == "stable"
    code, out, _ = run_cli(["drift", "--db", str(db), "--baseline", b, "--current", c,
                            "--fail-on-worse"], monkeypatch, capsys)
    assert code == 1 and "got_flaky" in out
    for args, needle, exit_code in [
        (["--baseline", "7d", "--current", c], "START..END", 2),
        # an empty window is not bad input: nothing to compare (exit 3)
        (["--baseline", b, "--current", "2031-01-01..2031-02-01"], "no probe rows", 3),
        (["--baseline", b, "--current", c, "--correction", "bonferroni"], "holm or bh", 2),
        (["--baseline", "x..y", "--current", c], "expected an ISO date", 2),
    ]:
        code, _, err = run_cli(["drift", "--db", str(db), *args], monkeypatch, capsys)
        assert needle in one_line_error(code, err, exit_code), args
