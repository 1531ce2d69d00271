"""Implicit faults seen from outside: answers a prober accepts (the call stays `ok`) that show
signs of being wrong. Stored per probe row in the `implicit` column, summarised per tool,
and calibrated into the profile's `implicit` section.

What a prober can see, from the tool's structured output and its earlier answers:

* `drift` (ToolMaze's implicit schema drift, read on the declared output at any depth, list
  elements counted one by one): the output fails the tool's declared output schema; a field
  the tool filled in every earlier answer (at least MIN_SEEN) is now absent or null; a field
  that always had one JSON type now has another; a value with a unit (`12 km`) now carries
  another unit; or a short code field whose values formed a small closed set (at most
  ENUM_MAX values over at least ENUM_SEEN answers, under more than one argument set) now
  holds a value outside it;
* `empty`: every collection in the answer is empty, or every field is null or blank;
* `stale`: the same answer again for the same arguments where this tool's answers to them
  usually vary (at least twice, and more than twice as often as they repeated), or dates
  older than the newest this tool has answered with by more than STALE_DAYS.

The detector remembers a tool's earlier answers for as long as it lives (one probe run): the
first answers of a tool can only show drift against the schema, or empty.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from realprobe.chunks import IMPLICIT_EXTRA as IMPLICIT_EXTRA  # where the readers take it from
from realprobe.dbfacts import IMPLICIT_KINDS
from realprobe.probes.loading import ProbeArrays

if TYPE_CHECKING:
    from realprobe.adapters.tool import Tool
    from realprobe.result import ToolResult

#: answers (or list elements) a field must have been seen in before its change is a sign
MIN_SEEN = 3
#: a code field is a closed set when it took at most ENUM_MAX values over ENUM_SEEN answers
ENUM_MAX, ENUM_SEEN = 4, 20
_CODE = re.compile(r"^[A-Za-z][A-Za-z_-]{0,19}$")
_UNIT = re.compile(r"^-?\d+(?:[.,]\d+)?\s?([A-Za-z°%µ/]+)$")
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


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object" if isinstance(v, dict) else "other"


def _fields(doc: Any, children: dict[str, set[str]], path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of every object field at any depth, list elements one by one under the
    path `*`; a field `children` knows under this object but absent from it comes as None."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            sub = f"{path}.{k}" if path else str(k)
            yield sub, v
            yield from _fields(v, children, sub)
        for sub in children.get(path, ()):
            if sub.rsplit(".", 1)[-1] not in doc:
                yield sub, None
    elif isinstance(doc, list):
        for v in doc:
            yield from _fields(v, children, f"{path}.*" if path else "*")


@dataclass
class _Field:
    """One declared field's history: how often seen, filled, with which types and values."""

    seen: int = 0
    filled: int = 0
    kinds: set[str] = field(default_factory=set)
    units: set[str] = field(default_factory=set)
    codes: set[str] | None = field(default_factory=set)  # None: not a code field
    code_args: set[str] = field(default_factory=set)

    def signs(self, v: Any, args_key: str) -> bool:
        """Whether value `v` breaks what this field always was (checked before it is kept)."""
        if self.seen < MIN_SEEN:
            return False
        if v is None or v == "":
            return self.filled == self.seen  # it was always there
        if len(self.kinds) == 1 and _kind(v) not in self.kinds:
            return True
        unit = _UNIT.match(v) if isinstance(v, str) else None
        if len(self.units) == 1 and unit and unit.group(1) not in self.units:
            return True
        closed = (self.codes is not None and self.seen >= ENUM_SEEN
                  and len(self.codes) <= ENUM_MAX and len(self.code_args) > 1)
        return closed and isinstance(v, str) and v not in (self.codes or ())

    def keep(self, v: Any, args_key: str) -> None:
        self.seen += 1
        if v is None or v == "":
            return
        self.filled += 1
        self.kinds.add(_kind(v))
        unit = _UNIT.match(v) if isinstance(v, str) else None
        if unit:
            self.units.add(unit.group(1))
        if self.codes is not None:
            if isinstance(v, str) and _CODE.match(v):
                self.codes.add(v)
                self.code_args.add(args_key)
            else:
                self.codes = None


@dataclass
class _Seen:
    """What one tool answered before."""

    fields: dict[str, _Field] = field(default_factory=dict)  # path -> its history
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
        if self._drifted(self._validator(tool), data, seen, _args_key(args)):
            found.append("drift")
        if is_empty(data):
            found.append("empty")
        if self._stale(data, args, seen):
            found.append("stale")
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
    def _drifted(validator: Any, data: dict[str, Any], seen: _Seen, args_key: str) -> bool:
        """Off the declared schema, or a field changed from what it always was; an answer
        without such a change joins each field's history afterwards."""
        off = validator is not None and not validator.is_valid(data)
        children: dict[str, set[str]] = {}
        for p in seen.fields:
            children.setdefault(p.rsplit(".", 1)[0] if "." in p else "", set()).add(p)
        values = list(_fields(data, children))
        sign = any(seen.fields[p].signs(v, args_key) for p, v in values if p in seen.fields)
        if not sign:  # a drifted answer stays out: an intermittent drift is seen every time
            for p, v in values:
                seen.fields.setdefault(p, _Field()).keep(v, args_key)
        return off or sign

    @staticmethod
    def _stale(data: dict[str, Any], args: Any, seen: _Seen) -> bool:
        key = _args_key(args)
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


def _args_key(args: Any) -> str:
    return json.dumps(args or {}, sort_keys=True, default=str)


# -- summary over stored rows -------------------------------------------------------------


def implicit_counts(arr: ProbeArrays) -> dict[str, dict[str, Any]]:
    """Per tool over rows read with `extra=IMPLICIT_EXTRA`: successful calls, and how many
    (and what share) showed each implicit kind. A file made before the `implicit` column
    existed shows none."""
    if "implicit" not in arr.extra:
        return {}
    out: dict[str, dict[str, Any]] = {}
    bits = arr.extra["implicit"]
    none = not bits.any()  # the usual file: every count 0, no per-tool pass over the bits
    for i, tool in enumerate(arr.tools):
        a, b = int(arr.bounds[i]), int(arr.bounds[i + 1])
        ok_rows = arr.code[a:b] < 0
        ok = int(np.count_nonzero(ok_rows))
        if not ok:
            continue
        mine = None if none else np.compress(ok_rows, bits[a:b]).astype(np.int64)
        counts = {k: 0 if mine is None else int(((mine >> j) & 1).sum())
                  for j, k in enumerate(IMPLICIT_KINDS)}
        out[tool] = {"ok": ok, **counts, "rates": {k: counts[k] / ok for k in IMPLICIT_KINDS}}
    return out
