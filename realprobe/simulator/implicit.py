"""Implicit faults: answers that look fine (HTTP 200, the client sees ok) but are wrong.

Each variant is built from the tool's real fixture bodies:

* `stale`: an earlier answer of the tool again, or, with none yet, the answer with its
  dates moved three years into the past;
* `empty`: the answer with its collections emptied (then its text blanked, then its
  optional values nulled), the first of these the tool's declared output still accepts;
* `wrong`: an answer for other arguments (another fixture, with the request's echoed
  arguments kept), or the answer with its numbers shifted and its flags flipped;
* `drift`: one field renamed, removed or retyped; a drift the tool's declared output still
  accepts is preferred (the call stays ok), else the first one (the client refuses it).

`Route.parse` (the tool's own parser, when the route has one) decides what the declared
output accepts. Every shaper returns the new body and a note saying what was done: the
truth for evaluators.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from realprobe.limits import json_or_none
from realprobe.simulator.routes import Body, Route

STALE_DAYS = 3 * 365
#: fields tried for a drift, depth first (each try parses a changed copy of the body)
DRIFT_FIELDS = 40
_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})")


def _dump(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


def _parsed(route: Route, body: bytes) -> tuple[bool, Any]:
    """(accepted, output) of the tool's parser; (True, None) when the route has none."""
    if route.parse is None:
        return True, None
    try:
        return True, route.parse(body)
    except Exception:  # any refusal: the declared output does not accept it
        return False, None


def _first_accepted(
    route: Route, original: bytes, candidates: Iterator[tuple[bytes, str]], *, fallback: bool
) -> tuple[bytes, str] | None:
    """The first candidate the tool accepts whose output differs from the original's, else
    the first accepted one, else (with `fallback`) the first candidate at all."""
    _, before = _parsed(route, original)
    accepted: tuple[bytes, str] | None = None
    first: tuple[bytes, str] | None = None
    for body, note in candidates:
        if body == original:
            continue
        first = first or (body, note)
        ok, after = _parsed(route, body)
        if ok and (route.parse is None or after != before):
            return body, note
        if ok and accepted is None:
            accepted = (body, note)
    return accepted or (first if fallback else None)


# -- empty ----------------------------------------------------------------------------


def _map(doc: Any, leaf: Callable[[Any], Any], lists: bool) -> Any:
    if isinstance(doc, dict):
        return {k: _map(v, leaf, lists) for k, v in doc.items()}
    if isinstance(doc, list):
        return [] if lists else [_map(v, leaf, lists) for v in doc]
    return leaf(doc)


def _empty_candidates(doc: Any) -> Iterator[tuple[bytes, str]]:
    if isinstance(doc, list):
        yield b"[]", "empty list"
    yield _dump(_map(doc, lambda v: v, True)), "collections emptied"
    for lists in (True, False):
        done = "collections emptied, " if lists else ""
        blank = _map(doc, lambda v: "" if isinstance(v, str) else v, lists)
        yield _dump(blank), done + "text blanked"
        yield _dump(_map(doc, lambda v: None, lists)), done + "values nulled"


def empty(route: Route, ok: Body) -> tuple[bytes, str]:
    doc = json_or_none(ok.body)
    if doc is None:
        return b"", "empty text"
    got = _first_accepted(route, ok.body, _empty_candidates(doc), fallback=False)
    return got if got is not None else (ok.body, "nothing to empty")


# -- stale ----------------------------------------------------------------------------


def _move_dates(text: str, days: int) -> str:
    def back(m: re.Match[str]) -> str:
        try:
            d = dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            return m.group(0)
        return (d - dt.timedelta(days=days)).isoformat()

    return _DATE.sub(back, text)


def stale(route: Route, ok: Body, earlier: bytes | None) -> tuple[bytes, str]:
    if earlier is not None and earlier != ok.body:
        return earlier, "an earlier answer again"
    text = ok.body.decode("utf-8", "replace")
    moved = _move_dates(text, STALE_DAYS)
    if moved != text:
        return moved.encode("utf-8"), f"dates moved {STALE_DAYS} days into the past"
    if earlier is not None:
        return earlier, "the same answer again"
    oldest = route.ok_bodies()[0].body
    return oldest, "the oldest recorded answer"


# -- wrong ----------------------------------------------------------------------------


def _shift(doc: Any, pick: int) -> Any:
    step = 1 + pick % 7

    def leaf(v: Any) -> Any:
        if isinstance(v, bool):
            return not v
        if isinstance(v, int):
            return v + step
        if isinstance(v, float):
            return round(v * 1.37 + step, 6)
        return v

    return _map(doc, leaf, False)


