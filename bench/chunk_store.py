"""The column-wise chunk store: what it costs the writer per row, and what it saves a reader.

- read: `load_probes` with the columns `stats` asks for, plus the provenance survey, over the
  1,000,000 live rows of bench/stats_1m_rows.py, from the chunks and through SQL alone (the
  path before chunks, and the one every older file takes), CPU in this process, best of
  --repeats; the two answers are compared to the last bit.
- seal: sealing those rows in one go (a file filled by a bulk import, or an older file).
- writer: --writes rows into two fresh files side by side, one with the chunk store
  (triggers, and sealing as the rows come) and one without (triggers dropped, no sealing),
  as users write: one committed row a call (`Store.insert_probe`, a prober) and --batch rows
  a call (`Store.insert_probes`, a merge). The files are written in alternating blocks, the
  CPU of each block this process' own, and the figure is the median of the blocks'
  differences per row (the difference of two whole runs moves with the neighbours); the
  sealing's own CPU per row is timed apart.

    python bench/chunk_store.py [--rows 1000000] [--writes 20000] [--batch 1000] [--save]
    python bench/chunk_store.py --rows 0      # the writer only
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
from benchlib import emit, load_average

import realprobe.chunks as chunks
from realprobe.probes import loading, provenance
from realprobe.probes.implicit import IMPLICIT_EXTRA
from realprobe.probes.loading import PHASE_EXTRA, load_probes
from realprobe.store import Store, open_db

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "chunk_store.json"
TMP = Path(tempfile.gettempdir()) / "realprobe-bench"
EXTRA = {**PHASE_EXTRA, **IMPLICIT_EXTRA}


def bench_db(rows: int) -> tuple[Path, float]:
    """The stats bench's database of `rows` live rows, sealed; (path, CPU s of sealing it
    now, 0 when it was sealed already)."""
    sys.path.insert(0, str(HERE))
    from stats_1m_rows import build, count_rows

    db = TMP / f"stats_{rows}_live.db"
    TMP.mkdir(exist_ok=True)
    if count_rows(db) != rows // 30 * 30:
        build(db, rows, 30, "live", seal=False)
    with Store(db) as store:  # sealed from scratch, as a file filled by other means is
        with store.conn:
            store.conn.execute(f"DELETE FROM {chunks.CHUNKS}")
        t = time.process_time()
        store.seal()
        return db, time.process_time() - t


def _read(db: Path) -> tuple[Any, Any]:
    return load_probes(open_db(db), kinds=["live"], extra=EXTRA), provenance.survey(open_db(db))


def read_cpu(db: Path, repeats: int) -> dict[str, Any]:
    """CPU of the reader's read and survey, from chunks and through SQL alone, alternating."""
    by_chunks, by_sql = [], []
    answers: dict[str, Any] = {}
    real_read, real_survey = loading._by_chunks, provenance._by_chunks
    for _ in range(repeats):
        for name, times in (("chunks", by_chunks), ("sql", by_sql)):
            if name == "sql":
                loading._by_chunks = lambda *a, **k: None  # type: ignore[assignment]
                provenance._by_chunks = lambda *a, **k: None  # type: ignore[assignment]
            try:
                t = time.process_time()
                answers[name] = _read(db)
                times.append(time.process_time() - t)
            finally:
                loading._by_chunks, provenance._by_chunks = real_read, real_survey
    (a, ga), (b, gb) = answers["chunks"], answers["sql"]
    same = ga == gb and a.tools == b.tools and all(
        np.array_equal(getattr(a, n), getattr(b, n), equal_nan=True)
        and getattr(a, n).dtype == getattr(b, n).dtype
        for n in ("bounds", "ts", "latency_ms", "code", "timeout_s")
    ) and a.extra.keys() == b.extra.keys() and all(
        np.array_equal(a.extra[k], b.extra[k], equal_nan=True) for k in a.extra)
    return {"read_and_survey_cpu_s_chunks": round(min(by_chunks), 4),
            "read_and_survey_cpu_s_sql": round(min(by_sql), 4),
            "read_ratio_sql_to_chunks": round(min(by_sql) / min(by_chunks), 1),
            "identical": bool(same)}


def _row(i: int, t0: float) -> dict[str, Any]:
    ok = i % 17 != 0
    return {"run_id": "bench", "tool": f"tool_{i % 30}", "api": "bench", "round": i // 30,
            "started_at": "", "started_ts": t0 + 0.01 * i, "latency_ms": 100.0 + i % 97,
            "outcome": "ok" if ok else "error", "error_code": None if ok else "SERVER_ERROR",
            "timeout_s": 10.0, "vantage": "bench", "source": "probe", "target_kind": "live",
            "target": "live", "ttfb_ms": 80.0 if ok else None, "transfer_ms": 5.0 if ok else None,
            "new_connection": int(i % 100 == 0)}


