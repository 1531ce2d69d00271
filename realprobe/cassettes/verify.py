"""`cassette verify`: does each recorded response still make sense for its tool?

Schema and decoding problems already stop `load_any` with a one-line error. Here each
complete 2xx response that belongs to a catalogue tool is parsed by that tool; calls whose
declared Content-Length disagrees with the stored body are flagged too.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from realprobe.adapters.catalog import Catalog
from realprobe.adapters.tool import BadResponse
from realprobe.cassettes.cassette import Call, Cassette, decoded
from realprobe.http.simulate import origins_of, routes_from_catalog
from realprobe.http.transports import origin_of
from realprobe.simulator.render import MOVED_PREFIX


@dataclass
class Finding:
    seq: int
    request: str
    tool: str | None
    # ok | parse-failed | recorded-failure | http-error | partial | no-tool | length-mismatch
    # | undecodable
    status: str
    detail: str = ""


class ToolIndex:
    """Which catalogue tool a recorded URL belongs to."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.origins = origins_of(catalog)
        self.routes = routes_from_catalog(catalog)

    def tool_for(self, method: str, uri: str) -> str | None:
        try:
            url = httpx.URL(uri)
        except (httpx.InvalidURL, TypeError, ValueError):
            return None
        api = self.origins.get(origin_of(url))
        if api is None:
            return None
        path = url.path
        if path.startswith(MOVED_PREFIX + "/"):
            path = path[len(MOVED_PREFIX):]
        route = self.routes.match(api, method, path)
        return route.tool if route else None


def verify_cassette(cassette: Cassette, catalog: Catalog) -> list[Finding]:
    index = ToolIndex(catalog)
    return [_check(call, index, catalog) for call in cassette.calls]


def _check(call: Call, index: ToolIndex, catalog: Catalog) -> Finding:
    req = f"{call.method} {call.uri}"
    tool = index.tool_for(call.method, call.uri)
    if call.error is not None:
        return Finding(call.seq, req, tool, "recorded-failure", f"{call.error.type}: "
                       f"{call.error.message or '(no message)'} during {call.error.phase}")
    encoding = (call.header("content-encoding") or "").strip().lower()
    if call.complete and call.body and encoding not in ("", "identity") and decoded(
        call.body, encoding
    ) is None:
        return Finding(call.seq, req, tool, "undecodable",
                       f"Content-Encoding {encoding} but the stored body does not decode")
    length = call.header("content-length")
    if call.complete and length and length.isdigit() and int(length) != len(call.body):
        return Finding(call.seq, req, tool, "length-mismatch",
                       f"Content-Length {length} but {len(call.body)} body bytes stored")
    if call.status is None or not 200 <= call.status < 300 or not call.complete:
        return Finding(call.seq, req, tool, "http-error" if call.complete else "partial",
                       f"HTTP {call.status}")
    if tool is None:
        return Finding(call.seq, req, None, "no-tool", "not a catalogue URL; body not parsed")
    try:
        catalog.get(tool).parse(call.body)
    except BadResponse as exc:
        return Finding(call.seq, req, tool, "parse-failed", f"{exc.code.value}: {exc.message}")
    return Finding(call.seq, req, tool, "ok")


#: statuses that mean the cassette itself is wrong (the rest are recorded outcomes)
PROBLEMS = frozenset({"length-mismatch", "undecodable"})
