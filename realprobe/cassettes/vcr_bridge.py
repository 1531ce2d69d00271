"""`requests`, `urllib3` and `aiohttp` through vcrpy's own patchers, answered by a realprobe
cassette session: vcrpy intercepts the library, this object stands where vcrpy's Cassette
would, and the calls land in realprobe's cassette format.

What these paths keep is what vcrpy sees: method, URL, headers and body of the request;
status, headers and body of the response; and the time between the request and its recorded
response. A recorded exception is raised again as the nearest OS error (`TimeoutError`,
`ConnectionError`), which the library maps to its own timeout or connection error.

A compressed recording reaches each library as it would live (vcrpy's stubs hand over the
stored bytes whatever the library asked): requests, and urllib3 with its default
`decode_content`, read the body decoded; aiohttp decodes unless `auto_decompress=False`;
`http.client` and `r.raw.read()` get the bytes as recorded. Headers stay as recorded.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.util
import io
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from realprobe.cassettes.cassette import Call, decoded, headers_to_json
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
    """The bytes of a request body as vcrpy hands it over: bytes or text, a file (vcrpy
    gives a fresh copy of what was sent each time it is asked) or the chunks of an iterable
    body (`requests` with a generator, aiohttp with an async generator), so every client's
    body is recorded and matched, not only one sent whole."""
    if raw is None or raw == b"" or raw == "":
        return None
    if isinstance(raw, str):
        return raw.encode("utf-8")
    if isinstance(raw, bytes | bytearray | memoryview):
        return bytes(raw) or None
    if isinstance(raw, io.IOBase):
        value = raw.getvalue() if isinstance(raw, io.BytesIO | io.StringIO) else None
        return _body(value)
    if isinstance(raw, Iterable) and not isinstance(raw, Mapping):
        chunks = list(raw)
        if all(isinstance(c, bytes | bytearray | memoryview | str) for c in chunks):
            return b"".join(c.encode("utf-8") if isinstance(c, str) else bytes(c)
                            for c in chunks) or None
    return None


def vcr_response(call: Call) -> dict[str, Any]:
    """A recording as the response dict vcrpy's stubs play."""
    if call.status is None:
        assert call.error is not None
        message = f"{call.error.type}: {call.error.message} (as recorded)"
        if "Timeout" in call.error.type or call.error.type in ("CancelledError", "TimeoutError"):
            raise TimeoutError(message)
        raise ConnectionError(message)
    body = call.body
    if call.error is not None and call.error.bytes_before:
        body = body[: call.error.bytes_before]
    return {"status": {"code": call.status, "message": call.reason},
            "headers": headers_to_json(call.headers), "body": {"string": body}}


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

    # -- what the stubs ask --------------------------------------------------------------

    def _seen(self, vreq: Any) -> Any:
        """The request as recorded and matched (None: answered live, never recorded)."""
        return self.session.as_recorded(vreq.method, vreq.uri, _body(vreq.body),
                                        _headers(vreq.headers))

    def _find(self, vreq: Any, *, consume: bool) -> Call | None:
        player, seen = self.session.player, self._seen(vreq)
        if player is None or seen is None:
            return None
        return player.find(*seen, consume=consume)

    def _routable(self, vreq: Any) -> bool:
        import httpx

        routes = self.session.routes
        return routes is not None and routes.target(httpx.URL(vreq.uri)) is not None

    def can_play_response_for(self, vreq: Any) -> bool:
        if self._seen(vreq) is None:
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
            call = self.session.find(*self._seen(vreq))
            if call is None:
                raise CassetteMiss(f"no recording for {vreq.method} {vreq.uri}")
        return vcr_response(call)

    @property
    def write_protected(self) -> bool:
        return not self.session.recording

    def filter_request(self, vreq: Any) -> Any:
        seen = self._seen(vreq)
        if seen is None:
            return None
        if not self.session.recording:
            # vcrpy asks this only for a request it cannot play while write-protected
            self.session.find(*seen)
        return vreq

    def append(self, vreq: Any, response: dict[str, Any]) -> None:
        if self._seen(vreq) is None:
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


