"""The one SQLite file (sqlite-utils, WAL): probe runs and probe rows; tasks add their tables.

`open_db` is the one way to open it: it knows the default path and hands every reader and
writer a `Database` (read-only connections, the migration a front door asks for, the choice
of SQLite library, the writer `Store`), never a path to open again.


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

import contextlib
import datetime as dt
import hashlib
import json
import math
import os
import socket
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pydantic import BaseModel

from realprobe.dbfacts import (
    BUSY_TIMEOUT_MS,
    META_TABLE,
    PHASE_COLUMNS,
    RUN_RUNNING,
    SCHEMA_VERSION,
    busy_timeout_s,
)
from realprobe.errors import BadArgument, ErrorCode, NoDatabase, RealprobeError
from realprobe.ranges import checked
from realprobe.secrets import scrub_row
from realprobe.target import SOURCES, Target, TargetKind

if TYPE_CHECKING:
    import sqlite_utils

    from realprobe.result import ToolResult  # a row's source; the readers never load it

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
    #: the row's idempotency key: a hash of its content (schema 4), so the same call stored
    #: twice, merged again or through another merge, is one row (see `row_key`)
    "row_key": str,
    #: the `X-Request-Id` the sandbox echoed for this call (pairs a row with its journal
    #: entry; schema 5)
    "request_id": str,
    #: schema 6: signs of an implicit fault in an `ok` answer (drift, empty, stale; comma-joined)
    "implicit": str,
}


PROBES_DEFAULTS = {"target_kind": "live", "source": "probe"}
#: the columns the provenance survey groups by, then the time (a covering index)
PROVENANCE_INDEX = ["target_kind", "excluded", "vantage", "source", "target", "started_ts"]
#: every column a selection of rows filters on, by tool then time (a covering index)
SELECTION_INDEX = ["target_kind", "tool", "started_ts", "excluded", "vantage"]

#: rows a store adds between its looks for rows to seal into chunks
SEAL_CHECK_ROWS = 1024

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
#: rows a database refused to take (merge): why, from where, and the row (scrubbed, cut)
QUARANTINE_TABLE = "probes_quarantine"
QUARANTINE_COLUMNS: dict[str, Any] = {
    "id": int, "ts": float, "origin": str, "reason": str, "message": str, "row": str,
}


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


# -- the one way to open the database ----------------------------------------------------


def sqlite_uri(path: Path, mode: str) -> str:
    """A `file:` URI for any legal path (`#`, `?`, `%` and spaces escaped)."""
    return f"file:{quote(str(path.resolve()), safe='/')}?mode={mode}"


def read_pragmas() -> list[str]:
    """What every reader's connection runs first, whichever SQLite library it is: wait for a
    writer up to `busy_timeout_s()`, and refuse any statement that would write."""
    return [f"PRAGMA busy_timeout = {int(busy_timeout_s() * 1000)}", "PRAGMA query_only = ON"]


def default_db_path() -> Path:
    """`$REALPROBE_DB`, else `realprobe/realprobe.db` in the XDG data folder."""
    env = os.environ.get("REALPROBE_DB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "realprobe" / "realprobe.db"


@checked
def open_db(db: str | Path | Database | None, *, read: bool = False) -> Database:
    """The one way to open the database: `db`, else the default (`$REALPROBE_DB`, else the
    data folder's), checked. `read`: the file must exist; else a given file's folder must
    exist (the default one is made by the writer); a `Database` is taken as it is. Opening
    changes nothing on disk: a front door that reads asks for `.migrate()` itself, a writer
    (`.write()`) sets up the schema."""
    if isinstance(db, Database):
        path = db.path
    elif db is None:
        path = default_db_path()
    else:
        path = Path(db)
        if not read and not path.parent.is_dir():
            raise BadArgument("db", f"db {path}: directory {path.parent} does not exist")
    if read and not path.exists():
        raise NoDatabase(path)
    if path.is_dir():
        raise BadArgument("db", f"{path}: is a directory, not a database file")
    return Database(path)


@dataclass(frozen=True)
class Database:
    """A database file `open_db` resolved and checked: what every reader and writer receives
    (never a bare path). Holding one keeps nothing open; each use opens what it needs."""

    path: Path

    def __str__(self) -> str:
        return str(self.path)

    def read(self, need: str | None = "probes",
             what: str = "realprobe database") -> sqlite3.Connection:
        """The connection every reader uses (stats, report, calibrate, drift, alerts, merge,
        imports of other programs' files): it never creates a file, takes no statement that
        writes, and waits up to `busy_timeout_s()` for a writer. `need`: a table the file must
        have (None: any SQLite file). One-line errors for a missing file, a folder, or a file
        that is not SQLite."""
        p = open_db(self, read=True).path  # the file may have gone since it was opened
        try:
            conn = sqlite3.connect(self.uri, uri=True, timeout=busy_timeout_s(),
                                   check_same_thread=False)
        except sqlite3.Error as exc:
            raise RealprobeError(f"{p}: cannot open database ({exc})", param="db") from exc
        try:
            for pragma in read_pragmas():
                conn.execute(pragma)
            names = {r[0] for r in
                     conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise RealprobeError(f"{p}: not a readable {what} ({read_error(exc)})",
                                 param="db") from exc
        if need is not None and need not in names:
            conn.close()
            raise RealprobeError(f"{p}: has no `{need}` table; run `realprobe probe` first")
        return conn

    def migrate(self) -> None:
        """Before a read: open the file for writing only when it needs it (an older schema to
        migrate, or runs still marked running, one of which may belong to a killed process);
        a file that is read-only, locked or not a database is left for the reader to report."""
        try:
            conn = self.read(need="probe_runs")
        except RealprobeError:
            return
        try:
            version = schema_version(conn, "probes")
            running = conn.execute(
                "SELECT 1 FROM probe_runs WHERE status = ? LIMIT 1", [RUN_RUNNING]
            ).fetchone()
        except (sqlite3.Error, ValueError):
            return
        finally:
            conn.close()
        if version == SCHEMA_VERSION and running is None:
            return
        with contextlib.suppress(RealprobeError):
            self.write(busy_timeout_s=2.0).close()

    @property
    def uri(self) -> str:
        """The file as its readers open it: never created, and read-write to SQLite (with
        `read_pragmas` holding the statements to reads) because the last connection to close
        a WAL file removes its -wal and -shm, which a `mode=ro` one leaves behind."""
        return sqlite_uri(self.path, "rw")

    @property
    def columnar(self) -> bool:
        """Which SQLite library reads the rows: ADBC's driver (column-wise, in C) when it is
        installed and this process holds the file open in no other way (the driver links its
        own copy of SQLite, and POSIX locks are per process); else the standard library's,
        through `read`."""
        return find_spec("adbc_driver_sqlite") is not None and not open_here(self.path)

    def write(self, **kw: Any) -> Store:
        """The writer (`Store`): sets up the schema, or migrates an older one."""
        return Store(self, **kw)


def read_error(exc: sqlite3.Error) -> str:
    """Why a read failed, in words (a lock held longer than the wait says so)."""
    if "locked" in str(exc):
        return (
            f"database is locked: another process held an exclusive lock for over "
            f"{busy_timeout_s():g} s; retry later"
        )
    return str(exc)


#: every table realprobe writes (probes, schedules, tasks); a file with tables and none of
#: these belongs to something else
OWN_TABLES = frozenset(
    {"probe_runs", "probes", "api_budget", "schedule_events", "task_runs", "task_steps"}
)


class Ingest(BaseModel):
    """What `Store.insert_probes` did: rows seen, added, and refused by reason."""

    seen: int = 0
    added: int = 0
    refused: dict[str, int] = {}


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


#: the files a Store of this process has open, and how many times
_WRITING: Counter[str] = Counter()


def writing_here(path: Path) -> bool:
    """Whether this process has a Store open on `path` (a second copy of SQLite in the
    process, as a columnar reader links, must then stay away: POSIX locks are per process)."""
    return _WRITING[str(path.resolve())] > 0


def open_here(path: Path) -> bool:
    """Whether this process holds the database file (or its journal) open in any way the OS
    can tell: a Store, or a connection of the caller's own. Where the OS cannot tell (no
    /proc), only a Store counts."""
    if writing_here(path):
        return True
    names = {str(path.resolve()) + end for end in ("", "-wal", "-shm", "-journal")}
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") in names:
                return True
        except OSError:
            continue
    return False


class Store:
    _open = ""
    #: rows this store added since it last looked for rows to seal
    _fresh = 0

    def __init__(
        self,
        db: str | Path | Database | None = None,
        *,
        busy_timeout_s: float = BUSY_TIMEOUT_MS / 1000,
        force: bool = False,
    ) -> None:
        """Open and set up the database `db` (a path is opened by `open_db`).

        Only the default location gets its folders made; a path given by the caller must be
        in an existing folder. A SQLite file that holds tables and none of realprobe's is
        refused (nothing added, journal mode untouched) unless `force`."""
        self.path = open_db(db).path
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # by URI, like `Database.read`: SQLite reads a name starting `file:` as a URI itself
            conn = sqlite3.connect(sqlite_uri(self.path, "rwc"), uri=True,
                                   timeout=busy_timeout_s, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            import sqlite_utils  # only a writer needs it

            self.db = sqlite_utils.Database(conn)
            if not force:
                _refuse_foreign(self.path, self.db)
            self.db.enable_wal()
            conn.execute("PRAGMA synchronous = NORMAL")
            self.ensure_schema()
        except sqlite3.Error as exc:
            raise db_error(self.path, exc) from exc
        except OSError as exc:
            raise RealprobeError(f"{self.path}: cannot open database ({exc.strerror})") from exc
        self._open = str(self.path.resolve())
        _WRITING[self._open] += 1

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
            if 1 <= have < 4:
                self._backfill_row_keys()
            set_schema_version(db, "probes", SCHEMA_VERSION)
        probes = self.db.table("probes")
        probes.create_index(["tool", "started_ts"], if_not_exists=True)
        probes.create_index(["run_id"], if_not_exists=True)
        # readers select by kind, in (tool, time) order; the provenance survey reads this
        # covering index instead of the table
        probes.create_index(["target_kind", "tool", "started_ts"], if_not_exists=True)
        probes.create_index(PROVENANCE_INDEX, if_not_exists=True)
        # the loader's side questions, answered from indexes alone: rows per tool of a
        # selection (every column a selection filters on), and whether it holds simulated rows
        probes.create_index(SELECTION_INDEX, if_not_exists=True)
        self.conn.execute(
            "CREATE INDEX IF NOT EXISTS idx_probes_virtual ON probes (target_kind, run_id) "
            "WHERE virtual_s IS NOT NULL"
        )
        self.conn.execute(
            "CREATE UNIQUE INDEX IF NOT EXISTS probes_row_key ON probes(row_key)"
        )
        import realprobe.chunks as chunks

        chunks.ensure(self.conn)  # the column-wise copy the readers take (a derived index)
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

    def _backfill_row_keys(self) -> None:
        """Rows stored before schema 4 get their content key (a key an older merge wrote is
        replaced: it was a claimed key, not the content's); a repeated call keeps its row
        under `<key>:<id>`."""
        conn = self.conn
        conn.execute("DROP INDEX IF EXISTS probes_row_key")
        names = [r[1] for r in conn.execute("PRAGMA table_info(probes)")]
        last = -1
        with conn:
            while True:
                rows = conn.execute(
                    "SELECT * FROM probes WHERE id > ? ORDER BY id LIMIT 5000", [last]
                ).fetchall()
                if not rows:
                    break
                last = rows[-1][0]
                conn.executemany("UPDATE probes SET row_key = ? WHERE id = ?", [
                    (row_key(dict(zip(names, r, strict=True))), r[0]) for r in rows
                ])
            conn.execute(
                "UPDATE probes SET row_key = row_key || ':' || id WHERE id NOT IN "
                "(SELECT MIN(id) FROM probes GROUP BY row_key)"
            )

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

    def insert_probe(self, row: dict[str, Any]) -> bool:
        """Check (`check_probe_row`: secrets scrubbed, numbers finite, known codes, ...) and
        commit one call's row; a killed process keeps every committed row. False when the
        same call is already stored (its content key); `RowRefused` for a bad row."""
        return self._insert([check_probe_row(row)]) == 1

    def insert_probes(self, rows: Iterable[dict[str, Any]], *, origin: str) -> Ingest:
        """Many rows from elsewhere (a merge): each checked like `insert_probe`; refused rows
        go to the quarantine table with their reason, the same call stored twice is one."""
        seen, added, refused = 0, 0, Counter[str]()
        batch: list[dict[str, Any]] = []
        bad: list[tuple[float, str, str, str, str]] = []
        now = time.time()
        for row in rows:
            seen += 1
            try:
                batch.append(check_probe_row(row, now))
            except RowRefused as exc:
                refused[exc.reason] += 1
                bad.append((now, origin, exc.reason, str(exc)[:300], quarantine_row(row)))
            if len(batch) >= 5_000:
                added += self._insert(self._new(batch))
                batch = []
        added += self._insert(self._new(batch))
        self._quarantine(bad)
        return Ingest(seen=seen, added=added, refused=dict(refused))

    def _new(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows whose content key is not stored yet: a repeat never reaches the INSERT,
        whose trigger would drop the chunk holding the stored row (it cannot tell a row about
        to be ignored from one about to be replaced), so merging again keeps the file sealed."""
        keys = [r["row_key"] for r in rows]
        known: set[str] = set()
        for i in range(0, len(keys), 500):
            part = keys[i:i + 500]
            known.update(k for (k,) in self.conn.execute(
                f"SELECT row_key FROM probes WHERE row_key IN ({','.join('?' * len(part))})",
                part))
        return [r for r in rows if r["row_key"] not in known]

    def _insert(self, rows: list[dict[str, Any]]) -> int:
        """INSERT OR IGNORE checked rows (the unique content key drops a repeat); probe rows
        added (what the chunk triggers drop is not counted)."""
        if not rows:
            return 0
        sql = (
            f"INSERT OR IGNORE INTO probes ({', '.join(_PROBE_INSERT_KEYS)}) "
            f"VALUES ({', '.join('?' * len(_PROBE_INSERT_KEYS))})"
        )
        try:
            with self.conn:
                added = self.conn.executemany(
                    sql, ([r.get(k) for k in _PROBE_INSERT_KEYS] for r in rows)
                ).rowcount
        except sqlite3.Error as exc:
            raise db_error(self.path, exc) from exc
        self._fresh += added
        if self._fresh >= SEAL_CHECK_ROWS:  # a chunk at a time: no call waits long on it
            self._fresh = 0
            self._seal_quietly(most=1)
        return added

    def _seal_quietly(self, most: int | None) -> None:
        """`seal`, for the writer's own upkeep: the chunks are an index the readers can do
        without, so a file too busy now is sealed at the next look."""
        import realprobe.chunks as chunks

        with contextlib.suppress(sqlite3.OperationalError):
            chunks.seal(self.conn, most=most)

    def seal(self, *, most: int | None = None) -> int:
        """Seal unsealed rows into column-wise chunks (`chunks.seal`; `most`: chunks at most,
        None: every full one); the rows sealed. Done as rows are added; a file filled by other
        means (a bulk import, an older realprobe) is sealed by calling this."""
        import realprobe.chunks as chunks

        try:
            return chunks.seal(self.conn, most=most)
        except sqlite3.Error as exc:
            raise db_error(self.path, exc) from exc

    def _quarantine(self, rows: list[tuple[float, str, str, str, str]]) -> None:
        """Keep refused rows once: the same row refused for the same reason again (a merge
        run twice, or the same file under another name) is not added again."""
        if not rows:
            return
        table = self.db.table(QUARANTINE_TABLE)
        with self.conn:
            if not table.exists():
                table.create(QUARANTINE_COLUMNS, pk="id")
            self.conn.execute(
                f"CREATE INDEX IF NOT EXISTS {QUARANTINE_TABLE}_row "
                f"ON {QUARANTINE_TABLE} (row)"
            )
            self.conn.executemany(
                f"INSERT INTO {QUARANTINE_TABLE} (ts, origin, reason, message, row) "
                f"SELECT ?, ?, ?, ?, ?5 WHERE NOT EXISTS (SELECT 1 FROM {QUARANTINE_TABLE} "
                "WHERE row = ?5 AND reason = ?3)", rows,
            )

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
        self._seal_quietly(most=None)  # a run's end: every full chunk (an older file's too)

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
        if self._open:
            _WRITING[self._open] -= 1
            self._open = ""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- schema version ---------------------------------------------------------------------


def schema_version(db: sqlite_utils.Database | sqlite3.Connection, part: str) -> int:
    """Version of `part` (probes | tasks) in `db`: 0 when its tables do not exist yet, 1 when
    they were made before versions were kept (plain SQL: a reader need not load
    sqlite_utils)."""
    conn = db if isinstance(db, sqlite3.Connection) else db.conn

    def exists(table: str) -> bool:
        return conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [table]
        ).fetchone() is not None

    if exists(META_TABLE):
        row = conn.execute(
            f"SELECT value FROM {META_TABLE} WHERE key = ?", [f"schema:{part}"]
        ).fetchone()
        if row is not None:
            return int(row[0])
    first = "probes" if part == "probes" else "task_runs"
    return 1 if exists(first) else 0


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
    implicit: str | None = None,
) -> dict[str, Any]:
    """The `probes` row of one finished call (PROBES_COLUMNS). `started_wall` is the real
    moment the call started; `virtual_s` its place on a simulated run's virtual clock."""
    err = result.error
    check_started_ts(started_wall)
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
        "detail": err.message if err is not None else "",  # cut when stored, after scrubbing
        "timeout_s": timeout_s,
        # an answer realprobe's own sandbox made (a catalogue it does not serve, no fixture)
        # is an infrastructure failure, never the API's
        "excluded": int(err is not None and err.infrastructure is not None),
        "source": source,
        "args": args,
        "target_kind": target.kind.value,
        "target": target.label,
        "virtual_s": virtual_s,
        "request_id": result.request_id,
        "implicit": implicit,
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


