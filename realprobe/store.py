"""The one SQLite file (sqlite-utils, WAL): probe runs and probe rows; tasks add their tables.

A row is committed when its call ends, so a killed process loses at most the calls in flight.
Readers (stats, report) can run while a prober writes: WAL plus a busy timeout.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import sqlite_utils

from realprobe.errors import RealprobeError

BUSY_TIMEOUT_MS = 30_000

PROBE_RUNS_COLUMNS: dict[str, Any] = {
    "id": str,
    "started_at": str,
    "ended_at": str,
    "vantage": str,
    "mode": str,
    "target": str,
    "tools": str,  # JSON list
    "rounds": int,
    "status": str,  # running | done | interrupted | local_network_failure | failed
    "n_calls": int,
    "version": str,
}

PROBES_COLUMNS: dict[str, Any] = {
    "id": int,
    "run_id": str,
    "tool": str,
    "api": str,
    "round": int,
    "started_at": str,  # ISO 8601 UTC
    "started_ts": float,  # epoch seconds, for range queries
    "latency_ms": float,
    "outcome": str,  # ok | error
    "error_code": str,
    "http_status": int,
    "bytes": int,
    "retry_after": float,
    "rate_limit": str,  # JSON object of rate-limit headers seen
    "redirects": str,  # JSON list
    "vantage": str,
    "detail": str,
    "timeout_s": float,  # the call's deadline: a TIMEOUT is right-censored here
    "excluded": int,  # 1: the prober's own outage, not the API's
    "source": str,  # probe | mcp | task
}


def default_db_path() -> Path:
    env = os.environ.get("REALPROBE_DB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "realprobe" / "realprobe.db"


class Store:
    def __init__(self, path: str | Path | None = None, *, create: bool = True) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        if not create and not self.path.exists():
            raise RealprobeError(
                f"no database at {self.path}; run `realprobe probe` first or pass --db FILE"
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self.db = sqlite_utils.Database(conn)
            if create:
                self.db.enable_wal()
                self.ensure_schema()
        except sqlite3.DatabaseError as exc:
            raise RealprobeError(f"{self.path}: not a usable SQLite database ({exc})") from exc
        except OSError as exc:
            raise RealprobeError(f"{self.path}: cannot open database ({exc.strerror})") from exc

    def ensure_schema(self) -> None:
        if "probe_runs" not in self.db.table_names():
            self.db["probe_runs"].create(PROBE_RUNS_COLUMNS, pk="id")  # type: ignore[union-attr]
        if "probes" not in self.db.table_names():
            probes = self.db["probes"]
            probes.create(PROBES_COLUMNS, pk="id")  # type: ignore[union-attr]
            probes.create_index(["tool", "started_ts"])  # type: ignore[union-attr]
            probes.create_index(["run_id"])  # type: ignore[union-attr]

    def insert_probe(self, row: dict[str, Any]) -> None:
        row = dict(row)
        for key in ("rate_limit", "redirects"):
            if key in row and not isinstance(row[key], str):
                row[key] = json.dumps(row[key])
        self.db["probes"].insert(row)  # type: ignore[union-attr]

    def close(self) -> None:
        self.db.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
