"""Import and scrub keep formats: `--substitute` rewrites Location too, the sandbox's own URL
layout maps back to the real URLs, and scrubbing a Ruby VCR or HAR file in place keeps it one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from cli_runner import invoke

from realprobe import load_cassette

REALWORLD = Path(__file__).parent / "data" / "realworld_cassettes"


def vcrpy_cassette(path: Path, interactions: list[tuple[str, int, dict[str, list[str]]]]) -> None:
    data = {"version": 1, "interactions": [
        {"request": {"method": "GET", "uri": uri, "body": None, "headers": {}},
         "response": {"status": {"code": code, "message": ""}, "headers": headers,
                      "body": {"string": "{}"}}}
        for uri, code, headers in interactions
    ]}
    path.write_text(json.dumps(data))


def test_substitute_rewrites_location_too(tmp_path: Path) -> None:
    src = tmp_path / "in.json"
    vcrpy_cassette(src, [
        ("<API>/old", 301, {"Location": ["<API>/new"], "Link": ["<<API>/next>; rel=next"]}),
        ("<API>/new", 200, {}),
    ])
    out = tmp_path / "out.json"
    r = invoke(["cassette", "import", str(src), "-o", str(out),
                "--substitute", "<API>=https://api.example.test"])
    assert r.exit_code == 0, r.output
    calls = load_cassette(out).calls
    assert [c.uri for c in calls] == ["https://api.example.test/old", "https://api.example.test/new"]
    assert calls[0].header("location") == "https://api.example.test/new"
    assert calls[0].header("link") == "<https://api.example.test/next>; rel=next"


def test_import_maps_the_sandbox_layout_back_to_real_urls(tmp_path: Path) -> None:
    src = tmp_path / "sandbox.json"
    vcrpy_cassette(src, [
        ("http://127.0.0.1:8765/catfact/fact?max_length=140", 200, {}),
        ("http://127.0.0.1:8765/dog-ceo/api/breeds/image/random", 302,
         {"Location": ["http://127.0.0.1:8765/dog-ceo/api/x"]}),
        ("http://127.0.0.1:8765/not-an-api/x", 200, {}),
        ("https://catfact.ninja/facts", 200, {}),
    ])
    out = tmp_path / "out.json"
    r = invoke(["cassette", "import", str(src), "-o", str(out)])
    assert r.exit_code == 0, r.output
    calls = load_cassette(out).calls
    assert [c.uri for c in calls] == [
        "https://catfact.ninja/fact?max_length=140",
        "https://dog.ceo/api/breeds/image/random",
        "http://127.0.0.1:8765/not-an-api/x",  # not the sandbox's layout: left alone
        "https://catfact.ninja/facts",
    ]
    assert calls[1].header("location") == "https://dog.ceo/api/x"


def test_scrub_in_place_keeps_a_ruby_vcr_file_ruby_vcr(tmp_path: Path) -> None:
    src = REALWORLD / "advice-slip__turingschool-examples-friendly-advice.yaml"
    path = tmp_path / "advice.yaml"
    text = src.read_text().replace(
        "uri: https://api.adviceslip.com/advice",
        "uri: https://api.adviceslip.com/advice?api_key=sekrit-123456", 1,
    )
    path.write_text(text)
    before = load_cassette(path)
    r = invoke(["cassette", "scrub", str(path), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["format"] == "ruby-vcr"
    data = yaml.safe_load(path.read_text())
    assert "http_interactions" in data and "interactions" not in data
    assert data["http_interactions"][0]["request"]["method"] == "get"
    assert "sekrit-123456" not in path.read_text()
    after = load_cassette(path)
    assert after.meta["source"] == "ruby-vcr"
    assert [c.body for c in after.calls] == [c.body for c in before.calls]
    assert [c.status for c in after.calls] == [c.status for c in before.calls]


def test_scrub_in_place_keeps_a_har_file_har(tmp_path: Path) -> None:
    har = {"log": {"version": "1.2", "creator": {"name": "Firefox", "version": "120"},
                   "entries": [{
                       "startedDateTime": "2026-11-01T10:00:00.000Z", "time": 42.0,
                       "request": {"method": "GET", "url": "https://api.agify.io/?name=ada",
                                   "headers": [{"name": "Authorization",
                                                "value": "Bearer tok-abcdef123456"}]},
                       "response": {"status": 200, "statusText": "OK",
                                    "headers": [{"name": "Content-Type",
                                                 "value": "application/json"}],
                                    "content": {"text": "{\"age\": 40}",
                                                "mimeType": "application/json"}},
                       "timings": {"wait": 30, "receive": 12}}]}}
    path = tmp_path / "session.har"
    path.write_text(json.dumps(har))
    r = invoke(["cassette", "scrub", str(path)])
    assert r.exit_code == 0, r.output
    data = json.loads(path.read_text())
    assert data["log"]["entries"][0]["response"]["content"]["text"] == "{\"age\": 40}"
    assert "tok-abcdef123456" not in path.read_text()
    call = load_cassette(path).calls[0]
    assert call.uri == "https://api.agify.io/?name=ada" and call.status == 200
    assert call.elapsed_s is not None and abs(call.elapsed_s - 0.042) < 1e-6


def test_scrub_to_another_file_writes_realprobe(tmp_path: Path) -> None:
    src = tmp_path / "a.yaml"
    shutil.copy(REALWORLD / "swapi__pikesley-red5.yaml", src)
    out = tmp_path / "b.json"
    r = invoke(["cassette", "scrub", str(src), "-o", str(out), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["format"] == "realprobe"
    assert "interactions" in json.loads(out.read_text())
