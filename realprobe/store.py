"""The one SQLite file (sqlite-utils, WAL): probe runs and probe rows; tasks add their tables.

A row is committed when its call ends, so a killed process loses at most the calls in flight.
Readers (stats, report) can run while a prober writes: WAL plus a busy timeout.

Every row says where its call went (`target_kind`: live | sandbox | simulate | replay), who
made it (`source`: probe | mcp | task) and from where (`vantage`). The schema version is kept
in the `realprobe_meta` table; opening an older file migrates it in place (sqlite-utils
`create(..., transform=True)` adds the new columns, old rows get their kind from their run).
A run whose process died without closing it (kill -9, power cut) is marked `killed` by the
next process on the same host that opens the file for writing (its pid is gone).

WAL with `synchronous=NORMAL` keeps every committed row across a killed process (only a power
cut may lose the last transactions), and costs no fsync per row.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlite_utils

from realprobe.dbfacts import (
    BUSY_TIMEOUT_MS,
    META_TABLE,
    PHASE_COLUMNS,
    RUN_RUNNING,
    SCHEMA_VERSION,
    default_db_path,
)
from realprobe.errors import NoDatabase, RealprobeError
from realprobe.result import ToolResult
from realprobe.secrets import scrub_row
from realprobe.target import Target

#: probe_runs.status values
RUN_DONE = "done"
RUN_INTERRUPTED = "interrupted"  # SIGINT/SIGTERM: stopped after in-flight calls ended
RUN_LOCAL_NETWORK_FAILURE = "local_network_failure"  # nothing reachable: rows excluded
RUN_FAILED = "failed"  # the prober itself failed (e.g. the database went away)
RUN_KILLED = "killed"  # its process died without closing it (found by a later process)
RUN_STATUSES = (
    RUN_RUNNING, RUN_DONE, RUN_INTERRUPTED, RUN_LOCAL_NETWORK_FAILURE, RUN_FAILED, RUN_KILLED
)


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
    "started_ts": float,
    "ended_ts": float,
    "n_ok": int,
    "n_error": int,
    "n_skipped": int,  # calls not made: daily budget spent, Retry-After too long, stopped
    "excluded": int,  # 1 when the run's rows are excluded from API statistics
    "schedule_id": str,  # set when the run was started by `realprobe schedule`
    "detail": str,
    # provenance (schema 2)
    "target_kind": str,  # live | sandbox | simulate | replay
    "source": str,  # probe | mcp
    "pid": int,  # the process writing the run, to find runs left `running` by kill -9
    "host": str,
    "pid_start": str,  # the process's start time (guards against a reused pid)
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
    "args": str,  # JSON object: the example arguments used
    # provenance (schema 2)
    "target_kind": str,  # live | sandbox | simulate | replay
    "target": str,  # label: live, sandbox:<url>, simulate:<profile>, replay:<cassette>
    #: simulated runs: seconds since the run began on its virtual clock (started_ts is the
    #: real moment of the call, so no row is ever stamped in the future)
    "virtual_s": float,
    # phase timings (ms) of the call, and the certificate seen on a new HTTPS connection
    "dns_ms": float,
    "connect_ms": float,
    "tls_ms": float,
    "ttfb_ms": float,
    "transfer_ms": float,
    "new_connection": int,
    "tls_expires_ts": float,
    "tls_issuer": str,
}


PROBES_DEFAULTS = {"target_kind": "live", "source": "probe"}
#: the columns the provenance survey groups by, then the time (a covering index)
PROVENANCE_INDEX = ["target_kind", "excluded", "vantage", "source", "target", "started_ts"]

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


def db_error(path: Path, exc: sqlite3.Error) -> RealprobeError:
    """A one-line, actionable message for a SQLite failure."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return RealprobeError(
            f"{path}: database is locked by another process ({text}); "
            "wait for it to finish or use another db",
            param="db",
        )
    if "readonly" in text or "read-only" in text:
        return RealprobeError(
            f"{path}: database is read-only ({text}); use a writable db", param="db"
        )
    return RealprobeError(f"{path}: not a usable SQLite database ({text})")


#: every table realprobe writes (probes, schedules, tasks); a file with tables and none of
#: these belongs to something else
OWN_TABLES = frozenset(
    {"probe_runs", "probes", "api_budget", "schedule_events", "task_runs", "task_steps"}
)


class ForeignDatabase(RealprobeError):
    """The file is a SQLite database of something else."""


def _refuse_foreign(path: Path, db: sqlite_utils.Database) -> None:
    tables = {t for t in db.table_names() if not t.startswith("sqlite_")}
    if tables and not tables & OWN_TABLES:
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise ForeignDatabase(
            f"{path}: a SQLite database of something else (tables: {shown}); "
            "realprobe adds no tables to it"
        )


