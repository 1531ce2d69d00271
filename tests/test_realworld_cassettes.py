"""Real third-party cassettes (tests/data/thirdparty_cassettes, with their licences, and the
single recordings of tests/data/realworld_cassettes): imported to JSON and YAML, replayed
through httpx, requests and aiohttp and compared byte for byte with what each client reads
live; and the shapes vcrpy stores (mapping request bodies, several Set-Cookie lines, CRLF
files) kept through import, scrub and `new_episodes`."""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
from pathlib import Path

import aiohttp
import pytest
import requests
import urllib3
import vcr
import yaml
from loopback_http import serving
from realworld_clients import (
    CLIENTS,
    THIRD_PARTY,
    Tally,
    live_body,
    real_files,
    replay_file,
    replayable,
)

import realprobe
from realprobe import import_cassette, load_cassette
from realprobe.cassettes.cassette import parse_text

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
FILES = real_files()


def test_the_sample_is_real_and_licensed() -> None:
    folders = [p for p in THIRD_PARTY.iterdir() if p.is_dir()]
    assert len(folders) >= 4
    for folder in folders:
        assert any(f.name.startswith("LICENSE") for f in folder.iterdir()), folder
        assert f"`{folder.name}/`" in (THIRD_PARTY / "SOURCES.md").read_text()
    assert len(FILES) >= 50


@pytest.mark.parametrize("src", FILES, ids=lambda p: p.name)
def test_each_client_reads_what_it_would_live(src: Path, no_network: None) -> None:
    tally = Tally()
    replay_file(src, tally)
    assert tally.failures == []
    assert all(tally.tried[c] == tally.identical[c] for c in CLIENTS)


@pytest.mark.parametrize("src", FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_each_real_file_imports_to_json_and_yaml(
    src: Path, suffix: str, tmp_path: Path, no_network: None
) -> None:
    out = tmp_path / ("imported" + suffix)
    import_cassette(src, out, scrub=False)
    before, after = load_cassette(src), load_cassette(out)
    assert [(c.method, c.uri, c.status, live_body(c)) for c in after.calls] == [
        (c.method, c.uri, c.status, live_body(c)) for c in before.calls
    ]
    source = parse_text(src.read_bytes(), src.name, yaml_hint=True)
    items = source.get("interactions")
    if suffix == ".yaml" and items and all("body" in i["response"] for i in items):
        # a vcrpy file (current form) imported to YAML is the same data, item for item
        assert yaml.safe_load(out.read_bytes())["interactions"] == items
    tally = Tally()
    replay_file(out, tally)
    assert tally.failures == []


def test_a_gzip_recording_reaches_each_reader_as_it_would_live(no_network: None) -> None:
    src = THIRD_PARTY / "vcrpy" / "gzip_requests.yaml"
    call = next(c for c in load_cassette(src).calls if replayable(c))
    assert call.header("content-encoding") == "gzip" and call.body[:2] == b"\x1f\x8b"
    plain = gzip.decompress(call.body)
    with realprobe.use_cassette(src, record_mode="none", on_exhausted="repeat-last"):
        r = requests.get(call.uri)
        assert r.content == plain and r.headers["Content-Encoding"] == "gzip"
        raw = requests.get(call.uri, stream=True).raw.read()  # requests' raw stream: as sent
        assert raw == call.body
        assert urllib3.request("GET", call.uri).data == plain  # urllib3 decodes by default
        pool = urllib3.PoolManager()
        assert pool.request("GET", call.uri, decode_content=False).data == call.body
        host = call.uri.split("/")[2]
        conn = http.client.HTTPSConnection(host)  # http.client never decodes
        conn.request("GET", call.uri.split(host, 1)[1])
        assert conn.getresponse().read() == call.body

    async def aio(auto: bool) -> bytes:
        async with aiohttp.ClientSession(auto_decompress=auto) as s, s.get(call.uri) as resp:
            return await resp.read()

    with realprobe.use_cassette(src, record_mode="none", on_exhausted="repeat-last"):
        assert asyncio.run(aio(True)) == plain
        assert asyncio.run(aio(False)) == call.body


def test_mapping_bodies_and_set_cookie_lines_survive_import_and_scrub(tmp_path: Path) -> None:
    src = THIRD_PARTY / "tweepy" / "test_asyncclient_create_and_delete_tweet.yaml"
    source = yaml.safe_load(src.read_bytes())["interactions"]
    cookies = len(source[0]["response"]["headers"]["set-cookie"])
    assert source[0]["request"]["body"] == {"text": "Test Tweet"} and cookies > 1
    for suffix in (".yaml", ".json"):
        out = tmp_path / ("scrubbed" + suffix)
        import_cassette(src, out, scrub=True)
        raw = out.read_text()
        data = json.loads(raw) if suffix == ".json" else yaml.safe_load(raw)
        first = data["interactions"][0]
        assert first["request"]["body"] == {"text": "Test Tweet"}
        assert len(first["response"]["headers"]["set-cookie"]) == cookies
        assert "guest_id" not in raw  # the cookies' values are gone


def test_new_episodes_on_a_crlf_vcrpy_file_appends(tmp_path: Path) -> None:
    routes = {"/a": (200, "application/json", b'{"a": 1}'),
              "/b": (200, "application/json", b'{"b": 2}')}
    with serving(routes) as srv:
        path = tmp_path / "windows.yaml"
        with vcr.use_cassette(str(path)):
            requests.get(srv.url + "/a")
        crlf = path.read_bytes().replace(b"\n", b"\r\n")
        path.write_bytes(crlf)
        with realprobe.use_cassette(path, record_mode="new_episodes"):
            assert requests.get(srv.url + "/a").json() == {"a": 1}  # replayed
            assert requests.get(srv.url + "/b").json() == {"b": 2}  # recorded
    after = path.read_bytes()
    tail = crlf.index(b"version: 1")
    assert after.startswith(crlf[:tail]) and after.endswith(crlf[tail:])
    assert b"\n" not in after.replace(b"\r\n", b"")  # the new lines end in CRLF too
    assert [i["request"]["uri"] for i in yaml.safe_load(after)["interactions"]] == [
        srv.url + "/a", srv.url + "/b"
    ]
