"""Databases with known rows for the exporter, alert and merge tests."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from realprobe import Store
from realprobe.store import iso_utc


def write_rows(
    db: Path,
    tool: str,
    outcomes: str,
    *,
    api: str | None = None,
    run_id: str = "run-1",
    vantage: str = "here",
    t0: float | None = None,
    step_s: float = 10.0,
    latency_ms: float = 120.0,
    code: str = "SERVER_ERROR",
    extra: dict[str, Any] | None = None,
) -> None:
    """One row per character of `outcomes`: `o` ok, `x` error (with `code`)."""
    t0 = time.time() - len(outcomes) * step_s if t0 is None else t0
    with Store(db) as store:
        if store.db["probe_runs"].count_where("id = ?", [run_id]) == 0:
            store.start_run({
                "id": run_id, "started_at": iso_utc(t0), "started_ts": t0, "vantage": vantage,
                "mode": "live", "target": "live", "tools": [tool], "rounds": len(outcomes),
                "status": "done",
            })
        for i, ch in enumerate(outcomes):
            ok = ch == "o"
            ts = t0 + i * step_s
            store.insert_probe({
                "run_id": run_id, "tool": tool, "api": api or tool.split("_")[0], "round": i,
                "started_at": iso_utc(ts), "started_ts": ts, "latency_ms": latency_ms,
                "outcome": "ok" if ok else "error", "error_code": None if ok else code,
                "http_status": 200 if ok else 500, "bytes": 10, "vantage": vantage,
                "detail": "" if ok else "HTTP 500", "timeout_s": 10.0, "excluded": 0,
                "source": "probe", **(extra or {}),
            })
