"""Loading probe rows: one read-only SQL query straight into numpy arrays.

A row's error code is an index into CODES (-1 for success), so every statistic downstream is
vectorised; rows with `excluded=1` (the prober's own outages) never leave the database.

Which rows: a time window on the real moment of the call (`started_ts`), tools, and the
provenance filters - target kinds (live, sandbox, simulate, replay) and vantages - so that
callers never pool live with sandbox or simulated rows by accident (`provenance.py` picks
the kinds). A simulated run's rows keep their own virtual timeline: their order and spacing
come from `virtual_s`, anchored so the run's last call sits at its real write time.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

import realprobe.chunks as chunks
from realprobe.chunks import CODE_SQL, CODES, MISSING, dense, real
from realprobe.chunks import PHASE_EXTRA as PHASE_EXTRA  # where the readers take it from
from realprobe.errors import ErrorCode, RealprobeError
from realprobe.store import FUTURE_SKEW_S, Database, read_error, writing_here

_TIMEOUT = CODES.index(ErrorCode.TIMEOUT)

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


@dataclass
class ProbeArrays:
    """Columns of the selected rows, sorted by (tool, started_ts).

    Tool `i` owns rows `bounds[i]:bounds[i+1]`. `code` is -1 for success, else an index
    into CODES. `timeout_s` is NaN when the row did not record its deadline. `extra`: the
    further columns a reader asked `load_probes` for (read in the same pass).
    """

    tools: list[str]
    bounds: IntArray
    ts: FloatArray
    latency_ms: FloatArray
    code: IntArray
    timeout_s: FloatArray
    extra: dict[str, FloatArray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    def slice(self, i: int) -> ProbeArrays:
        """The rows of tool `i`."""
        a, b = int(self.bounds[i]), int(self.bounds[i + 1])
        return self._rows(slice(a, b), [self.tools[i]], np.array([0, b - a], dtype=np.int64))

    def per_tool(self) -> list[tuple[str, ProbeArrays]]:
        """(tool, its rows) of every tool that has rows."""
        return [(t, self.slice(i)) for i, t in enumerate(self.tools)
                if self.bounds[i + 1] > self.bounds[i]]  # fmt: skip

    def where(self, mask: BoolArray) -> ProbeArrays:
        """The rows where `mask` holds, keeping the per-tool layout (tools left empty stay)."""
        idx = np.repeat(np.arange(len(self.tools)), np.diff(self.bounds))
        counts = np.bincount(idx[mask], minlength=len(self.tools))
        bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return self._rows(mask, list(self.tools), bounds)

    def _rows(self, pick: Any, tools: list[str], bounds: IntArray) -> ProbeArrays:
        """The rows `pick` (a slice or a mask) selects, as the arrays of `tools` (`bounds`)."""
        return ProbeArrays(tools, bounds, self.ts[pick], self.latency_ms[pick], self.code[pick],
                           self.timeout_s[pick], {k: v[pick] for k, v in self.extra.items()})


def probe_columns(conn: sqlite3.Connection) -> set[str]:
    return {str(r[1]) for r in conn.execute("PRAGMA table_info(probes)")}


def kind_expr(columns: set[str]) -> str:
    """A row's target kind (NOT NULL, default live, once the file is migrated); files from
    before the provenance columns, read as they are, hold live rows only."""
    return "target_kind" if "target_kind" in columns else "'live'"


def sane_start(now: float | None = None) -> tuple[str, list[Any]]:
    """SQL (and its parameter) true for rows whose start is a time: a number from 0 to now plus
    the skew the store allows (text sorts above every number in SQLite; NULL fails)."""
    return "started_ts BETWEEN 0 AND ?", [(time.time() if now is None else now) + FUTURE_SKEW_S]


def conditions(
    columns: set[str],
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    kinds: list[str] | None = None,
    vantages: list[str] | None = None,
    *,
    excluded: bool | None = False,
    now: float | None = None,
) -> tuple[str, list[Any]]:
    """The WHERE clause (and its parameters) of a selection of probe rows (`excluded`: only
    rows excluded as local network failures, only rows kept (the default), or None: both).
    A row whose start is not a time (text, NULL, not finite, negative, or later than now
    plus the clock skew a row may have) is never selected: one bad row cannot break a
    reader (`now`: the moment that bounds a start, default now)."""
    where = (
        [] if excluded is None
        else ["coalesce(excluded, 0) = 1" if excluded else "coalesce(excluded, 0) = 0"]
    )
    sane, params = sane_start(now)
    where.append(sane)
    if since is not None:
        where.append("started_ts >= ?")
        params.append(since)
    if until is not None:
        where.append("started_ts < ?")
        params.append(until)
    if tools:
        where.append(f"tool IN ({','.join('?' * len(tools))})")
        params.extend(tools)
    if kinds is not None:
        where.append(f"{kind_expr(columns)} IN ({','.join('?' * len(kinds)) or 'NULL'})")
        params.extend(kinds)
    if vantages:
        where.append(f"coalesce(vantage, '') IN ({','.join('?' * len(vantages))})")
        params.extend(vantages)
    return " AND ".join(where), params


def tool_counts(
    db: Database,
    since: float | None = None,
    until: float | None = None,
    kinds: list[str] | None = None,
    vantages: list[str] | None = None,
) -> dict[str, int]:
    """{tool: rows} in the window (excluded rows left out): from the chunks' heads and the
    rows outside them, else an index scan."""
    conn = db.read()
    try:
        now = time.time()
        where, params = conditions(probe_columns(conn), since, until, None, kinds, vantages,
                                   now=now)
        sql = "SELECT tool, count(*) FROM {} WHERE {} GROUP BY tool"
        rows = None
        with snapshot(conn, where) as got, contextlib.suppress(chunks.BadChunk):
            if got is not None:  # (a chunk no writer of ours made: SQL's way)
                found, rest, keys = got
                pieces: dict[Any, list[tuple[int, int, int, int]]] = {}
                _selected(conn, found, keys, Selection(
                    since, until, None, kinds, vantages, False, now + FUTURE_SKEW_S), pieces)
                rows = [(t, sum(p[3] for p in v)) for t, v in pieces.items()] + conn.execute(
                    sql.format("probes NOT INDEXED", rest), params).fetchall()
        if rows is None:
            rows = conn.execute(sql.format("probes", where), params).fetchall()
    except sqlite3.DatabaseError as exc:
        raise RealprobeError(f"cannot read probes ({read_error(exc)})") from exc
    finally:
        conn.close()
    out: dict[str, int] = {}
    for t, c in rows:
        out[str(t)] = out.get(str(t), 0) + int(c)
    return out


def _row_query(
    conn: sqlite3.Connection, columns: set[str], cond: str, params: list[Any],
    more: list[str], table: str = "probes", *, virtual: bool | None = None,
) -> tuple[str, list[Any]]:
    """The rows as (time, latency, code index, deadline, *more), by tool, time and rowid (no
    tie left to chance). Simulated runs are placed on their virtual timeline, ending at the
    run's last real stamp. `table`: the FROM clause (the uncovered rows of the chunk store
    are read `NOT INDEXED`, by rowid); `virtual`: whether there are such rows, when known."""
    values = (
        f"{real('latency_ms')} AS c1, {CODE_SQL} AS c2, {real('timeout_s')} AS c3"
        + "".join(f", {sql} AS c{i}" for i, sql in enumerate(more, start=4))
    )
    if not (virtual_rows(conn, columns, cond, params) if virtual is None else virtual):
        return (
            f"SELECT CAST(started_ts AS REAL) AS c0, {values} FROM {table} WHERE {cond} "
            "ORDER BY tool, started_ts, rowid",
            params,
        )
    timeline = (
        "CASE WHEN virtual_s IS NULL OR a.anchor IS NULL THEN started_ts "
        "ELSE a.anchor + virtual_s END"
    )
    return (
        f"SELECT CAST({timeline} AS REAL) AS c0, {values} FROM probes LEFT JOIN "
        "(SELECT run_id AS rid, max(started_ts) - max(virtual_s) AS anchor "
        f"FROM probes WHERE {cond} AND virtual_s IS NOT NULL GROUP BY run_id) a "
        f"ON a.rid = probes.run_id WHERE {cond} ORDER BY tool, c0, probes.rowid",
        [*params, *params],
    )


def virtual_rows(conn: sqlite3.Connection, columns: set[str], cond: str,
                 params: list[Any]) -> bool:
    """Whether the selection holds rows of a simulated run (on their virtual timeline)."""
    return "virtual_s" in columns and conn.execute(
        f"SELECT 1 FROM probes WHERE {cond} AND virtual_s IS NOT NULL LIMIT 1", params
    ).fetchone() is not None


Groups = list[tuple[str, int]]


def read_by_tool(
    db: Database | sqlite3.Connection, cond: str, params: list[Any],
    query: tuple[str, list[Any]],
    k: int,
) -> tuple[Groups, list[FloatArray]]:
    """(rows per tool, sorted by tool; the `k` REAL columns of `query`, a query over the same
    rows by tool with MISSING where a number is missing, each a float array with NaN there),
    in one snapshot
    even while a prober writes. A database file is read column-wise in C (the ADBC SQLite
    driver hands over whole columns, about half the CPU of converting each row to Python);
    an open connection (the exporter's, or any while this process writes the file: the
    driver links its own SQLite) row-wise through it."""
    groups_sql = f"SELECT tool, count(*) FROM probes WHERE {cond} GROUP BY tool ORDER BY tool"
    if isinstance(db, Database):
        if db.columnar:
            return _adbc_by_tool(db, (groups_sql, params), query, k)
        with closing(db.read()) as conn:  # an install without the driver: row-wise
            return read_by_tool(conn, cond, params, query, k)
    db.execute("BEGIN")
    try:
        groups, arrays = _rows_in(db, groups_sql, params, query, k)
    finally:
        db.execute("COMMIT")
    return [(str(t), c) for t, c in groups], arrays


def _rows_in(
    conn: sqlite3.Connection, groups_sql: str, params: list[Any], query: tuple[str, list[Any]],
    k: int,
) -> tuple[list[tuple[Any, int]], list[FloatArray]]:
    """`read_by_tool` row-wise, inside the caller's transaction (tools as stored)."""
    groups = [(t, int(c)) for t, c in conn.execute(groups_sql, params).fetchall()]
    n = sum(c for _, c in groups)
    if not n:
        return groups, [np.zeros(0) for _ in range(k)]
    sql, args = query
    # the rows' numbers converted in C, one pass, no Python object kept per row
    flat = np.fromiter(chain.from_iterable(conn.execute(sql.replace(MISSING, "'NaN'"), args)),
                       dtype=np.float64, count=k * n).reshape(n, k)
    return groups, [np.ascontiguousarray(flat[:, i]) for i in range(k)]


