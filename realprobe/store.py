"""The one SQLite file (sqlite-utils, WAL): probe runs and probe rows; tasks add their tables.

A row is committed when its call ends, so a killed process loses at most the calls in flight.
Readers (stats, report) can run while a prober writes: WAL plus a busy timeout.

WAL with `synchronous=NORMAL` keeps every committed row across a killed process (only a power
cut may lose the last transactions), and costs no fsync per row.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlite_utils

from realprobe.adapters.result import ToolResult
from realprobe.errors import RealprobeError
from realprobe.secrets import scrub_row

BUSY_TIMEOUT_MS = 30_000

#: probe_runs.status values
RUN_RUNNING = "running"  # still going, or the process was killed (no end time)
RUN_DONE = "done"
RUN_INTERRUPTED = "interrupted"  # SIGINT/SIGTERM: stopped after in-flight calls ended
RUN_LOCAL_NETWORK_FAILURE = "local_network_failure"  # nothing reachable: rows excluded
RUN_FAILED = "failed"  # the prober itself failed (e.g. the database went away)
RUN_STATUSES = (RUN_RUNNING, RUN_DONE, RUN_INTERRUPTED, RUN_LOCAL_NETWORK_FAILURE, RUN_FAILED)

PROBE_RUNS_COLUMNS: dict[str, Any] = {
    "id": str,
    "started_at": str,
    "ended_at": str,
    "vantage": str,
    "mode": str,
    "target": str,
    "tools": str,  # JSON list
    "rounds": int,
    "status": str,  # one of RUN_STATUSES
    "n_calls": int,
    "version": str,
    # added by the probe runner (issue 3)
    "started_ts": float,
    "ended_ts": float,
    "n_ok": int,
    "n_error": int,
    "n_skipped": int,  # calls not made: daily budget spent, Retry-After too long, stopped
    "excluded": int,  # 1 when the run's rows are excluded from API statistics
    "schedule_id": str,  # set when the run was started by `realprobe schedule`
    "detail": str,
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
    # added by the probe runner (issue 3)
    "args": str,  # JSON object: the example arguments used
}

#: calls sent per API per UTC day, shared by every run on this database
API_BUDGET_COLUMNS: dict[str, Any] = {"day": str, "api": str, "target": str, "used": int}

#: what `realprobe schedule` saw: rounds started/ended/failed, missed or skipped fire times
SCHEDULE_EVENTS_COLUMNS: dict[str, Any] = {
    "id": int,
    "schedule_id": str,
    "ts": float,
    "at": str,
    "kind": str,  # started | round_ok | round_failed | missed | skipped_overlap | stopped
    "run_id": str,
    "detail": str,
}

_PROBE_INSERT_KEYS = [k for k in PROBES_COLUMNS if k != "id"]


def default_db_path() -> Path:
    env = os.environ.get("REALPROBE_DB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "realprobe" / "realprobe.db"


def db_error(path: Path, exc: sqlite3.Error) -> RealprobeError:
    """A one-line, actionable message for a SQLite failure."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return RealprobeError(
            f"{path}: database is locked by another process ({text}); "
            "wait for it to finish or pass another --db"
        )
    if "readonly" in text or "read-only" in text:
        return RealprobeError(f"{path}: database is read-only ({text}); pass a writable --db")
    return RealprobeError(f"{path}: not a usable SQLite database ({text})")


