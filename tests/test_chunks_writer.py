"""The chunk store on the writer's side: a merged database leaves sealed, merging it again
keeps it sealed and counts only the probe rows it added (none), and after foreign writes
dropped chunks the writer seals the gaps again as it writes (only the gaps), so the next
`stats` reads column-wise again. Chunks of a few hundred rows (test_chunk_store's sizes)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from monitor_helpers import write_rows
from test_chunk_store import _both_quietly, _same, shrink

import realprobe.chunks as chunks
import realprobe.store
from realprobe import Store, merge_databases

T0 = 1_790_000_000.0


@pytest.fixture(autouse=True)
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    shrink(monkeypatch)


def _spans(db: Path) -> list[tuple[int, int]]:
    with closing(sqlite3.connect(db)) as conn:
        return [(c.lo, c.hi) for c in chunks.chunks(conn) or []]


def _unsealed(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        found = chunks.chunks(conn) or []
        return sum(conn.execute("SELECT count(*) FROM probes WHERE rowid BETWEEN ? AND ?",
                                [a, b]).fetchone()[0] for a, b in chunks.uncovered(found))


def _source(tmp_path: Path, name: str, n: int) -> Path:
    db = tmp_path / f"{name}.db"
    write_rows(db, "agify_age", "oox" * (n // 3), vantage=name, run_id=f"{name}-1", t0=T0,
               step_s=1.0)
    return db


def test_a_merged_database_leaves_sealed_and_merging_again_keeps_it(tmp_path: Path) -> None:
    sources = [_source(tmp_path, "berlin", 900), _source(tmp_path, "tokyo", 600)]
    out = tmp_path / "all.db"
    first = merge_databases(sources, out)
    assert first.rows_added == 1500
    sealed = _spans(out)
    assert sealed and _unsealed(out) < chunks.SEAL_ROWS  # at most a short tail
    again = merge_databases(sources, out)
    assert again.rows_added == 0  # probe rows only (the chunk rows a trigger drops are not)
    assert _spans(out) == sealed  # nothing dropped
    _same(*_both_quietly(out))


def test_the_writer_seals_the_gaps_foreign_writes_left_as_it_writes(tmp_path: Path) -> None:
    db = _source(tmp_path, "berlin", 1800)
    with Store(db) as store:
        store.seal()
    before = _spans(db)
    assert len(before) >= 3
    with closing(sqlite3.connect(db)) as conn, conn:  # a foreign UPDATE in every chunk
        for lo, _ in before:
            conn.execute("UPDATE probes SET latency_ms = 1.5 WHERE rowid = ?", [lo + 1])
    assert _spans(db) == []
    sealed_rows: list[int] = []
    real = chunks._seal_plan

    def counted(conn: sqlite3.Connection, found: list[chunks.Chunk] | None,
                most: int | None) -> int:
        sealed_rows.append(real(conn, found, most))
        return sealed_rows[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(chunks, "_seal_plan", counted)
        # a prober goes on writing (no run ends): each look seals a gap, one chunk at a time
        write_rows(db, "catfact_fact", "o" * (realprobe.store.SEAL_CHECK_ROWS * 8),
                   vantage="berlin", run_id="berlin-2", t0=T0 + 4000, step_s=1.0)
    after = _spans(db)  # every dropped chunk's rows sealed again (the last one grown)
    assert all(any(a <= lo and hi <= b for a, b in after) for lo, hi in before)
    assert max(sealed_rows) <= chunks.CHUNK_ROWS  # a chunk at a time, never the whole file
    _same(*_both_quietly(db))
