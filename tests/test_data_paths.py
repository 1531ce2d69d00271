"""One read path, one write path: any legal database path reads the same rows everywhere; the
alert rule's p95 is `stats`' p95; every row entering a database (insert or merge) passes the
same checks and is keyed by its content."""

from __future__ import annotations

import json
import math
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from monitor_helpers import write_rows

import realprobe
from realprobe import Store, open_db
from realprobe import merge_databases as merge
from realprobe.monitor.aggregate import Aggregator
from realprobe.monitor.alerts import AlertConfig, Rule, evaluate
from realprobe.store import RowRefused


def _files(root: Path) -> set[str]:
    """Every file under `root`, but a WAL database's own companions (-wal, -shm)."""
    return {
        str(p.relative_to(root)) for p in root.rglob("*")
        if not p.name.endswith(("-wal", "-shm"))
    }


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "realprobe.cli", *args], capture_output=True, text=True,
        timeout=120, cwd=cwd,
    )


@pytest.mark.parametrize("folder", ["a#b%c?d", "some#dir"])
def test_every_reader_reads_the_same_rows_under_any_folder_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str
) -> None:
    (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path)
    db = Path(folder) / "p.db"  # relative, as a user types it
    now = time.time()
    write_rows(db, "agify_age", "oxoooxoooo" * 3, t0=now - 3000, step_s=60)
    write_rows(db, "catfact_fact", "oooo" * 5, t0=now - 2400, step_s=60)
    before = _files(tmp_path)

    stats = realprobe.stats(db)
    assert sum(t.success.n for t in stats.tools) == 50
    assert realprobe.calibrate(db).tools.keys() == {"agify_age", "catfact_fact"}
    assert realprobe.build_report(db).stats.rows == 50
    realprobe.drift(db, baseline=(now - 3100, now - 1500), current=(now - 1500, now + 1))
    rule = Rule.model_validate({"kind": "success_below", "threshold": 0.99, "min_calls": 1})
    fired = evaluate(open_db(db), AlertConfig(rules=[rule]), now)
    assert [f.subject for f in fired] == ["agify_age"]
    agg = Aggregator(open_db(db))
    agg.refresh()
    assert agg.last_error is None and agg.rows_seen == 50
    assert _files(tmp_path) == before  # nothing created next to it, no stray empty file

    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [rule.model_dump(by_alias=True)]}))
    res = _cli("alert", "check", str(rules), "--db", str(db), "--dry-run", cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "agify_age" in res.stdout
    res = _cli("stats", "--db", str(db), "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert sum(t["success"]["n"] for t in json.loads(res.stdout)["tools"]) == 50
    res = _cli("report", "--db", str(db), "--format", "md", "-o", "r.md", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = merge([db], tmp_path / "all.db")
    assert out.rows_added == 50
    assert _files(tmp_path) - before == {"rules.json", "all.db", "r.md"}


def test_read_only_refuses_clearly_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(realprobe.RealprobeError, match="no database"):
        open_db(tmp_path / "x#y" / "p.db", read=True)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(realprobe.RealprobeError, match="not a readable"):
        open_db(junk).read()
    assert _files(tmp_path) == {"junk.db"}


# -- one p95 -----------------------------------------------------------------------------


def _slow_api_db(db: Path, now: float) -> float:
    """Calls whose latency often passes the 2 s deadline (TIMEOUT rows): `stats`' p95 comes
    from the censored fit. Returns the p95 the alert rule used to compute (nearest rank over
    the successes alone)."""
    rng = random.Random(7)
    oks = []
    with Store(db) as store:
        for i in range(300):
            lat = math.exp(rng.gauss(7.3, 0.6))
            ok = lat < 2000
            oks += [lat] if ok else []
            store.insert_probe({
                "run_id": "r", "tool": "slow_api", "api": "slow", "round": i,
                "started_ts": now - 3000 + i * 9, "latency_ms": lat if ok else 2000.0,
                "outcome": "ok" if ok else "error", "error_code": None if ok else "TIMEOUT",
                "timeout_s": 2.0, "vantage": "here",
            })
    oks.sort()
    return oks[math.ceil(0.95 * len(oks)) - 1]


def test_the_alert_rules_p95_is_the_p95_of_stats(tmp_path: Path) -> None:
    db, now = tmp_path / "p.db", time.time()
    old_p95 = _slow_api_db(db, now)
    stats = realprobe.stats(db, since=now - 3600, until=now + 1)
    p95 = stats.tools[0].latency.p95
    assert p95 is not None and p95 > old_p95 + 200
    threshold = (old_p95 + p95) / 2
    rule = Rule.model_validate({"kind": "p95_above", "threshold_ms": threshold, "window": "1h"})
    fired = evaluate(open_db(db), AlertConfig(rules=[rule]), now)
    assert len(fired) == 1 and fired[0].value == pytest.approx(p95, rel=1e-9)
    assert "censored fit" in fired[0].message
    from prometheus_client.parser import text_string_to_metric_families

    from realprobe.monitor.exporter import Exporter

    scraped = [
        s.value for f in text_string_to_metric_families(Exporter(open_db(db)).metrics().decode())
        for s in f.samples if s.name == "realprobe_latency_p95_seconds"
    ]
    assert scraped == [pytest.approx(p95 / 1000, rel=1e-9)]  # the exporter's p95 too


# -- one write path ------------------------------------------------------------------------


def _row(**over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "run_id": "r", "tool": "agify_age", "api": "agify", "round": 0,
        "started_ts": time.time() - 60, "latency_ms": 10.0, "outcome": "ok", "vantage": "v",
    }
    return {**row, **over}


@pytest.mark.parametrize(("over", "reason"), [
    ({"started_ts": time.time() + 86400 * 365 * 900}, "future_time"),
    ({"started_ts": 1e300}, "future_time"),
    ({"latency_ms": 10**400}, "bad_number"),
    ({"http_status": 10**30}, "bad_number"),  # past 64 bits: SQLite cannot store it
    ({"started_ts": 10**400}, "bad_time"),
    ({"started_ts": float("nan")}, "bad_time"),
    ({"started_ts": "yesterday"}, "bad_time"),
    ({"latency_ms": float("inf")}, "bad_number"),
    ({"outcome": "error", "error_code": "MADE_UP"}, "unknown_code"),
    ({"tool": "t" * 5000}, "too_large"),
    ({"target_kind": "elsewhere"}, "unknown_kind"),
])
def test_the_store_refuses_a_bad_row(tmp_path: Path, over: dict[str, object], reason: str
                                     ) -> None:
    with Store(tmp_path / "p.db") as store:
        with pytest.raises(RowRefused) as exc:
            store.insert_probe(_row(**over))
        assert exc.value.reason == reason
        assert store.conn.execute("SELECT COUNT(*) FROM probes").fetchone()[0] == 0


def test_the_same_call_stored_twice_is_one_row_and_detail_is_scrubbed_before_it_is_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-" + "Z" * 40
    monkeypatch.setenv("SOME_API_KEY", secret)
    row = _row(outcome="error", error_code="SERVER_ERROR", detail="x" * 480 + secret)
    with Store(tmp_path / "p.db") as store:
        assert store.insert_probe(row) is True
        assert store.insert_probe(dict(row, run_id="another")) is False
        (detail,) = store.conn.execute("SELECT detail FROM probes").fetchone()
    assert "ZZZZ" not in detail and len(detail) <= 500


def _raw_db(path: Path, rows: list[dict[str, object]], *, row_keys: list[str] | None = None
            ) -> None:
    """A database whose rows were written by something else (no checks on the way in)."""
    with Store(path) as store:
        store.start_run({"id": "r", "started_ts": time.time() - 600, "vantage": "v"})
        store.conn.execute("DROP INDEX probes_row_key")
        for i, row in enumerate(rows):
            keys = list(row) + (["row_key"] if row_keys else [])
            values = list(row.values()) + ([row_keys[i]] if row_keys else [])
            store.conn.execute(
                f"INSERT INTO probes ({', '.join(keys)}) VALUES ({', '.join('?' * len(keys))})",
                values,
            )
        store.conn.commit()


def test_merge_quarantines_what_the_store_refuses_and_says_so_per_kind(tmp_path: Path) -> None:
    src = tmp_path / "hostile.db"
    good = [_row(round=i, started_ts=time.time() - 600 + i) for i in range(5)]
    bad = [
        _row(round=90, started_ts=32503680000.0),  # the year 3000
        _row(round=91, started_ts=32503680001.0),
        _row(round=92, started_ts="soon"),
        _row(round=93, latency_ms=float("inf")),
        _row(round=94, outcome="error", error_code="X" * 50),
    ]
    _raw_db(src, good + bad)
    res = _cli("merge", str(src), "-o", str(tmp_path / "all.db"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if "refused" in ln]
    assert sorted(ln.split("(")[1].split(")")[0] for ln in lines) == [
        "bad_number", "bad_time", "future_time", "unknown_code",
    ]
    assert any("refused 2 rows (future_time)" in ln for ln in lines)
    with sqlite3.connect(tmp_path / "all.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM probes").fetchone()[0] == 5
        assert conn.execute("SELECT COUNT(*) FROM probes_quarantine").fetchone()[0] == 5


def test_a_refused_row_is_quarantined_once_however_often_it_is_merged(tmp_path: Path) -> None:
    src = tmp_path / "hostile.db"
    bad = [_row(round=90, started_ts=32503680000.0), _row(round=93, latency_ms=float("inf"))]
    _raw_db(src, [_row(round=1, started_ts=time.time() - 60), *bad])
    copy = tmp_path / "same-file-other-name.db"
    copy.write_bytes(src.read_bytes())
    out = tmp_path / "all.db"
    for source in (src, src, copy):
        assert merge([source], out).sources[0].rows_refused == {
            "future_time": 1, "bad_number": 1}
    with sqlite3.connect(out) as conn:
        assert conn.execute("SELECT COUNT(*) FROM probes_quarantine").fetchone()[0] == 2


def test_a_source_cannot_shadow_another_by_claiming_its_keys(tmp_path: Path) -> None:
    honest, hostile = tmp_path / "honest.db", tmp_path / "hostile.db"
    t0 = time.time() - 3000
    write_rows(honest, "agify_age", "o" * 200, run_id="n1", vantage="berlin", t0=t0, step_s=1)
    # the keys the honest rows would have been given by run id, vantage, tool, round, time
    claimed = [
        f"n1|berlin|agify_age|{i}|{t0 + i:.6f}|probe" for i in range(200)
    ]
    fake = [_row(round=i, vantage="evil", started_ts=t0 + i, latency_ms=1.0) for i in range(200)]
    _raw_db(hostile, fake, row_keys=claimed)
    out = tmp_path / "all.db"
    merge([hostile], out)
    report = merge([honest], out)
    assert report.sources[0].rows_added == 200
    with sqlite3.connect(out) as conn:
        assert conn.execute(
            "SELECT COUNT(*) FROM probes WHERE vantage = 'berlin'").fetchone()[0] == 200


def test_rows_without_a_run_id_merge_once(tmp_path: Path) -> None:
    src = tmp_path / "src.db"
    _raw_db(src, [_row(run_id=None, round=i, started_ts=time.time() - 100 + i) for i in range(7)])
    out = tmp_path / "all.db"
    assert merge([src], out).rows_total == 7
    assert merge([src], out).rows_added == 0
    assert merge([src], out).rows_total == 7


def test_foreign_files_are_one_line_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(os.urandom(4096))
    versioned = tmp_path / "v.db"
    write_rows(versioned, "agify_age", "oo")
    with sqlite3.connect(versioned) as conn:
        conn.execute("UPDATE realprobe_meta SET value = 'v9-beta' WHERE key = 'schema:probes'")
    for bad, words in ((junk, "not a readable"), (versioned, "bad schema version")):
        res = _cli("merge", str(bad), "-o", str(tmp_path / "all.db"), cwd=tmp_path)
        assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
        assert words in res.stderr and len(res.stderr.strip().splitlines()) == 1


# -- one read path -------------------------------------------------------------------------


def test_one_selection_feeds_every_reader_and_target_is_a_deprecated_alias(
    tmp_path: Path,
) -> None:
    import warnings

    from realprobe import errors

    db, now = tmp_path / "p.db", time.time()
    write_rows(db, "agify_age", "oxoo" * 10, t0=now - 3000, step_s=60)
    write_rows(db, "catfact_fact", "oo" * 10, t0=now - 3000, step_s=60, run_id="s",
               extra={"target_kind": "sandbox"})
    sel = realprobe.rows(db, kinds="sandbox")
    assert sel.kinds == ["sandbox"] and len(sel.arrays()) == 20
    assert sel.stats().model_dump() == realprobe.stats(db, kinds="sandbox").model_dump()
    assert sel.calibrate().tools.keys() == {"catfact_fact"}
    assert realprobe.rows(db).kinds == ["live"]  # live first when the window holds any
    half = now - 1800
    early, late = (realprobe.rows(db, until=half), realprobe.rows(db, since=half))
    assert [t.tool for t in early.drift(late).tools] == ["agify_age"]

    errors._RENAMED.discard("target")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = realprobe.stats(db, target="sandbox")
        realprobe.stats(db, target="sandbox")
    assert old.model_dump() == sel.stats().model_dump()
    assert [w.category for w in caught] == [DeprecationWarning]  # once
    assert "use kinds=" in str(caught[0].message)
    with pytest.raises(realprobe.BadArgument, match="kinds 'nope'"):
        realprobe.rows(db, kinds="nope")
    with pytest.raises(realprobe.RealprobeError, match=r"(?i)did you mean"):
        realprobe.rows(db, tools="agify_agee")


def test_the_front_door_runs_no_sql() -> None:
    import inspect

    import realprobe.api as front
    import realprobe.api_rows as selection

    for module in (front, selection):
        text = inspect.getsource(module)
        for word in ("SELECT ", "execute(", "sqlite3", ".read("):
            assert word not in text, (module.__name__, word)


def test_a_run_claimed_by_another_source_cannot_take_back_the_honest_rows(
    tmp_path: Path,
) -> None:
    honest, hostile = tmp_path / "honest.db", tmp_path / "hostile.db"
    t0 = time.time() - 1200
    write_rows(honest, "agify_age", "o" * 30, run_id="n1", vantage="berlin", t0=t0)
    with Store(honest) as store:
        run = store.run("n1")
    with Store(hostile) as store:  # the same run, claimed, and marked excluded
        store.start_run({**run, "excluded": 1, "status": "local_network_failure"})
    out = tmp_path / "all.db"
    merge([hostile, honest], out)
    agg = Aggregator(open_db(out))
    agg.refresh()
    agg.refresh()
    assert agg.rows_seen == 30
    assert sum(s.window(t0 - 60)[0] for s in agg.series.values()) == 30


def test_a_database_named_like_a_uri_is_that_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite reads a name starting `file:` as a URI: the writer opens it by an escaped URI
    like the readers, so runs land in that file and no `x.db` appears beside it."""
    monkeypatch.chdir(tmp_path)
    name = "file:x.db?mode=memory"
    realprobe.run_tasks(["pet_newsletter"], profile="calm", db=name)
    assert realprobe.task_results(name)["runs"] == 1
    assert {p.name for p in tmp_path.iterdir()} <= {name, f"{name}-wal", f"{name}-shm"}


def test_merge_checks_runs_like_rows(tmp_path: Path) -> None:
    """A run is a row too: an id or vantage of megabytes, an unknown status, a start that is
    no time are refused (counted, one line per kind), the honest run beside them is kept."""
    src = tmp_path / "hostile.db"
    _raw_db(src, [_row(round=1, started_ts=time.time() - 60)])
    with sqlite3.connect(src) as conn:
        for rid, over in (("big", {"vantage": "V" * 100_000}), ("odd", {"status": "weird"}),
                          ("soon", {"started_ts": "soon"}), ("R" * 300_000, {})):
            cols = {"id": rid, "started_ts": time.time() - 30, "vantage": "v", **over}
            conn.execute(f"INSERT INTO probe_runs ({', '.join(cols)}) "
                         f"VALUES ({', '.join('?' * len(cols))})", list(cols.values()))
    out = tmp_path / "all.db"
    report = merge([src], out)
    assert report.sources[0].runs_refused == {"too_large": 2, "unknown_status": 1,
                                              "bad_time": 1}
    with sqlite3.connect(out) as conn:
        assert [r[0] for r in conn.execute("SELECT id FROM probe_runs")] == ["r"]
    res = _cli("merge", str(src), "-o", str(tmp_path / "cli.db"), cwd=tmp_path)
    assert res.returncode == 0 and "refused 2 runs (too_large)" in res.stderr, res.stderr
