"""Real-world response shapes through record, replay, import, scrub and plain vcrpy.

The shapes are written here after public APIs whose recordings were damaged by name-based
scrubbing: a Crossref REST `/works` answer (keys such as `publisher`, `assertion`,
`access-level`; a `type%3Ajournal-article` filter in the URL), a Gemini `generateContent`
answer (`usageMetadata.promptTokenCount`/`totalTokenCount`, the key in `?key=`), a Twitter v2
rate-limit answer (`reset` numbers, `x-access-level`, `meta.next_token`), a gzip-encoded JSON
answer and a binary (PNG) answer. Only credentials may change; every other byte must survive.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import vcr
from cli_runner import invoke

import realprobe
from realprobe import load_cassette
from realprobe.cassettes.scrub import ScrubConfig, scrub_cassette
from realprobe.secrets import forget_all

GEMINI_KEY = "AIzaSyCNRYgemini0123456789abcdef"
BEARER = "CNRYbearer-tw-0123456789"
OAUTH_TOKEN = "ya29.CNRYoauth-token-value"

CROSSREF = json.dumps({
    "status": "ok", "message-type": "work-list",
    "message": {"items": [{
        "publisher": "Elsevier BV", "type": "journal-article", "article-number": "e1234",
        "assertion": [{"value": "2020-01-02", "name": "received", "label": "Received"}],
        "license": [{"content-version": "vor", "URL": "https://www.elsevier.com/tdm/userlicense"}],
        "access-level": "open", "token-count": 77, "authenticated": False,
    }], "next-cursor": "DnF1ZXJ5VGhlbkZldGNoBgAAAAAAAABk", "total-results": 10},
}, indent=2).encode()
GEMINI = json.dumps({
    "candidates": [{"content": {"parts": [{"text": "Hi"}], "role": "model"},
                    "finishReason": "STOP"}],
    "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 7, "totalTokenCount": 12},
    "modelVersion": "gemini-1.5-flash",
}).encode()
TWITTER = json.dumps({
    "title": "Too Many Requests", "detail": "Too Many Requests", "status": 429,
    "type": "about:blank", "reset": 1700000123,
    "meta": {"next_token": "b26v89c19zqg8o3fo7", "result_count": 10},
}).encode()
OAUTH = json.dumps({
    "access_token": OAUTH_TOKEN, "token_type": "Bearer", "expires_in": 3599,
    "echo_b64": base64.b64encode(OAUTH_TOKEN.encode()).decode(),
}).encode()
GZIPPED = gzip.compress(json.dumps({"fact": "cats sleep", "length": 10}).encode(), mtime=0)
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\xff\xfe\x80"

#: path -> (status, headers, body)
ROUTES: dict[str, tuple[int, list[tuple[str, str]], bytes]] = {
    "/works": (200, [("Content-Type", "application/json"), ("access-control-allow-origin", "*")],
               CROSSREF),
    "/v1beta/models/gemini-1.5-flash:generateContent": (
        200, [("Content-Type", "application/json; charset=UTF-8")], GEMINI),
    "/2/tweets/search/recent": (
        429, [("Content-Type", "application/problem+json"), ("x-access-level", "read"),
              ("x-rate-limit-reset", "1700000123"), ("x-rate-limit-remaining", "0")], TWITTER),
    "/token": (200, [("Content-Type", "application/json")], OAUTH),
    "/gz": (200, [("Content-Type", "application/json"), ("Content-Encoding", "gzip")], GZIPPED),
    "/png": (200, [("Content-Type", "image/png")], PNG),
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        status, headers, body = ROUTES[self.path.split("?")[0]]
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = _answer
    do_POST = _answer


@pytest.fixture
def base() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def requests_for(base: str) -> list[tuple[str, str, dict[str, str], bytes | None]]:
    return [
        ("GET", f"{base}/works?filter=type%3Ajournal-article&rows=1&mailto=a%40b.org", {}, None),
        ("POST", f"{base}/v1beta/models/gemini-1.5-flash:generateContent?key={GEMINI_KEY}",
         {"Content-Type": "application/json"},
         b'{"contents": [{"parts": [{"text": "Hi"}]}], "generationConfig": {"maxTokens": 9}}'),
        ("GET", f"{base}/2/tweets/search/recent?query=cats&next_token=b26v89c19zqg8o3fo7",
         {"Authorization": f"Bearer {BEARER}"}, None),
        ("POST", f"{base}/token", {"Content-Type": "application/x-www-form-urlencoded"},
         b"grant_type=client_credentials&client_secret=CNRYclient-secret-42"),
        ("GET", f"{base}/gz", {"Accept-Encoding": "gzip"}, None),
        ("GET", f"{base}/png", {}, None),
    ]


def short(url: str) -> str:
    return url.split("?")[0].rsplit("/", 1)[-1].split(":")[-1]


def run_all(base: str) -> list[httpx.Response]:
    out = []
    with httpx.Client() as client:
        for method, url, headers, body in requests_for(base):
            r = client.request(method, url, headers=headers, content=body)
            r.read()
            out.append(r)
    return out


@pytest.fixture(params=["json", "yaml"])
def recorded(request: pytest.FixtureRequest, base: str, tmp_path: Path) -> Path:
    forget_all()
    path = tmp_path / f"shapes.{request.param}"
    with realprobe.use_cassette(path, record_mode="once"):
        run_all(base)
    return path


def _untouched(path: Path) -> None:
    cassette = load_cassette(path)
    by_path = {c.uri.split("?")[0].split(":", 2)[-1].split("/", 1)[-1]: c for c in cassette.calls}
    for route, (status, _headers, body) in ROUTES.items():
        call = by_path[route.lstrip("/")]
        assert call.status == status
        if route != "/token":
            assert call.body == body, route  # byte for byte, gzip and PNG included
    for route in ("/works", "/2/tweets/search/recent", "/gz", "/png"):
        assert b"REDACTED" not in by_path[route.lstrip("/")].body, route


def test_only_credentials_are_scrubbed_and_every_other_byte_is_kept(recorded: Path) -> None:
    text = recorded.read_bytes()
    for secret in (GEMINI_KEY, BEARER, OAUTH_TOKEN, "CNRYclient-secret-42",
                   base64.b64encode(OAUTH_TOKEN.encode()).decode()):
        assert secret.encode() not in text
    _untouched(recorded)
    cassette = load_cassette(recorded)
    works, gemini, tweets, token = cassette.calls[:4]
    assert "type%3Ajournal-article" in works.uri and "mailto=a%40b.org" in works.uri
    assert json.loads(gemini.body)["usageMetadata"]["totalTokenCount"] == 12
    assert ("x-access-level", "read") in tweets.headers and "next_token=b26v" in tweets.uri
    assert json.loads(tweets.body)["reset"] == 1700000123
    assert {k.lower(): v for k, v in tweets.request_headers}["authorization"] == "REDACTED"
    oauth = json.loads(token.body)  # still JSON, the credential a string, other values kept
    assert oauth == {"access_token": "REDACTED", "token_type": "Bearer", "expires_in": 3599,
                     "echo_b64": oauth["echo_b64"]}
    assert "REDACTED" in oauth["echo_b64"]
    assert token.request_body == b"grant_type=client_credentials&client_secret=REDACTED"


def test_replay_hands_back_the_recorded_headers_and_bytes(recorded: Path, base: str) -> None:
    cassette = load_cassette(recorded)
    dead = "http://127.0.0.1:9"  # nothing listens: a replay that went live would fail
    with realprobe.use_cassette(recorded, record_mode="none"), httpx.Client() as client:
        for call in cassette.calls:
            url = call.uri
            with client.stream(call.method, url, content=call.request_body,
                               headers=dict(call.request_headers)) as r:
                raw = b"".join(r.iter_raw())
                assert r.status_code == call.status
                assert list(r.headers.multi_items()) == [(k.lower(), v) for k, v in call.headers]
                assert raw == call.body
    assert dead not in recorded.read_text(errors="replace")
    gz = next(c for c in cassette.calls if c.uri.endswith("/gz"))
    assert gz.header("content-encoding") == "gzip" and gz.body == GZIPPED


def test_plain_vcrpy_replays_what_realprobe_wrote(recorded: Path, base: str) -> None:
    serializer = "json" if recorded.suffix == ".json" else "yaml"
    got: dict[str, httpx.Response] = {}
    with vcr.use_cassette(str(recorded), serializer=serializer, record_mode="none"):
        for method, url, headers, body in requests_for(base):
            if url.endswith("/png") and serializer == "json":
                continue  # vcrpy's JSON has no form for bytes (see docs/replay.md)
            with httpx.Client() as client:
                got[short(url)] = client.request(
                    method, url.replace(GEMINI_KEY, "REDACTED"), headers=headers, content=body)
    assert got["works"].content == CROSSREF
    assert got["recent"].status_code == 429 and got["recent"].content == TWITTER
    assert got["recent"].headers["x-access-level"] == "read"
    assert got["gz"].json() == {"fact": "cats sleep", "length": 10}
    assert got["generateContent"].json()["usageMetadata"]["promptTokenCount"] == 5
    if serializer == "yaml":
        assert got["png"].content == PNG


def test_import_and_round_trip_keep_every_byte(recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / ("again" + recorded.suffix)
    result = invoke(["cassette", "import", str(recorded), "-o", str(out)])
    assert result.exit_code == 0, result.output
    _untouched(out)
    a, b = load_cassette(recorded), load_cassette(out)
    assert [(c.uri, c.headers, c.body, c.request_body) for c in a.calls] == [
        (c.uri, c.headers, c.body, c.request_body) for c in b.calls]
    # scrubbing again changes nothing: the placeholder and the data are both stable
    report = scrub_cassette(b, ScrubConfig())
    assert [(c.uri, c.headers, c.body) for c in b.calls] == [
        (c.uri, c.headers, c.body) for c in a.calls]
    assert report.total == 0


def test_new_episodes_appends_and_leaves_old_interactions_as_they_were(
    recorded: Path, base: str
) -> None:
    loader = json.loads if recorded.suffix == ".json" else _yaml
    before = loader(recorded.read_bytes())["interactions"]
    with realprobe.use_cassette(recorded, record_mode="new_episodes"), httpx.Client() as c:
        c.get(f"{base}/works?filter=type%3Abook")
    after = loader(recorded.read_bytes())["interactions"]
    assert after[: len(before)] == before
    assert len(after) == len(before) + 1


def _yaml(raw: bytes) -> Any:
    import yaml

    return yaml.load(raw, Loader=yaml.CSafeLoader if hasattr(yaml, "CSafeLoader")
                     else yaml.SafeLoader)


def test_scrub_dry_run_names_the_places_and_writes_nothing(base: str, tmp_path: Path) -> None:
    forget_all()
    path = tmp_path / "raw.json"
    with realprobe.use_cassette(path, record_mode="once", scrub=False):
        run_all(base)
    before = path.read_bytes()
    result = invoke(["cassette", "scrub", str(path), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == before
    report = json.loads(result.output)
    where = {short(c["request"]): c["where"] for c in report["calls"]}
    assert set(where) == {"generateContent", "recent", "token"}
    assert where["recent"] == ["request header authorization"]
    assert "url" in where["generateContent"]
    assert GEMINI_KEY not in result.output and BEARER not in result.output


def test_binary_request_bodies_and_old_base64_bodies_load_in_plain_vcrpy(
    base: str, tmp_path: Path
) -> None:
    path = tmp_path / "bin.json"
    blob = b"\x00\xff\xfe binary \x80"
    with realprobe.use_cassette(path, record_mode="once"), httpx.Client() as client:
        client.post(f"{base}/png", content=blob)
    assert load_cassette(path).calls[0].request_body == blob  # exact, from realprobe's section
    raw = json.loads(path.read_text())
    assert "body_base64" not in raw["interactions"][0]["request"]
    with vcr.use_cassette(str(path), serializer="json", record_mode="none"):
        pass  # loads: no KeyError, no unknown request key
    # a cassette written by an older realprobe (`base64_string`) is rewritten in vcrpy's forms
    raw["interactions"][0]["response"]["body"] = {
        "base64_string": base64.b64encode(b'{"a": 1}').decode()}
    path.write_text(json.dumps(raw))
    cassette = load_cassette(path)
    realprobe.cassettes.save_cassette(cassette, path)
    again = json.loads(path.read_text())["interactions"][0]["response"]["body"]
    assert again == {"string": '{"a": 1}'}
    with vcr.use_cassette(str(path), serializer="json", record_mode="none"), \
            httpx.Client() as client:
        assert client.post(f"{base}/png", content=blob).json() == {"a": 1}


def test_vcrpy_style_filters_extend_the_credential_names(base: str, tmp_path: Path) -> None:
    forget_all()
    path = tmp_path / "filtered.json"
    with realprobe.use_cassette(path, record_mode="once",
                                filter_headers=[("x-team-secret", "XXX")],
                                filter_query_parameters=["mailto"]), httpx.Client() as c:
        c.get(f"{base}/works?filter=type%3Ajournal-article&mailto=me%40example.org",
              headers={"X-Team-Secret": "team-4242-abcd"})
    text = path.read_text()
    assert "team-4242-abcd" not in text and "me%40example.org" not in text
    (call,) = load_cassette(path).calls
    assert "mailto=REDACTED" in call.uri and "type%3Ajournal-article" in call.uri
    assert call.body == CROSSREF
    with realprobe.use_cassette(path, record_mode="none"), httpx.Client() as c:  # still matches
        assert c.get(f"{base}/works?filter=type%3Ajournal-article&mailto=me%40example.org",
                     headers={"X-Team-Secret": "team-4242-abcd"}).content == CROSSREF


def test_har_export_holds_content_decoded(base: str, tmp_path: Path) -> None:
    from realprobe.cassettes.exporters import to_har
    from realprobe.cassettes.importers import from_data

    path = tmp_path / "gz.json"
    with realprobe.use_cassette(path, record_mode="once"), httpx.Client() as client:
        client.get(f"{base}/gz")
    har = to_har(load_cassette(path))
    content = har["log"]["entries"][0]["response"]["content"]
    assert json.loads(content["text"]) == {"fact": "cats sleep", "length": 10}
    (call,) = from_data(har, "gz.har").calls  # read back: decoded, the stale encoding dropped
    assert call.header("content-encoding") is None and json.loads(call.body)["length"] == 10


@pytest.mark.parametrize("serializer", ["yaml", "json"])
def test_new_episodes_on_a_vcrpy_file_keeps_every_byte_of_it(
    serializer: str, base: str, tmp_path: Path
) -> None:
    path = tmp_path / f"vcrpy.{serializer}"
    with vcr.use_cassette(str(path), serializer=serializer, record_mode="once"), \
            httpx.Client() as client:  # written by vcrpy itself, in its own layout
        client.get(f"{base}/works?filter=type%3Ajournal-article")
        client.get(f"{base}/2/tweets/search/recent?query=cats")
    before = path.read_bytes()
    with realprobe.use_cassette(path, record_mode="new_episodes"), httpx.Client() as client:
        assert client.get(f"{base}/works?filter=type%3Ajournal-article").content == CROSSREF
        assert client.get(f"{base}/png").content == PNG  # new: recorded and appended
    after = path.read_bytes()
    tail = before.rsplit(b"version", 1)[0]
    assert after.startswith(tail.rstrip(b"\n ]")), "the old text changed"
    assert len(load_cassette(path).calls) == 3
    with vcr.use_cassette(str(path), serializer=serializer, record_mode="none"), \
            httpx.Client() as client:
        if serializer == "yaml":  # vcrpy's JSON has no form for bytes
            assert client.get(f"{base}/png").content == PNG
        assert client.get(f"{base}/works?filter=type%3Ajournal-article").content == CROSSREF
