"""The column-wise chunk store gives the readers exactly what SQL gives them, to the last bit,
and never a stale answer: a file with several chunks, gaps and an unsealed tail, read with
varied selections both ways; rows changed behind the store's back (plain sqlite3 UPDATE,
DELETE, INSERT inside a chunk); a writer committing in the middle of a read; an older file
without chunks."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import realprobe.chunks as chunks
from realprobe import Store, open_db
from realprobe.probes import loading, provenance
from realprobe.probes.implicit import IMPLICIT_EXTRA
from realprobe.probes.loading import PHASE_EXTRA, load_probes
from realprobe.store import META_TABLE, RowRefused

EXTRA = {**PHASE_EXTRA, **IMPLICIT_EXTRA}
NOW = time.time()
T0 = NOW - 86400.0
TOOLS = ["b_list", "a_get", "c_find", "é_unicode"]


def _rows(n: int, seed: int = 3) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        ok = rng.random() > 0.2
        row: dict[str, Any] = {
            "run_id": f"r{i // 500}", "tool": TOOLS[int(rng.integers(len(TOOLS)))],
            "api": "x", "started_at": "",
            # out of order, with ties: rows of a later rowid may start earlier
            "started_ts": T0 + float(int(rng.integers(0, 4000))) * 10.0,
            "latency_ms": float(rng.lognormal(5, 1)), "outcome": "ok" if ok else "error",
            "error_code": None if ok else ["TIMEOUT", "SERVER_ERROR", "WEIRD"][i % 3],
            "timeout_s": [10.0, 5.0, None][i % 3 if i % 7 == 0 else 0],
            "excluded": [0, 1, None][i % 3] if i % 11 == 0 else 0,
            "target_kind": ["live", "sandbox", "replay", None][i % 4] if i % 5 == 0 else "live",
            "target": "live" if i % 5 else f"t{i % 3}",
            "vantage": [None, "home", "cloud"][i % 3], "source": "probe" if i % 9 else "mcp",
            "ttfb_ms": float(rng.uniform(1, 50)) if ok else None,
            "new_connection": int(i % 13 == 0), "dns_ms": 3.5 if i % 13 == 0 else None,
            "implicit": "drift,stale" if i % 17 == 0 else None,
        }
        if i % 97 == 5:
            row["latency_ms"] = "fast"  # text where a number belongs
        if i % 89 == 7:
            row["started_ts"] = "yesterday"  # a start that is no time
        if i % 83 == 3:
            row["started_ts"] = NOW + 7 * 86400  # in the future: never selected
        rows.append(row)
    return rows


def _insert(conn: sqlite3.Connection, rows: list[dict[str, Any]]) -> None:
    cols = sorted({k for r in rows for k in r})
    with conn:
        conn.executemany(
            f"INSERT INTO probes ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})",
            [tuple(r.get(c) for c in cols) for r in rows])


def shrink(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of a few hundred rows, sealed every 64."""
    import realprobe.store

    monkeypatch.setattr(realprobe.store, "SEAL_CHECK_ROWS", 64)
    monkeypatch.setattr(chunks, "SEAL_ROWS", 64)
    monkeypatch.setattr(chunks, "CHUNK_ROWS", 512)


@pytest.fixture()
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    shrink(monkeypatch)


@pytest.fixture()
def db(tmp_path: Path, small: None) -> Path:
    return build(tmp_path)


def build(tmp_path: Path) -> Path:
    """Several chunks, odd rows left in gaps, and an unsealed tail (chunks `shrink`-sized)."""
    path = tmp_path / "p.db"
    Store(path).close()
    with closing(sqlite3.connect(path)) as conn:
        _insert(conn, _rows(3000))
        with conn:  # rows no chunk can hold: a blob for a label, excluded = 2, no tool
            conn.execute("UPDATE probes SET target = x'00' WHERE rowid = 700")
            conn.execute("UPDATE probes SET excluded = 2 WHERE rowid = 1400")
            conn.execute("UPDATE probes SET tool = NULL WHERE rowid = 2100")
    with Store(path) as store:
        assert store.seal() > 2500
    with closing(sqlite3.connect(path)) as conn:
        _insert(conn, _rows(40, seed=4))  # the tail
    return path


def _sql_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "sealed", lambda conn: None)  # no chunk store to use