def _decoding_http_response() -> type:
    """vcrpy's replayed `http.client` response, reading the body decoded when urllib3 asks
    for it (`decode_content`, given per request or per read) as urllib3's own response does.
    Before the first read, vcrpy's public constructor builds the response again over the
    decoded body, so every reader of the stub (`read`, `data`, `tell`...) sees that body."""
    from vcr.stubs import VCRHTTPResponse

    class LiveDecoding(VCRHTTPResponse):  # type: ignore[misc]
        _rp_decode: bool | None = None
        _rp_switched = False

        def _rp_switch(self, want: bool | None) -> None:
            if not (self._rp_decode if want is None else want) or self._rp_switched:
                return
            self._rp_switched = True
            recorded = self.recorded_response
            if self.tell() == 0:
                plain = decoded(recorded["body"]["string"], self.getheader("content-encoding"))
                if plain is not None:
                    VCRHTTPResponse.__init__(self, {**recorded, "body": {"string": plain}},
                                             getattr(self, "url", None))

        def read(self, amt: int | None = None, decode_content: bool | None = None,
                 **_: Any) -> bytes:
            self._rp_switch(decode_content)
            return super().read(amt)

        def stream(self, amt: int = 65536, decode_content: bool | None = None) -> Iterator[bytes]:
            self._rp_switch(decode_content)
            yield from super().stream(amt)

    return LiveDecoding


def _http_decoding(stack: contextlib.ExitStack) -> None:
    """Responses of vcrpy's `http.client` stubs (requests, urllib3) decode like urllib3's."""
    from vcr.stubs import VCRConnection, VCRHTTPResponse

    live = _decoding_http_response()
    request, getresponse = VCRConnection.request, VCRConnection.getresponse

    def keep_decode(self: Any, *args: Any, **kwargs: Any) -> Any:
        object.__setattr__(self, "_rp_decode", kwargs.get("decode_content"))  # urllib3's wish
        return request(self, *args, **kwargs)

    def decoding(self: Any, *args: Any, **kwargs: Any) -> Any:
        response = getresponse(self, *args, **kwargs)
        if isinstance(response, VCRHTTPResponse):
            response.__class__ = live
            response._rp_decode = self.__dict__.get("_rp_decode")
            response._rp_switch(None)  # urllib3's default: `.data` is decoded
        return response

    VCRConnection.request, VCRConnection.getresponse = keep_decode, decoding
    stack.callback(setattr, VCRConnection, "request", request)
    stack.callback(setattr, VCRConnection, "getresponse", getresponse)


def _aiohttp(stack: contextlib.ExitStack) -> None:
    """aiohttp through vcrpy's stub as aiohttp itself behaves: `json=` and a plain form
    `data=` are sent as the bytes aiohttp makes of them (the stub keeps only bytes and strings,
    so the body that went out is recorded and a body matcher compares it on replay), and
    replayed responses are decoded unless `auto_decompress=False`."""
    from vcr.stubs import aiohttp_stubs

    original, build = aiohttp_stubs.vcr_request, aiohttp_stubs.build_response
    decode = contextvars.ContextVar("realprobe_aiohttp_decode", default=False)

    def build_response(vreq: Any, recorded: Any, history: Any) -> Any:
        """Each replayed hop, built by vcrpy over the decoded body when aiohttp decodes."""
        response = build(vreq, recorded, history)
        body = recorded["body"].get("string", b"")
        plain = decoded(body, response.headers.get("Content-Encoding")) if decode.get() else None
        if plain is None:
            return response
        return build(vreq, {**recorded, "body": {"string": plain}}, history)

    def vcr_request(cassette: Any, real_request: Any) -> Any:
        inner = original(cassette, real_request)

        async def new_request(self: Any, method: str, url: Any, **kwargs: Any) -> Any:
            _aiohttp_as_bytes(self, kwargs)
            auto = kwargs.get("auto_decompress")
            token = decode.set(self.auto_decompress if auto is None else auto)
            try:
                return await inner(self, method, url, **kwargs)
            finally:
                decode.reset(token)

        return functools.wraps(inner)(new_request)

    aiohttp_stubs.vcr_request, aiohttp_stubs.build_response = vcr_request, build_response
    stack.callback(setattr, aiohttp_stubs, "vcr_request", original)
    stack.callback(setattr, aiohttp_stubs, "build_response", build)


