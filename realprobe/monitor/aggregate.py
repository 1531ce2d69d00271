"""Incremental aggregation of the `probes` table, for scrapes that must not scan it.

The first refresh reads every row once; each later refresh reads only rows with a larger
`id` (the table is append-only) plus the runs that were marked `excluded` since. Those rows
(a run that turned out to be the prober's own network failure) are taken out of the windowed
ratios, but counters and the latency histogram never go down (Prometheus would read a drop
as a restart): they stay counted and are added to `excluded` instead.

Per series (tool, api, target kind, vantage) it keeps call counts by outcome and code, a
histogram of successful latencies, and per-minute buckets of the last 24 hours for windowed
success ratios, so a scrape costs the new rows, not the database.

Label values are bounded: error codes and target kinds come from closed sets (the error
taxonomy, the four kinds); tool and api names must look like catalogue names and at most
`MAX_TOOLS` tools, `MAX_APIS` apis, `MAX_VANTAGES` vantages and `MAX_TLS` certificates get
their own label (the rest are reported as `other`), and at most `MAX_SERIES` series exist.
Every value folded into `other` and every row left out is counted in `dropped` (the
`realprobe_labels_dropped_total` metric), so a hostile or merged database cannot blow up
cardinality unseen.

One bad row never breaks a scrape: a row whose start is not a time (text, not finite, in
the future) is left out like every reader leaves it out (`loading.sane_start`), and a value
that is not a number reads as missing.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from realprobe.errors import ErrorCode, RealprobeError
from realprobe.probes.loading import sane_start
from realprobe.store import Database
from realprobe.target import TargetKind

#: histogram bucket upper bounds for successful latencies, in seconds
LATENCY_BUCKETS_S = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: per-minute buckets kept for windowed ratios and the status page
KEEP_MINUTES = 24 * 60
MAX_VANTAGES = 64
MAX_TOOLS = 2_000
MAX_APIS = 1_000
MAX_TLS = 1_000
MAX_SERIES = 20_000
TARGET_KINDS = frozenset(k.value for k in TargetKind)
CODES = frozenset(c.value for c in ErrorCode)
_NAME = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
_BATCH = 5_000

SeriesKey = tuple[str, str, str, str]  # tool, api, target_kind, vantage
Interval = tuple[float, float]


def label(value: object, allowed: re.Pattern[str] = _NAME) -> str:
    text = "" if value is None else str(value)
    return text if allowed.match(text) else "other"


def _number(value: object) -> float | None:
    """A stored value as a finite number, None when it is not one (text, NULL, inf)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass
class Bounded:
    """The label values of one label: each kept as it is until `limit` distinct values were
    seen, then `other`; `dropped` counts the values folded (per label)."""

    limit: int
    seen: set[str] = field(default_factory=set)

    def __call__(self, value: str, dropped: Counter[str], what: str) -> str:
        if value in self.seen:
            return value
        if value == "other":
            dropped[what] += 1
            return value
        if len(self.seen) >= self.limit:
            dropped[what] += 1
            return "other"
        self.seen.add(value)
        return value


@dataclass
class Series:
    """Everything a scrape needs about one (tool, api, target kind, vantage)."""

    calls: Counter[tuple[str, str]] = field(default_factory=Counter)  # (outcome, code)
    #: of `calls`, those whose run was marked excluded after they were counted
    excluded: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_S) + 1))
    latency_sum_s: float = 0.0
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


