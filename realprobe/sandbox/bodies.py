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

from collections.abc import Iterable, Mapping
from pathlib import Path

from realprobe.cassettes.cassette import Call, Cassette
from realprobe.cassettes.matching import MATCH_URL, MATCH_URL_BODY, match_key
from realprobe.cassettes.scrub import ScrubConfig, config_for, scrub_for_match
from realprobe.simulator.fixtures import Chosen, choose_fixture, request_arguments
from realprobe.simulator.routes import Body, Route

SOURCE_HEADER = "X-Realprobe-Body-Source"
HOP_BY_HOP = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "content-type"}
)
CASSETTE_SUFFIXES = (".json", ".yaml", ".yml")


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