# -- one write path for rows: every row entering a database passes these checks -------------

#: a row may be stamped this far ahead of this host's clock (another vantage's clock drifts)
FUTURE_SKEW_S = 300.0
#: longest text in a label-like column (tool, api, vantage, run id, codes, kinds)
MAX_LABEL = 200
#: longest text anywhere else (the target label, the issuer, the JSON columns)
MAX_TEXT = 16_384
KNOWN_CODES = frozenset(c.value for c in ErrorCode)
KNOWN_KINDS = frozenset(k.value for k in TargetKind)
_FLOATS = frozenset(k for k, t in PROBES_COLUMNS.items() if t is float)
_INTS = frozenset(k for k, t in PROBES_COLUMNS.items() if t is int and k != "id")
_LABELS = ("tool", "api", "vantage", "run_id", "source", "target_kind", "error_code",
           "outcome", "started_at")
_JSON = ("rate_limit", "redirects", "args")
#: columns a row's content key leaves out: where it is stored, not what the call was
_NOT_CONTENT = frozenset({"id", "run_id", "excluded", "row_key"})
_NON_NEGATIVE = frozenset(
    ("latency_ms", "bytes", "retry_after", "timeout_s", *PHASE_COLUMNS)
)
#: checked against closed sets (and run ids, kept as they are): not scrubbed first
_CLOSED = ("id", "run_id", "outcome", "error_code", "target_kind", "source", "started_at")
_SKIP = frozenset({"started_ts", "row_key"})


