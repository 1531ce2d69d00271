"""The chunk store never disagrees with SQL, whatever was done to the file: a foreign
`UPDATE OR REPLACE` that moves an unsealed row onto a sealed row's key (SQLite deletes the
sealed row without a delete trigger), crafted chunk columns (a code past the known ones, an
infinite time, an `excluded` code or provenance key no writer makes, rowids out of range),
crafted heads, a trigger of ours replaced by one doing nothing, another trigger that keeps
chunks from being dropped. Each time the readers give SQL's answer, never a traceback."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_chunk_store import _both_quietly, _same, build, shrink

import realprobe.chunks as chunks
from realprobe import Store


@pytest.fixture()
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """test_chunk_store's file: several chunks, gaps, an unsealed tail."""
    shrink(monkeypatch)
    return build(tmp_path)


def _first_chunk(conn: sqlite3.Connection) -> tuple[int, int]:
    lo, hi = conn.execute(f"SELECT lo, hi FROM {chunks.CHUNKS} WHERE name = 'head' "
                          "ORDER BY lo LIMIT 1").fetchone()
    return int(lo), int(hi)


def _craft(db: Path, name: str, change: Callable[[np.ndarray], None]) -> None:
    """Rewrite column `name` of the first chunk with `change` applied to its values."""
    with closing(sqlite3.connect(db)) as conn, conn:
        lo, _ = _first_chunk(conn)
        found = [c for c in chunks.chunks(conn) or [] if c.lo == lo]
        (data,) = conn.execute(f"SELECT data FROM {chunks.CHUNKS} WHERE lo = ? AND name = ?",
                               [lo, name]).fetchone()
        values = chunks.dense(chunks.decode(data, chunks.COLUMNS[name][1], found[0].n),
                              found[0].n).copy()
        change(values)
        conn.execute(f"UPDATE {chunks.CHUNKS} SET data = ? WHERE lo = ? AND name = ?",
                     [values.tobytes(), lo, name])


def _set(i: int, v: Any) -> Callable[[np.ndarray], None]:
    def change(values: np.ndarray) -> None:
        values[i] = v

    return change


CRAFTED: dict[str, tuple[str, Callable[[np.ndarray], None]]] = {
    "a code past the known ones": ("code", _set(3, 100)),
    "a negative code": ("code", _set(3, -5)),
    "an infinite time": ("ts", _set(2, np.inf)),
    "a time before every time": ("ts", _set(2, -np.inf)),
    "an infinite latency": ("latency", _set(1, np.inf)),
    "an excluded code no writer makes": ("excluded", _set(0, 7)),
    "a provenance key the file lacks": ("prov", _set(0, 9999)),
    "a rowid out of the chunk's range": ("rowid", _set(0, 1 << 40)),
}


@pytest.mark.parametrize("case", CRAFTED)
def test_a_crafted_column_is_read_the_sql_way(db: Path, case: str) -> None:
    name, change = CRAFTED[case]
    _craft(db, name, change)
    _same(*_both_quietly(db))


@pytest.mark.parametrize("head", [
    {"toc": [[1, 10**9]], "groups": []},  # more rows than the chunk spans
    {"toc": [[1, 5]], "groups": [[1, 1, 0, 5, 0.0, float("inf")]]},  # an infinite time
    {"toc": [[1, 5]], "groups": [[1, 1, 3, 5, 0.0, 1.0]]},  # an excluded code past 2
    {"toc": [[1, 5]], "groups": [[1, 1, 0, 50, 0.0, 1.0]]},  # more rows grouped than held
    {"toc": [[1, 0]], "groups": []},  # a tool of no rows
])
def test_a_crafted_head_is_read_the_sql_way(db: Path, head: dict[str, Any]) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        lo, _ = _first_chunk(conn)
        conn.execute(f"UPDATE {chunks.CHUNKS} SET data = ? WHERE lo = ? AND name = 'head'",
                     [json.dumps(head).encode(), lo])
    _same(*_both_quietly(db))


def test_update_or_replace_onto_a_sealed_rows_key_drops_its_chunk(db: Path) -> None:
    """An unsealed row given a sealed row's key by `UPDATE OR REPLACE`: SQLite deletes the
    sealed row without firing a delete trigger; the chunk holding it is dropped all the
    same, and the readers count what SQL counts."""
    with closing(sqlite3.connect(db)) as conn:
        lo, hi = _first_chunk(conn)
        top = conn.execute("SELECT max(rowid) FROM probes").fetchone()[0]
        with conn:
            conn.execute("UPDATE probes SET row_key = 'sealed' WHERE rowid = ?", [lo + 10])
        assert chunks.chunks(conn) and _first_chunk(conn) != (lo, hi)  # that update drops it
    with Store(db) as store:
        store.seal()
    with closing(sqlite3.connect(db)) as conn:
        assert _first_chunk(conn)[0] <= lo + 10  # sealed again, the keyed row inside
        with conn:
            conn.execute("UPDATE probes SET row_key = 'tail' WHERE rowid = ?", [top])
            before = conn.execute("SELECT count(*) FROM probes").fetchone()[0]
            conn.execute("UPDATE OR REPLACE probes SET row_key = 'sealed' WHERE rowid = ?",
                         [top])
        assert conn.execute("SELECT count(*) FROM probes").fetchone()[0] == before - 1
    _same(*_both_quietly(db))


def test_a_trigger_of_ours_replaced_by_one_doing_nothing_is_not_trusted(db: Path) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(f"DROP TRIGGER {chunks.CHUNKS}_update")
        conn.execute(f"CREATE TRIGGER {chunks.CHUNKS}_update AFTER UPDATE ON probes "
                     "BEGIN SELECT 1; END")
        conn.execute("UPDATE probes SET latency_ms = 0.5 WHERE rowid = 5")
        assert chunks.chunks(conn) is None
    _same(*_both_quietly(db))
    with Store(db) as store:  # the writer puts its triggers back and seals again
        store.seal()
    with closing(sqlite3.connect(db)) as conn:
        assert chunks.chunks(conn)


def test_a_trigger_keeping_chunks_from_being_dropped_is_not_trusted(db: Path) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(f"CREATE TRIGGER keep BEFORE DELETE ON {chunks.CHUNKS} "
                     "BEGIN SELECT RAISE(IGNORE); END")
        conn.execute("UPDATE probes SET latency_ms = 0.5 WHERE rowid = 5")
        assert chunks.chunks(conn) is None
    _same(*_both_quietly(db))