# -- the chunk store (`realprobe/chunks.py`): sealed rows column-wise, the rest through SQL


@dataclass
class Selection:
    """What `conditions` selects, for evaluating it over chunk columns in numpy."""

    since: float | None
    until: float | None
    tools: list[str] | None
    kinds: list[str] | None
    vantages: list[str] | None
    excluded: bool | None
    #: the latest start a row may have (`sane_start`'s parameter, the same moment)
    latest: float

    def rows(self, ts: FloatArray, prov: NDArray[Any], excluded: NDArray[Any],
             prov_ok: BoolArray) -> BoolArray:
        m = (ts >= 0) & (ts <= self.latest)  # NaN (no number) fails both, as in SQL
        if self.since is not None:
            m &= ts >= self.since
        if self.until is not None:
            m &= ts < self.until
        if self.excluded is not None:
            m &= (excluded == 2) if self.excluded else (excluded <= 1)
        if not prov_ok.all():
            m &= prov_ok[prov]
        return m

    def provenance(self, keys: dict[int, Any]) -> BoolArray:
        """Per key id, whether rows of that (kind, vantage, source, target) are selected."""
        ok = np.zeros(max(keys, default=0) + 1, dtype=bool)
        for i, key in keys.items():
            if len(key) == 4:
                kind, vantage = key[0], key[1]
                ok[i] = (self.kinds is None or kind in self.kinds) and (
                    not self.vantages or (vantage if vantage is not None else "") in self.vantages
                )
        return ok

    def tool_ok(self, name: str) -> bool:
        return not self.tools or name in self.tools

    def excluded_ok(self, code: int) -> bool:
        """Whether rows of a chunk's `excluded` code (chunks.EXCLUDED_VALUES) are selected."""
        return self.excluded is None or (code == 2) == self.excluded

    def span(self, lo: float, hi: float) -> int:
        """Whether starts from `lo` to `hi` are all selected (1), none (0), or some (-1)."""
        low = max(0.0, self.since if self.since is not None else 0.0)
        if lo >= low and hi <= self.latest and (self.until is None or hi < self.until):
            return 1
        if hi < low or lo > self.latest or (self.until is not None and lo >= self.until):
            return 0
        return -1


