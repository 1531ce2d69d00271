"""Synthetic probe databases for the exporter and merge benchmarks (not a benchmark itself)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from realprobe.store import Store

CODES = ["TIMEOUT", "SERVER_ERROR", "RATE_LIMIT_ERROR", "NETWORK_ERROR", "INVALID_RESPONSE"]
COLUMNS = (
    "run_id", "tool", "api", "round", "started_at", "started_ts", "latency_ms", "outcome",
    "error_code", "http_status", "bytes", "vantage", "detail", "timeout_s", "excluded", "source",
)


def build(
    path: Path, rows: int, *, tools: int = 30, vantage: str = "bench", t_end: float,
    span_s: float = 30 * 86400, seed: int = 1,
) -> None:
    """`rows` calls over `tools` tools, spread over `span_s` seconds ending at `t_end`."""
    rng = np.random.default_rng(seed)
    path.unlink(missing_ok=True)
    Store(path).close()
    conn = sqlite3.connect(path)
    ts = np.sort(rng.uniform(t_end - span_s, t_end, rows))
    tool = rng.integers(0, tools, rows)
    fail = rng.random(rows) < 0.1
    lat = np.exp(rng.normal(5.5, 0.7, rows))
    codes = rng.choice(CODES, size=rows)
    batch = []
    sql = f"INSERT INTO probes ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
    with conn:
        for i in range(rows):
            f = bool(fail[i])
            name = f"tool_{int(tool[i]):02d}"
            batch.append((
                f"{vantage}-run{i // 1000}", name, f"api{int(tool[i]) % 20:02d}", i, "",
                float(ts[i]), float(lat[i]), "error" if f else "ok",
                str(codes[i]) if f else None, 500 if f else 200, 100, vantage, "", 10.0, 0,
                "probe",
            ))
            if len(batch) == 50_000:
                conn.executemany(sql, batch)
                batch = []
        if batch:
            conn.executemany(sql, batch)
        runs = sorted({f"{vantage}-run{i // 1000}" for i in range(0, rows, 1000)})
        conn.executemany(
            "INSERT INTO probe_runs (id, vantage, mode, target, status, started_ts) "
            "VALUES (?, ?, 'live', 'live', 'done', ?)",
            [(r, vantage, t_end - span_s) for r in runs],
        )
    conn.close()