def _both(db: Path, chunked: bool = True, **sel: Any) -> tuple[Any, Any]:
    """(from the chunks, through SQL alone) of the read and the survey; the chunk path must
    have answered (when `chunked`)."""
    answered = []
    real = loading._by_chunks

    def spy(*a: Any, **k: Any) -> Any:
        got = real(*a, **k)
        answered.append(got is not None)
        return got

    survey_args = {k: v for k, v in sel.items() if k in ("since", "until", "tools", "vantages")}
    count_args = {k: v for k, v in sel.items() if k in ("since", "until", "kinds", "vantages")}
    opened = open_db(db)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loading, "_by_chunks", spy)
        fast = (load_probes(opened, extra=EXTRA, **sel), provenance.survey(opened, **survey_args),
                loading.tool_counts(opened, **count_args))
    assert answered == [chunked]
    with pytest.MonkeyPatch.context() as mp:
        _sql_only(mp)
        slow = (load_probes(opened, extra=EXTRA, **sel), provenance.survey(opened, **survey_args),
                loading.tool_counts(opened, **count_args))
    return fast, slow


def _same(fast: Any, slow: Any) -> None:
    (a, *ga), (b, *gb) = fast, slow
    assert ga == gb  # the survey, the rows per tool
    assert a.tools == b.tools
    for name in ("bounds", "ts", "latency_ms", "code", "timeout_s"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), name  # every bit
    assert a.extra.keys() == b.extra.keys() == EXTRA.keys()
    for k in a.extra:
        assert a.extra[k].tobytes() == b.extra[k].tobytes(), k


SELECTIONS: list[dict[str, Any]] = [
    {},
    {"kinds": ["live"]},
    {"kinds": ["sandbox", "replay"]},
    {"kinds": []},
    {"kinds": ["live"], "vantages": ["home", ""]},
    {"since": T0 + 10_000.0, "until": T0 + 30_000.0},
    {"since": T0 + 20_000.0, "kinds": ["live"], "tools": ["a_get", "é_unicode"]},
    {"tools": ["nope"]},
    {"until": T0},
]


@pytest.mark.parametrize("sel", SELECTIONS)
def test_the_chunks_answer_what_sql_answers(db: Path, sel: dict[str, Any]) -> None:
    fast, slow = _both(db, **sel)
    _same(fast, slow)
    if not sel:
        assert len(fast[0]) > 2000 and len(fast[0].tools) == len(TOOLS) + 1  # + "None"
        with closing(sqlite3.connect(db)) as conn:
            assert conn.execute(f"SELECT count(DISTINCT lo) FROM {chunks.CHUNKS}").fetchone()[
                0] >= 5


def test_random_windows_and_filters_too(db: Path) -> None:
    rng = np.random.default_rng(11)
    for _ in range(12):
        a, b = sorted(rng.uniform(T0 - 1000, T0 + 41_000, 2).tolist())
        sel: dict[str, Any] = {"since": a, "until": b}
        if rng.random() < 0.5:
            sel["tools"] = [t for t in TOOLS if rng.random() < 0.6] or None
        if rng.random() < 0.5:
            sel["kinds"] = ["live"] if rng.random() < 0.7 else ["live", "sandbox"]
        if rng.random() < 0.3:
            sel["vantages"] = ["cloud"]
        _same(*_both(db, **sel))


def test_an_open_connection_reads_the_chunks_too(db: Path) -> None:
    with closing(sqlite3.connect(db)) as conn:
        fast = load_probes(conn, kinds=["live"], extra=EXTRA)
    with pytest.MonkeyPatch.context() as mp:
        _sql_only(mp)
        slow = load_probes(open_db(db), kinds=["live"], extra=EXTRA)
    _same((fast,), (slow,))


def _chunk_count(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute(
            f"SELECT count(DISTINCT lo) FROM {chunks.CHUNKS}").fetchone()[0])


@pytest.mark.parametrize("change", [
    "UPDATE probes SET latency_ms = 1.5, started_ts = started_ts + 1 WHERE rowid = 300",
    "UPDATE probes SET excluded = 1 WHERE rowid BETWEEN 600 AND 620",
    "UPDATE probes SET id = 99999 WHERE rowid = 900",
    "DELETE FROM probes WHERE rowid = 1200",
    "DELETE FROM probes WHERE tool = 'a_get'",
])
def test_a_foreign_change_drops_the_chunks_it_touches(db: Path, change: str) -> None:
    before = _chunk_count(db)
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(change)
    assert _chunk_count(db) < before
    _same(*_both(db, chunked=_chunk_count(db) > 0))
    with Store(db) as store:  # the writer seals the gap again
        store.seal()
    assert _chunk_count(db) > 0
    _same(*_both(db))


