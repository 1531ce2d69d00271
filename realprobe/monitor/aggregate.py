"""Incremental aggregation of the `probes` table, for scrapes that must not scan it.

The first refresh reads every row once; each later refresh reads only rows with a larger
`id` (the table is append-only) plus the runs that were marked `excluded` since. Those rows
(a run that turned out to be the prober's own network failure) are taken out of the windowed
ratios, but counters and the latency histogram never go down (Prometheus would read a drop
as a restart): they stay counted and are added to `excluded` instead.

Per series (tool, api, target kind, vantage) it keeps call counts by outcome and code, a
histogram of successful latencies, and per-minute buckets of the last 24 hours for windowed
success ratios, so a scrape costs the new rows, not the database.

Label values are bounded: tool and api names must look like catalogue names, target kinds
come from a fixed set, and at most `MAX_VANTAGES` vantages get their own label (the rest
are reported as `other`), so a hostile or merged database cannot blow up cardinality.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from realprobe.errors import RealprobeError
from realprobe.store import read_only

#: histogram bucket upper bounds for successful latencies, in seconds
LATENCY_BUCKETS_S = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: per-minute buckets kept for windowed ratios and the status page
KEEP_MINUTES = 24 * 60
MAX_VANTAGES = 64
MAX_SERIES = 20_000
TARGET_KINDS = frozenset({"live", "sandbox", "simulate", "replay"})
_NAME = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
_BATCH = 5_000

SeriesKey = tuple[str, str, str, str]  # tool, api, target_kind, vantage


def label(value: object, allowed: re.Pattern[str] = _NAME) -> str:
    text = "" if value is None else str(value)
    return text if allowed.match(text) else "other"


@dataclass
class Series:
    """Everything a scrape needs about one (tool, api, target kind, vantage)."""

    calls: Counter[tuple[str, str]] = field(default_factory=Counter)  # (outcome, code)
    #: of `calls`, those whose run was marked excluded after they were counted
    excluded: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_S) + 1))
    latency_sum_s: float = 0.0
    ok_count: int = 0
    minutes: dict[int, list[int]] = field(default_factory=dict)  # minute -> [n, n_ok]
    last_ts: float | None = None
    last_ok_ts: float | None = None

    def window(self, since_ts: float) -> tuple[int, int]:
        """(calls, successes) since `since_ts` (minute resolution)."""
        first = int(since_ts // 60)
        n = k = 0
        for minute, (mn, mk) in self.minutes.items():
            if minute >= first:
                n += mn
                k += mk
        return n, k


@dataclass
class TlsSeen:
    expires_ts: float
    issuer: str
    seen_ts: float


@dataclass
class _Row:
    tool: str
    api: str
    kind: str
    vantage: str
    outcome: str
    code: str
    latency_ms: float
    ts: float


class Aggregator:
    """Counters over one probe database, refreshed incrementally (thread-safe)."""

    def __init__(self, db_path: str | Path, *, source: str | None = None) -> None:
        self.db_path = Path(db_path)
        self.source = source
        self.series: dict[SeriesKey, Series] = {}
        self.tls: dict[str, TlsSeen] = {}  # api -> last certificate seen
        self.last_id = 0
        self.rows_seen = 0
        self.excluded_runs: set[str] = set()
        self.vantages: set[str] = set()
        self.refresh_errors = 0
        self.last_error: str | None = None
        self.last_refresh_s = 0.0
        self._lock = threading.Lock()
        self._columns: set[str] | None = None

    # -- reading ----------------------------------------------------------------------

    def _probe_columns(self, conn: sqlite3.Connection) -> set[str]:
        if self._columns is None or "target_kind" not in self._columns:
            self._columns = {r[1] for r in conn.execute("PRAGMA table_info(probes)")}
        return self._columns

    def _select(self, cols: set[str]) -> str:
        kind = "target_kind" if "target_kind" in cols else "'live'"
        tls = (
            "tls_expires_ts, tls_issuer"
            if {"tls_expires_ts", "tls_issuer"} <= cols
            else "NULL, NULL"
        )
        return (
            f"SELECT id, tool, api, {kind}, vantage, outcome, error_code, latency_ms, "
            f"started_ts, {tls}, run_id FROM probes"
        )

    def refresh(self) -> None:
        """Fold new rows (and newly excluded runs) into the counters."""
        t0 = time.perf_counter()
        with self._lock:
            if not self.db_path.exists():
                self.last_error = f"no database at {self.db_path}"
                self.refresh_errors += 1
                return
            try:
                conn = read_only(self.db_path, need=None)
            except RealprobeError as exc:
                self.last_error = str(exc)
                self.refresh_errors += 1
                return
            try:
                names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
                if "probes" not in names:
                    return
                cols = self._probe_columns(conn)
                self._read_new(conn, cols)
                if "probe_runs" in names:
                    self._take_back_excluded(conn, cols)
                self._prune()
                self.last_error = None
            except sqlite3.Error as exc:
                self.last_error = str(exc)
                self.refresh_errors += 1
            finally:
                conn.close()
                self.last_refresh_s = time.perf_counter() - t0

    def _where_source(self, cols: set[str]) -> tuple[str, list[object]]:
        if self.source and "source" in cols:
            return " AND source = ?", [self.source]
        return "", []

    def _read_new(self, conn: sqlite3.Connection, cols: set[str]) -> None:
        if self.last_id == 0:
            self._bulk_load(conn, cols)
            return
        extra, params = self._where_source(cols)
        cur = conn.execute(
            self._select(cols) + f" WHERE id > ? AND COALESCE(excluded, 0) = 0{extra} "
            "ORDER BY id",
            [self.last_id, *params],
        )
        while True:
            batch = cur.fetchmany(_BATCH)
            if not batch:
                break
            for row in batch:
                self._apply(row, +1)
            self.last_id = max(self.last_id, int(batch[-1][0]))
        # rows inserted already excluded still move the cursor
        top = conn.execute("SELECT MAX(id) FROM probes").fetchone()[0]
        if top is not None:
            self.last_id = max(self.last_id, int(top))

    def _bulk_load(self, conn: sqlite3.Connection, cols: set[str]) -> None:
        """The first read: aggregate in SQL (a few scans) instead of row by row."""
        top = conn.execute("SELECT MAX(id) FROM probes").fetchone()[0]
        if top is None:
            return
        extra, params = self._where_source(cols)
        kind = "target_kind" if "target_kind" in cols else "'live'"
        keys = f"tool, api, {kind}, vantage"
        where = f"id <= ? AND COALESCE(excluded, 0) = 0{extra}"
        args = [top, *params]
        for tool, api, k, vantage, outcome, code, n, lat_sum, last, last_ok in conn.execute(
            f"SELECT {keys}, outcome, error_code, COUNT(*), "
            "SUM(CASE WHEN outcome = 'ok' THEN latency_ms ELSE 0 END), MAX(started_ts), "
            f"MAX(CASE WHEN outcome = 'ok' THEN started_ts END) FROM probes WHERE {where} "
            "GROUP BY 1, 2, 3, 4, 5, 6", args,
        ):
            s = self._series(tool, api, k, vantage)
            if s is None:
                continue
            ok = outcome == "ok"
            s.calls[("ok", "") if ok else ("error", label(code))] += n
            self.rows_seen += n
            if ok:
                s.ok_count += n
                s.latency_sum_s += float(lat_sum or 0.0) / 1000.0
            s.last_ts = _max(s.last_ts, last)
            s.last_ok_ts = _max(s.last_ok_ts, last_ok)
        case = " ".join(
            f"WHEN latency_ms <= {b * 1000.0!r} THEN {i}" for i, b in enumerate(LATENCY_BUCKETS_S)
        )
        for tool, api, k, vantage, bucket, n in conn.execute(
            f"SELECT {keys}, CASE {case} ELSE {len(LATENCY_BUCKETS_S)} END, COUNT(*) "
            f"FROM probes WHERE {where} AND outcome = 'ok' GROUP BY 1, 2, 3, 4, 5", args,
        ):
            s = self._series(tool, api, k, vantage)
            if s is not None:
                s.buckets[int(bucket)] += n
        horizon = (time.time() // 60 - KEEP_MINUTES) * 60
        for tool, api, k, vantage, minute, n, n_ok in conn.execute(
            f"SELECT {keys}, CAST(started_ts / 60 AS INTEGER), COUNT(*), "
            f"SUM(outcome = 'ok') FROM probes WHERE {where} AND started_ts >= ? "
            "GROUP BY 1, 2, 3, 4, 5", [*args, horizon],
        ):
            s = self._series(tool, api, k, vantage)
            if s is not None:
                cell = s.minutes.setdefault(int(minute), [0, 0])
                cell[0] += n
                cell[1] += n_ok
        if {"tls_expires_ts", "tls_issuer"} <= cols:
            for api, expires, issuer, ts in conn.execute(
                "SELECT api, tls_expires_ts, tls_issuer, started_ts FROM probes WHERE id IN "
                "(SELECT MAX(id) FROM probes WHERE tls_expires_ts IS NOT NULL AND id <= ? "
                "GROUP BY api)", [top],
            ):
                self.tls[label(api)] = TlsSeen(float(expires), str(issuer or ""), float(ts))
        self.last_id = int(top)

    def _take_back_excluded(self, conn: sqlite3.Connection, cols: set[str]) -> None:
        runs = {r[0] for r in conn.execute("SELECT id FROM probe_runs WHERE excluded = 1")}
        new = runs - self.excluded_runs
        extra, params = self._where_source(cols)
        for run_id in sorted(new):
            for row in conn.execute(
                self._select(cols) + f" WHERE run_id = ? AND id <= ?{extra}",
                [run_id, self.last_id, *params],
            ):
                self._apply(row, -1)
        self.excluded_runs |= new

    # -- folding ----------------------------------------------------------------------

    def _series(self, tool: object, api: object, kind: object, vantage: object
                ) -> Series | None:
        """The series of these label values (bounded), created on first use."""
        k = str(kind or "live")
        k = k if k in TARGET_KINDS else "other"
        v = label(vantage)
        if v not in self.vantages:
            if len(self.vantages) >= MAX_VANTAGES:
                v = "other"
            else:
                self.vantages.add(v)
        key = (label(tool), label(api), k, v)
        s = self.series.get(key)
        if s is None:
            if len(self.series) >= MAX_SERIES:
                return None
            s = self.series[key] = Series()
        return s

    def _apply(self, row: tuple[object, ...], sign: int) -> None:
        s = self._series(row[1], row[2], row[3], row[4])
        if s is None:
            return
        ok = row[5] == "ok"
        code = "" if ok else label(row[6])
        ts = float(row[8] or 0.0)  # type: ignore[arg-type]
        latency_s = float(row[7] or 0.0) / 1000.0  # type: ignore[arg-type]
        if sign > 0:
            s.calls[("ok" if ok else "error", code)] += 1
            if ok:
                s.ok_count += 1
                s.latency_sum_s += latency_s
                s.buckets[_bucket(latency_s)] += 1
        else:  # taken back: counters stay monotonic, the call is counted as excluded
            s.excluded += 1
        minute = int(ts // 60)
        cell = s.minutes.setdefault(minute, [0, 0])
        cell[0] += sign
        cell[1] += sign if ok else 0
        self.rows_seen += sign
        if sign > 0:
            s.last_ts = ts if s.last_ts is None else max(s.last_ts, ts)
            if ok:
                s.last_ok_ts = ts if s.last_ok_ts is None else max(s.last_ok_ts, ts)
            if row[9] is not None:
                api = label(row[2])
                seen = self.tls.get(api)
                if seen is None or ts >= seen.seen_ts:
                    self.tls[api] = TlsSeen(float(row[9]), str(row[10] or ""), ts)  # type: ignore[arg-type]

    def _prune(self) -> None:
        newest = max((s.last_ts or 0.0 for s in self.series.values()), default=0.0)
        horizon = int(max(newest, time.time()) // 60) - KEEP_MINUTES
        for s in self.series.values():
            old = [m for m in s.minutes if m < horizon]
            for m in old:
                del s.minutes[m]

    # -- snapshots --------------------------------------------------------------------

    def snapshot(self) -> dict[SeriesKey, Series]:
        with self._lock:
            return dict(self.series)


def _max(a: float | None, b: object) -> float | None:
    if b is None:
        return a
    value = float(b)  # type: ignore[arg-type]
    return value if a is None else max(a, value)


def _bucket(latency_s: float) -> int:
    for i, bound in enumerate(LATENCY_BUCKETS_S):
        if latency_s <= bound:
            return i
    return len(LATENCY_BUCKETS_S)

