"""Interoperability: every real cassette we ship (vcrpy and Ruby VCR) imports and replays in
realprobe; HAR imports; a realprobe cassette replays in plain vcrpy."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import vcr
from cli_runner import invoke

from realprobe import Catalog, Mode, TransportOptions, call_tool, load_cassette, make_client
from realprobe.cassettes.cassette import decoded
from realprobe.cassettes.recording import RecordingTransport
from realprobe.cassettes.replayer import ReplayTransport

REALWORLD = Path(__file__).parent / "data" / "realworld_cassettes"
FILES = sorted(REALWORLD.glob("*.yaml"))
SUBSTITUTE = {
    "jsonplaceholder__flucas97-rails-rspec.yaml": "<API-URL>=https://jsonplaceholder.typicode.com"
}


def test_the_real_cassettes_are_here() -> None:
    assert len(FILES) >= 11
    assert (REALWORLD / "SOURCES.md").exists()


@pytest.mark.parametrize("src", FILES, ids=[f.stem for f in FILES])
async def test_every_real_cassette_imports_and_replays(
    src: Path, tmp_path: Path, no_network: None
) -> None:
    out = tmp_path / (src.stem + ".json")
    args = ["cassette", "import", str(src), "-o", str(out), "--json"]
    if src.name in SUBSTITUTE:
        args += ["--substitute", SUBSTITUTE[src.name]]
    result = invoke(args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["unresolved_urls"] == []
    imported = load_cassette(out)
    assert imported.calls and report["interactions"] == len(imported.calls)
    transport = ReplayTransport.from_path(out)
    async with httpx.AsyncClient(transport=transport) as client:
        for call in imported.calls:
            r = await client.request(call.method, call.uri)
            assert r.status_code == call.status
            # the recorded headers and bytes, as recorded; httpx decodes them
            assert list(r.headers.multi_items()) == [(k.lower(), v) for k, v in call.headers]
            enc = call.header("content-encoding")
            expected = decoded(call.body, enc) or call.body
            assert r.content == expected
            if "json" in (call.header("content-type") or ""):
                r.json()  # gzip and !binary bodies came out as real JSON
    # the same file also replays directly, without an import step
    direct = ReplayTransport.from_path(src)
    assert len(direct.cassette.calls) == len(imported.calls)


async def test_a_ruby_vcr_cassette_feeds_a_catalogue_tool(
    catalog: Catalog, no_network: None
) -> None:
    src = REALWORLD / "restcountries__RyanChrisSmith-lunch_and_learn.yaml"
    tool = catalog.get("restcountries_by_name")
    client = make_client(catalog, TransportOptions(mode=Mode.REPLAY, cassette=src))
    result = await call_tool(tool, {"name": "France"}, client)
    await client.aclose()
    assert result.ok, result.error
    assert "France" in json.dumps(result.data)


async def test_a_vcrpy_cassette_feeds_a_catalogue_tool(catalog: Catalog, no_network: None) -> None:
    src = REALWORLD / "open-meteo__klaasnotfound-epex-spot-forecast.yaml"
    tool = catalog.get("openmeteo_forecast")
    client = make_client(catalog, TransportOptions(mode=Mode.REPLAY, cassette=src))
    result = await call_tool(tool, dict(tool.examples[0]), client)
    await client.aclose()
    assert result.ok, result.error


def test_har_import_keeps_timings_and_failed_entries(tmp_path: Path) -> None:
    har = {"log": {"version": "1.2", "creator": {"name": "Firefox"}, "entries": [
        {"startedDateTime": "2026-11-01T10:00:00.000Z", "time": 120.5,
         "request": {"method": "GET", "url": "https://catfact.ninja/fact", "headers": [
             {"name": ":authority", "value": "catfact.ninja"},
             {"name": "cookie", "value": "XSRF-TOKEN=abcdefghijk"}]},
         "response": {"status": 200, "statusText": "OK", "headers": [
             {"name": "content-encoding", "value": "gzip"},
             {"name": "content-type", "value": "application/json"}],
             "content": {"text": '{"fact": "Cats sleep a lot.", "length": 17}',
                         "mimeType": "application/json"}},
         "timings": {"blocked": -1, "dns": 10, "connect": 20, "send": 1, "wait": 80,
                     "receive": 9.5}},
        {"startedDateTime": "2026-11-01T10:00:01.000Z", "time": 30,
         "request": {"method": "GET", "url": "https://catfact.ninja/breeds", "headers": []},
         "response": {"status": 0, "statusText": "", "headers": [], "content": {},
                      "_error": "net::ERR_CONNECTION_RESET"},
         "timings": {}},
    ]}}
    src = tmp_path / "session.har"
    src.write_text(json.dumps(har))
    out = tmp_path / "session.json"
    result = invoke(["cassette", "import", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    cassette = load_cassette(out)
    ok, failed = cassette.calls
    assert ok.status == 200 and json.loads(ok.body)["length"] == 17
    assert ok.header("content-encoding") is None  # browsers store decoded text
    assert ok.elapsed_s == pytest.approx(0.1205) and ok.ttfb_s == pytest.approx(0.111)
    assert ok.header("cookie") is None and ("cookie", "REDACTED") in ok.request_headers
    assert failed.error is not None and failed.error.type == "ConnectError"
    assert "ERR_CONNECTION_RESET" in failed.error.message


@pytest.mark.parametrize("fmt", ["json", "yaml"])
async def test_a_realprobe_cassette_replays_in_plain_vcrpy(tmp_path: Path, fmt: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/boom":
            raise httpx.ReadTimeout("timed out", request=request)
        return httpx.Response(200, json={"path": request.url.path, "q": request.url.query.decode()})

    path = tmp_path / f"ours.{fmt}"
    base = "https://api.example.test"
    urls = [f"{base}/a?x=1", f"{base}/b", f"{base}/boom"]
    recorder = RecordingTransport(httpx.MockTransport(handler), path)
    async with httpx.AsyncClient(transport=recorder) as c:
        live = []
        for u in urls:
            try:
                live.append((await c.get(u)).json())
            except httpx.ReadTimeout:
                live.append("timeout")
    with vcr.use_cassette(str(path), serializer=fmt, record_mode="none"):
        async with httpx.AsyncClient() as client:
            replayed = [(await client.get(u)).json() for u in urls[:2]]
    assert replayed == live[:2]