class Store:
    def __init__(
        self,
        path: str | Path | None = None,
        *,
        create: bool = True,
        busy_timeout_s: float = BUSY_TIMEOUT_MS / 1000,
        force: bool = False,
    ) -> None:
        """Open (and with `create`, set up) the database at `path`.

        Only the default location gets its folders made; a path given by the caller must be
        in an existing folder. A SQLite file that holds tables and none of realprobe's is
        refused (nothing added, journal mode untouched) unless `force`."""
        self.path = Path(path) if path is not None else default_db_path()
        if not create and not self.path.exists():
            raise NoDatabase(self.path)
        if self.path != default_db_path() and not self.path.parent.is_dir():
            raise RealprobeError(f"{self.path}: the folder {self.path.parent} does not exist")
        if self.path.is_dir():
            raise RealprobeError(
                f"{self.path}: is a directory; db wants a database file", param="db"
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=busy_timeout_s, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            self.db = sqlite_utils.Database(conn)
            if create and not force:
                _refuse_foreign(self.path, self.db)
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

    def schema_version(self, part: str = "probes") -> int:
        """The schema version of this file (1: made before versions were kept; 0: empty)."""
        return schema_version(self.db, part)

    def ensure_schema(self) -> None:
        """Create the tables, or bring an older file up to SCHEMA_VERSION (once)."""
        have = self.schema_version()
        if have > SCHEMA_VERSION:
            raise RealprobeError(
                f"{self.path}: written by a newer realprobe (schema {have}, this one knows "
                f"{SCHEMA_VERSION}); upgrade realprobe to use this database"
            )
        if have < SCHEMA_VERSION:
            db = self.db
            db.table("probe_runs").create(PROBE_RUNS_COLUMNS, pk="id", transform=True)
            probes = db.table("probes")
            # a row written without a kind (by hand, by an older tool) counts as live, as
            # every row did before kinds were kept
            probes.create(PROBES_COLUMNS, pk="id", transform=True, defaults=PROBES_DEFAULTS)
            db.table("api_budget").create(
                API_BUDGET_COLUMNS, pk=("day", "api", "target"), transform=True
            )
            db.table("schedule_events").create(SCHEDULE_EVENTS_COLUMNS, pk="id", transform=True)
            if have == 1:
                self._backfill_provenance()
            set_schema_version(db, "probes", SCHEMA_VERSION)
        probes = self.db.table("probes")
        probes.create_index(["tool", "started_ts"], if_not_exists=True)
        probes.create_index(["run_id"], if_not_exists=True)
        # readers select by kind, in (tool, time) order; the provenance survey reads this
        # covering index instead of the table
        probes.create_index(["target_kind", "tool", "started_ts"], if_not_exists=True)
        probes.create_index(PROVENANCE_INDEX, if_not_exists=True)
        self.mark_killed_runs()

    def _backfill_provenance(self) -> None:
        """Rows written before schema 2: their kind from their run's old mode/target labels
        (a sandbox URL, `simulate:...`, `replay:...`), the source `probe` where unset."""
        kind_of_run = (
            "CASE WHEN mode = 'replay' OR target LIKE 'replay:%' THEN 'replay' "
            "WHEN mode = 'simulate' OR target LIKE 'simulate%' THEN 'simulate' "
            "WHEN target LIKE 'http%' OR target LIKE 'sandbox%' THEN 'sandbox' "
            "ELSE 'live' END"
        )
        with self.conn:
            self.conn.execute(
                f"UPDATE probe_runs SET target_kind = {kind_of_run} WHERE target_kind IS NULL"
            )
            self.conn.execute(
                "UPDATE probe_runs SET source = CASE WHEN id LIKE 'mcp-%' THEN 'mcp' "
                "ELSE 'probe' END WHERE source IS NULL"
            )
            self.conn.execute(
                "UPDATE probes SET target_kind = coalesce((SELECT r.target_kind FROM "
                "probe_runs r WHERE r.id = probes.run_id), 'live'), target = (SELECT "
                "r.target FROM probe_runs r WHERE r.id = probes.run_id) "
                "WHERE target_kind IS NULL"
            )
            self.conn.execute("UPDATE probes SET source = 'probe' WHERE source IS NULL")

    def mark_killed_runs(self) -> list[str]:
        """Runs left `running` by a process of this host that is gone: marked `killed`."""
        host = default_vantage()
        try:
            rows = self.conn.execute(
                "SELECT id, pid, pid_start FROM probe_runs "
                "WHERE status = ? AND host = ? AND pid IS NOT NULL",
                [RUN_RUNNING, host],
            ).fetchall()
        except sqlite3.Error:
            return []
        gone = [rid for rid, pid, start in rows if not process_alive(int(pid), start)]
        if not gone:
            return []
        wall = time.time()
        with self.conn:
            for rid in gone:
                self.conn.execute(
                    "UPDATE probe_runs SET status = ?, ended_at = ?, ended_ts = ?, "
                    "n_calls = (SELECT count(*) FROM probes WHERE run_id = probe_runs.id), "
                    "detail = coalesce(detail || '; ', '') || ? WHERE id = ? AND status = ?",
                    [
                        RUN_KILLED, iso_utc(wall), wall,
                        f"its process ended without closing the run (killed); found at "
                        f"{iso_utc(wall)}", rid, RUN_RUNNING,
                    ],
                )
        return gone

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
        return list(self.db.table("probes").rows_where("run_id = ?", [run_id], order_by="id"))

    # -- runs ---------------------------------------------------------------------------

    def start_run(self, row: dict[str, Any]) -> None:
        """Open a run; it records this process (pid, host) so a killed run is found later."""
        row = {
            "pid": os.getpid(),
            "host": default_vantage(),
            "pid_start": process_start(os.getpid()),
            **row,
            "status": row.get("status", RUN_RUNNING),
        }
        row = scrub_row(row)
        if "tools" in row and not isinstance(row["tools"], str):
            row["tools"] = json.dumps(row["tools"])
        try:
            with self.conn:
                self.db.table("probe_runs").insert(row)
        except sqlite3.Error as exc:
            raise db_error(self.path, exc) from exc

    def finish_run(self, run_id: str, updates: dict[str, Any]) -> None:
        """Close a run; a local network failure also marks its rows `excluded`."""
        updates = scrub_row(updates)
        try:
            with self.conn:
                self.db.table("probe_runs").update(run_id, updates)
                if updates.get("excluded"):
                    self.conn.execute("UPDATE probes SET excluded = 1 WHERE run_id = ?", [run_id])
        except sqlite3.Error as exc:
            raise db_error(self.path, exc) from exc

    def run(self, run_id: str) -> dict[str, Any]:
        return dict(self.db.table("probe_runs").get(run_id))

    def runs(self) -> Iterator[dict[str, Any]]:
        yield from self.db.table("probe_runs").rows_where(order_by="started_ts")

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
                self.db.table("schedule_events").insert(row)
        except sqlite3.Error as exc:
            raise db_error(self.path, exc) from exc

    def events(self, schedule_id: str | None = None) -> list[dict[str, Any]]:
        if schedule_id is None:
            return list(self.db.table("schedule_events").rows_where(order_by="id"))
        events = self.db.table("schedule_events")
        return list(events.rows_where("schedule_id = ?", [schedule_id], order_by="id"))

    def integrity_ok(self) -> bool:
        row = self.conn.execute("PRAGMA integrity_check").fetchone()
        return bool(row and row[0] == "ok")

    def close(self) -> None:
        self.db.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- schema version ---------------------------------------------------------------------


def schema_version(db: sqlite_utils.Database, part: str) -> int:
    """Version of `part` (probes | tasks) in `db`: 0 when its tables do not exist yet, 1 when
    they were made before versions were kept."""
    if db.table(META_TABLE).exists():
        row = db.conn.execute(
            f"SELECT value FROM {META_TABLE} WHERE key = ?", [f"schema:{part}"]
        ).fetchone()
        if row is not None:
            return int(row[0])
    first = "probes" if part == "probes" else "task_runs"
    return 1 if db.table(first).exists() else 0


def set_schema_version(db: sqlite_utils.Database, part: str, version: int) -> None:
    db.table(META_TABLE).upsert(
        {"key": f"schema:{part}", "value": str(version)}, pk="key"
    )


# -- is a run's process still there ------------------------------------------------------


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_start(pid: int) -> str | None:
    """The kernel's start time of `pid`, to tell a reused pid apart (None off Linux)."""
    stat = _proc_stat(pid)
    return stat[19] if stat is not None and len(stat) > 19 else None


def process_alive(pid: int, started: str | None = None) -> bool:
    """Whether `pid` is still the process that started a run (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process, so it exists
    except OSError:
        return True
    stat = _proc_stat(pid)
    if stat is None:
        return True
    if stat[0] == "Z":
        return False
    return started is None or len(stat) <= 19 or stat[19] == started


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
    target: Target | None = None,
    virtual_s: float | None = None,
) -> dict[str, Any]:
    """The `probes` row of one finished call (PROBES_COLUMNS). `started_wall` is the real
    moment the call started; `virtual_s` its place on a simulated run's virtual clock."""
    err = result.error
    if started_wall > time.time() + 1.0:
        raise ValueError(f"probe row stamped in the future ({iso_utc(started_wall)})")
    target = target or Target.live()
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
        "target_kind": target.kind.value,
        "target": target.label,
        "virtual_s": virtual_s,
        **_phase_cells(result.phases),
    }


def _phase_cells(phases: dict[str, Any] | None) -> dict[str, Any]:
    if not phases:
        return {}
    cells = {k: phases.get(k) for k in PHASE_COLUMNS}
    cells["new_connection"] = int(bool(phases.get("new_connection")))
    if phases.get("tls_expires_ts") is not None:
        cells["tls_expires_ts"] = phases["tls_expires_ts"]
        cells["tls_issuer"] = phases.get("tls_issuer")
    return cells
