"""`use_cassette` from Python: the httpx patch point, record modes, matchers, and vcrpy round
trips (plain vcrpy replays what realprobe wrote, redirects and binary bodies included)."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import vcr

import realprobe
from realprobe import RealprobeError, load_cassette, use_cassette
from realprobe.cassettes import httpx_patch
from realprobe.cassettes.core import CassetteMiss
from realprobe.cassettes.matching import MATCHER_NAMES

BINARY = bytes(range(256)) * 4


class _Handler(http.server.BaseHTTPRequestHandler):
    hits: list[str]

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        if self.path.startswith("/old"):
            self._send(301, b"moved", {"Location": "/middle"})
        elif self.path.startswith("/middle"):
            self._send(302, b"", {"Location": "/final?x=1"})
        elif self.path.startswith("/bin"):
            self._send(200, BINARY, {"Content-Type": "application/octet-stream"})
        else:
            n = len(type(self).hits)
            body = json.dumps({"path": self.path, "n": n, "ua": self.headers.get("x-who")})
            self._send(200, body.encode(), {"Content-Type": "application/json"})

    def do_POST(self) -> None:
        type(self).hits.append(self.path)
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(200, json.dumps({"echo": data.decode()}).encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def origin() -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []
    handler = type("H", (_Handler,), {"hits": hits})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_port}", hits
    srv.shutdown()
    srv.server_close()


def user_code(base: str) -> dict[str, Any]:
    """A user's own code: its own clients, no transport passed anywhere."""
    with httpx.Client(follow_redirects=True) as client:
        chain = client.get(f"{base}/old")
        binary = client.get(f"{base}/bin").content

    async def go() -> Any:
        async with httpx.AsyncClient() as client:
            return (await client.get(f"{base}/async")).json()["path"]

    return {
        "chain": [r.status_code for r in chain.history] + [chain.status_code],
        "final": chain.json()["path"],
        "binary": binary == BINARY,
        "async": asyncio.run(go()),
        "requests": requests.get(f"{base}/req", params={"a": "1"}).json()["path"],
    }


