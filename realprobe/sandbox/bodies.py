"""Which success body the sandbox serves for one request, and where it came from.

In order:
1. `cassette`: a recorded response whose request matches this one (method, URL with the
   query, and the body: the replay matcher's key). Identical requests get their recordings
   in recorded order, then start over.
2. `fixture`: a catalogue fixture whose `when` arguments all match the request's arguments
   (the most specific first), or a fixture that declares no `when`.
3. `unknown-input`: no fixture matches, and the catalogue holds the API's real answer to
   input it does not know (a 404 body, an empty list): that answer. Never for the arguments
   of one of the tool's catalogue examples: those are inputs the real API is known to answer.
4. `nearest-fixture`: otherwise, the fixture whose `when` is closest to the arguments.

Response fields the catalogue declares as echoing an argument (`echo`) are set to the
request's argument in fixture answers (2-4), so `name=michael` is answered with
`"name": "michael"`. The answer's source goes out in the `X-Realprobe-Body-Source` header.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote

from realprobe.replay.cassette import Call, Cassette
from realprobe.replay.importers import load_cassette
from realprobe.replay.matching import MATCH_URL, MATCH_URL_BODY, match_key
from realprobe.replay.scrub import ScrubConfig, config_for, scrub_for_match
from realprobe.simulator.routes import Body, Route

SOURCE_HEADER = "X-Realprobe-Body-Source"
SOURCES = ("cassette", "fixture", "nearest-fixture", "unknown-input", "upstream")
HOP_BY_HOP = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "content-type"}
)
CASSETTE_SUFFIXES = (".json", ".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class Chosen:
    body: Body
    source: str  # one of SOURCES


def cassette_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given; folders expanded to the cassettes in them (sorted, not recursive)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.iterdir() if f.suffix.lower() in CASSETTE_SUFFIXES))
        else:
            out.append(p)
    return out


def recorded_body(call: Call) -> Body:
    """A recorded response as a servable body (hop-by-hop headers dropped)."""
    ctype = call.header("content-type") or "application/octet-stream"
    headers = tuple((k, v) for k, v in call.headers if keep_header(k))
    return Body("ok", call.status or 200, ctype, headers, call.body, None)


def keep_header(name: str) -> bool:
    """Pass a recorded or upstream header on: not hop-by-hop, not a sandbox annotation (a
    recording made through a sandbox carries its X-Realprobe-* headers)."""
    low = name.lower()
    return low not in HOP_BY_HOP and not low.startswith("x-realprobe-")


class Recordings:
    """Recorded responses, indexed by the replay matcher's key (method + canonical URL, with
    and without the body digest). Only complete responses are served: a recorded timeout or
    reset is the profile's business, not the body source's."""

    def __init__(self, cassettes: Iterable[Cassette]) -> None:
        self.with_body: dict[str, list[Call]] = {}
        self.url_only: dict[str, list[Call]] = {}
        self.scrubs: list[ScrubConfig] = []
        self.count = 0
        self._served: dict[str, int] = {}
        for cassette in cassettes:
            if cassette.meta.get("scrubbed"):
                cfg = config_for(cassette.meta)
                if cfg not in self.scrubs:
                    self.scrubs.append(cfg)
            by_body = "body" in cassette.match_on
            for call in sorted(cassette.calls, key=lambda c: c.seq):
                if call.status is None or call.error is not None or not call.complete:
                    continue
                self.count += 1
                key = match_key(call.method, call.uri, call.request_body, MATCH_URL_BODY)
                self.with_body.setdefault(key, []).append(call)
                if not by_body:
                    url_key = match_key(call.method, call.uri, None, MATCH_URL)
                    self.url_only.setdefault(url_key, []).append(call)

    @classmethod
    def load(cls, paths: Iterable[str | Path]) -> Recordings:
        return cls(load_cassette(p) for p in cassette_paths(paths))

    def _variants(self, url: str, body: bytes | None) -> list[tuple[str, bytes | None]]:
        """The request as it is, and as each cassette's scrubbing would have written it."""
        out = [(url, body)]
        for cfg in self.scrubs:
            out.append(scrub_for_match(url, body, cfg))
        return out

    def lookup(self, method: str, url: str, body: bytes | None) -> Call | None:
        for u, b in self._variants(url, body):
            for index, key in (
                (self.with_body, match_key(method, u, b, MATCH_URL_BODY)),
                (self.url_only, match_key(method, u, None, MATCH_URL)),
            ):
                calls = index.get(key)
                if calls:
                    n = self._served.get(key, 0)
                    self._served[key] = n + 1
                    return calls[n % len(calls)]
        return None


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


def _matches(body: Body, args: Mapping[str, str]) -> bool:
    return all(args.get(k, "").casefold() == v.casefold() for k, v in body.when)


def _closeness(body: Body, args: Mapping[str, str]) -> float:
    score = 0.0
    for k, v in body.when:
        got = args.get(k)
        if got is None:
            continue
        score += difflib.SequenceMatcher(None, got.casefold(), v.casefold()).ratio()
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
    try:
        doc = json.loads(body.body)
    except (ValueError, UnicodeDecodeError):
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
        best = max(len(b.when) for b in matching)
        top = [b for b in matching if len(b.when) == best]
        return Chosen(echo(route, top[pick % len(top)], args), "fixture")
    unknown = [b for b in route.bodies if b.unknown_input]
    if unknown and not is_example(route, args):
        return Chosen(echo(route, unknown[pick % len(unknown)], args), "unknown-input")
    nearest = max(oks, key=lambda b: _closeness(b, args))
    return Chosen(echo(route, nearest, args), "nearest-fixture")


class BodySource:
    """Recordings first (when given), then the catalogue's fixtures by argument."""

    def __init__(
        self, origins: Mapping[str, str], recordings: Recordings | None = None
    ) -> None:
        #: api id -> origin of its real base URL ("https://api.agify.io")
        self.origins = dict(origins)
        self.recordings = recordings

    def choose(
        self, route: Route, method: str, path: str, query: str, body: bytes | None, pick: int
    ) -> Chosen | None:
        """None: no recording matches and the tool has no body (the sandbox says so)."""
        origin = route.origin or self.origins.get(route.api_id)
        if self.recordings is not None and origin:
            url = origin + path + (f"?{query}" if query else "")
            call = self.recordings.lookup(method, url, body)
            if call is not None:
                return Chosen(recorded_body(call), "cassette")
        return choose_fixture(route, request_arguments(route, path, query), pick)
