"""Which catalogue fixture answers a request, by its arguments (the sandbox and the
in-process simulator both ask this).

1. `fixture`: a fixture whose `when` arguments all match the request's arguments (the most
   specific first), or a fixture that declares no `when`.
2. `unknown-input`: no fixture matches, and the catalogue holds the API's real answer to
   input it does not know (a 404 body, an empty list): that answer. Never for the arguments
   of one of the tool's catalogue examples: those are inputs the real API is known to answer.
3. `nearest-fixture`: otherwise, the fixture whose `when` is closest to the arguments.

Response fields the catalogue declares as echoing an argument (`echo`) are set to the
request's argument, so `name=michael` is answered with `"name": "michael"`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote

from realprobe.limits import json_or_none
from realprobe.simulator.routes import Body, Route


@dataclass(frozen=True, slots=True)
class Chosen:
    body: Body
    source: str  # fixture, nearest-fixture or unknown-input (the sandbox adds cassette, upstream)


def request_arguments(route: Route, path: str, query: str) -> dict[str, str]:
    """The tool arguments a request carries, read back through the path and query templates."""
    args: dict[str, str] = {}
    m = route.args_regex.match(path)
    if m:
        args.update({k: unquote(v) for k, v in m.groupdict().items()})
    pairs = dict(parse_qsl(query, keep_blank_values=True))
    for qname, template in route.query.items():
        if qname in pairs and template.startswith("{") and template.endswith("}"):
            args[template[1:-1]] = pairs[qname]
    return args


def _wanted(body: Body) -> dict[str, list[str]]:
    """The body's `when` by argument: any of the listed values matches."""
    wanted: dict[str, list[str]] = {}
    for k, v in body.when:
        wanted.setdefault(k, []).append(v.casefold())
    return wanted


def _matches(body: Body, args: Mapping[str, str]) -> bool:
    return all(args.get(k, "").casefold() in vs for k, vs in _wanted(body).items())


def _closeness(body: Body, args: Mapping[str, str]) -> float:
    score = 0.0
    for k, vs in _wanted(body).items():
        got = args.get(k)
        if got is None:
            continue
        score += max(difflib.SequenceMatcher(None, got.casefold(), v).ratio() for v in vs)
    return score


def _set_path(doc: Any, path: str, value: str) -> bool:
    """Set a dotted path (`name`, `0.name`) in parsed JSON; False when the path is absent."""
    parts = path.split(".")
    node = doc
    for part in parts[:-1]:
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return False
    last = parts[-1]
    if isinstance(node, dict):
        old = node.get(last)
        node[last] = _typed(value, old)
        return True
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = _typed(value, node[int(last)])
        return True
    return False


def _typed(value: str, like: Any) -> Any:
    """The argument in the type of the field it replaces (an id stays a number)."""
    if isinstance(like, bool):
        return value.lower() in ("1", "true", "yes")
    if isinstance(like, int):
        with contextlib.suppress(ValueError):
            return int(value)
    if isinstance(like, float):
        with contextlib.suppress(ValueError):
            return float(value)
    return value


def echo(route: Route, body: Body, args: Mapping[str, str]) -> Body:
    """The body with the route's echo fields set to the request's arguments."""
    wanted = [(path, args[name]) for path, name in route.echo if name in args]
    if not wanted:
        return body
    doc = json_or_none(body.body)
    if doc is None:
        return body
    before = json.dumps(doc, sort_keys=True)
    for path, value in wanted:
        _set_path(doc, path, value)
    if json.dumps(doc, sort_keys=True) == before:
        return body  # nothing changed: keep the real bytes as they were
    return dataclasses.replace(body, body=json.dumps(doc, ensure_ascii=False).encode("utf-8"))


def is_example(route: Route, args: Mapping[str, str]) -> bool:
    """Whether `args` are one of the tool's catalogue examples (compared as strings)."""
    given = {k: v.casefold() for k, v in args.items() if v != ""}
    return any(
        given == {k: v.casefold() for k, v in example} for example in route.examples
    )


def choose_fixture(route: Route, args: Mapping[str, str], pick: int) -> Chosen | None:
    """The fixture answer for these arguments (sources 2-4 above); None when the tool has
    no body at all."""
    oks = route.ok_bodies()
    if not oks:
        return None
    matching = [b for b in oks if _matches(b, args)]
    if matching:
        best = max(len(_wanted(b)) for b in matching)
        top = [b for b in matching if len(_wanted(b)) == best]
        return Chosen(echo(route, top[pick % len(top)], args), "fixture")
    unknown = [b for b in route.bodies if b.unknown_input]
    if unknown and not is_example(route, args):
        return Chosen(echo(route, unknown[pick % len(unknown)], args), "unknown-input")
    nearest = max(oks, key=lambda b: _closeness(b, args))
    return Chosen(echo(route, nearest, args), "nearest-fixture")
