"""Imported histories never pool with realprobe's own probes: the readers of probe rows
(stats, calibrate, drift, report, the exporter) see none of them, and say where they are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import realprobe
from realprobe import open_db
from tests.history_builders import site_records, upptime_repo
from tests.probe_helpers import synthetic_rows

T0 = 1_767_225_600.0
CLI = [str(Path(sys.executable).parent / "realprobe")]
URL = "https://api.example.org/health"


@pytest.fixture
def both(tmp_path: Path) -> Path:
    """A database with 200 of realprobe's own probe rows and an imported history."""
    db = tmp_path / "both.db"
    with realprobe.Store(db) as store:
        store.insert_probes(synthetic_rows("agify_age", 200, seed=3), origin="test")
    repo = upptime_repo(tmp_path / "r", {"Api": URL}, site_records("api", URL, [
        (T0, "up", 200), (T0 + 3600, "down", 0), (T0 + 4800, "up", 200),
        (T0 + 86400, "up", 200)]))
    realprobe.import_history(f"upptime:{repo}", db)
    return db


def test_plain_stats_and_calibrate_read_only_their_own_rows(both: Path) -> None:
    own = realprobe.stats(both)
    assert [t.tool for t in own.tools] == ["agify_age"] and own.tools[0].success.n == 200
    assert own.provenance is not None and own.provenance.rows == 200
    profile = realprobe.calibrate(both)
    assert set(profile.tools) == {"agify_age"} and "imported" not in profile.source
    imported = realprobe.stats(both, kinds="imported")
    assert [m.monitor for m in imported.monitors] == ["api"]
    assert imported.kind == "imported" and imported.label.startswith("IMPORTED HISTORY")
    assert set(realprobe.calibrate(both, kinds="imported").tools) == {"api"}


def test_the_probe_readers_say_where_imported_histories_are(both: Path) -> None:
    for verb in (["drift", "--baseline", "2d..1d", "--current", "1d..now"], ["report"]):
        out = subprocess.run([*CLI, *verb, "--db", str(both), "--kinds", "imported"],
                             capture_output=True, text=True)
        assert out.returncode == 2
        assert "stats and calibrate with --kinds imported" in out.stderr
        assert len(out.stderr.splitlines()) == 1
    with pytest.raises(realprobe.BadArgument, match="never pool with"):
        realprobe.stats(both, kinds="live,imported")


def test_the_exporter_serves_none_of_it(both: Path) -> None:
    from realprobe.monitor.exporter import Exporter

    text = Exporter(open_db(both)).metrics().decode()
    assert 'tool="agify_age"' in text
    assert 'tool="api"' not in text and "imported" not in text