class RowRefused(RealprobeError, ValueError):
    """A row the database does not take; `reason` is its kind (one word, for counting)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def check_started_ts(value: object, now: float | None = None) -> float:
    """A row's start: a finite epoch-seconds number, not after now (plus a small skew)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RowRefused("bad_time", f"started_ts {str(value)[:40]!r} is not a number")
    ts = float(value) if _finite(value) else math.inf
    if not math.isfinite(ts) or ts < 0:
        raise RowRefused("bad_time", f"started_ts {ts!r} is not a time")
    limit = (time.time() if now is None else now) + FUTURE_SKEW_S
    if ts > limit:
        try:
            when = iso_utc(ts)
        except (ValueError, OverflowError, OSError):  # past the calendar datetime knows
            when = f"{ts:g} s after 1970"
        raise RowRefused("future_time", f"row stamped in the future ({when})")
    return ts


def _number(key: str, value: object) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if not isinstance(value, int | float) or not _finite(value):
        raise RowRefused("bad_number", f"{key} {str(value)[:40]!r} is not a finite number")
    if key in _INTS:
        if value != int(value) or not _finite(int(value)):  # a whole float past 64 bits too
            raise RowRefused("bad_number", f"{key} {value!r} is not a 64-bit whole number")
        return int(value)
    if key in _NON_NEGATIVE and value < 0:
        raise RowRefused("bad_number", f"{key} {value!r} is negative")
    return float(value)


