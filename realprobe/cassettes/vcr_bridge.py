"""`requests`, `urllib3` and `aiohttp` through vcrpy's own patchers, answered by a realprobe
cassette session: vcrpy intercepts the library, this object stands where vcrpy's Cassette
would, and the calls land in realprobe's cassette format.

What these paths keep is what vcrpy sees: method, URL, headers and body of the request;
status, headers and body of the response; and the time between the request and its recorded
response. A recorded exception is raised again as the nearest OS error (`TimeoutError`,
`ConnectionError`), which the library maps to its own timeout or connection error.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

from realprobe.cassettes.cassette import Call
from realprobe.cassettes.core import CassetteMiss

#: a `realprobe.cassettes.session.CassetteSession` (typed loosely: the session imports this module)
CassetteSession = Any

#: vcrpy patcher groups realprobe does not hand to vcrpy (httpx has its own patch point)
SKIPPED = ("httpx", "httpx2", "boto3", "httplib2", "tornado")
GROUPS = {"requests": "requests", "urllib3": "urllib3", "aiohttp": "aiohttp"}


def _headers(raw: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for k, v in dict(raw or {}).items():
        values = v if isinstance(v, list | tuple) else [v]
        for value in values:
            text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
            out.append((str(k), text))
    return out


def _body(raw: Any) -> bytes | None:
    if raw is None or raw == b"" or raw == "":
        return None
    if isinstance(raw, str):
        return raw.encode("utf-8")
    if isinstance(raw, bytes | bytearray):
        return bytes(raw)
    return None


def vcr_response(call: Call) -> dict[str, Any]:
    """A recording as the response dict vcrpy's stubs play."""
    if call.status is None:
        assert call.error is not None
        message = f"{call.error.type}: {call.error.message} (as recorded)"
        if "Timeout" in call.error.type or call.error.type in ("CancelledError", "TimeoutError"):
            raise TimeoutError(message)
        raise ConnectionError(message)
    headers: dict[str, list[str]] = {}
    for k, v in call.headers:
        headers.setdefault(k, []).append(v)
    body = call.body
    if call.error is not None and call.error.bytes_before:
        body = body[: call.error.bytes_before]
    return {
        "status": {"code": call.status, "message": call.reason},
        "headers": headers,
        "body": {"string": body},
    }


class BridgeCassette:
    """Duck-types the part of vcrpy's Cassette its stubs call."""

    custom_patches: tuple[Any, ...] = ()

    def __init__(self, session: CassetteSession, libraries: Sequence[str]) -> None:
        self.session = session
        self._path = str(session.path)
        self.skip_patchers = tuple(SKIPPED) + tuple(
            g for lib, g in GROUPS.items() if lib not in libraries
        )
        if "requests" not in libraries and "urllib3" not in libraries:
            self.skip_patchers += ("httplib",)
        self._started: dict[int, float] = {}
        self._peeked: dict[int, Call] = {}

    # -- what the stubs ask --------------------------------------------------------------

    def _find(self, vreq: Any, *, consume: bool) -> Call | None:
        player = self.session.player
        if player is None:
            return None
        headers = _headers(vreq.headers)
        return player.find(vreq.method, vreq.uri, _body(vreq.body), headers, consume=consume)

    def _routable(self, vreq: Any) -> bool:
        import httpx

        routes = self.session.routes
        return routes is not None and routes.target(httpx.URL(vreq.uri)) is not None

    def can_play_response_for(self, vreq: Any) -> bool:
        if self.session.ignored(vreq.uri):
            return False  # answered live, never recorded
        self._started.setdefault(id(vreq), time.monotonic())
        if self._find(vreq, consume=False) is not None:
            return True
        if self.session.recording:
            return self._routable(vreq)  # recorded by realprobe itself, through the sandbox
        return self.session.player is not None  # play_response raises the miss

    def play_response(self, vreq: Any) -> dict[str, Any]:
        call = self._find(vreq, consume=True)
        if call is None and self.session.recording and self._routable(vreq):
            call = self.session.fetch_for_bridge(
                vreq.method, vreq.uri, _headers(vreq.headers), _body(vreq.body)
            )
        if call is None:
            try:
                call = self.session.find(vreq.method, vreq.uri, _body(vreq.body),
                                         _headers(vreq.headers))
            except CassetteMiss as exc:
                raise self.session._miss(exc) from None
            if call is None:
                raise CassetteMiss(f"no recording for {vreq.method} {vreq.uri}")
        return vcr_response(call)

    @property
    def write_protected(self) -> bool:
        return not self.session.recording

    def filter_request(self, vreq: Any) -> Any:
        if self.session.ignored(vreq.uri):
            return None
        if not self.session.recording:
            # vcrpy asks this only for a request it cannot play while write-protected
            try:
                self.session.find(vreq.method, vreq.uri, _body(vreq.body), _headers(vreq.headers))
            except CassetteMiss as exc:
                raise self.session._miss(exc) from None
        return vreq

    def append(self, vreq: Any, response: dict[str, Any]) -> None:
        if self.session.ignored(vreq.uri):
            return
        status = response.get("status") or {}
        raw_body = (response.get("body") or {}).get("string")
        call = Call(
            seq=0,
            method=str(vreq.method).upper(),
            uri=str(vreq.uri),
            request_headers=_headers(vreq.headers),
            request_body=_body(vreq.body),
            status=int(status.get("code") or 0),
            reason=str(status.get("message") or ""),
            headers=_headers(response.get("headers")),
            body=_body(raw_body) or b"",
        )
        started = self._started.pop(id(vreq), time.monotonic())
        self.session.add_recorded(call, started)

    def find_requests_with_most_matches(self, vreq: Any) -> list[Any]:
        return []  # aiohttp's redirect replay then looks the hop up by its own request


@contextlib.contextmanager
def patch_libraries(session: CassetteSession, libraries: Sequence[str]) -> Iterator[None]:
    """vcrpy's patchers for the given libraries, answering from `session`, for the block."""
    from vcr.patch import CassettePatcherBuilder

    bridge = BridgeCassette(session, libraries)
    with contextlib.ExitStack() as stack:
        for patcher in CassettePatcherBuilder(bridge).build():
            stack.enter_context(patcher)
        yield