#: the most rows the chunk path reads through SQL; past it (a file mostly unsealed, an older
#: realprobe's) the whole selection goes the columnar SQL way
UNSEALED_MAX = 4 * chunks.CHUNK_ROWS


def sealed(conn: sqlite3.Connection) -> tuple[list[chunks.Chunk], list[tuple[int, int]]] | None:
    """The chunks and the rowid ranges they leave to SQL, when the file has a chunk store
    and no more than UNSEALED_MAX rowids lie outside it (inside the read transaction)."""
    found = chunks.chunks(conn)
    if not found:
        return None
    top = conn.execute("SELECT max(rowid) FROM probes").fetchone()[0] or 0
    ranges = [(a, min(b, top)) for a, b in chunks.uncovered(found) if a <= top]
    if sum(b - a + 1 for a, b in ranges) > UNSEALED_MAX:
        return None
    return found, ranges


@contextmanager
def snapshot(
    conn: sqlite3.Connection, cond: str
) -> Iterator[tuple[list[chunks.Chunk], str, dict[int, Any]] | None]:
    """In one read transaction: the chunks, the WHERE clause of the selected rows no chunk
    holds (`cond` and their rowids) and the chunks' keys; None when the chunk store cannot
    be used (`sealed`)."""
    conn.execute("BEGIN")
    try:
        got = sealed(conn)
        try:
            names = None if got is None else chunks.keys(conn, got[0])
        except chunks.BadChunk:  # a key no writer of ours made: SQL's way
            names = None
        yield None if got is None or names is None else (
            got[0], f"{chunks.rowid_sql(got[1])} AND {cond}", names)
    finally:
        conn.execute("COMMIT")


