"""Which rows a number is made of: target kinds, targets, vantages, sources, window, counts.

The readers (`stats`, `calibrate`, `drift`, `report`) never pool kinds by accident. With no
`--kinds`, they read the live rows when the window holds any, else the one kind present;
when several kinds other than live are present and none is chosen, they refuse with one
line. Every output then names what it summarises (`Provenance`), and one made only of
sandbox, simulated or replayed rows says so in a banner.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, Field

import realprobe.chunks as chunks
from realprobe.chunks import dense
from realprobe.errors import BadArgument, RealprobeError
from realprobe.probes.loading import Selection, conditions, probe_columns, snapshot
from realprobe.probes.windows import iso
from realprobe.store import FUTURE_SKEW_S, IMPORTED_KIND, Database, read_error
from realprobe.target import TargetKind

#: what `target` accepts: the kinds, and all
ALL = "all"
TARGET_CHOICES = (*(k.value for k in TargetKind), ALL)
KIND_WORDS = {
    "live": "the real public APIs",
    "sandbox": "the loopback sandbox",
    "simulate": "the in-process simulator",
    "replay": "replayed cassettes",
}


class Provenance(BaseModel):
    """Where the summarised rows came from."""

    target_kinds: list[str]
    targets: list[str] = Field(default_factory=list)  # sandbox URL, profile or cassette
    vantages: list[str] = Field(default_factory=list)
    sources: dict[str, int] = Field(default_factory=dict)  # probe | mcp | task
    window: tuple[str | None, str | None] = (None, None)
    first: str | None = None
    last: str | None = None
    rows: int = 0
    rows_by_kind: dict[str, int] = Field(default_factory=dict)
    #: rows of the selection left out of statistics (not the API's doing: the prober's own
    #: network, or a realprobe sandbox answering instead of the API)
    excluded_rows: int = 0
    #: why, when every row of the selection was left out (see `excluded_cause`)
    excluded_why: str | None = Field(default=None, exclude=True)
    #: rows of other kinds in the same window, not summarised
    other_kinds: dict[str, int] = Field(default_factory=dict)

    def kinds_text(self) -> str:
        return "+".join(self.target_kinds) or "none"

    def headline(self) -> str:
        """One line for titles: kind(s), target(s), vantage(s), window, rows."""
        parts = [f"target {self.kinds_text()}"]
        shown = [t for t in self.targets if t != "live"]
        if shown:
            parts.append(", ".join(shown[:3]) + (f" (+{len(shown) - 3})" if len(shown) > 3 else ""))
        if self.vantages:
            parts.append(f"vantage {', '.join(self.vantages[:3])}"
                         + (f" (+{len(self.vantages) - 3})" if len(self.vantages) > 3 else ""))
        parts.append(f"{self.window[0] or 'start'} → {self.window[1] or 'now'}")
        rows = f"{self.rows} rows"
        if self.excluded_rows:
            rows += f" (+{self.excluded_rows} excluded: not the API's doing)"
        parts.append(rows)
        return " · ".join(parts)

    def banner(self) -> str | None:
        """A sentence no reader can miss when the numbers are not from the real APIs."""
        return kinds_banner(self.target_kinds, self.targets)


def kinds_banner(kinds: Sequence[str], targets: Sequence[str] = ()) -> str | None:
    """What a page of numbers from rows of `kinds` must say first (None: live rows only)."""
    if "live" in kinds:
        if len(kinds) > 1:
            return (
                "MIXED SOURCES: these numbers pool live rows with rows from "
                + ", ".join(KIND_WORDS.get(k, k) for k in kinds if k != "live")
                + "; they do not describe the real APIs alone."
            )
        return None
    what = " and ".join(KIND_WORDS.get(k, k) for k in kinds)
    return (
        f"NOT MEASURED ON THE REAL APIS: every number here comes from {what}"
        + (f" ({', '.join(targets[:3])})" if targets else "")
        + ", not from calls to the public APIs."
    )


def parse_target(value: str | None) -> str | None:
    """`target` as given: a kind, `all`, or None (choose from what the window holds)."""
    if value is None:
        return None
    v = value.strip().lower() if isinstance(value, str) else value
    if v == IMPORTED_KIND:  # monitors' histories: time, not calls; never pooled with probes
        raise BadArgument("kinds", "kinds imported: imported monitor histories are read as "
                                   "statistics in time (stats and calibrate with kinds "
                                   "imported), never pooled with probe rows")
    if v not in TARGET_CHOICES:
        raise BadArgument(
            "kinds", f"kinds {value!r}: choose one of {', '.join(TARGET_CHOICES)}"
        )
    return str(v)


def parse_vantages(value: str | Sequence[str] | None) -> list[str] | None:
    """Vantage names from "a,b" or a list; None means every vantage."""
    if value is None:
        return None
    parts = value.split(",") if isinstance(value, str) else list(value)
    names = [v.strip() for v in parts if isinstance(v, str) and v.strip()]
    if not names:
        raise BadArgument("vantage", "vantage: give at least one vantage name")
    return names


def _query(conn: sqlite3.Connection, sql: str, params: list[Any]) -> list[Any]:
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.DatabaseError as exc:
        raise RealprobeError(f"cannot read probes ({read_error(exc)})") from exc


def survey_sql(have: list[str], cond: str, table: str = "probes") -> str:
    """The survey's query: rows, first and last start per group of the `have` columns."""
    cols = ", ".join(have)
    return (
        f"SELECT {cols}{',' if have else ''} count(*), min(started_ts), max(started_ts) "
        f"FROM {table} WHERE {cond}" + (f" GROUP BY {cols} ORDER BY {cols}" if have else "")
    )