class Store:
    def __init__(
        self,
        path: str | Path | None = None,
        *,
        create: bool = True,
        busy_timeout_s: float = BUSY_TIMEOUT_MS / 1000,
    ) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        if not create and not self.path.exists():
            raise RealprobeError(
                f"no database at {self.path}; run `realprobe probe` first or pass --db FILE"
            )
        if self.path.is_dir():
            raise RealprobeError(f"{self.path}: is a directory; --db wants a database file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=busy_timeout_s, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            self.db = sqlite_utils.Database(conn)
            if create:
                self.db.enable_wal()
                conn.execute("PRAGMA synchronous = NORMAL")
                self.ensure_schema()
        except sqlite3.Error as exc:
            raise db_error(self.path, exc) from exc
        except OSError as exc:
            raise RealprobeError(f"{self.path}: cannot open database ({exc.strerror})") from exc

    @property
    def conn(self) -> sqlite3.Connection:
        return self.db.conn

    def ensure_schema(self) -> None:
        names = set(self.db.table_names())
        if "probe_runs" not in names:
            self.db["probe_runs"].create(PROBE_RUNS_COLUMNS, pk="id")  # type: ignore[union-attr]
        else:
            self._add_missing("probe_runs", PROBE_RUNS_COLUMNS)
        if "probes" not in names:
            probes = self.db["probes"]
            probes.create(PROBES_COLUMNS, pk="id")  # type: ignore[union-attr]
            probes.create_index(["tool", "started_ts"])  # type: ignore[union-attr]
            probes.create_index(["run_id"])  # type: ignore[union-attr]
        else:
            self._add_missing("probes", PROBES_COLUMNS)
        if "api_budget" not in names:
            self.db["api_budget"].create(  # type: ignore[union-attr]
                API_BUDGET_COLUMNS, pk=("day", "api", "target")
            )
        if "schedule_events" not in names:
            self.db["schedule_events"].create(  # type: ignore[union-attr]
                SCHEDULE_EVENTS_COLUMNS, pk="id"
            )

    def _add_missing(self, table: str, columns: dict[str, Any]) -> None:
        have = {c.name for c in self.db[table].columns}
        for name, typ in columns.items():
            if name not in have:
                self.db[table].add_column(name, typ)  # type: ignore[union-attr]

    # -- probe rows ---------------------------------------------------------------------

    def insert_probe(self, row: dict[str, Any]) -> None:
        """Insert and commit one call's row (a killed process keeps every committed row).
        Secrets (secret-named arguments, keys in URLs, declared values) are scrubbed first."""
        row = scrub_row(row)
        for key in ("rate_limit", "redirects", "args"):
            if key in row and row[key] is not None and not isinstance(row[key], str):
                row[key] = json.dumps(row[key])
        keys = [k for k in _PROBE_INSERT_KEYS if k in row]
        extra = set(row) - set(PROBES_COLUMNS)
        if extra:
            raise ValueError(f"unknown probe columns: {sorted(extra)}")
        sql = f"INSERT INTO probes ({', '.join(keys)}) VALUES ({', '.join('?' * len(keys))})"
        try:
            with self.conn:
                self.conn.execute(sql, [row[k] for k in keys])
        except sqlite3.Error as exc:
            raise db_error(self.path, exc) from exc

    def probes_for_run(self, run_id: str) -> list[dict[str, Any]]:
        return list(self.db["probes"].rows_where("run_id = ?", [run_id], order_by="id"))

    # -- runs ---------------------------------------------------------------------------

    def start_run(self, row: dict[str, Any]) -> None:
        row = scrub_row({**row, "status": row.get("status", RUN_RUNNING)})
        if "tools" in row and not isinstance(row["tools"], str):
            row["tools"] = json.dumps(row["tools"])
        try:
            with self.conn:
                self.db["probe_runs"].insert(row)  # type: ignore[union-attr]
        except sqlite3.Error as exc:
            raise db_error(self.path, exc) from exc

    def finish_run(self, run_id: str, updates: dict[str, Any]) -> None:
        """Close a run; a local network failure also marks its rows `excluded`."""
        updates = scrub_row(updates)
        try:
            with self.conn:
                self.db["probe_runs"].update(run_id, updates)  # type: ignore[union-attr]
                if updates.get("excluded"):
                    self.conn.execute("UPDATE probes SET excluded = 1 WHERE run_id = ?", [run_id])
        except sqlite3.Error as exc:
            raise db_error(self.path, exc) from exc

    def run(self, run_id: str) -> dict[str, Any]:
        return dict(self.db["probe_runs"].get(run_id))  # type: ignore[union-attr]

    def runs(self) -> Iterator[dict[str, Any]]:
        yield from self.db["probe_runs"].rows_where(order_by="started_ts")

    # -- daily budget -------------------------------------------------------------------

    def budget_take(self, day: str, api: str, target: str, limit: int) -> bool:
        """Count one call against today's budget of `api`; False (nothing counted) if spent.

        Atomic across processes: a scheduled job and a manual probe share the same ledger.
        """
        try:
            with self.conn:
                self.conn.execute(
                    "INSERT OR IGNORE INTO api_budget (day, api, target, used) VALUES (?, ?, ?, 0)",
                    [day, api, target],
                )
                cur = self.conn.execute(
                    "UPDATE api_budget SET used = used + 1 "
                    "WHERE day = ? AND api = ? AND target = ? AND used < ?",
                    [day, api, target, limit],
                )
                return cur.rowcount == 1
        except sqlite3.Error as exc:
            raise db_error(self.path, exc) from exc

    def budget_used(self, day: str, api: str, target: str) -> int:
        row = self.conn.execute(
            "SELECT used FROM api_budget WHERE day = ? AND api = ? AND target = ?",
            [day, api, target],
        ).fetchone()
        return int(row[0]) if row else 0

    # -- schedule events ----------------------------------------------------------------

    def log_event(self, row: dict[str, Any]) -> None:
        row = scrub_row(row)
        try:
            with self.conn:
                self.db["schedule_events"].insert(row)  # type: ignore[union-attr]
        except sqlite3.Error as exc:
            raise db_error(self.path, exc) from exc

    def events(self, schedule_id: str | None = None) -> list[dict[str, Any]]:
        if schedule_id is None:
            return list(self.db["schedule_events"].rows_where(order_by="id"))
        return list(
            self.db["schedule_events"].rows_where("schedule_id = ?", [schedule_id], order_by="id")
        )

    def integrity_ok(self) -> bool:
        row = self.conn.execute("PRAGMA integrity_check").fetchone()
        return bool(row and row[0] == "ok")

    def close(self) -> None:
        self.db.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- one probe row, whoever made the call (prober, MCP server) -------------------------

DETAIL_MAX = 500  # long error messages are cut in the `detail` column


def iso_utc(ts: float) -> str:
    """Epoch seconds as ISO 8601 UTC with milliseconds and a Z."""
    return (
        dt.datetime.fromtimestamp(ts, dt.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def default_vantage() -> str:
    return socket.gethostname() or "unknown"


def probe_row(
    result: ToolResult,
    *,
    run_id: str,
    tool: str,
    api: str,
    round_no: int,
    started_wall: float,
    timeout_s: float,
    vantage: str,
    args: Any = None,
    source: str = "probe",
) -> dict[str, Any]:
    """The `probes` row of one finished call (PROBES_COLUMNS)."""
    err = result.error
    return {
        "run_id": run_id,
        "tool": tool,
        "api": api,
        "round": round_no,
        "started_at": iso_utc(started_wall),
        "started_ts": started_wall,
        "latency_ms": round(result.latency_ms, 3),
        "outcome": "ok" if result.ok else "error",
        "error_code": err.code.value if err is not None else None,
        "http_status": result.http_status,
        "bytes": result.bytes,
        "retry_after": err.retry_after_s if err is not None else None,
        "rate_limit": result.rate_limit_headers,
        "redirects": result.redirects,
        "vantage": vantage,
        "detail": err.message[:DETAIL_MAX] if err is not None else "",
        "timeout_s": timeout_s,
        "excluded": 0,
        "source": source,
        "args": args,
    }
