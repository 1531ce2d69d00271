"""Merge probe databases from several vantage points into one, idempotently.

Each probe row gets a `row_key` that names the call wherever it is stored: its original
run id, vantage, tool, round and start time (a database that was itself a merge keeps the
keys it has). The output has a unique index on it, so merging the same files again, in any
order or through an intermediate merge, adds nothing. Runs keep their ids; when two sources
hold different runs under one id (same id, other vantage or start), the later one is
renamed `<id>@<vantage>` and its rows follow it. Every row keeps its vantage.

The copy is SQL (`ATTACH` + `INSERT ... SELECT`), so a million rows take seconds.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel

from realprobe.errors import RealprobeError
from realprobe.store import META_TABLE, PROBE_RUNS_COLUMNS, PROBES_COLUMNS, Store

#: columns a source must have to be merged at all
REQUIRED_PROBE_COLUMNS = {"run_id", "tool", "api", "started_ts", "outcome", "vantage"}
ROW_KEY_SQL = (
    "{p}.run_id || '|' || COALESCE({p}.vantage, '') || '|' || {p}.tool || '|' || "
    "COALESCE({p}.round, '') || '|' || printf('%.6f', {p}.started_ts) || '|' || "
    "COALESCE({p}.source, '')"
)


class MergedSource(BaseModel):
    path: str
    runs_added: int
    runs_renamed: int
    rows_seen: int
    rows_added: int
    seconds: float


class MergeReport(BaseModel):
    output: str
    sources: list[MergedSource]
    rows_total: int

    @property
    def rows_added(self) -> int:
        return sum(s.rows_added for s in self.sources)


def _schema_version(conn: sqlite3.Connection, schema: str = "main") -> int:
    """The probes schema version of an attached file (as `store.schema_version` reads it)."""
    tables = {r[0] for r in conn.execute(f"SELECT name FROM {schema}.sqlite_master")}
    if META_TABLE in tables:
        row = conn.execute(
            f"SELECT value FROM {schema}.{META_TABLE} WHERE key = 'schema:probes'"
        ).fetchone()
        if row is not None:
            return int(row[0])
    return 1 if "probes" in tables else 0


def _columns(conn: sqlite3.Connection, table: str, schema: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA {schema}.table_info({table})")]


def check_source(path: Path, conn: sqlite3.Connection, ours: int) -> tuple[list[str], list[str]]:
    """The source's probe and run columns; refuses what cannot be merged."""
    tables = {r[0] for r in conn.execute("SELECT name FROM src.sqlite_master WHERE type='table'")}
    if "probes" not in tables or "probe_runs" not in tables:
        raise RealprobeError(f"{path}: not a realprobe probe database (no probes/probe_runs)")
    theirs = _schema_version(conn, "src")
    if theirs > ours:
        raise RealprobeError(
            f"{path}: schema version {theirs} is newer than this realprobe's ({ours}); "
            "upgrade realprobe on this machine first"
        )
    probe_cols = _columns(conn, "probes", "src")
    missing = REQUIRED_PROBE_COLUMNS - set(probe_cols)
    if missing:
        raise RealprobeError(
            f"{path}: incompatible schema: probes lacks {', '.join(sorted(missing))}"
        )
    return probe_cols, _columns(conn, "probe_runs", "src")


def _prepare_output(store: Store) -> None:
    cols = {c.name for c in store.db["probes"].columns}
    if "row_key" not in cols:
        store.conn.execute("ALTER TABLE probes ADD COLUMN row_key TEXT")
        store.conn.execute("UPDATE probes SET row_key = " + ROW_KEY_SQL.format(p="probes"))
    store.conn.execute(
        "CREATE UNIQUE INDEX IF NOT EXISTS probes_row_key ON probes(row_key)"
    )
    store.conn.commit()