def _by_chunks(
    conn: sqlite3.Connection, have: list[str], cond: str, params: list[Any], sel: Selection
) -> list[tuple[Any, ...]] | None:
    """The survey's rows (raw group values, rows, first, last) from the chunk store: sealed
    rows grouped in numpy, the rest by SQL, in one snapshot, in the order SQL gives them
    (None: no chunk store to use)."""
    import numpy as np

    with snapshot(conn, cond) as got:
        if got is None:
            return None
        found, where, keys = got
        acc = {tuple(r[:5]): list(r[5:]) for r in _query(
            conn, survey_sql(have, where, "probes NOT INDEXED"), params)}
        prov_ok = sel.provenance(keys)

        def add(group: tuple[Any, ...], n: int, lo: float, hi: float) -> None:
            a = acc.get(group)
            acc[group] = [n, lo, hi] if a is None else [a[0] + n, min(a[1], lo), max(a[2], hi)]

        cut = []  # chunks a window cuts: their rows say which are in
        for c, chunk in enumerate(found):
            mine = []
            for tool, prov, excluded, n, lo, hi in chunk.groups:
                if sel.tool_ok(keys[tool][0]) and prov_ok[prov] and (span := sel.span(lo, hi)):
                    mine.append((prov, excluded, n, lo, hi))
                    if span < 0:
                        cut.append(c)
                        break
            else:
                for prov, excluded, n, lo, hi in mine:
                    kind, vantage, source, target = keys[prov]
                    add((kind, chunks.EXCLUDED_VALUES[excluded], vantage, source, target),
                        n, lo, hi)
        rows = chunks.columns(conn, [found[c] for c in cut], ["ts", "prov", "excluded"])
        for i, c in enumerate(cut):
            size, toc = found[c].n, found[c].toc
            ts = dense(rows["ts"][i], size)
            key = dense(rows["prov"][i], size).astype(np.int64) * 3 + dense(
                rows["excluded"][i], size)
            m = sel.rows(ts, key // 3, key % 3, prov_ok) & np.repeat(
                [sel.tool_ok(keys[t][0]) for t, _ in toc], [n for _, n in toc])
            ts, key = ts[m], key[m]
            counts = np.bincount(key)
            for k in np.flatnonzero(counts).tolist():
                mine_ts = ts[key == k]
                kind, vantage, source, target = keys[k // 3]
                add((kind, chunks.EXCLUDED_VALUES[k % 3], vantage, source, target),
                    int(counts[k]), float(mine_ts.min()), float(mine_ts.max()))
        return sorted(((*k, *v) for k, v in acc.items()),
                      key=lambda r: [chunks.sql_order(v) for v in r[:5]])


#: one group of rows: (kind, target label, vantage, source, excluded, rows, first, last)
Group = tuple[str, str, str, str, int, int, float, float]


def survey(
    db: Database,
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    vantages: list[str] | None = None,
) -> list[Group]:
    """Every (kind, target, vantage, source, excluded) group in the window: one scan, of the
    covering provenance index when the file has it."""
    conn = db.read()
    try:
        cols = probe_columns(conn)
        have: list[str] = [
            c for c in ("target_kind", "excluded", "vantage", "source", "target") if c in cols]
        now = time.time()
        cond, params = conditions(cols, since, until, tools, None, vantages, excluded=None,
                                  now=now)
        sel = Selection(since, until, tools, None, vantages, None, now + FUTURE_SKEW_S)
        rows = chunks.or_none(lambda: _by_chunks(conn, have, cond, params, sel)) \
            if len(have) == 5 else None
        if rows is None:
            rows = _query(conn, survey_sql(have, cond), params)
    finally:
        conn.close()
    merged: dict[tuple[str, str, str, str, int], list[float]] = {}
    for row in rows:
        got = dict(zip(have, row[: len(have)], strict=True))
        n, lo, hi = row[len(have):]
        if not n:
            continue
        key = (
            str(got.get("target_kind") or "live"),
            str(got.get("target") or ""),
            str(got.get("vantage") or ""),
            str(got.get("source") or "probe"),
            1 if got.get("excluded") else 0,
        )
        acc = merged.setdefault(key, [0, float(lo), float(hi)])
        acc[0] += n
        acc[1], acc[2] = min(acc[1], float(lo)), max(acc[2], float(hi))
    return [(*k, int(v[0]), v[1], v[2]) for k, v in merged.items()]


def _totals(pairs: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Rows summed per name, by name."""
    out: Counter[str] = Counter()
    for name, n in pairs:
        out[name] += n
    return dict(sorted(out.items()))


def kinds_present(groups: list[Group]) -> dict[str, int]:
    """{target kind: rows} among a window's `survey` groups (excluded rows left out; when every
    row is excluded, their kinds, so that the readers pick them and say why they were left
    out)."""
    return (_totals((g[0], g[5]) for g in groups if not g[4])
            or _totals((g[0], g[5]) for g in groups if g[4]))


def vantages_present(
    db: Database,
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    kinds: list[str] | None = None,
) -> dict[str, int]:
    """{vantage: rows} in the window among `kinds` (excluded rows left out)."""
    return _totals((g[2], g[5]) for g in survey(db, since, until, tools)
                   if not g[4] and (kinds is None or g[0] in kinds))


def pick_kinds(present: dict[str, int], target: str | None) -> list[str]:
    """The kinds to summarise: as asked, else live if present, else the one kind present."""
    if target == ALL:
        return sorted(present) or [k.value for k in TargetKind]
    if target is not None:
        return [target]
    if "live" in present or not present:
        return ["live"]
    if len(present) == 1:
        return list(present)
    found = ", ".join(f"{k} ({n} rows)" for k, n in sorted(present.items()))
    raise BadArgument(
        "kinds",
        f"this window holds no live rows, only {found}; pick one with "
        f"kinds={'|'.join(sorted(present))}, or kinds=all to pool them",
    )


def describe(
    db: Database,
    kinds: list[str],
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    vantages: list[str] | None = None,
    *,
    groups: list[Group] | None = None,
) -> Provenance:
    """The provenance of the rows `load_probes(db, since, until, tools, kinds=..., vantages=...)`
    returns, plus what the window holds besides."""
    if groups is None:
        groups = survey(db, since, until, tools, vantages)
    kept = [g for g in groups if g[0] in kinds and not g[4]]
    excluded_rows = sum(g[5] for g in groups if g[0] in kinds and g[4])
    return Provenance(
        target_kinds=sorted(kinds),
        targets=sorted({g[1] for g in kept if g[1]}),
        vantages=sorted({g[2] for g in kept if g[2]}),
        sources=_totals((g[3], g[5]) for g in kept),
        window=(iso(since), iso(until)),
        first=iso(min((g[6] for g in kept), default=None)),
        last=iso(max((g[7] for g in kept), default=None)),
        rows=sum(g[5] for g in kept),
        rows_by_kind=_totals((g[0], g[5]) for g in kept),
        excluded_rows=excluded_rows,
        excluded_why=None if kept or not excluded_rows else excluded_cause(
            _excluded_detail(db, kinds, since, until, tools, vantages)),
        other_kinds=_totals((g[0], g[5]) for g in groups if g[0] not in kinds and not g[4]),
    )


def _excluded_detail(db: Database, kinds: list[str], since: float | None,
                     until: float | None, tools: list[str] | None,
                     vantages: list[str] | None) -> str | None:
    """The `detail` of one excluded row of the selection (they share their cause)."""
    conn = db.read()
    try:
        cols = probe_columns(conn)
        cond, params = conditions(cols, since, until, tools, kinds, vantages, excluded=True)
        rows = _query(conn, f"SELECT max(detail) FROM probes WHERE {cond}", params)
    finally:
        conn.close()
    return rows[0][0] if rows else None


def excluded_cause(detail: str | None) -> str:
    """Why rows were left out of statistics and what to run, from an excluded row's `detail`
    (the one wording for `probe` when a whole run was, and for every reader of the rows)."""
    d = detail or ""
    if "catalogue differs" in d:
        return ("the sandbox serves another catalogue (it answered HTTP 421 for these APIs); "
                "restart it with the probe's catalogue (`realprobe sandbox --catalog FILE`), "
                "then probe again")
    if "(no-fixture)" in d:
        return ("the sandbox has no fixture body for these tools; record them "
                "(`realprobe catalog record-fixtures`), then probe again")
    if "realprobe sandbox, not" in d:
        return ("a realprobe server answered instead of the API; check the --sandbox URL, then "
                "probe again")
    return ("the prober reached no server (its own network or the sandbox was down); check the "
            "network or the --sandbox URL, then probe again")


def empty_selection_error(
    prov: Provenance, db: Database, tools: list[str] | None,
    widen: tuple[str, ...] = ("since", "until"),
) -> str:
    """Why a selection holds no rows, in one line that says what to do (naming the parameters
    `kinds` and `widen`: raise it with `param=EMPTY_SELECTION_PARAMS`)."""
    sel = f" for {', '.join(tools)}" if tools else ""
    where = f"between {prov.window[0] or 'the beginning'} and {prov.window[1] or 'now'}"
    kinds = prov.kinds_text()
    if prov.excluded_rows:
        n, why = prov.excluded_rows, prov.excluded_why or excluded_cause(None)
        rows = f"the one {kinds} row{sel} {where} in {db} was" if n == 1 else \
            f"all {n} {kinds} rows{sel} {where} in {db} were"
        return f"{rows} excluded from statistics: {why}"
    if prov.other_kinds:
        found = ", ".join(f"{k} ({n})" for k, n in sorted(prov.other_kinds.items()))
        return (
            f"no {kinds} rows{sel} {where} in {db}; the window holds {found}: "
            "pick it with kinds"
        )
    return (
        f"no probe rows{sel} {where} in {db}; widen the window ({', '.join(widen)}) "
        "or probe first"
    )


#: the parameters an `empty_selection_error` message may name
EMPTY_SELECTION_PARAMS = ("kinds", "since", "until", "baseline", "current")