class Aggregator:
    """Counters over one probe database, refreshed incrementally (thread-safe)."""

    def __init__(self, db: Database, *, source: str | None = None) -> None:
        self.db = db
        self.source = source
        self.series: dict[SeriesKey, Series] = {}
        self.tls: dict[str, TlsSeen] = {}  # api -> last certificate seen
        self.last_id = 0
        self.rows_seen = 0
        self.excluded_runs: set[str] = set()
        self.tools = Bounded(MAX_TOOLS)
        self.apis = Bounded(MAX_APIS)
        self.vantage_labels = Bounded(MAX_VANTAGES)
        #: label values folded into `other` and rows left out, by label (`series`, `tls`)
        self.dropped: Counter[str] = Counter()
        self.refresh_errors = 0
        self.last_error: str | None = None
        self.last_refresh_s = 0.0
        self._lock = threading.Lock()
        self._columns: set[str] | None = None
        self._quoted: dict[int, dict[tuple[str, str, str], Interval]] = {}

    # -- reading ----------------------------------------------------------------------

    def _probe_columns(self, conn: sqlite3.Connection) -> set[str]:
        if self._columns is None or "target_kind" not in self._columns:
            self._columns = {r[1] for r in conn.execute("PRAGMA table_info(probes)")}
        return self._columns

    @property
    def vantages(self) -> set[str]:
        return self.vantage_labels.seen

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
            try:
                conn = self.db.read(need=None)  # a missing file: "no database at ..."
            except RealprobeError as exc:
                self.last_error = str(exc)
                self.refresh_errors += 1
                return
            try:
                names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
                if "probes" not in names:
                    return
                cols = self._probe_columns(conn)
                counted_up_to = self.last_id
                self._read_new(conn, cols)
                if "probe_runs" in names:
                    self._take_back_excluded(conn, cols, counted_up_to)
                self._prune()
                self.last_error = None
            except sqlite3.Error as exc:
                self.last_error = str(exc)
                self.refresh_errors += 1
            finally:
                conn.close()
                self.last_refresh_s = time.perf_counter() - t0

    def _where_source(self, cols: set[str]) -> tuple[str, list[object]]:
        """The rows a scrape folds: a sane start (`sane_start`), this source if one is set."""
        sane, params = sane_start()
        where, args = f" AND {sane}", list(params)
        if self.source and "source" in cols:
            where += " AND source = ?"
            args.append(self.source)
        return where, args

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
            s.calls[("ok", "") if ok else ("error", self._code(code))] += n
            self.rows_seen += n
            if ok:
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
                "(SELECT MAX(id) FROM probes WHERE typeof(tls_expires_ts) = 'real' "
                f"AND id <= ?{extra} GROUP BY api)", args,
            ):
                self._tls_seen(api, expires, issuer, ts)
        self.last_id = int(top)

    def _take_back_excluded(self, conn: sqlite3.Connection, cols: set[str],
                            counted_up_to: int) -> None:
        """Rows of runs marked excluded since the last refresh leave the windows: only rows
        counted before (ids up to `counted_up_to`) that are themselves marked excluded, so a
        run row claiming another run's id (a hostile merge source) cannot take back rows the
        store kept, and rows that arrived already excluded are not taken back twice."""
        runs = {r[0] for r in conn.execute("SELECT id FROM probe_runs WHERE excluded = 1")}
        new = runs - self.excluded_runs
        extra, params = self._where_source(cols)
        for run_id in sorted(new):
            for row in conn.execute(
                self._select(cols) + " WHERE run_id = ? AND id <= ? "
                f"AND COALESCE(excluded, 0) = 1{extra}",
                [run_id, counted_up_to, *params],
            ):
                self._apply(row, -1)
        self.excluded_runs |= new

    # -- folding ----------------------------------------------------------------------

    def _series(self, tool: object, api: object, kind: object, vantage: object
                ) -> Series | None:
        """The series of these label values (bounded), created on first use."""
        k = str(kind or "live")
        if k not in TARGET_KINDS:
            self.dropped["target_kind"] += 1
            k = "other"
        key = (
            self.tools(label(tool), self.dropped, "tool"),
            self.apis(label(api), self.dropped, "api"),
            k,
            self.vantage_labels(label(vantage), self.dropped, "vantage"),
        )
        s = self.series.get(key)
        if s is None:
            if len(self.series) >= MAX_SERIES:
                self.dropped["series"] += 1
                return None
            s = self.series[key] = Series()
        return s

    def _code(self, code: object) -> str:
        """An error code label: one of the taxonomy's codes, else `other` (counted)."""
        text = "" if code is None else str(code)
        if text in CODES:
            return text
        self.dropped["code"] += 1
        return "other"

    def _tls_seen(self, api: object, expires: object, issuer: object, ts: object) -> None:
        """The last certificate seen for an API (at most `MAX_TLS` APIs)."""
        exp, at = _number(expires), _number(ts)
        if exp is None or at is None:
            return
        name = label(api)
        seen = self.tls.get(name)
        if seen is None and len(self.tls) >= MAX_TLS:
            self.dropped["tls"] += 1
            return
        if seen is None or at >= seen.seen_ts:
            self.tls[name] = TlsSeen(exp, str(issuer or "")[:120], at)

    def _apply(self, row: tuple[object, ...], sign: int) -> None:
        s = self._series(row[1], row[2], row[3], row[4])
        if s is None:
            return
        ok = row[5] == "ok"
        code = "" if ok else self._code(row[6])
        ts = _number(row[8]) or 0.0
        latency_s = (_number(row[7]) or 0.0) / 1000.0
        if sign > 0:
            s.calls[("ok" if ok else "error", code)] += 1
            if ok:
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
                self._tls_seen(row[2], row[9], row[10], ts)

    def _prune(self) -> None:
        """Minutes older than the kept span, counted from this host's clock (a row stamped
        far ahead never pushes the other series' minutes out)."""
        horizon = int(time.time() // 60) - KEEP_MINUTES
        for s in self.series.values():
            old = [m for m in s.minutes if m < horizon]
            for m in old:
                del s.minutes[m]

    # -- snapshots --------------------------------------------------------------------

    def snapshot(self) -> dict[SeriesKey, Series]:
        with self._lock:
            return dict(self.series)

    def quoted(self, since: float) -> dict[tuple[str, str, str], Interval]:
        """{(tool, target kind, vantage): the success interval `realprobe stats` quotes} over
        the rows since `since` (`quoted_success`: burst-adjusted, as every surface shows it),
        read at most once a minute per window (a scrape stays a fold of the new rows, not a
        read of the window); a database that cannot be read gives nothing (the ratio is then
        shown without an interval)."""
        from realprobe.probes.loading import load_probes
        from realprobe.probes.stats import ChainPrior, quoted_success

        key = int(since // 60)
        if key in self._quoted:
            return self._quoted[key]
        out: dict[tuple[str, str, str], Interval] = {}
        groups: dict[tuple[str, str], set[str]] = {}
        for k in self.snapshot():
            if k[3] != "other":
                groups.setdefault((k[2], k[3]), set()).add(k[0])
        try:
            conn = self.db.read()
        except RealprobeError:
            return out
        try:
            for (kind, vantage), tools in sorted(groups.items()):
                # by tool, the window is a range of the (kind, tool, time) index, not a scan
                # of every row of the kind (a tool folded into `other` needs the scan)
                names = None if "other" in tools else sorted(tools)
                arr = load_probes(conn, since, None, names, kinds=[kind], vantages=[vantage])
                # a tool with few failures borrows from every tool of these rows, as `stats`
                prior = None if names is None else ChainPrior.of_rows(
                    load_probes(conn, since, None, None, kinds=[kind], vantages=[vantage]))
                for tool, s in quoted_success(arr, prior).items():
                    out[(label(tool), kind, vantage)] = s.quoted95
        except RealprobeError:
            return out
        finally:
            conn.close()
        if len(self._quoted) >= 4:  # the status page's day and the exporter's window
            self._quoted.clear()
        self._quoted[key] = out
        return out


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