def _echoed(route: Route, body: bytes, like: bytes) -> bytes:
    """`body` with the echo fields of `like` (the request's arguments) copied in."""
    doc, src = json_or_none(body), json_or_none(like)
    if doc is None or src is None or not route.echo:
        return body
    for path, _ in route.echo:
        value = _get(src, path)
        if value is not None:
            _put(doc, path, value)
    return _dump(doc)


def _get(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(doc, dict):
            doc = doc.get(part)
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            return None
    return doc


def _put(doc: Any, path: str, value: Any) -> None:
    *head, last = path.split(".")
    node = _get(doc, ".".join(head)) if head else doc
    if isinstance(node, dict) and last in node:
        node[last] = value


def _scrambled(text: str) -> str:
    """The words of a text in reverse order (a sentence that is no longer the answer)."""
    words = text.split(" ")
    return " ".join(reversed(words)) if len(words) > 1 else text[::-1]


def _wrong_candidates(route: Route, ok: Body, pick: int) -> Iterator[tuple[bytes, str]]:
    others = [b for b in route.ok_bodies() if b.body != ok.body]
    for i in range(len(others)):
        other = others[(pick + i) % len(others)]
        when = ", ".join(f"{k}={v}" for k, v in other.when) or "other arguments"
        yield _echoed(route, other.body, ok.body), f"the answer for {when}"
    doc = json_or_none(ok.body)
    if doc is None:
        text = ok.body.decode("utf-8", "replace")
        yield _scrambled(text).encode("utf-8"), "text scrambled"
        return
    yield _dump(_shift(doc, pick)), "numbers shifted, flags flipped"
    scrambled = _map(doc, lambda v: _scrambled(v) if isinstance(v, str) else v, False)
    yield _echoed(route, _dump(scrambled), ok.body), "text scrambled"


def wrong(route: Route, ok: Body, pick: int) -> tuple[bytes, str]:
    got = _first_accepted(route, ok.body, _wrong_candidates(route, ok, pick), fallback=False)
    return got if got is not None else (ok.body, "no other answer to give")


# -- drift ----------------------------------------------------------------------------


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Key paths of every object field, depth first (list elements: the first only)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list) and doc:
        yield from _paths(doc[0], (*prefix, 0))


def _retyped(v: Any) -> Any:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int | float):
        return str(v)
    if isinstance(v, str):
        return [v]
    return json.dumps(v)


def _drifts(doc: Any) -> Iterator[tuple[bytes, str]]:
    for path in itertools.islice(_paths(doc), DRIFT_FIELDS):
        *head, key = path
        name = ".".join(str(p) for p in path)
        for how in ("removed", "renamed", "retyped"):
            new = copy.deepcopy(doc)
            node = new
            for p in head:
                node = node[p]
            value = node.pop(key)
            if how == "renamed":
                node[f"{key}_v2"] = value
            elif how == "retyped":
                node[key] = _retyped(value)
            yield _dump(new), f"field {name} {how}"


def drift(route: Route, ok: Body) -> tuple[bytes, str]:
    doc = json_or_none(ok.body)
    if doc is None:
        return ok.body, "no fields to drift"
    got = _first_accepted(route, ok.body, _drifts(doc), fallback=True)
    return got if got is not None else (ok.body, "no fields to drift")


def shape(
    variant: str, route: Route, ok: Body, pick: int, earlier: bytes | None = None
) -> tuple[bytes, str]:
    """The body of an implicit variant and a note of what was done to it."""
    if variant == "stale":
        return stale(route, ok, earlier)
    if variant == "empty":
        return empty(route, ok)
    if variant == "wrong":
        return wrong(route, ok, pick)
    if variant == "drift":
        return drift(route, ok)
    raise KeyError(variant)


def reshape(variant: str, doc: Any, pick: int, earlier: Any = None) -> tuple[Any, str]:
    """An implicit variant of any JSON answer (an MCP tool's structured result, say), with no
    route to consult: the first candidate of each variant, and a note of what was done."""
    if variant == "stale":
        if earlier is not None and earlier != doc:
            return earlier, "an earlier answer again"
        moved = json_or_none(_move_dates(json.dumps(doc, ensure_ascii=False), STALE_DAYS))
        return moved, f"dates moved {STALE_DAYS} days into the past" if moved != doc else (
            "the same answer again")
    if variant == "empty":
        same = _dump(doc)
        body, note = next((c for c in _empty_candidates(doc) if c[0] != same),
                          (same, "nothing to empty"))
        return json_or_none(body), note
    if variant == "wrong":
        shifted = _shift(doc, pick)
        if shifted != doc:
            return shifted, "numbers shifted, flags flipped"
        return _map(doc, lambda v: _scrambled(v) if isinstance(v, str) else v, False), (
            "text scrambled")
    if variant == "drift":
        body, note = next(_drifts(doc), (_dump(doc), "no fields to drift"))
        return json_or_none(body), note
    raise KeyError(variant)