def _cut(chunk: chunks.Chunk, keys: dict[int, Any], sel: Selection,
         prov_ok: BoolArray) -> list[tuple[str, int, int, int]]:
    """The selection in a chunk, tool by tool: (tool, start, end, rows selected: all, or -1
    when only some are (then the chunk's own rows say which)); tools with none left out."""
    out, at = [], 0
    by_tool: dict[int, list[tuple[int, int, int, int, float, float]]] = {}
    for g in chunk.groups:
        by_tool.setdefault(g[0], []).append(g)
    for tool_id, count in chunk.toc:
        name = keys[tool_id][0]
        if sel.tool_ok(name):
            n = 0
            for _, prov, excluded, rows, lo, hi in by_tool.get(tool_id, ()):
                if not prov_ok[prov] or not sel.excluded_ok(excluded):
                    continue
                span = sel.span(lo, hi)
                if span < 0:
                    n = -1
                    break
                n += rows * span
            if n:  # all the tool's rows, or the rows say which
                out.append((name, at, at + count, n if n == count else -1))
        at += count
    return out


def _selected(conn: sqlite3.Connection, found: list[chunks.Chunk], keys: dict[int, Any],
              sel: Selection, pieces: dict[Any, list[tuple[int, int, int, int]]],
              ) -> dict[int, BoolArray]:
    """Into `pieces`, per tool, each chunk's (chunk, start, end, rows selected) in rowid
    order; the row masks of the chunks a window or filter cuts."""
    prov_ok = sel.provenance(keys)
    cuts = [_cut(chunk, keys, sel, prov_ok) for chunk in found]
    cut = [c for c, mine in enumerate(cuts) if any(n < 0 for *_, n in mine)]
    masks: dict[int, BoolArray] = {}
    rows = chunks.columns(conn, [found[c] for c in cut], ["ts", "prov", "excluded"])
    for i, c in enumerate(cut):  # their own rows say which are in
        ts, prov, excluded = (dense(rows[n][i], found[c].n) for n in rows)
        masks[c] = sel.rows(ts, prov, excluded, prov_ok)
    for c, mine in enumerate(cuts):
        for name, a, b, n in mine:
            n = int(np.count_nonzero(masks[c][a:b])) if n < 0 else n
            if n:
                pieces.setdefault(name, []).append((c, a, b, n))
    return masks


