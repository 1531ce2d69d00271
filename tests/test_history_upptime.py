"""Upptime histories, through the front door and the command: a status repository built with
exact commit dates, so every figure is computed by hand below."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

import realprobe
from tests.history_builders import site_records, upptime_repo

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
H, D = 3600.0, 86400.0
URL = "https://api.example.org/health"
CLI = [str(Path(sys.executable).parent / "realprobe")]


def _repo(tmp_path: Path) -> Path:
    api = site_records("api", URL, [
        (T0, "up", 200), (T0 + D, "up", 200),
        (T0 + D + 3 * H, "down", 503), (T0 + D + 3.5 * H, "up", 200),
        (T0 + 2 * D, "up", 200),
        # three days without the daily re-commit: censored
        (T0 + 5 * D, "up", 200), (T0 + 5 * D + H, "down", 0),
        (T0 + 5 * D + H + 1200, "up", 200), (T0 + 6 * D, "up", 200),
    ])
    residue = site_records("google", "https://www.google.com", [(T0 + 10, "up", 200)])
    removed = site_records("old-site", "https://old.example.org",
                           [(T0, "up", 200), (T0 + D, "down", 404)])
    odd = [(T0 + 6 * D + 10, "history/api.yml", "status: 5\ncode: [1]\n")]
    commits = sorted(api + residue + removed + odd)
    return upptime_repo(tmp_path / "status", {"Api": URL}, commits)


def test_an_upptime_history_gives_the_hand_computed_figures(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    rep = realprobe.import_history(f"upptime:{_repo(tmp_path)}", db)
    assert {m.monitor for m in rep.monitors} == {"api", "old-site"}
    assert rep.skipped == {"template residue (the template's sites, not configured)": 1,
                           "record of the wrong types": 1}
    api = next(m for m in rep.monitors if m.monitor == "api")
    assert api.checks == 9 and api.censored_intervals == 1 and api.censored_s == 3 * D
    # implied at the configured 5 minutes between the records (never stored as rows):
    # 1d, 3h, 30m, 20h30m, then 1h, 20m, 22h40m over 300 s each
    assert api.implied_checks == 288 + 36 + 6 + 246 + 12 + 4 + 272

    stats = realprobe.stats(db, kinds="imported", tools="api")
    m = stats.monitors[0]
    assert m.kind == "imported" and m.source.startswith("upptime:example/status@")
    up, down = 3 * D - 3000, 3000.0  # days 1-2 and 6, less 30 and 20 minutes down
    assert m.observed_s == pytest.approx(3 * D) and m.censored_s == pytest.approx(3 * D)
    assert m.availability == pytest.approx(up / (up + down))
    lo, hi = m.availability_ci95
    assert lo < m.availability < hi
    assert m.outages.count == 2 and m.outages.censored == 0
    assert m.outages.durations_s == pytest.approx([1800, 1200])
    assert m.outages.longest_s == pytest.approx(1800)
    assert m.downtime_by_day_min == {"2026-01-02": 30.0, "2026-01-06": 20.0}
    assert m.errors == {"SERVER_ERROR": 0.5, "NETWORK_ERROR": 0.5}
    assert m.latency_ms is None and "one response time a day" in m.latency_note

    # a window: only what lies inside it
    day2 = realprobe.stats(db, kinds="imported", tools="api", since="2026-01-02",
                           until="2026-01-03").monitors[0]
    assert day2.observed_s == pytest.approx(D)
    assert day2.availability == pytest.approx(1 - 1800 / D)


def test_importing_again_adds_nothing_and_plain_stats_shows_none_of_it(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    repo = _repo(tmp_path)
    first = realprobe.import_history(f"upptime:{repo}", db)
    assert first.checks_added == first.checks_read > 0
    again = realprobe.import_history(f"upptime:{repo}", db)
    assert (again.checks_added, again.intervals_added) == (0, 0)
    dry = realprobe.import_history(f"upptime:{repo}", tmp_path / "none.db", dry_run=True)
    assert dry.checks_read == first.checks_read and not (tmp_path / "none.db").exists()
    cmd = [*CLI, "stats", "--db", str(db)]
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ,
                                                                  "COLUMNS": "200"})
    assert out.returncode != 0 and "api" not in out.stdout and "no probe rows" in out.stderr
    shown = subprocess.run([*cmd, "--kinds", "imported"], capture_output=True, text=True,
                           env={**os.environ, "COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    assert "IMPORTED HISTORY" in shown.stderr and "api" in shown.stdout


def _flapping(tmp_path: Path, seed: int) -> Path:
    """60 days of a site with outages of random length (10-90 minutes) about twice a day."""
    rng = random.Random(seed)
    events, t = [(T0, "up", 200)], T0
    while t < T0 + 60 * D:
        t += rng.expovariate(1 / (12 * H))
        events.append((t, "down", rng.choice([0, 502])))
        t += rng.uniform(600, 5400)
        events.append((t, "up", 200))
    return upptime_repo(tmp_path / "flap", {"Flap": URL}, site_records("flap", URL, events))


def test_the_profile_calibrated_from_an_import_reproduces_it_in_simulation(
        tmp_path: Path) -> None:
    from realprobe import FaultModel

    db = tmp_path / "h.db"
    realprobe.import_history(f"upptime:{_flapping(tmp_path, 3)}", db)
    seen = realprobe.stats(db, kinds="imported").monitors[0]
    profile = realprobe.calibrate(db, kinds="imported")
    source = profile.source["imported"]["flap"]
    assert source["monitor"].startswith("upptime:example/status#flap")
    spacing = source["spacing_s"]
    assert spacing == seen.cadence_s
    tool = profile.tools["flap"]
    assert tool.success_rate == pytest.approx(seen.availability, abs=1e-6)
    model = FaultModel(profile, seed=11)
    oks = [model.draw("flap").ok for _ in range(400_000)]
    runs, run = [], 0
    for ok in oks:
        if not ok:
            run += 1
        elif run:
            runs.append(run * spacing)
            run = 0
    simulated = sum(oks) / len(oks)
    lo, hi = seen.availability_ci95
    assert lo <= simulated <= hi
    mlo, mhi = seen.outages.mean_ci95
    assert mlo <= sum(runs) / len(runs) <= mhi


@pytest.mark.parametrize("make, says", [
    (lambda p: p / "missing", "no such folder"),
    (lambda p: (p / "file.txt").write_text("x") and p / "file.txt", "not a folder"),
    (lambda p: p, "not a git repository"),
    (lambda p: upptime_repo(p / "r", {"A": URL}, [(T0, "README.md", "hello\n")]),
     "no history/<site>.yml record"),
    (lambda p: upptime_repo(p / "r", {"A": URL}, [(T0, "history/a.yml", "[1, 2")]),
     "no usable history record (1 skipped: 1 record not valid YAML)"),
])
def test_a_bad_upptime_source_is_one_line_and_writes_nothing(tmp_path: Path, make, says) -> None:
    src = make(tmp_path)
    db = tmp_path / "h.db"
    out = subprocess.run([*CLI, "history", "import",
                          f"upptime:{src}", "--db", str(db)], capture_output=True, text=True)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and f"upptime:{src}" in lines[0]
    assert not db.exists()


def test_odd_records_are_skipped_and_counted(tmp_path: Path) -> None:
    """A record from the future, one going back in time, one of 100 KB and one whose status
    is no status: each skipped and counted; the rest imported."""
    from tests.history_builders import record

    good = site_records("api", URL, [(T0, "up", 200), (T0 + H, "down", 500),
                                     (T0 + 2 * H, "up", 200)])
    odd = [
        (T0 + 3 * H, "history/api.yml", record(URL, "down", 0, 1, 4_102_444_800.0, T0)),
        (T0 + 4 * H, "history/api.yml", record(URL, "up", 200, 1, T0 + 30, T0)),
        (T0 + 5 * H, "history/api.yml", "status: up\nnote: " + "x" * 100_000 + "\n"),
        (T0 + 6 * H, "history/api.yml", "status: sideways\ncode: 200\n"),
    ]
    repo = upptime_repo(tmp_path / "r", {"Api": URL}, good + odd)
    rep = realprobe.import_history(f"upptime:{repo}", tmp_path / "h.db")
    assert rep.skipped == {"future time": 1, "time going backwards": 1, "record over 64 KB": 1,
                           "record of the wrong types": 1}
    assert rep.checks_read == 3


def test_an_import_is_one_transaction(tmp_path: Path) -> None:
    """A failure while the rows are written leaves the database as it was."""
    import sqlite3

    db = tmp_path / "h.db"
    realprobe.import_history(f"upptime:{_repo(tmp_path)}", db)
    conn = sqlite3.connect(db)
    before = conn.execute("SELECT count(*) FROM imported_checks").fetchone()[0]
    conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON imported_intervals "
                 "BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    conn.commit()
    conn.close()
    flap = _flapping(tmp_path, 5)
    with pytest.raises(realprobe.RealprobeError, match="disk full"):
        realprobe.import_history(f"upptime:{flap}", db)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM imported_checks").fetchone()[0] == before
    assert conn.execute("SELECT count(*) FROM imported_monitors WHERE monitor = 'flap'"
                        ).fetchone()[0] == 0
    conn.close()


def test_times_go_through_the_one_grammar(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    rep = realprobe.import_history(f"upptime:{repo}", tmp_path / "h.db", since="2026-01-05",
                                   until="2026-01-06T12:00:00Z")
    api = next(m for m in rep.monitors if m.monitor == "api")
    assert api.first == "2026-01-06T00:00:00.000Z" and api.checks == 3
    out = subprocess.run([*CLI, "history", "import", f"upptime:{repo}", "--db",
                          str(tmp_path / "x.db"), "--since", "yesterday-ish"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "since" in out.stderr and not (tmp_path / "x.db").exists()


def test_history_calibrate_writes_a_profile_the_sandbox_serves(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    realprobe.import_history(f"upptime:{_repo(tmp_path)}", db)
    out = tmp_path / "imported.json"
    done = subprocess.run([*CLI, "history", "calibrate", "--db", str(db), "--monitors", "api",
                           "--spacing", "1m", "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "at a call spacing of 1m" in done.stderr
    profile = realprobe.load_profile(str(out))
    src = profile.source["imported"]["api"]
    assert src["spacing_s"] == 60 and src["source"].startswith("upptime:example/status@")
    tool = profile.tools["api"]
    assert profile.default == tool
    # outages of 30 and 20 minutes: runs of 25 one-minute calls on average
    assert tool.burst is not None and tool.burst.p_fail_after_fail == pytest.approx(1 - 60 / 1500)
    with realprobe.sandbox_running(out) as url:
        result = realprobe.call("agify_age", {"name": "michael"},
                                target=realprobe.options(sandbox=url))
    assert result.ok, result.error  # seed 0: the first draw at 98.8% success


def test_settings_over_the_limit_are_refused_by_their_size(tmp_path: Path) -> None:
    huge = "sites:\n" + "  - name: x\n    url: https://x.example.org\n" * 60_000
    repo = upptime_repo(tmp_path / "r", {"A": URL}, [
        (T0, ".upptimerc.yml", huge), *site_records("a", URL, [(T0 + 60, "up", 200)])])
    out = subprocess.run([*CLI, "history", "import", f"upptime:{repo}", "--db",
                          str(tmp_path / "h.db")], capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert ".upptimerc.yml is over the limit of 2,000,000 bytes" in out.stderr


def test_an_unknown_kind_of_source_is_one_line() -> None:
    out = subprocess.run([*CLI, "history", "import", "nagios:/var/log"], capture_output=True,
                         text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "source 'nagios:/var/log': expected upptime:PATH, kuma:FILE" in out.stderr
