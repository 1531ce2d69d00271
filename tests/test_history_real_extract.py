"""A real Upptime history (a small extract of manticoresoftware/upptime, ODbL 1.0: see
tests/fixtures/history/NOTICE.md), checked against a hand computation from its git log:
the commit subjects (🟥 down / 🟩 up) and commit times alone, not the YAML the importer reads."""

from __future__ import annotations

import subprocess
from itertools import pairwise
from pathlib import Path

import pytest

import realprobe

FIXTURE = Path(__file__).parent / "fixtures" / "history" / "manticore-upptime.fastimport"


def _clone(tmp_path: Path) -> Path:
    repo = tmp_path / "manticore"
    subprocess.run(["git", "init", "-q", "-b", "master", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet"],
                   input=FIXTURE.read_bytes(), check=True)
    return repo


def _by_hand(repo: Path, slug: str) -> tuple[float, list[float]]:
    """(share of time up, outage durations) from `git log` subjects and commit times: each
    record's state holds until the next record."""
    log = subprocess.run(["git", "-C", str(repo), "log", "--reverse", "--format=%ct %s", "--",
                          f"history/{slug}.yml"], capture_output=True, text=True, check=True)
    records = []
    for line in log.stdout.splitlines():
        ts, subject = line.split(" ", 1)
        if subject.startswith(("🟥", "🟩")):  # a human commit touching the file is no record
            records.append((int(ts), subject.startswith("🟥")))
    up = down = 0.0
    outages, start = [], None
    for (t, is_down), (t2, _) in pairwise(records):
        if is_down:
            down += t2 - t
            start = t if start is None else start
        elif start is not None:
            outages.append(t - start)
            start = None
        if not is_down:
            up += t2 - t
    return up / (up + down), outages


@pytest.mark.parametrize("slug", ["manual", "manual-dev"])
def test_a_real_upptime_history_matches_its_git_log(tmp_path: Path, slug: str) -> None:
    repo = _clone(tmp_path)
    db = tmp_path / "h.db"
    rep = realprobe.import_history(f"upptime:{repo}", db)
    assert rep.source.startswith("upptime:manticoresoftware/upptime@")
    m = realprobe.stats(db, kinds="imported", tools=slug).monitors[0]
    availability, outages = _by_hand(repo, slug)
    assert m.availability == pytest.approx(availability, abs=0.0005)
    assert m.outages.count == len(outages)
    assert m.outages.longest_s == pytest.approx(max(outages), rel=0.01)
    assert m.published is not None and m.published["by"].startswith("Upptime history/summary")
    assert m.published["uptime"] == {"manual": "99.62%", "manual-dev": "99.11%"}[slug]
    again = realprobe.import_history(f"upptime:{repo}", db)
    assert again.checks_added == 0 and again.intervals_added == 0


def test_the_monitors_own_figures_are_shown_beside_ours(tmp_path: Path) -> None:
    """Upptime published 36 minutes down on 18 August for `manual`; its git history holds
    four outages that day (13 + 36 + 9 + 9 minutes): both are shown, theirs labelled."""
    import os
    import sys

    repo = _clone(tmp_path)
    db = tmp_path / "h.db"
    realprobe.import_history(f"upptime:{repo}", db)
    cli = str(Path(sys.executable).parent / "realprobe")
    out = subprocess.run([cli, "stats", "--kinds", "imported", "--tools", "manual", "--db",
                          str(db)], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    assert "manual: down on 2 UTC days; worst 2026-08-18 66m (theirs 36m)" in out.stdout
    assert "99.62% (upptime)" in out.stdout and "IMPORTED HISTORY" in out.stderr


def _partial(src: Path, dest: Path, blob_filter: str) -> Path:
    """A partial clone of `src` (no network: a file:// clone) whose remote then points
    nowhere, so that a fetch of a missing object could only fail."""
    subprocess.run(["git", "clone", "-q", f"--filter={blob_filter}", "--no-checkout",
                    "--upload-pack=git -c uploadpack.allowFilter=true upload-pack",
                    f"file://{src}", str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "remote", "set-url", "origin",
                    "https://example.invalid/status.git"], check=True)
    return dest


def test_a_partial_clone_is_read_without_fetching(tmp_path: Path) -> None:
    src = _clone(tmp_path)
    small = _partial(src, tmp_path / "small", "blob:limit=100k")
    rep = realprobe.import_history(f"upptime:{small}", tmp_path / "h.db", dry_run=True)
    assert rep.checks_read == 54
    bare = _partial(src, tmp_path / "bare", "blob:none")
    with pytest.raises(realprobe.RealprobeError,
                       match=r"54 record missing from a partial clone \(clone with "
                             r"--filter=blob:limit=100k\)"):
        realprobe.import_history(f"upptime:{bare}", tmp_path / "h.db", dry_run=True)
