"""One way to open the database: `open_db` resolves and checks a path and returns a handle
(`Database`); readers and writers take the handle, never a path.

Opening for reading changes nothing on disk (no file, no folder, no -wal/-shm, no new mtime)
until a front door asks for `.migrate()`; only the store connects to SQLite itself.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from probe_helpers import synthetic_rows
from test_provenance import OLD_PROBE_RUNS, OLD_PROBES

import realprobe
from realprobe import BadArgument, NoDatabase, Store, open_db

PACKAGE = Path(realprobe.__file__).resolve().parent


def _disk(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file and folder under `root`: (inode, mtime ns, size)."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.stat()
        out[str(path.relative_to(root))] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return out


def _rows_db(path: Path) -> Path:
    with Store(path) as store:
        for row in synthetic_rows("catfact_fact", 60, seed=3):
            store.insert_probe(row)
    return path


def _old_db(path: Path) -> Path:
    """A file of the schema before versions were kept (as an older realprobe left it)."""
    conn = sqlite3.connect(path)
    conn.execute(OLD_PROBE_RUNS)
    conn.execute(OLD_PROBES)
    conn.execute("INSERT INTO probe_runs (id, status) VALUES ('r', 'done')")
    conn.execute("INSERT INTO probes (run_id, tool, api, started_ts, outcome, latency_ms) "
                 "VALUES ('r', 'catfact_fact', 'catfact', 1790000000, 'ok', 120)")
    conn.commit()
    conn.close()
    return path


def _missing_file(tmp: Path) -> None:
    path = tmp / "none.db"
    handle = open_db(path)  # resolving for a writer: the file is the writer's to make
    with pytest.raises(NoDatabase):
        handle.read()
    with pytest.raises(NoDatabase):
        open_db(path, read=True)
    with pytest.raises(NoDatabase):
        realprobe.stats(path)


def _missing_folder(tmp: Path) -> None:
    path = tmp / "no-such-folder" / "p.db"
    with pytest.raises(BadArgument, match="does not exist"):
        open_db(path)
    with pytest.raises(NoDatabase):
        open_db(path, read=True)
    with pytest.raises(BadArgument, match="does not exist"):
        Store(path)


def _read_only_file(tmp: Path) -> None:
    path = tmp / "ro.db"
    handle = open_db(path, read=True)
    conn = handle.read()
    assert conn.execute("SELECT count(*) FROM probes").fetchone() == (60,)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        conn.execute("DELETE FROM probes")  # the reader's connection takes no write
    conn.close()
    assert realprobe.stats(path, kinds="live").tools[0].success.n == 60
    assert isinstance(handle.columnar, bool)


def _older_schema(tmp: Path) -> None:
    handle = open_db(tmp / "old.db", read=True)
    conn = handle.read()
    assert conn.execute("SELECT count(*) FROM probes").fetchone() == (1,)
    conn.close()


PREPARE: dict[str, Any] = {
    "missing file": lambda tmp: None,
    "missing folder": lambda tmp: None,
    "read-only file": lambda tmp: os.chmod(_rows_db(tmp / "ro.db"), 0o444),
    "older schema": lambda tmp: _old_db(tmp / "old.db"),
}
OPEN = {"missing file": _missing_file, "missing folder": _missing_folder,
        "read-only file": _read_only_file, "older schema": _older_schema}


@pytest.mark.parametrize("case", sorted(OPEN))
def test_opening_for_reading_changes_nothing_on_disk(tmp_path: Path, case: str) -> None:
    PREPARE[case](tmp_path)
    before = _disk(tmp_path)
    OPEN[case](tmp_path)
    assert _disk(tmp_path) == before  # no file, folder, -wal, -shm or new mtime


def test_an_older_file_is_migrated_only_when_asked(tmp_path: Path) -> None:
    handle = open_db(_old_db(tmp_path / "old.db"), read=True)
    before = _disk(tmp_path)
    handle.read().close()
    assert _disk(tmp_path) == before
    handle.migrate()
    conn = handle.read()
    version = conn.execute(
        "SELECT value FROM realprobe_meta WHERE key = 'schema:probes'").fetchone()
    kinds = conn.execute("SELECT DISTINCT target_kind FROM probes").fetchall()
    conn.close()
    assert int(version[0]) > 1 and kinds == [("live",)]
    assert _disk(tmp_path) != before


def test_the_default_is_worked_out_in_one_place(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REALPROBE_DB", str(tmp_path / "env.db"))
    assert open_db(None).path == tmp_path / "env.db"
    assert open_db(open_db(None)) == open_db(None)  # a handle is taken as it is
    assert not (tmp_path / "env.db").exists()


# -- invariants: one opener, readers take the handle -----------------------------------

#: module -> the reader functions (and classes) that take the database, and the parameter
READERS: dict[str, list[tuple[str, str]]] = {
    "realprobe.probes.loading": [("tool_counts", "db"), ("load_probes", "db"),
                                 ("load_mcp_failures", "db"), ("load_retry_after", "db"),
                                 ("read_by_tool", "db")],
    "realprobe.probes.phases": [("vantage_table", "db")],
    "realprobe.probes.provenance": [("survey", "db"), ("vantages_present", "db"),
                                    ("describe", "db"), ("empty_selection_error", "db")],
    "realprobe.probes.availability": [("imported_stats", "db")],

    "realprobe.probes.stats": [("stats_from_db", "db")],
    "realprobe.probes.calibrate": [("calibrate", "db")],
    "realprobe.probes.session": [("probe_session", "db")],
    "realprobe.report.build": [("several_vantages", "db"), ("side_tables", "db"),
                               ("build_report", "db")],
    "realprobe.monitor.alerts": [("evaluate", "db"), ("check", "db"), ("missing_rows", "db"),
                                 ("RoundChecks", "db")],
    "realprobe.monitor.merge": [("merge", "sources"), ("merge", "output")],
    "realprobe.monitor.aggregate": [("Aggregator", "db")],
    "realprobe.monitor.exporter": [("Exporter", "db")],
    "realprobe.monitor.blackbox": [("BlackboxProber", "db")],
    "realprobe.tasks.sweep": [("run_sweep", "db")],
    "realprobe.mcp.probing": [("probe_server", "db")],
    "realprobe.mcp.evaluation": [("store_run", "db"), ("evaluate_mcp", "db")],
    "realprobe.sandbox.proxy": [("store_ledger", "db")],
    "realprobe.api_rows": [("Rows", "db"), ("check_tools", "db")],
}


@pytest.mark.parametrize("module", sorted(READERS))
def test_readers_take_the_handle_not_a_path(module: str) -> None:
    mod = importlib.import_module(module)
    for name, param in READERS[module]:
        annotation = str(inspect.signature(getattr(mod, name)).parameters[param].annotation)
        assert "Database" in annotation, (module, name, param, annotation)
        assert not re.search(r"\b(str|Path)\b", annotation), (module, name, param, annotation)


def test_only_the_store_connects_to_sqlite() -> None:
    """sqlite3 and sqlite-utils connect in store.py alone; the columnar driver connects
    elsewhere only to the handle's own URI (`db.uri`)."""
    connect = re.compile(r"(sqlite3|adbc_driver_sqlite)\.connect\((?!db\.uri\))"
                         r"|sqlite_utils\.Database\(")
    found = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py")) if path.name != "store.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if connect.search(line)
    ]
    assert found == []