class _Placing:
    """Where each chunk's selected rows land in the answer (and the SQL rows, chunk -1)."""

    def __init__(self, pieces: list[tuple[int, int, int, int]], masks: dict[int, BoolArray]):
        self.masks = masks
        self.by_chunk: dict[int, list[tuple[int, int, int]]] = {}
        offsets = np.cumsum([0] + [n for *_, n in pieces]).tolist()
        self.n = offsets[-1]
        for (c, a, b, _), o in zip(pieces, offsets, strict=False):
            self.by_chunk.setdefault(c, []).append((a, b, o))

    def put(self, out: NDArray[Any], c: int, col: NDArray[Any] | chunks.Sparse,
            size: int) -> None:
        mask = self.masks.get(c)
        mine = self.by_chunk.get(c, [])
        if isinstance(col, chunks.Sparse) and mask is None:
            for a, b, o in mine:
                out[o:o + b - a] = col.fill
            if len(col.at):
                starts, ends, offs = np.array(mine, dtype=np.int64).T
                at = col.at.astype(np.int64)
                i = np.searchsorted(starts, at, "right") - 1
                keep = (i >= 0) & (at < ends[np.maximum(i, 0)])
                out[offs[i[keep]] + at[keep] - starts[i[keep]]] = col.values[keep]
            return
        col = dense(col, size)
        for a, b, o in mine:
            part = col[a:b] if mask is None else col[a:b][mask[a:b]]
            out[o:o + len(part)] = part


def _by_chunks(
    conn: sqlite3.Connection, columns: set[str], sel: Selection, cond: str, params: list[Any],
    more: list[str],
) -> tuple[Groups, list[FloatArray]] | None:
    """`read_by_tool` from the chunk store: the sealed rows from their chunks, the others
    through SQL, in the same snapshot and order. None when the store cannot answer (no
    chunks, too many rows outside them, a column no chunk keeps)."""
    names = ["ts", "latency", "code", "timeout", *(f"x:{sql}" for sql in more)]
    if any(n not in chunks.COLUMNS for n in names):
        return None
    with snapshot(conn, cond) as got:
        if got is None:
            return None
        found, where, keys = got
        query = _row_query(conn, columns, where, params, [*more, "rowid"], "probes NOT INDEXED",
                           virtual=False)
        tail_groups, tail = _rows_in(
            conn, f"SELECT tool, count(*) FROM probes NOT INDEXED WHERE {where} GROUP BY tool "
            "ORDER BY tool", params, query, len(names) + 1)
        # the answer tool by tool: each chunk's rows of the tool (by rowid), then SQL's
        pieces: dict[Any, list[tuple[int, int, int, int]]] = {}  # by the tool as stored
        masks = _selected(conn, found, keys, sel, pieces)
        at = 0
        for tool, count in tail_groups:
            pieces.setdefault(tool, []).append((-1, at, at + count, count))
            at += count
        tools = sorted(pieces, key=chunks.sql_order)  # as SQL orders them
        order = [(tool, p) for tool in tools for p in pieces[tool]]
        groups = [(str(tool), sum(p[3] for p in pieces[tool])) for tool in tools]
        place = _Placing([p for _, p in order], masks)
        out = np.empty((len(names), place.n))
        used = sorted({p[0] for _, p in order if p[0] >= 0})
        for i in range(len(names)):
            place.put(out[i], -1, tail[i], len(tail[i]))
        for j, i, col in chunks.each(conn, [found[c] for c in used], names):
            place.put(out[i], used[j], col, found[used[j]].n)
        arrays = list(out)
        # in (tool, time, rowid) order already when the pieces of a tool join in time and
        # the SQL rows all lie past the chunks; else sorted here
        ts = arrays[0]
        ends = np.cumsum([p[3] for _, p in order]).tolist()
        joins = np.array([e for e, (t, _), (u, _) in zip(ends, order, order[1:], strict=False)
                          if t == u], dtype=np.int64)
        if (ts[joins - 1] > ts[joins]).any() or (tail[-1] <= found[-1].hi).any():
            rowid = np.empty(place.n)
            place.put(rowid, -1, tail[-1], len(tail[-1]))
            for j, _, col in chunks.each(conn, [found[c] for c in used], ["rowid"]):
                place.put(rowid, used[j], col, found[used[j]].n)
            tool_at = np.repeat(np.arange(len(groups)), [n for _, n in groups])
            sort = np.lexsort((rowid, ts, tool_at))
            arrays = [a[sort] for a in arrays]
        return groups, arrays


