"""The loader's side questions (rows per tool, any simulated rows) are answered from indexes,
without reading the table; and what it reads is the same as before."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from realprobe import Store, open_db
from realprobe.probes.loading import PHASE_EXTRA, conditions, load_probes, probe_columns
from realprobe.probes.phases import phase_medians


def _db(tmp_path: Path, rows: int = 200) -> Path:
    path = tmp_path / "p.db"
    st = Store(path)
    for i in range(rows):
        ok = i % 3 != 0
        row = dict(
            run_id=f"r{i // 50}", tool=f"t{i % 4}", api="a", round=i, started_ts=1e9 + i,
            latency_ms=100.0 + i, outcome="ok" if ok else "error",
            error_code=None if ok else "SERVER_ERROR", http_status=200 if ok else 500,
            timeout_s=10.0, excluded=0, vantage="",
            target_kind="simulate" if i >= 150 else "live",
            virtual_s=float(i) if i >= 150 else None,
        )
        if ok and i < 150:
            row.update(ttfb_ms=50.0 + i, transfer_ms=5.0, new_connection=int(i % 10 == 1),
                       dns_ms=1.0 + i, connect_ms=2.0, tls_ms=3.0)
        st.insert_probe(row)
    st.close()
    return path


def _plan(conn: sqlite3.Connection, sql: str, params: list[object]) -> str:
    return " | ".join(str(r[3]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))


@pytest.mark.parametrize("kinds", [["live"], ["simulate"], None])
def test_side_questions_read_indexes_only(tmp_path: Path, kinds: list[str] | None) -> None:
    conn = sqlite3.connect(_db(tmp_path))
    cond, params = conditions(probe_columns(conn), 1e9, 2e9, None, kinds, ["", "x"])
    counts = _plan(conn, f"SELECT tool, count(*) FROM probes WHERE {cond} GROUP BY tool", params)
    if kinds is not None:  # what stats, report and calibrate always ask
        assert "COVERING INDEX" in counts, counts
    virtual = _plan(
        conn, f"SELECT 1 FROM probes WHERE {cond} AND virtual_s IS NOT NULL LIMIT 1", params
    )
    assert "idx_probes_virtual" in virtual, virtual


def test_loaded_rows_and_phases(tmp_path: Path) -> None:
    db = _db(tmp_path)
    live = load_probes(open_db(db), kinds=["live"])
    assert live.tools == ["t0", "t1", "t2", "t3"] and len(live) == 150
    sim = load_probes(open_db(db), kinds=["simulate"])
    assert len(sim) == 50
    # simulated rows sit on their virtual timeline, ending at the run's last real stamp
    assert sim.ts.max() == pytest.approx(1e9 + 199)
    phases = phase_medians(load_probes(open_db(db), kinds=["live"], extra=PHASE_EXTRA))
    t1 = phases["t1"]  # rows 1, 5, 9, ...: ok, new connection on 1, 21, 41, ...
    oks = [i for i in range(1, 150, 4) if i % 3 != 0]
    news = [i for i in oks if i % 10 == 1]
    assert t1["n"] == len(oks) and t1["new_connections"] == len(news)
    assert t1["ttfb_ms"] == pytest.approx(50.0 + sorted(oks)[len(oks) // 2], abs=2.0)
    mid = (news[(len(news) - 1) // 2] + news[len(news) // 2]) / 2
    assert t1["dns_ms"] == pytest.approx(1.0 + mid)
    assert phases["t0"]["n"] == len([i for i in range(0, 150, 4) if i % 3 != 0])
