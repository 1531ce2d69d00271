"""The column-wise reader against a straightforward reference: every row read as a Python
dict, the arrays built by `probe_helpers.arrays_from_rows`, the phase medians by
`statistics.median`. The seeded database has bursts of failures, hangs at the deadline,
excluded rows, text where a number belongs, two vantages and several days."""

from __future__ import annotations

import sqlite3
import statistics
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from probe_helpers import arrays_from_rows

import realprobe
from realprobe import ErrorCode, Store, open_db
from realprobe.probes.loading import ProbeArrays, load_probes
from realprobe.probes.stats import compute_stats

TOOLS = ("alpha_get", "beta_list", "gamma_find")
VANTAGES = ("home", "cloud")
PHASES = ("dns_ms", "connect_ms", "tls_ms", "ttfb_ms", "transfer_ms")


def _rows(seed: int = 7) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    start = time.time() - 4 * 86400
    rows: list[dict[str, Any]] = []
    for t, tool in enumerate(TOOLS):
        burst = 0
        for i in range(900):  # a call every 6 minutes for 3.75 days, per tool
            ts = start + 360.0 * i + 0.37 * t + 1e-3 * (i % 7)
            deadline = 5.0 if t == 2 else 10.0
            if burst == 0 and rng.random() < 0.03:
                burst = int(rng.integers(2, 9))  # failures come in runs
            row: dict[str, Any] = {
                "tool": tool, "api": tool.split("_")[0], "run_id": f"r{i // 100}",
                "round": i, "started_at": "", "started_ts": ts, "timeout_s": deadline,
                "target_kind": "live", "target": "live", "source": "probe",
                "vantage": VANTAGES[i % 2], "excluded": int(rng.random() < 0.02),
            }
            if burst:
                burst -= 1
                code = (ErrorCode.SERVER_ERROR, ErrorCode.TIMEOUT,
                        ErrorCode.RATE_LIMIT_ERROR)[int(rng.integers(3))]
                hang = code == ErrorCode.TIMEOUT
                row |= {"outcome": "error", "error_code": code.value,
                        "latency_ms": deadline * 1000 if hang else float(rng.lognormal(4, 1))}
            elif rng.random() < 0.04:  # a hang on its own: the deadline cut it off
                row |= {"outcome": "error", "error_code": ErrorCode.TIMEOUT.value,
                        "latency_ms": deadline * 1000}
            else:
                lat = float(rng.lognormal(5.5 + 0.2 * t + 0.3 * (i // 240), 0.6))
                new = i % 25 == 0
                row |= {
                    "outcome": "ok", "error_code": None, "latency_ms": lat,
                    "new_connection": int(new), "ttfb_ms": 0.7 * lat,
                    "transfer_ms": 0.1 * lat if i % 11 else None,
                    "dns_ms": float(rng.uniform(1, 9)) if new else None,
                    "connect_ms": float(rng.uniform(5, 30)) if new else None,
                    "tls_ms": float(rng.uniform(10, 60)) if new and t != 1 else None,
                    "implicit": "drift" if i % 97 == 0 else None,
                }
            if i == 400:  # a row written around the store's checks: text for a number
                row["latency_ms"] = "fast"
            rows.append(row)
    return rows


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    db = tmp_path_factory.mktemp("columnar") / "p.db"
    Store(db).close()
    rows = _rows()
    cols = sorted({k for r in rows for k in r})
    with closing(sqlite3.connect(db)) as conn, conn:  # closed, not left to the GC: an open
        conn.executemany(  # connection here would be one the reader must stay away from
            f"INSERT INTO probes ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})",
            [tuple(r.get(c) for c in cols) for r in rows],
        )
    return db, rows


def _reference(rows: list[dict[str, Any]]) -> ProbeArrays:
    clean = [r | {"latency_ms": r["latency_ms"] if isinstance(r["latency_ms"], float) else None}
             for r in rows]
    return arrays_from_rows(clean)


def _phases(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for tool in sorted({r["tool"] for r in rows}):
        mine = [r for r in rows if r["tool"] == tool and not r["excluded"]
                and r["outcome"] == "ok" and r.get("ttfb_ms") is not None]
        if not mine:
            continue
        med: dict[str, Any] = {}
        for p in PHASES:
            pool = [r for r in mine if r["new_connection"]] if p in PHASES[:3] else mine
            vals = [r[p] for r in pool if r.get(p) is not None]
            med[p] = round(statistics.median(vals), 2) if vals else None
        out[tool] = med
    return out


@pytest.mark.parametrize("vantage", [None, "cloud"])
def test_stats_equal_the_row_by_row_reference(
    seeded: tuple[Path, list[dict[str, Any]]], vantage: str | None
) -> None:
    db, rows = seeded
    mine = [r for r in rows if vantage is None or r["vantage"] == vantage]
    fast = realprobe.stats(db, kinds="live", vantage=vantage)
    ref = compute_stats(_reference(mine))
    assert ref.rows == fast.rows < len(mine)  # excluded rows left out
    assert all(t.burst.rho is not None and t.burst.rho > 0.1 for t in ref.tools)  # bursty
    # every number the command prints, to the last bit
    got = fast.model_dump(mode="json", include={"window", "rows", "tools", "overall"})
    assert got == ref.model_dump(mode="json", include={"window", "rows", "tools", "overall"})
    want = _phases(mine)
    assert {t: {p: v[p] for p in PHASES} for t, v in fast.phases.items()} == want


def test_the_arrays_equal_the_reference_and_an_open_connection_reads_the_same(
    seeded: tuple[Path, list[dict[str, Any]]],
) -> None:
    db, rows = seeded
    ref = _reference(rows)
    by_file = load_probes(open_db(db), kinds=["live"])
    with closing(sqlite3.connect(db)) as conn:
        by_conn = load_probes(conn, kinds=["live"])
    for arr in (by_file, by_conn):
        assert arr.tools == ref.tools
        for name in ("bounds", "ts", "latency_ms", "code", "timeout_s"):
            a, b = getattr(arr, name), getattr(ref, name)
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), name
    assert np.isnan(by_file.latency_ms).sum() == len(TOOLS)  # the text stands for no number
    assert (by_file.code == list(ErrorCode).index(ErrorCode.TIMEOUT)).sum() > 10


def test_a_file_this_process_writes_is_read_through_sqlite3_alone(
    seeded: tuple[Path, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The columnar driver links its own SQLite; two copies in one process on one file lose
    each other's POSIX locks, so while a Store is open here the rows go through `sqlite3`."""
    import realprobe.probes.loading as loading

    db, rows = seeded

    def refuse(*args: Any) -> Any:
        raise AssertionError("the columnar reader ran while this process writes the file")

    monkeypatch.setattr(loading, "_adbc_by_tool", refuse)
    with Store(db):
        arr = load_probes(open_db(db), kinds=["live"])
    assert np.array_equal(arr.latency_ms, _reference(rows).latency_ms, equal_nan=True)
    with pytest.raises(AssertionError, match="columnar reader ran"):
        load_probes(open_db(db), kinds=["live"])  # the Store is closed: the columnar reader again


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="no /proc to see open files")
def test_a_file_the_caller_holds_open_is_read_through_sqlite3_alone(
    seeded: tuple[Path, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a connection of the caller's own (not a Store): its locks would be lost."""
    import sqlite3

    import realprobe.probes.loading as loading

    db, rows = seeded

    def refuse(*args: Any) -> Any:
        raise AssertionError("the columnar reader ran while the caller holds the file open")

    monkeypatch.setattr(loading, "_adbc_by_tool", refuse)
    mine = sqlite3.connect(db)
    try:
        mine.execute("BEGIN IMMEDIATE")  # holding a write lock the driver's close would drop
        arr = load_probes(open_db(db), kinds=["live"])
        mine.execute("INSERT INTO probes (run_id, tool, api, started_at, started_ts, "
                     "latency_ms, outcome) VALUES ('x', 'x', 'x', '', 0, 1, 'ok')")
        mine.rollback()
    finally:
        mine.close()
    assert np.array_equal(arr.latency_ms, _reference(rows).latency_ms, equal_nan=True)
    with pytest.raises(AssertionError, match="columnar reader ran"):
        load_probes(open_db(db), kinds=["live"])  # closed: the columnar reader again


def test_without_the_driver_the_rows_are_read_row_wise_alike(
    seeded: tuple[Path, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import realprobe.store as store

    db, rows = seeded
    monkeypatch.setattr(store, "find_spec", lambda name: None)
    arr = load_probes(open_db(db), kinds=["live"])
    assert np.array_equal(arr.latency_ms, _reference(rows).latency_ms, equal_nan=True)
    assert realprobe.stats(db, kinds="live").model_dump() == _stats_dump(db)


def _stats_dump(db: Path) -> dict[str, Any]:
    from realprobe import store

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(store, "find_spec", lambda name: object())
        return realprobe.stats(db, kinds="live").model_dump()
