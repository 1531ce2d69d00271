"""A column-wise copy of the probe rows inside the same SQLite file, kept like an index.

The one writer (`Store`) seals the rows it has written into chunks: each chunk covers a
contiguous rowid range [lo, hi] of `probes` and holds, one BLOB per column, exactly what the
readers compute from a row (the numbers by the very SQL the readers run, evaluated by SQLite
when the chunk is sealed) and what they filter and group on (time, tool, kind, vantage,
source, target, excluded), the strings as codes into `probe_chunk_keys`. Rows in a chunk are
in the readers' order (tool, started_ts, rowid). Triggers on `probes` drop the chunk holding
any row that is updated, deleted, inserted inside a chunk's range or replaced (an `OR
REPLACE` on its row key, which fires no delete trigger), whoever writes (the store,
sqlite-utils, a user's own UPDATE), so a chunk is never stale; the writer seals such gaps
again as it writes (only the gaps). Readers take the chunks for the covered rowids and read
only the rest (the unsealed tail, any gap) through SQL, in the same read transaction.

Readers trust the chunks only while the triggers are exactly ours (a trigger of the same
name doing nothing, or another trigger writing into the chunk tables, means no chunk store),
and check what they read: a head, key or column no writer of ours makes (a code past the
known ones, an infinite time, a row or key out of range) is `BadChunk`, and the reader takes
SQL's way instead. A row a chunk could not represent exactly (a tool that is not text, a blob
where a label belongs, `excluded` other than NULL, 0 or 1) is left out of every chunk: it
stays a gap the readers read through SQL.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any, TypeVar

from realprobe.dbfacts import IMPLICIT_KINDS, META_TABLE, PHASE_COLUMNS, SCHEMA_VERSION
from realprobe.errors import ErrorCode, RealprobeError

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")

CHUNKS = "probe_chunks"
KEYS = "probe_chunk_keys"
#: unsealed rows past the last chunk that make the writer seal them (the most the readers
#: ever read through SQL when nobody else writes)
SEAL_ROWS = 8192
#: a chunk grows (sealed again with the rows after it) until it holds this many rows
CHUNK_ROWS = 65536

#: error codes in a fixed order; a row's code is an index into this tuple, -1 for success
CODES: tuple[ErrorCode, ...] = tuple(ErrorCode)
OTHER = CODES.index(ErrorCode.OPERATION_FAILED)

#: where a number is missing in reader SQL; each reader puts in what it takes
MISSING = "__missing__"


def real(column: str, missing: str = MISSING) -> str:
    """A number column as a REAL, `missing` when it holds anything else (NULL, text, a blob,
    an infinity): in SQLite text and blobs sort above every number and NULL compares to
    nothing, so two comparisons say it (cheaper per row than `typeof`)."""
    return (
        f"CASE WHEN {column} < 9e999 AND {column} > -9e999 THEN CAST({column} AS REAL) "
        f"ELSE {missing} END"
    )


#: a row's outcome as a REAL: -1 for success, else its error code's index in CODES
CODE_SQL = (
    "CASE WHEN outcome = 'ok' THEN -1.0 ELSE CASE error_code "
    + " ".join(f"WHEN '{c.value}' THEN {i}.0" for i, c in enumerate(CODES))
    + f" ELSE {OTHER}.0 END END"
)
#: the row's time as every reader selects it (a start that is not a number is never selected)
TS_SQL = f"CASE WHEN typeof(started_ts) IN ('real', 'integer') THEN CAST(started_ts AS REAL) " \
    f"ELSE {MISSING} END"

#: the columns the phase medians need, as `load_probes(..., extra=...)` reads them
PHASE_EXTRA = {
    "new_connection": ("new_connection", real("new_connection", "0.0")),
    **{p: (p, real(p)) for p in PHASE_COLUMNS},
}
#: each row's implicit kinds as bits (bit j: IMPLICIT_KINDS[j] sits in its comma-joined
#: list), as `load_probes(..., extra=...)` reads them
IMPLICIT_EXTRA = {
    "implicit": ("implicit", "CASE WHEN implicit IS NULL THEN 0.0 ELSE CAST(" + " + ".join(
        f"{1 << j} * (instr(',' || implicit || ',', ',{k},') > 0)"
        for j, k in enumerate(IMPLICIT_KINDS)
    ) + " AS REAL) END"),
}

#: what a chunk holds: name, SQL (evaluated by SQLite at sealing), numpy dtype. `x:<sql>`
#: names the further columns a reader may ask for, by their SQL
_FIXED = [
    ("rowid", "rowid", "i8"),
    ("ts", TS_SQL, "f8"),
    ("latency", real("latency_ms"), "f8"),
    ("code", CODE_SQL, "i1"),
    ("timeout", real("timeout_s"), "f8"),
    ("tool", f"(SELECT id FROM {KEYS} WHERE key = json_array(tool))", "i4"),
    ("prov", f"(SELECT id FROM {KEYS} WHERE key = json_array(target_kind, vantage, source, "
             "target))", "i4"),
    # NULL, 0, 1 (a chunk holds no other value): the readers' filter and the survey's group
    ("excluded", "CASE WHEN excluded IS NULL THEN 0 WHEN excluded = 0 THEN 1 ELSE 2 END", "i1"),
]
COLUMNS: dict[str, tuple[str, str]] = {
    **{name: (sql, dtype) for name, sql, dtype in _FIXED},
    **{f"x:{sql}": (sql, "f8") for _, sql in (*PHASE_EXTRA.values(), *IMPLICIT_EXTRA.values())},
}
#: a row no chunk can represent exactly: read through SQL
_ODD = (
    "typeof(tool) != 'text' OR typeof(target_kind) = 'blob' OR typeof(vantage) = 'blob' "
    "OR typeof(source) = 'blob' OR typeof(target) = 'blob' "
    "OR NOT (excluded IS NULL OR (typeof(excluded) = 'integer' AND excluded IN (0, 1)))"
)
#: the raw `excluded` value of each code
EXCLUDED_VALUES = (None, 0, 1)

_DROP = (
    f"DELETE FROM {CHUNKS} WHERE lo = (SELECT max(lo) FROM {CHUNKS} WHERE lo <= {{row}}) "
    "AND hi >= {row};"
)
#: the row a new or changed row key collides with (an `OR REPLACE` deletes it unseen)
_KEYED = "(SELECT rowid FROM probes WHERE row_key = NEW.row_key)"
TRIGGERS = {
    # a row past every chunk (the writer's every row) costs one look at the largest `hi`
    f"{CHUNKS}_insert": f"AFTER INSERT ON probes WHEN NEW.rowid <= (SELECT max(hi) FROM "
                        f"{CHUNKS}) BEGIN {_DROP.format(row='NEW.rowid')} END",
    f"{CHUNKS}_update": f"AFTER UPDATE ON probes BEGIN {_DROP.format(row='OLD.rowid')} "
                        f"{_DROP.format(row='NEW.rowid')} END",
    f"{CHUNKS}_delete": f"AFTER DELETE ON probes BEGIN {_DROP.format(row='OLD.rowid')} END",
    # `INSERT OR REPLACE` and `UPDATE OR REPLACE` delete the row a UNIQUE row key collides
    # with without firing the delete trigger (unless recursive_triggers is on): the row about
    # to be replaced drops its chunk first (an ignored duplicate drops it too: sealed again)
    f"{CHUNKS}_replace": f"BEFORE INSERT ON probes WHEN NEW.row_key IS NOT NULL AND EXISTS "
                         f"{_KEYED} BEGIN {_DROP.format(row=_KEYED)} END",
    f"{CHUNKS}_rekey": f"BEFORE UPDATE OF row_key ON probes WHEN NEW.row_key IS NOT NULL "
                       f"AND EXISTS {_KEYED} BEGIN {_DROP.format(row=_KEYED)} END",
}


def ensure(conn: sqlite3.Connection) -> None:
    """The chunk tables and triggers (the writer, on opening). A file whose triggers went
    missing (a tool rebuilt `probes`, which drops them) loses its chunks first: rows may have
    changed unseen."""
    with conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {KEYS} (id INTEGER PRIMARY KEY, "
                     "key TEXT NOT NULL UNIQUE)")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {CHUNKS} (lo INTEGER NOT NULL, "
                     "hi INTEGER NOT NULL, name TEXT NOT NULL, data BLOB NOT NULL, "
                     "PRIMARY KEY (lo, name))")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {CHUNKS}_hi ON {CHUNKS} (hi)")
        if not _guarded(conn):
            conn.execute(f"DELETE FROM {CHUNKS}")
            for name, body in TRIGGERS.items():
                conn.execute(f"DROP TRIGGER IF EXISTS {name}")
                conn.execute(f"CREATE TRIGGER {name} {body}")


def _guarded(conn: sqlite3.Connection) -> bool:
    """Whether the triggers are ours, word for word, and no other trigger writes into the
    chunk tables (a chunk kept past a change, or put back after one, would be stale)."""
    got = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
    return all(got.pop(n, None) == f"CREATE TRIGGER {n} {b}" for n, b in TRIGGERS.items()) \
        and not any(CHUNKS in str(sql) or KEYS in str(sql) for sql in got.values())


@dataclass
class Chunk:
    lo: int
    hi: int
    #: (tool key id, rows) in the chunk's order (tool names ascending)
    toc: list[tuple[int, int]]
    #: (tool, provenance key id, excluded code, rows, first, last start) of its rows whose start
    #: is a number: a reader needs a chunk's rows only where a window cuts a group
    groups: list[tuple[int, int, int, int, float, float]]

    @property
    def n(self) -> int:
        return sum(c for _, c in self.toc)


def chunks(conn: sqlite3.Connection) -> list[Chunk] | None:
    """The file's chunks by rowid, or None when it has no chunk store a reader may trust (an
    older file, one whose triggers are gone, or a head no writer of ours made). Call inside
    the read transaction."""
    try:
        return _chunks(conn)
    except BadChunk:  # the readers take SQL's way
        return None


def _chunks(conn: sqlite3.Connection) -> list[Chunk] | None:
    try:
        version = conn.execute(
            f"SELECT value FROM {META_TABLE} WHERE key = 'schema:probes'").fetchone()
        if version is None or int(version[0]) != SCHEMA_VERSION or not _guarded(conn):
            return None
        rows = conn.execute(
            f"SELECT lo, hi, data FROM {CHUNKS} WHERE name = 'head' ORDER BY lo"
        ).fetchall()
    except sqlite3.OperationalError:
        return None
    return [_chunk(int(lo), int(hi), data) for lo, hi, data in rows]


class BadChunk(sqlite3.DatabaseError):
    """A chunk head, key or column that is not what a writer of ours stores (a damaged or
    hostile file): the chunk store is not used, and the next writer makes it again."""


def or_none(read: Callable[[], T]) -> T | None:
    """What `read` gets from the chunk store; None (the reader takes SQL's way) when it meets
    a chunk no writer of ours made."""
    try:
        return read()
    except BadChunk:
        return None


#: the most a chunk head or key may hold (a head lists its chunk's groups: a few kB)
MAX_META_BYTES = 1 << 20


def _meta(data: object) -> Any:
    """A chunk head or key as stored, JSON under the input limits (size, nesting)."""
    from realprobe.limits import load_json_text

    try:
        return load_json_text(data, "chunk head or key", max_bytes=MAX_META_BYTES, limit=3)
    except RealprobeError as exc:
        raise BadChunk(f"an unreadable chunk head or key ({exc})") from None


def _chunk(lo: int, hi: int, data: object) -> Chunk:
    head = _meta(data)
    try:
        toc = [(int(t), int(c)) for t, c in head["toc"]]
        groups = [(int(k), int(p), int(e), int(c), float(a), float(b))
                  for k, p, e, c, a, b in head["groups"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise BadChunk(f"a chunk head of another shape ({exc!r})") from None
    rows = sum(c for _, c in toc)
    if not (0 < lo <= hi < 1 << 62 and 0 < rows <= min(hi - lo + 1, CHUNK_ROWS)
            and all(c > 0 for _, c in toc) and sum(g[3] for g in groups) <= rows
            and all(e in (0, 1, 2) and c > 0 and 0 <= a <= b < math.inf
                    for _, _, e, c, a, b in groups)):
        raise BadChunk(f"the chunk at rowid {lo} has a head no writer of ours makes")
    return Chunk(lo, hi, toc, groups)


def keys(conn: sqlite3.Connection, found: list[Chunk] | None = None) -> dict[int, Any]:
    """{key id: the tool name, or [kind, vantage, source, target] as stored}; BadChunk for a
    key no writer of ours made, or one the heads of `found` name and the file lacks."""
    out = {int(i): _meta(k) for i, k in conn.execute(f"SELECT id, key FROM {KEYS}")}
    for key in out.values():  # [tool] or [kind, vantage, source, target], each a scalar
        if not (isinstance(key, list) and len(key) in (1, 4)
                and all(isinstance(v, str | int | float | None) for v in key)):
            raise BadChunk(f"a chunk key of another shape ({str(key)[:40]})")
    for c in found or []:
        if any(t not in out for t, _ in c.toc) or any(
                g[0] not in out or g[1] not in out for g in c.groups):
            raise BadChunk(f"the chunk at rowid {c.lo} names a key the file lacks")
    return out


@dataclass
class Sparse:
    """A chunk column mostly one value: `fill`, except `values` at `at` (ascending)."""

    fill: Any
    at: np.ndarray
    values: np.ndarray

    def dense(self, n: int) -> np.ndarray:
        import numpy as np

        out = np.full(n, self.fill)
        out[self.at] = self.values
        return out


def encode(values: np.ndarray) -> bytes:
    """A chunk column's BLOB: the values as they are, or, when three in four or more are one
    value (a phase only new connections have, a constant deadline), that value, then where
    the others are (uint16: a chunk spans at most CHUNK_ROWS rowids) and what they are. The
    length tells the two apart; the values keep every bit."""
    import numpy as np

    n = len(values)
    bits = values.view(f"u{values.itemsize}")
    common, counts = np.unique(bits, return_counts=True)
    top = int(np.argmax(counts))
    odd = np.flatnonzero(bits != common[top])
    if n < 8 or 4 * len(odd) >= n:
        return values.tobytes()
    return (common[top:top + 1].view(values.dtype).tobytes()
            + odd.astype("<u2").tobytes() + values[odd].tobytes())


def decode(data: bytes, dtype: str, n: int) -> np.ndarray | Sparse:
    import numpy as np

    size = np.dtype(dtype).itemsize
    if not isinstance(data, bytes):
        raise BadChunk("a chunk column that is no BLOB")
    if len(data) == n * size:
        return np.frombuffer(data, dtype)
    k = (len(data) - size) // (2 + size)
    if len(data) != size + k * (2 + size) or k >= max(n, 1):
        raise BadChunk(f"a chunk column of {len(data)} bytes for {n} rows")
    at = np.frombuffer(data, "<u2", k, size)
    if k and int(at.max()) >= n:
        raise BadChunk(f"a chunk column naming row {int(at.max())} of {n}")
    return Sparse(np.frombuffer(data, dtype, 1)[0], at, np.frombuffer(data, dtype, k, size + 2 * k))


def each(
    conn: sqlite3.Connection, found: list[Chunk], names: list[str]
) -> Iterator[tuple[int, int, np.ndarray | Sparse]]:
    """(index in `found`, index in `names`, column) for the `names` of the chunks `found`,
    one BLOB at a time."""
    at = {c.lo: i for i, c in enumerate(found)}
    if not at:
        return
    ids = None
    if "prov" in names:
        import numpy as np

        ids = np.array(sorted(i for (i,) in conn.execute(f"SELECT id FROM {KEYS}")), np.int64)
    got: set[tuple[int, str]] = set()
    for lo, name, data in conn.execute(
        f"SELECT lo, name, data FROM {CHUNKS} WHERE lo IN ({','.join(map(str, at))}) "
        f"AND name IN ({','.join('?' * len(names))})", names,
    ):
        c = at[lo]
        col = decode(data, COLUMNS[name][1], found[c].n)
        check(name, col, found[c], ids)
        got.add((lo, name))
        yield c, names.index(name), col
    if len(got) != len(at) * len(names):
        raise BadChunk("a chunk lacks a column its head promises")


def check(name: str, col: np.ndarray | Sparse, chunk: Chunk, ids: np.ndarray | None) -> None:
    """BadChunk unless a column holds only what sealing puts there: codes of known errors
    (or -1), `excluded` codes 0 to 2, rowids of the chunk's range, known provenance keys, and
    numbers that are never infinite (a missing one is NaN)."""
    import numpy as np

    values = np.r_[col.fill, col.values] if isinstance(col, Sparse) else col
    if name == "code":
        ok = bool(((values >= -1) & (values < len(CODES))).all())
    elif name == "excluded":
        ok = bool(((values >= 0) & (values <= 2)).all())
    elif name == "rowid":
        ok = bool(((values >= chunk.lo) & (values <= chunk.hi)).all())
    elif name == "prov":
        ok = ids is not None and bool(np.isin(values, ids).all())
    else:
        ok = not bool(np.isinf(values).any())
    if not ok:
        raise BadChunk(f"the chunk at rowid {chunk.lo} holds a {name} no writer of ours makes")


def columns(
    conn: sqlite3.Connection, found: list[Chunk], names: list[str]
) -> dict[str, list[np.ndarray | Sparse]]:
    """{name: one column per chunk of `found`}."""
    out: dict[str, list[Any]] = {n: [None] * len(found) for n in names}
    for c, i, col in each(conn, found, names):
        out[names[i]][c] = col
    return out


def uncovered(found: list[Chunk]) -> list[tuple[int, int]]:
    """The rowid ranges no chunk covers (the last one open: up to the largest rowid)."""
    out, at = [], 1
    for c in found:
        if c.lo > at:
            out.append((at, c.lo - 1))
        at = c.hi + 1
    out.append((at, 1 << 62))
    return out


def sql_order(v: Any) -> tuple[int, Any]:
    """A value's place in SQLite's order (BINARY collation): NULL, numbers, text, blobs."""
    if v is None:
        return (0, 0)
    if isinstance(v, int | float):
        return (1, v)
    return (2, v) if isinstance(v, str) else (3, bytes(v))


def rowid_sql(ranges: list[tuple[int, int]]) -> str:
    return "(" + (" OR ".join(f"rowid BETWEEN {a} AND {b}" for a, b in ranges) or "0") + ")"


# -- the writer's side --------------------------------------------------------------------


def seal(conn: sqlite3.Connection, *, most: int | None = None) -> int:
    """Seal the rows no chunk covers, where there are at least SEAL_ROWS of them in a row
    (the tail, or a gap a changed row left): in pieces of CHUNK_ROWS rowids, a last chunk
    short of that growing with the rows after it. `most`: chunks to write at most, and only
    when the tail is due (the writer's look as rows come); None: every one. One write
    transaction; the rows sealed."""
    if conn.in_transaction:  # the caller's own transaction: not now
        return 0
    if most is not None and not _tail_due(conn):
        return 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        done = _seal_in(conn, most)
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return done


def _tail_due(conn: sqlite3.Connection) -> bool:
    """Whether SEAL_ROWS rowids lie past the last chunk, or rows of that many rowids in a gap
    a dropped chunk left (the writer's frequent look, cheap: the heads' ranges and a lookup
    per gap, no head parsed, no lock taken)."""
    try:
        top = conn.execute("SELECT max(rowid) FROM probes").fetchone()[0]
        spans = conn.execute(f"SELECT lo, hi FROM {CHUNKS} WHERE name = 'head' ORDER BY lo")
        at = 1
        for lo, hi in [*spans, (top + 1 if top is not None else 1, 0)]:
            if lo - at >= SEAL_ROWS:
                a, b = conn.execute("SELECT min(rowid), max(rowid) FROM probes WHERE rowid "
                                    "BETWEEN ? AND ?", [at, lo - 1]).fetchone()
                if a is not None and b - a + 1 >= SEAL_ROWS:
                    return True
            at = hi + 1
    except sqlite3.OperationalError:
        return False
    return False


def _plan(conn: sqlite3.Connection, found: list[Chunk]) -> list[tuple[int, int]]:
    top = conn.execute("SELECT max(rowid) FROM probes").fetchone()[0]
    if top is None:
        return []
    plan: list[tuple[int, int]] = []
    for a, b in uncovered(found):
        b = min(b, int(top))
        grow = b == top and found and found[-1].hi == a - 1 and found[-1].n < CHUNK_ROWS
        if b - a + 1 < SEAL_ROWS:
            continue
        if grow and b - a + 1 + found[-1].n <= CHUNK_ROWS:
            plan.append((a, b))  # the last chunk takes them (`_seal_in` merges)
            continue
        while b - a + 1 >= SEAL_ROWS:
            plan.append((a, min(b, a + CHUNK_ROWS - 1)))
            a = plan[-1][1] + 1
    return plan


def _head(data: dict[str, np.ndarray]) -> dict[str, Any]:
    """A chunk's table of contents: its tools in order, and its groups (see `Chunk`)."""
    import numpy as np

    tool = data["tool"]
    starts = np.flatnonzero(np.r_[True, tool[1:] != tool[:-1]])
    counts = np.diff(np.r_[starts, len(tool)])
    ts = data["ts"]
    timed = ~np.isnan(ts)
    key = ((tool.astype(np.int64) << 34) | (data["prov"].astype(np.int64) << 2)
           | data["excluded"].astype(np.int64))[timed]
    ts = ts[timed]
    order = np.argsort(key, kind="stable")
    key, ts = key[order], ts[order]
    at = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, int)
    n = np.diff(np.r_[at, len(key)])
    lo = np.minimum.reduceat(ts, at) if len(at) else ts
    hi = np.maximum.reduceat(ts, at) if len(at) else ts
    return {
        "toc": [[int(tool[s]), int(c)] for s, c in zip(starts, counts, strict=True)],
        "groups": [[int(k >> 34), int((k >> 2) & ((1 << 32) - 1)), int(k & 3), int(c),
                    float(a), float(b)]
                   for k, c, a, b in zip(key[at].tolist(), n.tolist(), lo.tolist(), hi.tolist(),
                                         strict=True)],
    }


def _seal_in(conn: sqlite3.Connection, most: int | None) -> int:
    try:
        found = _chunks(conn)
        keys(conn, found)
        return _seal_plan(conn, found, most)
    except BadChunk:  # made again from the rows, as an index is rebuilt
        conn.execute(f"DELETE FROM {CHUNKS}")
        conn.execute(f"DELETE FROM {KEYS}")
        return _seal_plan(conn, _chunks(conn), most)


def _seal_plan(conn: sqlite3.Connection, found: list[Chunk] | None, most: int | None) -> int:
    if found is None:
        return 0
    done = 0
    for a, b in _plan(conn, found)[:most]:
        odd = [r for (r,) in conn.execute(
            f"SELECT rowid FROM probes WHERE rowid BETWEEN ? AND ? AND ({_ODD})", [a, b])]
        for lo, hi in zip([a] + [r + 1 for r in odd], [r - 1 for r in odd] + [b], strict=True):
            data = _rows(conn, lo, hi) if hi >= lo else None
            if data is None:
                continue
            done += len(data["rowid"])
            last = found[-1] if found else None
            if last is not None and last.hi == lo - 1 and last.n + hi - lo + 1 <= CHUNK_ROWS:
                lo, data = last.lo, _merge(conn, last, data)  # the last chunk grows
                conn.execute(f"DELETE FROM {CHUNKS} WHERE lo = ?", [lo])
            conn.executemany(
                f"INSERT INTO {CHUNKS} (lo, hi, name, data) VALUES (?, ?, ?, ?)",
                [(lo, hi, "head", json.dumps(_head(data)).encode())]
                + [(lo, hi, n, encode(data[n])) for n in data if n != "tool"],
            )
            found = chunks(conn) or []
    return done


def _rows(conn: sqlite3.Connection, lo: int, hi: int) -> dict[str, np.ndarray] | None:
    """The chunk columns of rows lo..hi (none of them odd), computed by SQLite, in the
    readers' order; None when there are no rows."""
    import numpy as np

    for key in ("json_array(tool)", "json_array(target_kind, vantage, source, target)"):
        conn.execute(f"INSERT OR IGNORE INTO {KEYS} (key) SELECT DISTINCT {key} "
                     "FROM probes WHERE rowid BETWEEN ? AND ?", [lo, hi])
    names = list(COLUMNS)
    # a missing number comes as infinity (cheaper to convert than text), which no column
    # holds otherwise (`real` lets none through; a start at infinity is never selected)
    cols = ", ".join(COLUMNS[n][0] for n in names).replace(MISSING, "9e999")
    cur = conn.execute(f"SELECT {cols} FROM probes NOT INDEXED WHERE rowid BETWEEN ? AND ? "
                       "ORDER BY tool, started_ts, rowid", [lo, hi])
    table = np.fromiter(chain.from_iterable(cur), np.float64).reshape(-1, len(names))
    if not len(table):
        return None
    table[np.isinf(table)] = np.nan
    return {n: np.ascontiguousarray(table[:, i]).astype(COLUMNS[n][1])
            for i, n in enumerate(names)}


def _merge(conn: sqlite3.Connection, last: Chunk, data: dict[str, np.ndarray]
           ) -> dict[str, np.ndarray]:
    """A chunk's columns and the next rows' in one, in the readers' order (tool name, time,
    rowid; rows whose start is no number, which no reader selects, last within a tool)."""
    import numpy as np

    got = columns(conn, [last], [n for n in data if n != "tool"])
    old = {n: dense(v[0], last.n) for n, v in got.items()}
    old["tool"] = np.repeat([t for t, _ in last.toc], [c for _, c in last.toc]).astype(
        data["tool"].dtype)
    both = {n: np.concatenate([old[n], data[n]]) for n in data}
    names = keys(conn)
    ids = np.unique(both["tool"])
    rank = np.zeros(int(ids.max()) + 1, dtype=np.int64)
    rank[ids] = np.argsort(np.argsort([names[int(i)][0] for i in ids]))
    order = np.lexsort((both["rowid"], both["ts"], rank[both["tool"]]))
    return {n: v[order] for n, v in both.items()}


def dense(col: np.ndarray | Sparse, n: int) -> np.ndarray:
    """A chunk column as all its values."""
    return col.dense(n) if isinstance(col, Sparse) else col