def test_an_insert_inside_a_chunk_drops_it(db: Path) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        row = conn.execute("SELECT * FROM probes WHERE rowid >= 1000 AND excluded = 0 AND "
                           "started_ts < ?  ORDER BY rowid LIMIT 1", [NOW]).fetchone()
        names = [d[1] for d in conn.execute("PRAGMA table_info(probes)")]
        conn.execute("DELETE FROM probes WHERE rowid = ?", [row[0]])
    with Store(db) as store:
        store.seal()  # sealed again, the missing rowid inside the chunk
    before = _chunk_count(db)
    with closing(sqlite3.connect(db)) as conn, conn:
        fresh = dict(zip(names, row, strict=True)) | {"latency_ms": 0.25, "row_key": "k"}
        conn.execute(f"INSERT INTO probes ({','.join(names)}) VALUES "
                     f"({','.join('?' * len(names))})", list(fresh.values()))
    assert _chunk_count(db) == before - 1
    fast, slow = _both(db)
    _same(fast, slow)
    assert 0.25 in fast[0].latency_ms


def test_a_foreign_replace_over_a_row_key_drops_its_chunk(db: Path) -> None:
    """INSERT OR REPLACE deletes the colliding row without firing the delete trigger."""
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE probes SET row_key = 'k800' WHERE rowid = 800")
    with Store(db) as store:
        store.seal()  # sealed again, the row with its key inside a chunk
    before = _chunk_count(db)
    with closing(sqlite3.connect(db)) as conn, conn:
        row = conn.execute("SELECT * FROM probes WHERE rowid = 800").fetchone()
        names = [d[1] for d in conn.execute("PRAGMA table_info(probes)")]
        fresh = dict(zip(names, row, strict=True)) | {"id": None, "latency_ms": 0.125}
        conn.execute(f"INSERT OR REPLACE INTO probes ({','.join(names)}) VALUES "
                     f"({','.join('?' * len(names))})", list(fresh.values()))
        assert conn.execute("SELECT count(*) FROM probes WHERE rowid = 800").fetchone()[0] == 0
    assert _chunk_count(db) == before - 1
    fast, slow = _both(db)
    _same(fast, slow)
    assert 0.125 in fast[0].latency_ms


@pytest.mark.parametrize("sql", [
    f"UPDATE {chunks.CHUNKS} SET data = CAST(? AS BLOB) WHERE name = 'head' AND lo = 1",
    f"UPDATE {chunks.KEYS} SET key = ? WHERE id = 1",
])
@pytest.mark.parametrize("bad", ["[" * 100_000, "not json", '{"toc": 1}', "x" * (2 << 20),
                                 '{"toc": [[999, 1]], "groups": [[999, 999, 0, 1, 0.0, 1.0]]}'])
def test_a_damaged_head_or_key_is_read_the_sql_way_and_sealed_again(
        db: Path, sql: str, bad: str) -> None:
    """A head or key no writer of ours made (deep, not JSON, another shape, huge) makes the
    readers take SQL's way with the same answer, never a traceback; the next writer makes the
    chunk store again from the rows."""
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(sql, [bad])
    _same(*_both(db, chunked=False))
    with Store(db) as store:
        store.seal()
    _same(*_both(db))


def test_a_damaged_column_is_read_the_sql_way(db: Path) -> None:
    """A column no writer of ours made is found while the chunks are read: the reader takes
    SQL's way (the same answer), never a traceback nor an error."""
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(f"UPDATE {chunks.CHUNKS} SET data = x'0102030405' WHERE name != 'head'")
    _same(*_both_quietly(db))


def _both_quietly(db: Path) -> tuple[Any, Any]:
    """(as the readers read, through SQL alone) of the read, the survey and the counts."""
    opened = open_db(db)

    def read() -> Any:
        return load_probes(opened, extra=EXTRA), provenance.survey(opened), \
            loading.tool_counts(opened)

    fast = read()
    with pytest.MonkeyPatch.context() as mp:
        _sql_only(mp)
        return fast, read()