def merge(
    sources: Sequence[str | Path],
    output: str | Path,
    *,
    on_source: Callable[[MergedSource], None] | None = None,
) -> MergeReport:
    """Merge `sources` into `output` (created if missing). Safe to run again."""
    out = Path(output).resolve()
    for s in sources:
        if Path(s).resolve() == out:
            raise RealprobeError(f"{s}: is the output; pass it only as -o")
        if not Path(s).is_file():
            raise RealprobeError(f"{s}: no such database file")
    results: list[MergedSource] = []
    with Store(out) as store:
        ours = _schema_version(store.conn)
        _prepare_output(store)
        for src in sources:
            merged = _merge_one(store, Path(src), ours)
            results.append(merged)
            if on_source is not None:
                on_source(merged)
        total = store.conn.execute("SELECT COUNT(*) FROM probes").fetchone()[0]
    return MergeReport(output=str(out), sources=results, rows_total=int(total))


def _merge_one(store: Store, path: Path, ours: int) -> MergedSource:
    t0 = time.perf_counter()
    conn = store.conn
    conn.execute("ATTACH DATABASE ? AS src", [f"file:{path}?mode=ro"])
    try:
        probe_cols, run_cols = check_source(path, conn, ours)
        with conn:
            runs_added, renamed = _merge_runs(conn, run_cols)
            seen, added = _merge_probes(conn, probe_cols)
    except sqlite3.DatabaseError as exc:
        raise RealprobeError(f"{path}: cannot merge ({exc})") from exc
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("DETACH DATABASE src")
    return MergedSource(
        path=str(path), runs_added=runs_added, runs_renamed=renamed, rows_seen=seen,
        rows_added=added, seconds=round(time.perf_counter() - t0, 3),
    )


def _merge_runs(conn: sqlite3.Connection, run_cols: list[str]) -> tuple[int, int]:
    """Copy runs; map colliding ids of different runs to `<id>@<vantage>`.

    Returns (runs added, runs renamed).
    """
    conn.execute("DROP TABLE IF EXISTS temp.run_map")
    conn.execute("CREATE TEMP TABLE run_map (src_id TEXT PRIMARY KEY, dst_id TEXT)")
    conn.execute(
        "INSERT INTO temp.run_map SELECT s.id, s.id || '@' || COALESCE(s.vantage, 'unknown') "
        "FROM src.probe_runs s JOIN main.probe_runs m ON m.id = s.id "
        "WHERE COALESCE(m.vantage, '') != COALESCE(s.vantage, '') "
        "OR COALESCE(m.started_ts, 0) != COALESCE(s.started_ts, 0)"
    )
    renamed = int(conn.execute("SELECT COUNT(*) FROM temp.run_map").fetchone()[0])
    cols = [c for c in run_cols if c in PROBE_RUNS_COLUMNS]
    select = ", ".join(
        "COALESCE(m.dst_id, s.id)" if c == "id" else f"s.{c}" for c in cols
    )
    before = conn.total_changes
    conn.execute(
        f"INSERT OR IGNORE INTO main.probe_runs ({', '.join(cols)}) SELECT {select} "
        "FROM src.probe_runs s LEFT JOIN temp.run_map m ON m.src_id = s.id"
    )
    return conn.total_changes - before, renamed


def _merge_probes(conn: sqlite3.Connection, probe_cols: list[str]) -> tuple[int, int]:
    cols = [c for c in probe_cols if c in PROBES_COLUMNS and c != "id"]
    computed = ROW_KEY_SQL.format(p="s")
    key = f"COALESCE(s.row_key, {computed})" if "row_key" in probe_cols else computed
    select = ", ".join(
        "COALESCE(m.dst_id, s.run_id)" if c == "run_id" else f"s.{c}" for c in cols
    )
    seen = int(conn.execute("SELECT COUNT(*) FROM src.probes").fetchone()[0])
    before = conn.total_changes
    conn.execute(
        f"INSERT OR IGNORE INTO main.probes ({', '.join(cols)}, row_key) "
        f"SELECT {select}, {key} FROM src.probes s "
        "LEFT JOIN temp.run_map m ON m.src_id = s.run_id ORDER BY s.id"
    )
    return seen, conn.total_changes - before