def test_record_once_then_replay_without_the_server(
    origin: tuple[str, list[str]], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    base, hits = origin
    path = tmp_path / "c.json"
    assert not httpx_patch.patched()
    with use_cassette(path, record_mode="once"):
        assert httpx_patch.patched()
        live = user_code(base)
    assert not httpx_patch.patched()  # put back as found
    assert live == {"chain": [301, 302, 200], "final": "/final?x=1", "binary": True,
                    "async": "/async", "requests": "/req?a=1"}
    n = len(hits)
    request.getfixturevalue("no_network")  # from here on, any socket connect fails
    with use_cassette(path, record_mode="once"):  # exists now: replay only
        assert user_code(base) == live
    assert len(hits) == n


def test_the_patch_point_matches_the_httpx_we_support() -> None:
    httpx_patch.check_httpx()
    lo, hi = httpx_patch.SUPPORTED
    assert lo <= tuple(int(x) for x in httpx.__version__.split(".")[:2]) < hi


def test_a_transport_passed_in_is_left_alone(tmp_path: Path) -> None:
    mock = httpx.MockTransport(lambda r: httpx.Response(200, text="mock"))
    with use_cassette(tmp_path / "c.json", record_mode="all"), \
            httpx.Client(transport=mock) as client:
        assert client.get("https://api.example.test/").text == "mock"
    assert not (tmp_path / "c.json").exists()  # nothing recorded, nothing written (as vcrpy)


def test_record_modes(origin: tuple[str, list[str]], tmp_path: Path) -> None:
    base, _ = origin
    path = tmp_path / "modes.json"
    with use_cassette(path, record_mode="none"):
        pass  # no cassette and no request: fine, as under vcrpy
    with pytest.raises(CassetteMiss, match="no cassette there; record mode none"), \
            use_cassette(path, record_mode="none"), httpx.Client() as c:
        c.get(f"{base}/a")
    assert not path.exists()
    with use_cassette(path, record_mode="once"), httpx.Client() as c:
        first = c.get(f"{base}/a").json()["n"]
    with use_cassette(path, record_mode="none"), httpx.Client() as c:
        assert c.get(f"{base}/a").json()["n"] == first
        with pytest.raises(CassetteMiss, match="no recording for GET"):
            c.get(f"{base}/b")
    before = path.read_bytes()
    with use_cassette(path, record_mode="new_episodes"), httpx.Client() as c:
        assert c.get(f"{base}/a").json()["n"] == first  # replayed
        second = c.get(f"{base}/b").json()["n"]  # recorded
    data = json.loads(path.read_bytes())
    assert [i["request"]["uri"].rsplit("/", 1)[1] for i in data["interactions"]] == ["a", "b"]
    assert data["interactions"][0] == json.loads(before)["interactions"][0]
    unchanged = path.read_bytes()
    with use_cassette(path, record_mode="new_episodes"), httpx.Client() as c:
        assert c.get(f"{base}/b").json()["n"] == second
    assert path.read_bytes() == unchanged  # nothing new: not rewritten
    with use_cassette(path, record_mode="all"), httpx.Client() as c:
        assert c.get(f"{base}/c").json()["n"] > second
    assert [c.uri.rsplit("/", 1)[1] for c in load_cassette(path).calls] == ["c"]
    with pytest.raises(RealprobeError, match="record mode 'sometimes'"):
        use_cassette(path, record_mode="sometimes")


def test_decorator_sync_and_async(origin: tuple[str, list[str]], tmp_path: Path) -> None:
    base, hits = origin

    @realprobe.use_cassette(tmp_path / "deco.json")
    def fetch() -> int:
        return int(httpx.get(f"{base}/d").json()["n"])

    @use_cassette(tmp_path / "adeco.json")
    async def afetch() -> int:
        async with httpx.AsyncClient() as c:
            return int((await c.get(f"{base}/e")).json()["n"])

    assert fetch() == fetch()
    assert asyncio.run(afetch()) == asyncio.run(afetch())
    assert hits.count("/d") == 1 and hits.count("/e") == 1


def test_a_failing_block_writes_nothing(origin: tuple[str, list[str]], tmp_path: Path) -> None:
    base, _ = origin
    path = tmp_path / "failed.json"
    with pytest.raises(ZeroDivisionError), use_cassette(path, record_mode="all"):
        httpx.get(f"{base}/x")
        _ = 1 / 0
    assert not path.exists()
    assert not Path(str(path) + ".journal").exists()


def test_httpx_keeps_exceptions_and_latency(tmp_path: Path) -> None:
    """A connection refused is recorded and raised again, as the same httpx exception."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    path = tmp_path / "refused.json"
    for _ in range(2):
        with use_cassette(path), pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/")
    call = load_cassette(path).calls[0]
    assert call.error is not None and call.error.type == "ConnectError"
    assert call.elapsed_s is not None


# -- matching ------------------------------------------------------------------------------

VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # name: (recorded request, a request that differs only in what that matcher looks at)
    "method": ({"method": "GET"}, {"method": "DELETE"}),
    "scheme": ({"url": "http://h.test/p"}, {"url": "https://h.test:80/p"}),
    "host": ({"url": "http://h.test/p"}, {"url": "http://other.test/p"}),
    "port": ({"url": "http://h.test/p"}, {"url": "http://h.test:81/p"}),
    "path": ({"url": "http://h.test/p"}, {"url": "http://h.test/q"}),
    "query": ({"url": "http://h.test/p?a=1&b=2"}, {"url": "http://h.test/p?a=1&b=3"}),
    "body": ({"method": "POST", "json": {"a": 1, "b": 2}}, {"method": "POST", "json": {"a": 2}}),
    "raw_body": ({"method": "POST", "content": b"{\"a\":1}"},
                 {"method": "POST", "content": b"{\"a\": 1}"}),
    "headers": ({"headers": {"x-who": "me"}}, {"headers": {"x-who": "you"}}),
    "uri": ({"url": "http://h.test/p?a=1"}, {"url": "http://h.test/p?a=2"}),
    "url": ({"url": "http://h.test/p?a=1"}, {"url": "http://h.test/p?a=2"}),
}


def _send(client: httpx.Client, spec: dict[str, Any]) -> httpx.Response:
    spec = {"method": "GET", "url": "http://h.test/p", **spec}
    return client.request(spec.pop("method"), spec.pop("url"), **spec)


@pytest.mark.parametrize("name", MATCHER_NAMES)
def test_every_vcrpy_matcher_name(name: str, tmp_path: Path) -> None:
    recorded, other = VARIANTS[name]
    path = tmp_path / f"{name}.json"
    mock = httpx.MockTransport(lambda r: httpx.Response(200, text="recorded"))
    with client_on(path, "all", None, mock) as c:
        _send(c, recorded)
    with client_on(path, "none", [name], mock) as c:
        assert _send(c, recorded).text == "recorded"
    with client_on(path, "none", [name], mock) as c, pytest.raises(CassetteMiss):
        _send(c, other)
    # everything else about the request may change
    if name in ("method", "scheme", "host", "port", "path"):
        loose = {"url": "http://h.test/p?zzz=1", "headers": {"x-who": "other"}}
        if name != "method":
            loose["url"] = str(httpx.URL(recorded.get("url", "http://h.test/p"))
                               .copy_with(query=b"zzz=1"))
        with client_on(path, "none", [name], mock) as c:
            assert _send(c, {**recorded, **loose}).text == "recorded"


@contextmanager
def client_on(
    path: Path, mode: str, match_on: list[Any] | None, base: httpx.BaseTransport
) -> Iterator[httpx.Client]:
    """A client given the cassette as its transport (no patching)."""
    from realprobe.cassettes.session import SessionTransport

    with use_cassette(path, record_mode=mode, match_on=match_on, libraries=()) as session, \
            httpx.Client(transport=SessionTransport(session, base)) as client:
        yield client


def test_a_custom_matcher_and_an_unknown_name(tmp_path: Path) -> None:
    path = tmp_path / "custom.json"
    mock = httpx.MockTransport(lambda r: httpx.Response(200, text=r.url.params.get("id", "")))
    with client_on(path, "all", None, mock) as c:
        for i in ("1", "2"):
            c.get("http://h.test/item", params={"id": i, "nonce": "x" + i})

    def same_id(r1: Any, r2: Any) -> bool:  # vcrpy's signature: two vcrpy Requests
        return dict(r1.query).get("id") == dict(r2.query).get("id")

    with client_on(path, "none", ["method", "path", same_id], mock) as c:
        assert c.get("http://h.test/item", params={"id": "2", "nonce": "new"}).text == "2"
        assert c.get("http://h.test/item", params={"id": "1", "nonce": "other"}).text == "1"
        with pytest.raises(CassetteMiss):
            c.get("http://h.test/item", params={"id": "3"})
    with pytest.raises(RealprobeError, match="unknown matcher 'colour'"):
        use_cassette(path, record_mode="none", match_on=["colour"]).open()


# -- vcrpy round trip ----------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["yaml", "json"])
def test_plain_vcrpy_replays_a_realprobe_cassette(
    origin: tuple[str, list[str]], tmp_path: Path, suffix: str
) -> None:
    base, hits = origin
    path = tmp_path / f"c.{suffix}"
    with use_cassette(path, record_mode="all"):
        live = user_code(base)
    n = len(hits)
    ser = "yaml" if suffix == "yaml" else "json"
    with vcr.use_cassette(str(path), serializer=ser, record_mode="none",
                          allow_playback_repeats=True):
        with httpx.Client(follow_redirects=True) as client:
            chain = client.get(f"{base}/old")
            assert [r.status_code for r in chain.history] + [chain.status_code] == live["chain"]
            if suffix == "yaml":  # vcrpy's JSON serializer cannot hold bytes at all
                assert client.get(f"{base}/bin").content == BINARY
        r = requests.get(f"{base}/old")
        assert [h.status_code for h in r.history] == [301, 302]
        assert r.json()["path"] == live["final"]
        if suffix == "yaml":
            assert requests.get(f"{base}/bin").content == BINARY
    assert len(hits) == n  # vcrpy answered everything


def test_realprobe_http_client_redirect_hops_are_whole_interactions(tmp_path: Path) -> None:
    """realprobe's own client closes a redirect hop unread: still a complete vcrpy interaction."""
    from realprobe import HttpClient
    from realprobe.cassettes.recording import RecordingTransport

    def app(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/old":
            return httpx.Response(301, headers={"Location": "https://api.example.test/new"},
                                  content=b"moved")
        return httpx.Response(200, json={"ok": True})

    path = tmp_path / "hops.yaml"

    async def go() -> None:
        rec = RecordingTransport(httpx.MockTransport(app), path)
        async with HttpClient(rec) as client:
            await client.fetch("GET", "https://api.example.test/old", allow_private=True)

    asyncio.run(go())
    data = __import__("yaml").safe_load(path.read_text())
    assert len(data["interactions"]) == 2 and not data["realprobe"]["beyond_vcrpy"]
    assert data["interactions"][0]["response"]["status"]["code"] == 301
    with vcr.use_cassette(str(path), record_mode="none"):
        r = httpx.get("https://api.example.test/old", follow_redirects=True)
    assert r.json() == {"ok": True}


def test_a_vcrpy_resave_warns_once_and_still_replays(
    origin: tuple[str, list[str]], tmp_path: Path
) -> None:
    base, _ = origin
    path = tmp_path / "resaved.yaml"
    with use_cassette(path, record_mode="all"), httpx.Client() as c:
        c.get(f"{base}/one")
    with vcr.use_cassette(str(path), record_mode="new_episodes"):
        httpx.get(f"{base}/two")  # vcrpy appends and re-saves: our section is gone
    text = path.read_text()
    assert "beyond_vcrpy" not in text
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        load_cassette(path)
        cassette = load_cassette(path)
    lost = [w for w in seen if "realprobe` section is gone" in str(w.message)]
    assert len(lost) == 1
    assert len(cassette.calls) == 2 and cassette.calls[0].elapsed_s is not None
    with use_cassette(path, record_mode="none"), httpx.Client() as c:
        assert c.get(f"{base}/one").json()["path"] == "/one"
        assert c.get(f"{base}/two").json()["path"] == "/two"


def test_aiohttp_and_urllib3_through_vcrpy_patchers(
    origin: tuple[str, list[str]], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    import aiohttp
    import urllib3

    base, hits = origin

    async def with_aiohttp() -> tuple[int, str]:
        async with aiohttp.ClientSession() as session, session.get(f"{base}/aio?q=1") as r:
            return r.status, (await r.json())["path"]

    def with_urllib3() -> bytes:
        return bytes(urllib3.PoolManager().request("GET", f"{base}/bin").data)

    path = tmp_path / "libs.yaml"
    with use_cassette(path, record_mode="once"):
        live = asyncio.run(with_aiohttp()), with_urllib3()
    assert live == ((200, "/aio?q=1"), BINARY)
    n = len(hits)
    calls = load_cassette(path).calls
    assert [c.uri.split("/", 3)[3] for c in calls] == ["aio?q=1", "bin"]
    assert all(c.elapsed_s is not None for c in calls)
    request.getfixturevalue("no_network")
    with use_cassette(path, record_mode="none"):
        assert (asyncio.run(with_aiohttp()), with_urllib3()) == live
        with pytest.raises(CassetteMiss, match="no recording for GET"):
            urllib3.PoolManager().request("GET", f"{base}/other")
    assert len(hits) == n


def test_requests_gzip_is_stored_decoded_and_replays(tmp_path: Path) -> None:
    import gzip

    class Gz(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = gzip.compress(b'{"zipped": true}')
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gz)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_port}/z"
    path = tmp_path / "gz.json"
    try:
        with use_cassette(path):
            assert requests.get(url).json() == {"zipped": True}
    finally:
        srv.shutdown()
        srv.server_close()
    call = load_cassette(path).calls[0]
    assert call.body == b'{"zipped": true}' and call.header("content-encoding") is None
    with use_cassette(path, record_mode="none"):
        assert requests.get(url).json() == {"zipped": True}


def test_before_record_request_shapes_what_is_recorded_and_matched(tmp_path: Path) -> None:
    """vcrpy's hook: a cache-busting parameter it strips is neither recorded nor matched on;
    a request it returns None for is answered live and never recorded."""
    import re

    from tests.loopback_http import serving

    def strip_ts(request: Any) -> Any:
        if request.path == "/health":
            return None
        request.uri = re.sub(r"[?&]ts=\d+", "", request.uri)
        return request

    routes = {"/a": (200, "application/json", b'{"a": 1}'), "/health": (200, "text/plain", b"ok")}
    with serving(routes) as srv:
        path = tmp_path / "hooked.yaml"
        with use_cassette(path, record_mode="once", before_record_request=strip_ts):
            assert requests.get(srv.url + "/a?ts=1").json() == {"a": 1}
            assert httpx.get(srv.url + "/health").text == "ok"
        text = path.read_text()
        assert "ts=" not in text and "/health" not in text
        with use_cassette(path, record_mode="none", before_record_request=strip_ts,
                          on_exhausted="repeat-last"):
            assert requests.get(srv.url + "/a?ts=2").json() == {"a": 1}  # replayed
            assert httpx.get(srv.url + "/a?ts=3").json() == {"a": 1}
            assert requests.get(srv.url + "/health").text == "ok"  # live, as vcrpy does
        assert srv.requests == ["/a?ts=1", "/health", "/health"]
