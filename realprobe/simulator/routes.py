"""What the simulator serves: tools as routes with their real fixture bodies (plain data).

The catalogue is turned into a RouteTable elsewhere (`replay.simulate.routes_from_catalog`);
this room only needs the data, so the sandbox never imports the adapters.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from realprobe.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class Body:
    kind: str  # ok | soft_failure | error
    status: int
    content_type: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    code: ErrorCode | None
    #: the arguments that select this body ({} = any arguments)
    #: (argument, value) pairs this body answers; a repeated argument lists alternatives
    when: tuple[tuple[str, str], ...] = ()
    #: this is the API's real answer to input it does not know (a 404 body, an empty list)
    unknown_input: bool = False


@dataclass(slots=True)
class Route:
    api_id: str
    tool: str
    method: str
    path: str  # the full original path template, e.g. /api/v3/PublicHolidays/{year}/{cc}
    response: str  # json | text
    bodies: list[Body]
    #: the query template, {"name": "{name}"}: how arguments reach the query string
    query: dict[str, str] = field(default_factory=dict)
    #: response fields that echo an argument: (dotted field path, argument name)
    echo: tuple[tuple[str, str], ...] = ()
    #: the catalogue's example argument sets: inputs the real API is known to answer
    examples: tuple[tuple[tuple[str, str], ...], ...] = ()
    origin: str = ""  # scheme://host[:port] of the API, shared by APIs on one host
    #: the tool's own parser (raises on a body its declared output refuses): implicit faults
    #: use it to stay what the client accepts
    parse: Callable[[bytes], Any] | None = field(default=None, compare=False, repr=False)
    regex: re.Pattern[str] = field(init=False)
    #: the path template with one named group per placeholder, to read arguments back
    args_regex: re.Pattern[str] = field(init=False)

    def __post_init__(self) -> None:
        pattern = re.sub(r"\\\{[a-zA-Z_][a-zA-Z0-9_]*\\\}", "[^/]+", re.escape(self.path))
        self.regex = re.compile("^" + pattern + "/?$")
        named = re.sub(
            r"\\\{([a-zA-Z_][a-zA-Z0-9_]*)\\\}", r"(?P<\1>[^/]+)", re.escape(self.path)
        )
        self.args_regex = re.compile("^" + named + "/?$")

    def ok_bodies(self) -> list[Body]:
        """Success bodies (an `unknown_input` answer only when there is nothing else)."""
        oks = [b for b in self.bodies if b.kind == "ok"]
        return [b for b in oks if not b.unknown_input] or oks

    def failure_bodies(self, code: ErrorCode) -> list[Body]:
        return [b for b in self.bodies if b.kind != "ok" and b.code is code]


class RouteTable:
    def __init__(self, routes: list[Route]) -> None:
        self.routes = routes
        self.by_api: dict[str, list[Route]] = {}
        for r in routes:
            self.by_api.setdefault(r.api_id, []).append(r)
        for rs in self.by_api.values():
            # literal paths before templated ones, longer first
            rs.sort(key=lambda r: (r.path.count("{"), -len(r.path)))
        by_origin: dict[str, list[str]] = {}
        for api_id, rs in self.by_api.items():
            if rs[0].origin:
                by_origin.setdefault(rs[0].origin, []).append(api_id)
        #: other APIs on the same host (a hand-written API and an imported family of it)
        self.siblings = {
            api_id: [other for other in by_origin.get(rs[0].origin, []) if other != api_id]
            for api_id, rs in self.by_api.items()
        }

    def match(self, api_id: str, method: str, path: str) -> Route | None:
        """The API's own route for the path, or one of an API on the same host; a route
        with a real body wins over one without."""
        first: Route | None = None
        for candidate in (api_id, *self.siblings.get(api_id, ())):
            for r in self.by_api.get(candidate, ()):
                if r.method == method and r.regex.match(path):
                    if r.ok_bodies():
                        return r
                    first = first or r
                    break
        return first

    def by_tool(self, tool: str) -> Route | None:
        for r in self.routes:
            if r.tool == tool:
                return r
        return None