# -- the command line opens once and hands the handle on --------------------------------

#: `synthetic_rows` makes 60 calls a minute apart from 2026-09-21T14:13:20Z
READING_VERBS = {
    "stats": [],
    "report": [],
    "calibrate": [],
    "drift": ["--baseline", "2026-09-21T14:13Z..2026-09-21T14:43Z",
              "--current", "2026-09-21T14:43Z..2026-09-21T15:14Z"],
    "results": [],
}


@pytest.mark.parametrize("verb", sorted(READING_VERBS))
def test_a_reading_verb_resolves_the_database_once(tmp_path: Path, verb: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A command works the path out once; everything after takes the handle (`Database`)."""
    from cli_runner import invoke

    db = _rows_db(tmp_path / "p.db")
    real, paths = open_db, []

    def counting(db: Any, **kw: Any) -> realprobe.Database:
        if not isinstance(db, realprobe.Database):
            paths.append(db)
        return real(db, **kw)

    monkeypatch.setattr("realprobe.store.open_db", counting)  # where every caller looks it up
    result = invoke([verb, "--db", str(db), *READING_VERBS[verb]])
    if not isinstance(result.exception, SystemExit | None):  # read through, found no tasks
        assert (verb, str(result.exception)) == ("results", f"no task runs in {db}")
    assert paths == [str(db)] or paths == [db], (verb, paths, result.output)


def test_the_front_door_takes_a_handle(tmp_path: Path) -> None:
    handle = open_db(_rows_db(tmp_path / "p.db"), read=True)
    by_handle = realprobe.stats(db=handle)
    by_path = realprobe.stats(db=str(handle))
    assert [t.tool for t in by_handle.tools] == ["catfact_fact"]
    assert by_handle.tools == by_path.tools


def test_every_front_door_db_takes_a_handle() -> None:
    """Whatever a user passes as `db` (a path, or what `open_db` returned) every door takes."""
    doors = [name for name in realprobe.__all__ if inspect.isfunction(getattr(realprobe, name))
             and "db" in inspect.signature(getattr(realprobe, name)).parameters]
    assert len(doors) > 15, doors
    for name in doors:
        annotation = str(inspect.signature(getattr(realprobe, name)).parameters["db"].annotation)
        assert "Database" in annotation, (name, annotation)