#: rows per batch the columnar reader takes from SQLite at a time
BATCH_ROWS = 1 << 16


def _adbc_by_tool(
    db: Database, groups: tuple[str, list[Any]], query: tuple[str, list[Any]], k: int
) -> tuple[Groups, list[FloatArray]]:
    import adbc_driver_manager as adbc
    import adbc_driver_sqlite
    import nanoarrow as na

    from realprobe.store import read_pragmas

    def statement(conn: Any, sql: str, args: list[Any]) -> Any:
        st = adbc.AdbcStatement(conn)
        st.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
        st.set_sql_query(sql)
        if args:
            st.bind(_params(args))
        return st

    def fill(conn: Any, n: int) -> FloatArray:
        # no NULL reaches the driver (it would type an all-NULL first batch as integers): a
        # missing number comes as infinity, which `real` never lets through otherwise
        sql, args = query
        out = np.empty((k, n))
        at = 0
        with statement(conn, sql.replace(MISSING, "9e999"), args) as st:
            handle, _ = st.execute_query()
            for batch in na.ArrayStream(handle):  # into the arrays, one batch at a time
                m = len(batch)
                for i in range(k):
                    col = batch.child(i)
                    out[i, at : at + m] = np.frombuffer(
                        col.buffer(1), np.float64, m, 8 * col.offset
                    )
                at += m
        if at != n:
            raise sqlite3.DatabaseError(f"read {at} rows of {n}")
        for col in out:
            col[col == np.inf] = np.nan
        return out

    try:
        with adbc_driver_sqlite.connect(db.uri) as database, adbc.AdbcConnection(
            database
        ) as conn:
            conn.set_autocommit(False)  # both queries in one read transaction
            try:
                for pragma in read_pragmas():
                    with statement(conn, pragma, []) as st:
                        st.execute_update()
                with statement(conn, *groups) as st:
                    handle, _ = st.execute_query()
                    table = na.ArrayStream(handle).read_all()
                    tools, counts = table.to_columns_pysequence()[1]
                out = [(str(t), int(c)) for t, c in zip(tools, counts, strict=True)]
                flat = fill(conn, sum(c for _, c in out))
            finally:
                conn.rollback()
    except adbc.Error as exc:
        raise sqlite3.DatabaseError(str(exc)) from exc
    return out, list(flat)


def _params(args: list[Any]) -> Any:
    """One row of query parameters as an Arrow array (what ADBC binds)."""
    import nanoarrow as na

    types = [
        na.string() if isinstance(v, str) else na.float64() if isinstance(v, float)
        else na.int64() for v in args
    ]
    schema = na.struct({f"p{i}": t for i, t in enumerate(types)})
    children = [na.c_array([v], t) for v, t in zip(args, types, strict=True)]
    return na.c_array_from_buffers(schema, 1, [None], children=children)


def load_probes(
    db: Database | sqlite3.Connection,
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    *,
    kinds: list[str] | None = None,
    vantages: list[str] | None = None,
    extra: Mapping[str, tuple[str, str]] | None = None,
) -> ProbeArrays:
    """Rows with excluded != 1 in [since, until) of the given target kinds and vantages (None:
    any), as arrays, in one read transaction. `extra`: {name: (column, SQL number)} further
    columns read in the same pass into `.extra` (those whose column the file has)."""
    path = db if isinstance(db, Database) else None
    conn = path.read() if path is not None else cast(sqlite3.Connection, db)
    try:
        columns = probe_columns(conn)
        now = time.time()
        cond, params = conditions(columns, since, until, tools, kinds, vantages, now=now)
        more = {k: sql for k, (col, sql) in (extra or {}).items() if col in columns}
        virtual = virtual_rows(conn, columns, cond, params)  # their own timeline: SQL's
        got = None if virtual else chunks.or_none(lambda: _by_chunks(
            conn, columns, Selection(since, until, tools, kinds, vantages, False,
                                     now + FUTURE_SKEW_S), cond, list(params), list(more.values())))
        if got is None:
            got = _by_sql(path, conn, columns, cond, params, list(more.values()), virtual)
        groups, (ts, lat, code, timeout, *rest) = got
    except sqlite3.DatabaseError as exc:
        raise RealprobeError(f"cannot read probes ({read_error(exc)})") from exc
    finally:
        if path is not None:
            conn.close()
    counts = [c for _, c in groups]
    return ProbeArrays(
        [t for t, _ in groups],
        np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        ts, lat, code.astype(np.int64, copy=False), timeout, dict(zip(more, rest, strict=True)),
    )


