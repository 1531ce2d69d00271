"""Implicit faults seen from outside: answers a prober accepts (the call stays `ok`) that show
signs of being wrong. Stored per probe row in the `implicit` column, summarised per tool,
and calibrated into the profile's `implicit` section.

What a prober can see, from the tool's structured output and its earlier answers:

* `drift`: the output fails the tool's declared output schema, or a field the tool filled
  in its earlier answers is now missing (null);
* `empty`: every collection in the answer is empty, or every field is null or blank;
* `stale`: the same answer again for the same arguments where this tool's answers to them
  usually vary (at least twice, and more than twice as often as they repeated), or dates
  older than the newest this tool has answered with by more than STALE_DAYS.

The detector remembers a tool's earlier answers for as long as it lives (one probe run): the
first answers of a tool can only show drift against the schema, or empty.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from realprobe.probes.loading import conditions, probe_columns
from realprobe.result import ToolResult
from realprobe.store import read_only

if TYPE_CHECKING:
    from realprobe.adapters.tool import Tool

IMPLICIT_KINDS = ("drift", "empty", "stale")
#: a date this much older than the newest the tool has answered with is stale
STALE_DAYS = 365
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")


def _leaves(doc: Any) -> Iterator[Any]:
    if isinstance(doc, dict):
        for v in doc.values():
            yield from _leaves(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _leaves(v)
    else:
        yield doc


def _collections(doc: Any) -> Iterator[list[Any] | dict[str, Any]]:
    if isinstance(doc, dict):
        for v in doc.values():
            if isinstance(v, list | dict):
                yield v
                yield from _collections(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _collections(v)


def is_empty(data: dict[str, Any]) -> bool:
    """Every collection empty (when there is one), or every field null or blank."""
    colls = [c for c in _collections(data) if isinstance(c, list)]
    if colls and all(len(c) == 0 for c in colls):
        return True
    leaves = list(_leaves(data))
    return bool(leaves) and all(v is None or v == "" for v in leaves)


def _dates(doc: Any) -> list[dt.date]:
    out = []
    for v in _leaves(doc):
        if isinstance(v, str):
            m = _DATE.match(v)
            if m:
                try:
                    out.append(dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3))))
                except ValueError:
                    continue
    return out


@dataclass
class _Seen:
    """What one tool answered before."""

    filled: set[str] = field(default_factory=set)  # top-level fields seen non-null
    last: dict[str, str] = field(default_factory=dict)  # args key -> body hash
    #: args key -> [consecutive answers that changed, that repeated]
    pairs: dict[str, list[int]] = field(default_factory=dict)
    newest: dt.date | None = None


class ImplicitWatch:
    """Looks at each successful answer of a run for signs of an implicit fault."""

    def __init__(self) -> None:
        self._seen: dict[str, _Seen] = {}
        self._validators: dict[str, Any] = {}

    def check(self, tool: Tool, result: ToolResult, args: Any = None) -> str | None:
        """The implicit-fault kinds this answer shows (comma-joined), or None."""
        if not result.ok or result.data is None:
            return None
        data = result.data
        seen = self._seen.setdefault(tool.name, _Seen())
        found = []
        if self._drifted(self._validator(tool), data, seen):
            found.append("drift")
        if is_empty(data):
            found.append("empty")
        if self._stale(data, args, seen):
            found.append("stale")
        seen.filled |= {k for k, v in data.items() if v is not None and v != ""}
        return ",".join(found) or None

    def _validator(self, tool: Tool) -> Any:
        """The tool's output-schema validator, built once (None: the schema is unusable)."""
        if tool.name not in self._validators:
            import jsonschema  # only a live watch validates; the summary readers do not

            schema = tool.output_schema
            cls = jsonschema.validators.validator_for(schema)
            try:
                cls.check_schema(schema)
                self._validators[tool.name] = cls(schema)
            except jsonschema.SchemaError:
                self._validators[tool.name] = None
        return self._validators[tool.name]

    @staticmethod
    def _drifted(validator: Any, data: dict[str, Any], seen: _Seen) -> bool:
        if validator is not None and not validator.is_valid(data):
            return True
        return any(data.get(k) is None for k in seen.filled)

    @staticmethod
    def _stale(data: dict[str, Any], args: Any, seen: _Seen) -> bool:
        key = json.dumps(args or {}, sort_keys=True, default=str)
        digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
        before = seen.last.get(key)
        changed, repeated = seen.pairs.setdefault(key, [0, 0])
        repeat = before == digest and changed >= 2 and changed > 2 * repeated
        if before is not None:
            seen.pairs[key][0 if before != digest else 1] += 1
        seen.last[key] = digest
        dates = _dates(data)
        old = False
        if dates:
            newest = max(dates)
            if seen.newest is not None:
                old = (seen.newest - newest).days > STALE_DAYS
            seen.newest = max(newest, seen.newest or newest)
        return repeat or old


# -- summary over stored rows -------------------------------------------------------------


def implicit_summary(
    db: str | Path,
    since: float | None = None,
    until: float | None = None,
    tools: list[str] | None = None,
    kinds: list[str] | None = None,
    vantages: list[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per tool over the selection (the readers' own, `loading.conditions`): successful
    calls, and how many (and what share) showed each implicit kind. A file made before the
    `implicit` column existed shows none."""
    with contextlib.closing(read_only(db)) as conn:
        columns = probe_columns(conn)
        if "implicit" not in columns:
            return {}
        where, params = conditions(columns, since, until, tools, kinds, vantages)
        # one aggregate in SQLite: a row shows a kind when it sits in its comma-joined list
        # (most rows have none: those are not searched)
        shows = ", ".join(
            f"sum(implicit IS NOT NULL AND instr(',' || implicit || ',', ',{k},') > 0)"
            for k in IMPLICIT_KINDS
        )
        rows = conn.execute(
            f"SELECT tool, count(*), {shows} FROM probes WHERE {where} AND outcome = 'ok' "
            "GROUP BY tool", params
        ).fetchall()
    out: dict[str, dict[str, Any]] = {}
    for tool, ok, *counts in rows:
        entry: dict[str, Any] = {"ok": ok, **dict(zip(IMPLICIT_KINDS, counts, strict=True))}
        entry["rates"] = {k: entry[k] / ok for k in IMPLICIT_KINDS}
        out[str(tool)] = entry
    return out


__all__ = ["IMPLICIT_KINDS", "ImplicitWatch", "implicit_summary", "is_empty"]