def _store(path: Path, chunked: bool, spent: list[float]) -> Store:
    """A fresh store with the chunk store (its sealing's CPU added to `spent`) or without
    (triggers dropped, nothing sealed)."""
    store = Store(path)
    if chunked:
        seal = store._seal_quietly

        def timed(most: int | None) -> None:
            t = time.process_time()
            seal(most)
            spent[0] += time.process_time() - t

        store._seal_quietly = timed  # type: ignore[method-assign]
    else:
        for name in chunks.TRIGGERS:
            store.conn.execute(f"DROP TRIGGER {name}")
        store._seal_quietly = lambda most: None  # type: ignore[method-assign]
    return store


def writer_cpu(n: int, batch: int, blocks: int = 40) -> dict[str, Any]:
    """CPU per row of the writer with and without the chunk store, as users write: one
    committed row a call (`insert_probe`, a prober) and `batch` rows a call (`insert_probes`,
    a merge). Two fresh files written side by side, in `blocks` alternating blocks (which one
    goes first alternating too), so the neighbours weigh on both alike; the CPU of each
    block is this process' own. The figure is the median of the blocks' differences."""
    out: dict[str, Any] = {"writes": n, "batch": batch, "blocks": blocks}
    with tempfile.TemporaryDirectory() as tmp:
        for how in ("one_row_a_call", "batched"):
            spent = [0.0]
            stores = {c: _store(Path(tmp) / f"{how}{int(c)}.db", c, spent) for c in (True, False)}
            t0 = time.time() - 3600
            per = n // blocks
            diffs, cpu = [], {True: 0.0, False: 0.0}
            for b in range(blocks):
                rows = [_row(i, t0) for i in range(b * per, (b + 1) * per)]
                took = {}
                for chunked in (True, False) if b % 2 else (False, True):
                    store = stores[chunked]
                    t = time.process_time()
                    if how == "batched":
                        for i in range(0, len(rows), batch):
                            store.insert_probes(rows[i:i + batch], origin="bench")
                    else:
                        for row in rows:
                            store.insert_probe(row)
                    took[chunked] = time.process_time() - t
                    cpu[chunked] += took[chunked]
                diffs.append((took[True] - took[False]) / per)
            sealed = stores[True].conn.execute(
                f"SELECT count(DISTINCT lo) FROM {chunks.CHUNKS}").fetchone()[0]
            for store in stores.values():
                store.close()
            diffs.sort()
            added = diffs[len(diffs) // 2]
            without = cpu[False] / (per * blocks)
            out[how] = {
                "cpu_us_per_row_with_chunks": round(1e6 * cpu[True] / (per * blocks), 1),
                "cpu_us_per_row_without": round(1e6 * without, 1),
                "added_cpu_us_per_row": round(1e6 * added, 1),
                "added_share": round(added / without, 3),
                "added_quartiles_us": [round(1e6 * diffs[len(diffs) // 4], 1),
                                       round(1e6 * diffs[3 * len(diffs) // 4], 1)],
                "sealing_cpu_us_per_row": round(1e6 * spent[0] / (per * blocks), 1),
                "chunks_after_writes": int(sealed),
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="0: the writer only")
    ap.add_argument("--writes", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--save", action="store_true", help="write bench/results/")
    args = ap.parse_args()
    before = load_average()
    out: dict[str, Any] = {"seal_rows_at": chunks.SEAL_ROWS, "chunk_rows": chunks.CHUNK_ROWS}
    if args.rows:
        db, seal_cpu = bench_db(args.rows)
        with closing(sqlite3.connect(db)) as conn:  # closed: an open file is read row-wise
            n = conn.execute("SELECT count(*) FROM probes").fetchone()[0]
            blobs = conn.execute(f"SELECT count(DISTINCT lo), sum(length(data)) FROM "
                                 f"{chunks.CHUNKS}").fetchone()
        out.update({
            "rows": n, "chunks": blobs[0], "chunk_bytes_per_row": round(blobs[1] / n, 1),
            **read_cpu(db, args.repeats),
            "seal_cpu_us_per_row": round(1e6 * seal_cpu / n, 2) if seal_cpu > 0.5 else None,
        })
    out["writer"] = writer_cpu(args.writes, args.batch)
    emit(out, args.save, RESULTS, before)


if __name__ == "__main__":
    main()