def _aiohttp_as_bytes(session: Any, kwargs: dict[str, Any]) -> None:
    """Turn `json=` (serialised by the session's own `json_serialize`) and a form of plain
    strings (url-encoded, as aiohttp encodes it) into `data=` bytes with the content type
    aiohttp would have given them. Anything else is left as the caller passed it."""
    import aiohttp
    from multidict import CIMultiDict

    obj, data = kwargs.get("json"), kwargs.get("data")
    if obj is not None and data is None:
        body = session.json_serialize(obj)
        kwargs["data"] = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        kwargs.pop("json")
        ctype = "application/json"
    elif isinstance(data, aiohttp.FormData) or data is None:
        return
    else:
        pairs = _plain_form(data)
        if pairs is None:
            return
        kwargs["data"] = urlencode(pairs, doseq=True, encoding="utf-8").encode("ascii")
        ctype = "application/x-www-form-urlencoded"
    headers: CIMultiDict[str] = CIMultiDict(kwargs.get("headers") or {})
    skipped = {str(h).lower() for h in (kwargs.get("skip_auto_headers") or ())}
    skipped |= {str(h).lower() for h in session.skip_auto_headers}
    if ("Content-Type" not in headers and "Content-Type" not in session.headers
            and "content-type" not in skipped):
        headers["Content-Type"] = ctype
        kwargs["headers"] = headers


def _plain_form(data: Any) -> list[tuple[str, str]] | None:
    """The (name, value) pairs of a form of strings only (a dict or a list of pairs)."""
    if isinstance(data, Mapping):
        items = list(data.items())
    elif isinstance(data, list | tuple) and all(
        isinstance(f, tuple) and len(f) == 2 for f in data
    ):
        items = list(data)
    else:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in items):
        return None
    return items


@contextlib.contextmanager
def patch_libraries(session: CassetteSession, libraries: Sequence[str]) -> Iterator[None]:
    """vcrpy's patchers for the given libraries, answering from `session`, for the block."""
    from vcr.patch import CassettePatcherBuilder

    bridge = BridgeCassette(session, libraries)
    with contextlib.ExitStack() as stack:
        _http_decoding(stack)
        if "aiohttp" in libraries and importlib.util.find_spec("aiohttp") is not None:
            _aiohttp(stack)
        for patcher in CassettePatcherBuilder(bridge).build():
            stack.enter_context(patcher)
        yield


def _hooks(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def before_record(
    request_hooks: Any = None, response_hooks: Any = None, *, decode_compressed: bool = False
) -> Callable[[Call], Call | None] | None:
    """vcrpy's `before_record_request` / `before_record_response` (a callable or a list) and
    `decode_compressed_response`, as one step applied to each recorded call: the hooks see
    vcrpy's own `Request` and response dict, and returning None leaves the call out."""
    req_hooks, resp_hooks = _hooks(request_hooks), _hooks(response_hooks)
    if not (req_hooks or resp_hooks or decode_compressed):
        return None
    from vcr.filters import decode_response
    from vcr.request import Request

    def apply(call: Call) -> Call | None:
        if req_hooks:
            vreq: Any = Request(call.method, call.uri, call.request_body,
                                headers_to_json(call.request_headers))
            for hook in req_hooks:
                vreq = hook(vreq)
                if vreq is None:
                    return None
            call.method, call.uri = str(vreq.method).upper(), str(vreq.uri)
            call.request_body = _body(vreq.body)
            call.request_headers = _headers(vreq.headers)
        if call.status is None or not (resp_hooks or decode_compressed):
            return call
        response: Any = {"status": {"code": call.status, "message": call.reason},
                         "headers": headers_to_json(call.headers), "body": {"string": call.body}}
        if decode_compressed:
            response = decode_response(response)
        for hook in resp_hooks:
            response = hook(response)
            if response is None:
                return None
        status = response.get("status") or {}
        call.status = int(status.get("code", call.status))
        call.reason = str(status.get("message", call.reason))
        call.headers = _headers(response.get("headers"))
        call.body = _body((response.get("body") or {}).get("string")) or b""
        return call

    return apply