def test_a_writer_committing_mid_read_changes_nothing_the_read_sees(db: Path) -> None:
    with pytest.MonkeyPatch.context() as mp:
        _sql_only(mp)
        before = load_probes(open_db(db), extra=EXTRA)
    real_keys = chunks.keys
    wrote = []

    def keys_then_write(conn: sqlite3.Connection, found: Any = None) -> Any:
        got = real_keys(conn, found)
        if not wrote:  # inside the reader's snapshot: another process's commit
            with closing(sqlite3.connect(db, timeout=30)) as other, other:
                other.execute("UPDATE probes SET latency_ms = 7 WHERE rowid < 2000")
                other.execute("DELETE FROM probes WHERE rowid BETWEEN 2500 AND 2600")
            wrote.append(True)
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(chunks, "keys", keys_then_write)
        during = load_probes(open_db(db), extra=EXTRA)
    assert wrote
    _same((during,), (before,))
    after = _both(db)[0][0]
    assert not np.array_equal(after.latency_ms, before.latency_ms, equal_nan=True)
    _same(*_both(db))


def test_the_writer_seals_as_it_inserts(tmp_path: Path, small: None) -> None:
    path = tmp_path / "w.db"
    with Store(path) as store:
        for row in _rows(1500, seed=9):
            with contextlib.suppress(RowRefused):  # the store refuses the odd ones
                store.insert_probe(row)
        assert _chunk_count(path) >= 2
    _same(*_both(path))


def test_a_runs_end_seals_what_is_left(tmp_path: Path, small: None) -> None:
    path = tmp_path / "r.db"
    Store(path).close()
    with closing(sqlite3.connect(path)) as conn:  # rows the store did not write itself
        _insert(conn, _rows(1000))
    assert _chunk_count(path) == 0
    with Store(path) as store:
        store.start_run({"id": "r", "started_ts": NOW - 600, "vantage": "v"})
        store.finish_run("r", {"status": "done", "ended_ts": NOW})
    assert _chunk_count(path) >= 2
    _same(*_both(path))


def test_an_older_file_is_read_through_sql_and_migrated_on_writing(db: Path) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:  # as the previous realprobe left it
        for name in chunks.TRIGGERS:
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute(f"DROP TABLE {chunks.CHUNKS}")
        conn.execute(f"DROP TABLE {chunks.KEYS}")
        conn.execute(f"UPDATE {META_TABLE} SET value = '6' WHERE key = 'schema:probes'")
    with closing(sqlite3.connect(db)) as conn:
        assert chunks.chunks(conn) is None
    with pytest.MonkeyPatch.context() as mp:
        _sql_only(mp)
        want = load_probes(open_db(db), extra=EXTRA), provenance.survey(open_db(db))
    _same((load_probes(open_db(db), extra=EXTRA), provenance.survey(open_db(db))), want)
    with Store(db) as store:
        assert store.schema_version() == chunks.SCHEMA_VERSION
        assert store.seal() > 2500
    _same(*_both(db))


def test_chunks_whose_triggers_are_gone_are_not_trusted(db: Path) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:  # e.g. a tool rebuilt the table
        conn.execute(f"DROP TRIGGER {next(iter(chunks.TRIGGERS))}")
        conn.execute("UPDATE probes SET latency_ms = 3 WHERE rowid = 10")
    with closing(sqlite3.connect(db)) as conn:
        assert chunks.chunks(conn) is None
    with pytest.MonkeyPatch.context() as mp:
        _sql_only(mp)
        want = load_probes(open_db(db), extra=EXTRA)
    _same((load_probes(open_db(db), extra=EXTRA),), (want,))
    Store(db).close()  # the writer starts over: chunks dropped, triggers back
    with closing(sqlite3.connect(db)) as conn:
        assert chunks.chunks(conn) == []


def test_a_sparse_column_keeps_every_bit() -> None:
    values = np.full(100, np.nan)
    values[[3, 50]] = [1.5, -0.0]
    blob = chunks.encode(values)
    assert len(blob) < values.nbytes
    back = chunks.dense(chunks.decode(blob, "f8", 100), 100)
    assert back.tobytes() == values.tobytes()
    dense = np.arange(100, dtype=np.float64)
    assert chunks.encode(dense) == dense.tobytes()
