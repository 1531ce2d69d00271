"""Merge probe databases from several vantage points into one, idempotently.

Every probe row enters the output through the store's one write path (`Store.insert_probes`):
it is checked like a row a prober inserts (finite numbers, a start not in the future, known
codes, kinds and sources, bounded text, secrets scrubbed), and keyed by its content; every
run by the same rules (`check_run_row`), a refused run left out and counted. A row the
store refuses is kept in the output's `probes_quarantine` table with its reason, and counted
per reason. Keys are computed from what a row holds, never taken from the source, so a file
that claims another file's keys cannot shadow its rows; merging the same files again, in any
order or through an intermediate merge, adds nothing (rows with no run id included), and
the output leaves sealed into the chunk store (`realprobe.chunks`), as a prober's file does.

Runs keep their ids; when two sources hold different runs under one id (same id, other vantage
or start), the later one is renamed `<id>@<vantage>` and its rows follow it. Every row keeps
its vantage. Sources are read through the one read-only connector (any legal path).
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from realprobe.errors import RealprobeError
from realprobe.secrets import scrub_row
from realprobe.store import (
    PROBE_RUNS_COLUMNS,
    PROBES_COLUMNS,
    SCHEMA_VERSION,
    Database,
    RowRefused,
    Store,
    check_run_row,
    schema_version,
)

#: columns a source must have to be merged at all
REQUIRED_PROBE_COLUMNS = {"run_id", "tool", "api", "started_ts", "outcome", "vantage"}
_BATCH = 5_000


class MergedSource(BaseModel):
    path: str
    runs_added: int
    runs_renamed: int
    rows_seen: int
    rows_added: int
    seconds: float
    #: rows the store refused (kept in the quarantine table), by reason
    rows_refused: dict[str, int] = Field(default_factory=dict)
    #: runs the store's rules refused (left out), by reason
    runs_refused: dict[str, int] = Field(default_factory=dict)


class MergeReport(BaseModel):
    output: str
    sources: list[MergedSource]
    rows_total: int

    @property
    def rows_added(self) -> int:
        return sum(s.rows_added for s in self.sources)

    def refused(self) -> dict[str, int]:
        """Refused rows of every source, by reason."""
        out: Counter[str] = Counter()
        for s in self.sources:
            out.update(s.rows_refused)
        return dict(out)


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """The table's columns, generated ones included (their values are data like any
    other; `table_info` would leave them out). Hidden columns of virtual tables are not."""
    return [r[1] for r in conn.execute(f"PRAGMA table_xinfo({table})") if r[6] != 1]


def check_source(path: Path, conn: sqlite3.Connection) -> tuple[list[str], list[str]]:
    """The source's probe and run columns; refuses what cannot be merged, in one line."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "probes" not in tables or "probe_runs" not in tables:
        raise RealprobeError(f"{path}: not a realprobe probe database (no probes/probe_runs)")
    try:
        theirs = schema_version(conn, "probes")
    except (TypeError, ValueError):
        raise RealprobeError(f"{path}: bad schema version; not a realprobe database this "
                             "version can merge") from None
    if theirs > SCHEMA_VERSION:
        raise RealprobeError(
            f"{path}: schema version {theirs} is newer than this realprobe's "
            f"({SCHEMA_VERSION}); upgrade realprobe on this machine first"
        )
    probe_cols = _columns(conn, "probes")
    missing = REQUIRED_PROBE_COLUMNS - set(probe_cols)
    if missing:
        raise RealprobeError(
            f"{path}: incompatible schema: probes lacks {', '.join(sorted(missing))}"
        )
    return probe_cols, _columns(conn, "probe_runs")


def merge(
    sources: Sequence[Database],
    output: Database,
    *,
    on_source: Callable[[MergedSource], None] | None = None,
) -> MergeReport:
    """Merge `sources` into `output` (created if missing). Safe to run again."""
    results: list[MergedSource] = []
    with output.write() as store:
        for src in sources:
            merged = _merge_one(store, src)
            results.append(merged)
            if on_source is not None:
                on_source(merged)
        store.seal()  # the output read column-wise at once (merging again adds, drops none)
        total = store.conn.execute("SELECT COUNT(*) FROM probes").fetchone()[0]
    return MergeReport(output=str(output.path.resolve()), sources=results, rows_total=int(total))


def _merge_one(store: Store, db: Database) -> MergedSource:
    t0 = time.perf_counter()
    db.migrate()  # an older schema migrated, runs of a killed process marked, as for a read
    path = db.path
    src = db.read(need=None)
    try:
        probe_cols, run_cols = check_source(path, src)
        runs_refused: dict[str, int] = {}
        renames, runs_added = _merge_runs(store, src, run_cols, runs_refused)
        ingest = store.insert_probes(_source_rows(src, probe_cols, renames), origin=str(path))
    except sqlite3.DatabaseError as exc:
        raise RealprobeError(f"{path}: cannot merge ({exc})") from exc
    finally:
        with contextlib.suppress(sqlite3.Error):
            src.close()
    return MergedSource(
        path=str(path), runs_added=runs_added, runs_renamed=len(renames),
        rows_seen=ingest.seen, rows_added=ingest.added, rows_refused=ingest.refused,
        runs_refused=runs_refused,
        seconds=round(time.perf_counter() - t0, 3),
    )


def _merge_runs(
    store: Store, src: sqlite3.Connection, run_cols: list[str], refused: dict[str, int]
) -> tuple[dict[str, str], int]:
    """Copy runs; a source run whose id names a different run here (other vantage or start)
    is renamed `<id>@<vantage>`; a run the store's rules refuse is counted in `refused`.
    Returns (renames, runs added)."""
    cols = [c for c in run_cols if c in PROBE_RUNS_COLUMNS]
    ours = {
        str(rid): (vantage or "", start or 0)
        for rid, vantage, start in store.conn.execute(
            "SELECT id, vantage, started_ts FROM probe_runs"
        )
    }
    renames: dict[str, str] = {}
    rows: list[list[Any]] = []
    for values in src.execute(f"SELECT {', '.join(cols)} FROM probe_runs"):
        try:  # checked like every row: a bad run is left out (its rows then name no run)
            run = check_run_row(scrub_row(dict(zip(cols, values, strict=True))))
        except RowRefused as exc:
            refused[exc.reason] = refused.get(exc.reason, 0) + 1
            continue
        rid = str(run.get("id"))
        here = ours.get(rid)
        if here is not None and here != (run.get("vantage") or "", run.get("started_ts") or 0):
            renames[rid] = run["id"] = f"{rid}@{run.get('vantage') or 'unknown'}"
        rows.append([run.get(c) for c in cols])
    sql = (
        f"INSERT OR IGNORE INTO probe_runs ({', '.join(cols)}) "
        f"VALUES ({', '.join('?' * len(cols))})"
    )
    with store.conn:
        before = store.conn.total_changes
        store.conn.executemany(sql, rows)
        return renames, store.conn.total_changes - before


def _source_rows(
    src: sqlite3.Connection, probe_cols: list[str], renames: dict[str, str]
) -> Iterator[dict[str, Any]]:
    """The source's rows as the store takes them: known columns only (its own ids and any
    key it claims left behind), run ids renamed like their runs."""
    cols = [c for c in probe_cols if c in PROBES_COLUMNS and c not in ("id", "row_key")]
    cur = src.execute(f"SELECT {', '.join(cols)} FROM probes ORDER BY id")
    while batch := cur.fetchmany(_BATCH):
        for values in batch:
            row = dict(zip(cols, values, strict=True))
            rid = row.get("run_id")
            if rid in renames:
                row["run_id"] = renames[rid]
            yield row
