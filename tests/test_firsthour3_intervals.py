"""One interval for the same rows whatever the selection, and verdicts that lead with the
worst: `stats`, `stats --tools X`, `alert check` and /status quote the same interval for a
tool that borrows the other tools' burst chain, and the note names what it borrowed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from monitor_helpers import write_rows

from realprobe import api, open_db
from realprobe.monitor.exporter import Exporter
from realprobe.probes.stats import interval_text, mid_p, verdict, wilson

#: few failures, none in a row: too few pairs after a failure for a chain of its own
SPARSE = "ooooxoooooooxooooooo" * 2
#: long outages: a chain of their own, which the sparse tool borrows
BURSTY = "ooooxxxxxxxxoooooooo" * 2


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("iv") / "p.db"
    t0 = time.time() - 600
    write_rows(path, "agify_age", SPARSE, t0=t0)
    write_rows(path, "catfact_fact", BURSTY, run_id="r2", t0=t0)
    write_rows(path, "dogceo_random", BURSTY[::-1], run_id="r3", t0=t0)
    write_rows(path, "kanye_quote", "x" * 8 + "o" * 2, run_id="r4", t0=t0)
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "realprobe.cli", *args],
                          capture_output=True, text=True, timeout=120)


def _stats_interval(db: Path, *more: str) -> tuple[list[float], str | None]:
    res = _cli("stats", "--db", str(db), "--json", *more)
    assert res.returncode == 0, res.stderr
    tool = next(t for t in json.loads(res.stdout)["tools"] if t["tool"] == "agify_age")
    return tool["success"]["burst_adjusted95"], tool["success"]["note"]


def test_one_tool_or_all_give_the_same_interval_everywhere(db: Path, tmp_path: Path) -> None:
    every, note = _stats_interval(db)
    alone, alone_note = _stats_interval(db, "--tools", "agify_age")
    assert alone == every and alone_note == note
    # the note says exactly what was borrowed, and from which tools
    assert note is not None and "pooled over the 4 tools with failures in these rows" in note
    assert "agify_age, catfact_fact, dogceo_random and kanye_quote" in note

    rules = tmp_path / "rules.toml"
    rules.write_text('[[rules]]\nkind = "success_below"\nthreshold = 0.99\nwindow = "1h"\n'
                     'tools = ["agify_age"]\nmin_calls = 1\n')
    alert = _cli("alert", "check", str(rules), "--db", str(db), "--dry-run", "--json")
    assert alert.returncode == 1, alert.stderr
    message = json.loads(alert.stdout)["events"][0]["message"]
    assert interval_text((every[0], every[1])) in message, message

    status = {s["tool"]: s for s in Exporter(open_db(db)).status_json()}["agify_age"]
    assert [status["lower"], status["upper"]] == pytest.approx(every, abs=1e-12)


def test_a_tool_alone_in_its_rows_borrows_nothing(tmp_path: Path) -> None:
    path = tmp_path / "one.db"
    write_rows(path, "agify_age", SPARSE)
    _, note = _stats_interval(path, "--tools", "agify_age")
    assert note is None or "borrow" not in note
    res = _cli("stats", "--db", str(path))
    assert res.returncode == 0 and "borrow" not in res.stdout + res.stderr


def test_the_verdict_names_the_tools_that_never_succeeded_first(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    t0 = time.time() - 600
    write_rows(path, "agify_age", "oxxxx", t0=t0)  # 20%: more calls, a tighter interval
    write_rows(path, "catfact_fact", "xxxxx", run_id="r2", t0=t0)  # 0%, one outage
    write_rows(path, "dogceo_random", "oxoxx", run_id="r3", t0=t0)
    rep = api.stats(path)
    says = verdict(rep)
    first = says.split("worst ", 1)[1].split(" ", 1)[0]
    assert first == "catfact_fact", says


def test_bounds_never_exclude_their_own_point() -> None:
    for n in range(1, 61):
        for k in range(n + 1):
            for lo, hi in (wilson(k, n), mid_p(k, n), wilson(k / 3.7, n / 3.7)):
                assert 0.0 <= lo <= k / n <= hi <= 1.0, (k, n, lo, hi)
    assert wilson(7, 7)[1] == 1.0 and mid_p(7, 7)[1] == 1.0 and wilson(0, 7)[0] == 0.0
    assert wilson(7 / 1.3, 7 / 1.3)[1] == 1.0


def test_a_small_n_p99_is_marked_a_lower_bound_on_every_surface(db: Path) -> None:
    from realprobe import build_report
    from realprobe.report import render_html, render_markdown

    res = _cli("stats", "--db", str(db), "--json")
    tool = json.loads(res.stdout)["tools"][0]
    assert tool["latency"]["percentiles"] == "empirical"
    assert tool["latency"]["p99_lower_bound"] is True  # 40 successes at most
    table = subprocess.run([sys.executable, "-m", "realprobe.cli", "stats", "--db", str(db)],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "COLUMNS": "160"}).stdout
    assert "/≥" in table and "≥ a lower bound: a p99 over fewer than 400 successes" in table
    data = build_report(db)
    assert "id='lower-bound'" in render_html(data, plots={})
    assert "≥" in render_markdown(data)