def _finite(value: float) -> bool:
    """A number SQLite stores as it is: finite, and an int within 64 bits (a larger one
    fails the insert itself with an OverflowError)."""
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int past any float
        return False


def _text(key: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        value = json.dumps(value, default=str) if key in _JSON else str(value)
    if key == "detail":
        return value[:DETAIL_MAX]  # cut after scrubbing: no half secret survives the cut
    cap = MAX_LABEL if key in _LABELS else MAX_TEXT
    if len(value) > cap:
        raise RowRefused("too_large", f"{key} is {len(value)} characters (at most {cap})")
    return value


def _check_labels(row: dict[str, Any]) -> None:
    for key in ("tool", "api"):
        if not row.get(key):
            raise RowRefused("missing", f"the row has no {key}")
    if row.get("outcome") not in ("ok", "error"):
        raise RowRefused("bad_outcome", f"outcome {str(row.get('outcome'))[:40]!r}: ok or error")
    code = row.get("error_code")
    if code is not None and code not in KNOWN_CODES:
        raise RowRefused("unknown_code", f"error_code {code[:40]!r} is not a known code")
    if row["target_kind"] not in KNOWN_KINDS:
        raise RowRefused("unknown_kind", f"target_kind {row['target_kind'][:40]!r} is unknown")
    if row["source"] not in SOURCES:
        raise RowRefused("unknown_source", f"source {row['source'][:40]!r} is unknown")


def check_probe_row(row: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """The row as stored, or `RowRefused`: secrets scrubbed first (then long text cut), known
    columns only, finite numbers, a start not in the future, known codes, kinds and sources,
    bounded text; defaults filled and its content key (`row_key`) set."""
    extra = row.keys() - PROBES_COLUMNS.keys()
    if extra:
        raise RowRefused("unknown_column", f"unknown probe columns: {sorted(extra)[:5]}")
    out: dict[str, Any] = {**PROBES_DEFAULTS, **scrub_row(row, keep=_CLOSED)}
    for key, default in PROBES_DEFAULTS.items():
        if out[key] is None:  # a NULL (a generated column's) stands for the default too
            out[key] = default
    for key, value in out.items():
        if value is None or key in _SKIP:
            continue
        kind = type(value)
        if kind is float and key in _FLOATS and math.isfinite(value) and (
            value >= 0 or key not in _NON_NEGATIVE
        ):
            continue  # the common case, checked inline
        if kind is str and key not in _FLOATS and key not in _INTS and (
            len(value) <= (MAX_LABEL if key in _LABELS else DETAIL_MAX)
        ):
            continue
        if key in _FLOATS or key in _INTS:
            out[key] = _number(key, value)
        else:
            out[key] = _text(key, value)
    out["started_ts"] = check_started_ts(out.get("started_ts"), now)
    _check_labels(out)
    out.pop("id", None)
    out["row_key"] = row_key(out)
    return out


def check_table_row(
    row: dict[str, Any], columns: dict[str, Any], what: str, now: float | None = None
) -> dict[str, Any]:
    """A row of another table (task runs and steps) as stored, or `RowRefused`: the same
    rules as a probe row where they apply. Known columns only, finite numbers of the
    column's type, a start (`started_at`, ISO time) not in the future, known kinds and
    sources; text is cut at MAX_TEXT (the caller scrubs secrets first, so nothing half a
    secret survives the cut)."""
    extra = row.keys() - columns.keys()
    if extra:
        raise RowRefused("unknown_column", f"unknown {what} columns: {sorted(extra)[:5]}")
    out: dict[str, Any] = {}
    for key, value in row.items():
        if value is None:
            out[key] = None
        elif columns[key] in (int, float):
            out[key] = _typed_number(what, key, value, columns[key])
        else:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            out[key] = text[:MAX_TEXT]
    started = out.get("started_at")
    if started is not None:
        try:
            ts = dt.datetime.fromisoformat(str(started).replace("Z", "+00:00")).timestamp()
        except ValueError:
            why = f"{what} started_at {started[:40]!r} is not a time"
            raise RowRefused("bad_time", why) from None
        check_started_ts(ts, now)
    if out.get("target_kind") not in (None, *KNOWN_KINDS):
        raise RowRefused("unknown_kind", f"{what} target_kind {out['target_kind'][:40]!r}")
    if out.get("source") not in (None, *SOURCES):
        raise RowRefused("unknown_source", f"{what} source {out['source'][:40]!r}")
    return out


def check_run_row(row: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """A `probe_runs` row from elsewhere (a merge) as stored, or `RowRefused`: the rules of
    `check_table_row`, a start (`started_ts`) that is a time, a known status, and an id and
    vantage short enough to be labels (cutting them would change which rows are the run's)."""
    if row.get("started_ts") is not None:  # a start that is no time is bad_time, as in probes
        row = {**row, "started_ts": check_started_ts(row["started_ts"], now)}
    out = check_table_row(row, PROBE_RUNS_COLUMNS, "probe run", now)
    for key in ("id", "vantage"):
        value = row.get(key)
        if value is not None and len(str(value)) > MAX_LABEL:
            raise RowRefused("too_large", f"probe run {key} of {len(str(value)):,} characters")
    if not out.get("id"):
        raise RowRefused("bad_label", "probe run without an id")
    if out.get("status") not in (None, *RUN_STATUSES):
        raise RowRefused("unknown_status", f"probe run status {out['status'][:40]!r}")
    return out


def _typed_number(what: str, key: str, value: object, kind: type) -> int | float:
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, int | float) or not _finite(value):
        raise RowRefused("bad_number", f"{what} {key} {str(value)[:40]!r} is not a finite number "
                         "SQLite can store")
    if kind is int:
        if value != int(value) or not _finite(int(value)):  # a whole float past 64 bits too
            raise RowRefused("bad_number", f"{what} {key} {value!r} is not a 64-bit whole number")
        return int(value)
    return value


def row_key(row: dict[str, Any]) -> str:
    """A row's idempotency key: a hash of what the call was (every column but where it is
    stored: id, run id, exclusion). Rows are keyed by content, never by a key a source
    claims, so a file cannot shadow another file's rows, and a row with no run id is still
    found again on the next merge."""
    items = sorted(
        (k, v) for k, v in {**PROBES_DEFAULTS, **row}.items()
        if k not in _NOT_CONTENT and v is not None
    )
    blob = json.dumps(items, separators=(",", ":"), default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:32]


def quarantine_row(row: dict[str, Any]) -> str:
    """A refused row as JSON for the quarantine table: secrets out, every value cut short."""
    cut = {k: (v[:300] if isinstance(v, str) else v) for k, v in scrub_row(row).items()}
    return json.dumps(cut, default=str)[:8192]


# -- imported histories: what uptime monitors recorded, kept apart from realprobe's own rows --
#
# Rows a monitor recorded (`imported_checks`), and time it implied or did not watch
# (`imported_intervals`: `observed` runs of one state, `censored` gaps, declared `incident`
# windows), per monitor (`imported_monitors`). No reader of `probes` sees them; each row
# names its monitor, its source (`upptime:owner/repo@commit`, ...) and the monitor's vantage.
# Natural keys make an import idempotent: the same history imported again adds nothing.

HISTORY_SCHEMA_VERSION = 1
#: the kind every imported row carries (never a target kind of realprobe's own calls)
IMPORTED_KIND = "imported"

IMPORTED_MONITORS_COLUMNS: dict[str, Any] = {
    "monitor_key": str,  # upptime:owner/repo#slug, kuma:<name>#<id>, ...
    "monitor": str,  # the short name shown
    "monitor_kind": str,  # upptime | kuma | gatus | prometheus | statuspage
    "name": str,
    "url": str,
    "source": str,  # the import's source: upptime:owner/repo@commit, kuma:<file>, ...
    "vantage": str,  # where the monitor checked from
    "cadence_configured_s": float,
    "cadence_s": float,  # the spacing the monitor really had
    "cadence_how": str,
    #: a longer silence between two recorded checks is censored (the monitor did not run)
    "gap_limit_s": float,
    "first_ts": float,
    "last_ts": float,
    "published": str,  # JSON: the monitor's own figures (a labelled cross-check)
    "detail": str,
    "imported_at": str,
}
IMPORTED_CHECKS_COLUMNS: dict[str, Any] = {
    "id": int,
    "monitor_key": str,
    "ts": float,
    "at": str,
    "state": str,  # up | down | degraded | pending | maintenance
    "ok": int,
    "http_status": int,  # 0: no answer
    "error_code": str,
    "latency_ms": float,  # only where the monitor measured it per check
    "detail": str,
    "source": str,
    "vantage": str,
    "kind": str,  # always IMPORTED_KIND
}
IMPORTED_INTERVALS_COLUMNS: dict[str, Any] = {
    "id": int,
    "monitor_key": str,
    "kind": str,  # observed | censored | incident
    "state": str,  # observed: up | down | degraded; incident: its impact
    "start_ts": float,
    "end_ts": float,
    "count": int,  # checks in it: recorded, or implied at the configured cadence
    "recorded": int,  # 1: the count are recorded checks; 0: implied between records
    "reason": str,  # why censored; an incident's name
    "ref": str,  # an incident's id ('' otherwise: part of the natural key)
    "source": str,
    "vantage": str,
}
_HISTORY_KEYS = {
    "imported_checks": ("monitor_key", "ts"),
    "imported_intervals": ("monitor_key", "kind", "start_ts", "ref"),
}


def ensure_history_schema(store: Store) -> None:
    """Create the imported-history tables (schema part `history`), once."""
    db = store.db
    have = schema_version(db, "history")
    if have > HISTORY_SCHEMA_VERSION:
        raise RealprobeError(
            f"{store.path}: imported history written by a newer realprobe (schema {have}); "
            "upgrade realprobe to use this database"
        )
    if have == HISTORY_SCHEMA_VERSION and db.table("imported_intervals").exists():
        return
    with store.conn:
        db.table("imported_monitors").create(
            IMPORTED_MONITORS_COLUMNS, pk="monitor_key", transform=True)
        db.table("imported_checks").create(IMPORTED_CHECKS_COLUMNS, pk="id", transform=True)
        db.table("imported_intervals").create(
            IMPORTED_INTERVALS_COLUMNS, pk="id", transform=True)
        for table, key in _HISTORY_KEYS.items():
            store.conn.execute(
                f"CREATE UNIQUE INDEX IF NOT EXISTS {table}_key ON {table} ({', '.join(key)})"
            )
        set_schema_version(db, "history", HISTORY_SCHEMA_VERSION)


def insert_history(
    store: Store,
    monitors: list[dict[str, Any]],
    checks: Iterable[dict[str, Any]],
    intervals: Iterable[dict[str, Any]],
) -> tuple[int, int]:
    """One import in one transaction: monitors upserted, checks and intervals added unless
    their natural key is stored already. (checks added, intervals added); nothing is
    written when anything fails. Each check names every column of IMPORTED_CHECKS_COLUMNS
    but `id` and `at` (None where unknown; `at` is written from `ts`)."""
    ensure_history_schema(store)
    conn = store.conn
    ck = [k for k in IMPORTED_CHECKS_COLUMNS if k not in ("id", "at")]  # `at`: from `ts`
    ik = [k for k in IMPORTED_INTERVALS_COLUMNS if k != "id"]
    mk = list(IMPORTED_MONITORS_COLUMNS)
    try:
        with conn:
            conn.executemany(
                f"INSERT OR REPLACE INTO imported_monitors ({', '.join(mk)}) "
                f"VALUES ({', '.join('?' * len(mk))})",
                ([m.get(k) for k in mk] for m in monitors),
            )
            before = conn.total_changes
            conn.executemany(
                f"INSERT OR IGNORE INTO imported_checks ({', '.join(ck)}, at) "
                f"VALUES ({', '.join('?' * len(ck))}, "
                "strftime('%Y-%m-%dT%H:%M:%fZ', ?, 'unixepoch'))",
                map(itemgetter(*ck, "ts"), checks),  # every column named (None: unknown)
            )
            added_checks = conn.total_changes - before
            before = conn.total_changes
            conn.executemany(
                f"INSERT OR IGNORE INTO imported_intervals ({', '.join(ik)}) "
                f"VALUES ({', '.join('?' * len(ik))})",
                ([{"ref": "", **iv}.get(k) for k in ik] for iv in intervals),
            )
            added_intervals = conn.total_changes - before
    except sqlite3.Error as exc:
        raise db_error(store.path, exc) from exc
    return added_checks, added_intervals

