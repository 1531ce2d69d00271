"""Uptime Kuma and Gatus histories, from databases in their exact schemas (Kuma's
`db/knex_init_db.js` and migrations, Gatus's `storage/store/sql/specific_sqlite.go`)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import realprobe
from tests.history_builders import GATUS_SCHEMA, go_time, kuma_db

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
CLI = [str(Path(sys.executable).parent / "realprobe")]


def _kuma(path: Path) -> Path:
    """Monitor 1 checked every 60 s for 2 h: down (503) from minute 30 to 40 (a pending beat
    first), a timeout outage from 60 to 65, paused from 80 to 100 (no beats), maintenance
    from 110 to 115; one heartbeat stored twice. Monitor 2: no heartbeats."""
    beats = []
    for i in range(121):
        t = T0 + 60 * i
        if 80 < i < 100:
            continue
        if i == 30:
            beat = (1, 2, "Request failed with status code 503", t, None)
        elif 30 < i < 40:
            beat = (1, 0, "Request failed with status code 503", t, None)
        elif 60 <= i < 65:
            beat = (1, 0, "timeout of 48000ms exceeded", t, None)
        elif 110 <= i < 115:
            beat = (1, 3, "Maintenance", t, None)
        else:
            beat = (1, 1, "200 - OK", t, 100 + i % 10)
        beats.append(beat)
    beats.append(beats[5])  # a duplicated heartbeat
    db = kuma_db(path, [(1, "Public API", "https://user:hunter22secret@api.example.org/x", 60),
                        (2, "Idle", "https://idle.example.org", 60)], beats)
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO stat_daily (monitor_id, timestamp, ping, up, down) "
                 "VALUES (1, ?, 105, 1400, 40)", [int(T0)])
    conn.commit()
    conn.close()
    return db


def test_a_kuma_database_gives_availability_outages_latency_and_its_own_figures(
        tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    rep = realprobe.import_history(f"kuma:{_kuma(tmp_path / 'kuma.db')}", db)
    assert rep.skipped == {"duplicate": 1}
    (mon,) = rep.monitors
    assert mon.checks == 121 - 19 and mon.cadence_s == 60 and mon.censored_intervals == 6
    assert "hunter22secret" not in (mon.url or "")
    m = realprobe.stats(db, kinds="imported").monitors[0]
    # observed: 120 minutes less 20 paused less 5 in maintenance; down: 10 + 5 minutes
    assert m.observed_s == pytest.approx(95 * 60)
    assert m.down_s == pytest.approx(15 * 60)
    assert m.availability == pytest.approx(80 / 95)
    assert m.outages.count == 2 and m.outages.durations_s == pytest.approx([600, 300])
    assert m.errors == {"SERVER_ERROR": pytest.approx(10 / 15), "TIMEOUT": pytest.approx(5 / 15)}
    assert m.latency_ms is not None and m.latency_ms.n == 121 - 19 - 15 - 5
    assert 100 <= m.latency_ms.p50 <= 109
    assert m.published == {"by": "Uptime Kuma stat_daily (heartbeats counted, not time)",
                           "up_beats": 1400, "down_beats": 40, "days": 1, "uptime": "97.22%"}
    again = realprobe.import_history(f"kuma:{tmp_path / 'kuma.db'}", db)
    assert again.checks_added == 0 and again.intervals_added == 0
    conn = sqlite3.connect(db)  # the rows as Datasette shows them: time text, kind, source
    first = conn.execute("SELECT at, kind, source, vantage, state, error_code FROM "
                         "imported_checks ORDER BY ts LIMIT 1").fetchone()
    down = conn.execute("SELECT http_status, error_code FROM imported_checks "
                        "WHERE state = 'down' ORDER BY ts LIMIT 1").fetchone()
    conn.close()
    assert first == ("2026-01-01T00:00:00.000Z", "imported", "kuma:kuma.db", "uptime-kuma",
                     "up", None)
    assert down == (503, "SERVER_ERROR")


def _gatus(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(GATUS_SCHEMA)
    conn.execute("INSERT INTO endpoints VALUES (1, 'core_api', 'api', 'core')")
    rows = []
    for i in range(100):
        t = T0 + 30 * i
        down = 40 <= i < 46
        connected = not (40 <= i < 43)
        status = 0 if not connected else (500 if down else 200)
        errors = "context deadline exceeded (Client.Timeout exceeded)" if not connected else ""
        rows.append((1, int(not down), errors, int(connected), status, "NOERROR", 0, 0,
                     "api.example.org", "192.0.2.1", (80 + i % 20) * 1_000_000, go_time(t)))
    conn.executemany("INSERT INTO endpoint_results (endpoint_id, success, errors, connected, "
                     "status, dns_rcode, certificate_expiration, domain_expiration, hostname, "
                     "ip, duration, timestamp) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    conn.execute("INSERT INTO endpoint_uptimes (endpoint_id, hour_unix_timestamp, "
                 "total_executions, successful_executions, total_response_time) "
                 "VALUES (1, ?, 120, 114, 10800)", [int(T0)])
    conn.commit()
    conn.close()
    return path


def test_a_gatus_store_gives_its_results_in_time(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    rep = realprobe.import_history(f"gatus:{_gatus(tmp_path / 'gatus.db')}", db)
    (mon,) = rep.monitors
    assert mon.monitor == "core/api" and mon.checks == 100 and mon.cadence_s == 30
    m = realprobe.stats(db, kinds="imported").monitors[0]
    assert m.observed_s == pytest.approx(99 * 30)
    assert m.down_s == pytest.approx(6 * 30)
    assert m.outages.count == 1 and m.outages.durations_s == pytest.approx([180])
    assert m.errors == {"TIMEOUT": 0.5, "SERVER_ERROR": 0.5}
    assert m.latency_ms is not None and m.latency_ms.n == 94
    assert m.published is not None and m.published["uptime"] == "95.00%"


def _not_kuma(p: Path) -> Path:
    conn = sqlite3.connect(p / "other.db")
    conn.execute("CREATE TABLE users (id INTEGER)")
    conn.commit()
    conn.close()
    return p / "other.db"


def _text(p: Path) -> Path:
    (p / "notes.db").write_text("not a database at all\n" * 100)
    return p / "notes.db"


@pytest.mark.parametrize("kind", ["kuma", "gatus"])
@pytest.mark.parametrize("make, says", [
    (_not_kuma, "not an {what} (no `{table}` table"),
    (_text, "not a readable {what}"),
    (lambda p: p / "missing.db", "no such file"),
])
def test_a_file_that_is_not_the_monitors_database_is_one_line(tmp_path: Path, kind: str,
                                                              make, says) -> None:
    src = make(tmp_path)
    what, table = (("Uptime Kuma database", "heartbeat") if kind == "kuma"
                   else ("Gatus store", "endpoints"))
    db = tmp_path / "h.db"
    out = subprocess.run([*CLI, "history", "import", f"{kind}:{src}", "--db", str(db)],
                         capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{kind}:{src}" in lines[0], lines
    assert says.format(what=what, table=table) in lines[0]
    assert not db.exists()


def test_kuma_times_as_numbers_are_read_too(tmp_path: Path) -> None:
    """A heartbeat time stored as epoch milliseconds or seconds (an export, another
    version's driver) is read as the same moment as Kuma's own text."""
    beats = [(1, 1, "200 - OK", T0 + 60 * i, 120) for i in range(10)]
    db = kuma_db(tmp_path / "kuma.db", [(1, "api", "https://api.example.org", 60)], beats)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE heartbeat SET time = ? WHERE id = 1", [int(T0 * 1000)])
    conn.execute("UPDATE heartbeat SET time = ? WHERE id = 2", [T0 + 60])
    conn.commit()
    conn.close()
    rep = realprobe.import_history(f"kuma:{db}", tmp_path / "h.db")
    assert rep.checks_read == 10 and not rep.skipped
    m = realprobe.stats(tmp_path / "h.db", kinds="imported").monitors[0]
    assert m.first == "2026-01-01T00:00:00Z" and m.observed_s == pytest.approx(9 * 60)