def _by_sql(
    path: Database | None, conn: sqlite3.Connection, columns: set[str], cond: str,
    params: list[Any], more: list[str], virtual: bool,
) -> tuple[Groups, list[FloatArray]]:
    """`read_by_tool` through SQL: a file column-wise by the ADBC driver (after closing
    `conn`: one copy of SQLite at a time on the file, POSIX locks), unless this process holds
    the file open; an open connection row-wise."""
    query = _row_query(conn, columns, cond, list(params), more, virtual=virtual)
    source: Database | sqlite3.Connection = conn
    if path is not None and not writing_here(path.path):
        conn.close()
        if path.columnar:
            source = path
        else:  # the caller holds it open: stay with that copy
            source = path.read()
            try:
                return read_by_tool(source, cond, list(params), query, 4 + len(more))
            finally:
                source.close()
    return read_by_tool(source, cond, list(params), query, 4 + len(more))


def load_mcp_failures(
    db: Database,
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    *,
    kinds: list[str] | None = None,
) -> dict[str, list[tuple[bool, float, str]]]:
    """{tool: [(answered with a JSON-RPC error rather than an isError result, latency ms,
    error code)]} for the failed rows of MCP runs (run ids `mcp-...`: probes of an MCP
    server and calls through the MCP proxy) in the selection."""
    from realprobe.result import JSONRPC_ERROR_PREFIX

    conn = db.read()
    try:
        columns = probe_columns(conn)
        if not {"run_id", "detail"} <= columns:
            return {}
        cond, params = conditions(columns, since, until, tools, kinds)
        rows = conn.execute(
            f"SELECT tool, substr(coalesce(detail, ''), 1, ?) = ?, latency_ms, "
            f"coalesce(error_code, '') FROM probes WHERE {cond} AND outcome != 'ok' "
            "AND run_id LIKE 'mcp-%'",
            [len(JSONRPC_ERROR_PREFIX), JSONRPC_ERROR_PREFIX, *params],
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise RealprobeError(f"cannot read probes ({read_error(exc)})") from exc
    finally:
        conn.close()
    out: dict[str, list[tuple[bool, float, str]]] = {}
    for tool, jsonrpc, latency, code in rows:
        if isinstance(latency, int | float):
            out.setdefault(str(tool), []).append((bool(jsonrpc), float(latency), str(code)))
    return out


def load_retry_after(
    db: Database,
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    *,
    kinds: list[str] | None = None,
    vantages: list[str] | None = None,
) -> dict[str, dict[str, tuple[int, list[float]]]]:
    """{tool: {error code: (failures with that code, the Retry-After values they carried)}}
    for the failed rows of the selection (Retry-After in seconds, as stored per row)."""
    conn = db.read()
    try:
        columns = probe_columns(conn)
        if "retry_after" not in columns:
            return {}
        cond, params = conditions(columns, since, until, tools, kinds, vantages)
        rows = conn.execute(
            f"SELECT tool, coalesce(error_code, ''), retry_after FROM probes "
            f"WHERE {cond} AND outcome != 'ok'",
            params,
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise RealprobeError(f"cannot read probes ({read_error(exc)})") from exc
    finally:
        conn.close()
    out: dict[str, dict[str, tuple[int, list[float]]]] = {}
    for tool, code, wait in rows:
        count, values = out.setdefault(str(tool), {}).get(str(code), (0, []))
        if wait is not None:
            values.append(float(wait))
        out[str(tool)][str(code)] = (count + 1, values)
    return out
