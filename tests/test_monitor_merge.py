"""Merging vantage databases: idempotent, vantage kept, run ids unique, bad sources refused."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from monitor_helpers import write_rows

from realprobe import RealprobeError, Store
from realprobe import merge_databases as merge

T0 = 1_790_000_000.0


def vantage_dbs(tmp_path: Path) -> list[Path]:
    out = []
    for i, name in enumerate(("berlin", "tokyo", "ohio")):
        db = tmp_path / f"{name}.db"
        write_rows(db, "agify_age", "oxo" * (i + 2), vantage=name, run_id=f"{name}-1", t0=T0)
        write_rows(db, "catfact_fact", "oo", vantage=name, run_id=f"{name}-2", t0=T0 + 5)
        # the same run id on two vantages (e.g. a copied config): two different runs
        write_rows(db, "kanye_quote", "ox", vantage=name, run_id="nightly", t0=T0 + i)
        out.append(db)
    return out


def rows(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return sorted(conn.execute(
            "SELECT run_id, tool, vantage, round, started_ts, outcome, latency_ms FROM probes"
        ).fetchall())


def test_merging_twice_equals_merging_once(tmp_path: Path) -> None:
    sources = vantage_dbs(tmp_path)
    out = tmp_path / "all.db"
    first = merge(sources, out)
    expected = sum(len(rows(s)) for s in sources)
    assert first.rows_total == expected == first.rows_added
    once = rows(out)
    again = merge(sources, out)
    assert again.rows_added == 0 and rows(out) == once
    merge(list(reversed(sources)), out)
    assert rows(out) == once
    with sqlite3.connect(out) as conn:
        vantages = dict(conn.execute(
            "SELECT vantage, COUNT(*) FROM probes GROUP BY vantage").fetchall())
        run_ids = [r[0] for r in conn.execute("SELECT id FROM probe_runs")]
        nightly = conn.execute(
            "SELECT DISTINCT run_id, vantage FROM probes WHERE tool = 'kanye_quote'"
        ).fetchall()
    assert vantages == {"berlin": 10, "tokyo": 13, "ohio": 16}
    assert len(run_ids) == len(set(run_ids)) == 9
    assert len(nightly) == 3 and len({r for r, _ in nightly}) == 3  # renamed, kept apart


def test_a_merged_database_merges_into_another_without_duplicates(tmp_path: Path) -> None:
    a, b, c = vantage_dbs(tmp_path)
    ab = tmp_path / "ab.db"
    merge([a, b], ab)
    everything = tmp_path / "all.db"
    merge([a, b, c], everything)
    direct = rows(everything)
    merge([ab, c], everything)
    assert rows(everything) == direct
    via = tmp_path / "via.db"
    merge([ab, c], via)
    merge([a], via)
    assert len(rows(via)) == len(direct)


def test_incompatible_sources_are_refused_clearly(tmp_path: Path) -> None:
    good = vantage_dbs(tmp_path)[0]
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(RealprobeError, match="not a realprobe probe database"):
        merge([good, foreign], tmp_path / "out.db")
    newer = tmp_path / "newer.db"
    write_rows(newer, "agify_age", "o")
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE realprobe_meta SET value = '999' WHERE key = 'schema:probes'")
    with pytest.raises(RealprobeError, match="schema version 999 is newer"):
        merge([newer], tmp_path / "out2.db")
    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "merge", str(foreign), "-o",
         str(tmp_path / "o.db")],
        capture_output=True, text=True, timeout=60,
    )
    assert res.returncode == 2 and "not a realprobe probe database" in res.stderr
    assert "Traceback" not in res.stderr


def test_rows_written_after_a_merge_merge_again_once(tmp_path: Path) -> None:
    a = vantage_dbs(tmp_path)[0]
    out = tmp_path / "all.db"
    merge([a], out)
    write_rows(a, "agify_age", "oo", vantage="berlin", run_id="berlin-3", t0=T0 + 999)
    report = merge([a], out)
    assert report.rows_added == 2
    with Store(out) as store:
        assert store.integrity_ok()


def test_stats_by_vantage_compares_the_same_tool_across_networks(tmp_path: Path) -> None:
    import json

    out = tmp_path / "all.db"
    merge(vantage_dbs(tmp_path), out)
    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "stats", "--db", str(out), "--by", "vantage",
         "--since", "2026-09-01", "--until", "2027-01-01", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["by"] == "vantage" and set(data["vantages"]) == {"berlin", "tokyo", "ohio"}
    tokyo = {t["tool"]: t for t in data["vantages"]["tokyo"]["tools"]}
    assert tokyo["agify_age"]["success"]["n"] == 9  # "oxo" * 3
    table = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "stats", "--db", str(out), "--by", "vantage",
         "--since", "2026-09-01", "--until", "2027-01-01"],
        capture_output=True, text=True, timeout=120, env={**__import__("os").environ,
                                                          "COLUMNS": "200"},
    )
    assert table.returncode == 0 and "berlin" in table.stdout and "ohio" in table.stdout
    said = [ln.split(": Verdict at a 95% success threshold")[0] for ln in table.stdout.splitlines()
            if ": Verdict at a 95% success threshold" in ln]
    assert said == list(data["vantages"]), table.stdout  # each vantage's verdict, in order


def test_the_report_compares_vantages_and_shows_phases(tmp_path: Path) -> None:
    out = tmp_path / "all.db"
    merge(vantage_dbs(tmp_path), out)
    write_rows(out, "catfact_fact", "oooo", vantage="ohio", run_id="phased", t0=T0 + 50,
               extra={"dns_ms": 3.0, "connect_ms": 9.0, "tls_ms": 20.0, "ttfb_ms": 180.0,
                      "transfer_ms": 4.0, "new_connection": 1})
    report = tmp_path / "r.html"
    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "report", "--db", str(out), "-o", str(report),
         "--since", "2026-09-01", "--until", "2027-01-01"],
        capture_output=True, text=True, timeout=300,
    )
    assert res.returncode == 0, res.stderr
    html = report.read_text()
    assert "Vantage points side by side" in html and "tokyo" in html and "berlin" in html
    assert "Where the time goes" in html and "<td>180</td>" in html


def _with_generated(db: Path, table: str, column: str, expr: str) -> None:
    """`column` of `table` rebuilt as a stored generated column computing `expr`."""
    with sqlite3.connect(db) as conn:
        info = list(conn.execute(f"PRAGMA table_info({table})"))
        kept = ", ".join(f'"{c[1]}"' for c in info if c[1] != column)
        defs = ", ".join(f'"{c[1]}" {c[2]}' for c in info if c[1] != column)
        conn.execute(f"ALTER TABLE {table} RENAME TO old")
        conn.execute(f"CREATE TABLE {table} ({defs}, {column} GENERATED ALWAYS AS ({expr}) "
                     "STORED)")
        conn.execute(f"INSERT INTO {table} ({kept}) SELECT {kept} FROM old")
        conn.execute("DROP TABLE old")


@pytest.mark.parametrize(("table", "column", "expr", "added", "refused"), [
    ("probes", "run_id", "'r1'", 3, {}),  # a generated column's values merge like any
    ("probes", "source", "NULL", 3, {}),  # NULL: the column's default
    ("probes", "round", "99999999999999999999", 0, {"bad_number": 3}),  # past 64 bits
    ("probes", "latency_ms", "x'00ff'", 0, {"bad_number": 3}),
    ("probe_runs", "rounds", "99999999999999999999", 3, {}),  # the run is refused instead
])
def test_sources_with_generated_columns_merge_or_are_refused_per_row(
    tmp_path: Path, table: str, column: str, expr: str, added: int, refused: dict[str, int]
) -> None:
    src = tmp_path / "generated.db"
    write_rows(src, "agify_age", "oxo", vantage="x", run_id="r1", t0=T0)
    _with_generated(src, table, column, expr)
    source = merge([src], tmp_path / "out.db").sources[0]
    assert (source.rows_added, source.rows_refused) == (added, refused)
    assert source.runs_refused == ({"bad_number": 1} if table == "probe_runs" else {})
