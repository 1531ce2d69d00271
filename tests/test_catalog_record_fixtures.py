"""Imported tools become sandbox-ready: documentation examples are labelled fixtures,
`catalog record-fixtures` stores one real body per tool (source and time), a tool with no
body is marked, and the sandbox answers it with a clear "no fixture" error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_runner import invoke

from realprobe import (
    Catalog,
    ErrorCode,
    RealprobeError,
    SyncHttpClient,
    TransportOptions,
    call_tool_sync,
    make_sync_client,
    sandbox_running,
)
from realprobe.adapters.catalog import load_file
from tests.loopback_http import serving

JSON = "application/json"


def cli(*args: str) -> tuple[int, str, str]:
    res = invoke(list(args))
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        if isinstance(res.exception, RealprobeError):
            return 2, res.stdout, res.stderr + f"error: {res.exception}\n"
        raise res.exception
    return res.exit_code, res.stdout, res.stderr


@contextmanager
def sandbox_client(cat: Catalog) -> Iterator[SyncHttpClient]:
    with sandbox_running("calm", latency_scale=0, catalog=cat) as url, \
            make_sync_client(cat, TransportOptions(sandbox=url)) as client:
        yield client


def spec_doc() -> dict[str, Any]:
    ok = {
        "description": "ok",
        "content": {
            JSON: {
                "schema": {
                    "type": "object",
                    "required": ["word"],
                    "properties": {"word": {"type": "string"}},
                }
            }
        },
    }
    with_example = json.loads(json.dumps(ok))
    with_example["content"][JSON]["example"] = {"word": "documented"}
    return {
        "openapi": "3.0.3",
        "info": {"title": "Words", "version": "1"},
        "servers": [{"url": "https://words.example/api"}],
        "paths": {
            "/word": {"get": {"operationId": "word", "responses": {"200": with_example}}},
            "/random": {"get": {"operationId": "random", "responses": {"200": ok}}},
            "/empty": {"get": {"operationId": "empty", "responses": {"200": ok}}},
            "/broken": {"get": {"operationId": "broken", "responses": {"200": ok}}},
        },
    }


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    spec = tmp_path / "words.yaml"
    spec.write_text(yaml.safe_dump(spec_doc()), encoding="utf-8")
    out = tmp_path / "words.json"
    code, _, err = cli("catalog", "import-openapi", str(spec), "-o", str(out))
    assert code == 0, err
    return out


def test_documentation_examples_are_labelled_and_missing_bodies_marked(imported: Path) -> None:
    tools = {t.name: t for a in load_file(imported) for t in a.tools}
    (fx,) = tools["words_word"].fixtures
    assert fx.origin == "documentation" and fx.recorded_at is None
    assert "documentation example" in fx.source and "operation word" in fx.source
    assert tools["words_random"].fixtures == []
    assert tools["words_random"].no_fixture
    entry = Catalog.load([imported]).get("words_random").catalog_entry()
    assert entry["sandbox_ready"] is False and entry["no_fixture"]


def test_sandbox_answers_a_tool_without_a_body_with_no_fixture(imported: Path) -> None:
    cat = Catalog.load([imported])
    with sandbox_client(cat) as client:
        documented = call_tool_sync(cat.get("words_word"), {}, client)
        missing = call_tool_sync(cat.get("words_random"), {}, client)
    assert documented.ok and documented.data == {"word": "documented"}
    assert not missing.ok and missing.error is not None
    assert missing.error.code is ErrorCode.OPERATION_FAILED and not missing.error.retryable
    assert "no fixture" in missing.error.message
    assert "words_random" in missing.error.message


def test_simulator_answers_no_fixture_too(imported: Path) -> None:
    import asyncio

    from realprobe import call_tool, make_client

    cat = Catalog.load([imported])

    async def go() -> Any:
        client = make_client(cat, TransportOptions(profile="calm"))
        try:
            return await call_tool(cat.get("words_random"), {}, client)
        finally:
            await client.aclose()

    result = asyncio.run(go())
    assert not result.ok and "no fixture" in result.error.message


def test_record_fixtures_against_an_upstream_stores_real_bodies(imported: Path) -> None:
    routes = {
        "/api/word": (200, JSON, b'{"word": "recorded"}'),
        "/api/random": (200, JSON + "; charset=utf-8", b'{"word": "serendipity"}'),
        "/api/empty": (204, JSON, b""),
        "/api/broken": (200, JSON, b'{"nothing": 1}'),
    }
    with serving(routes) as up:
        code, out, err = cli(
            "catalog",
            "record-fixtures",
            str(imported),
            "--upstream",
            up.url,
            "--interval",
            "0",
            "--json",
        )
    assert code == 0, err
    report = {t["tool"]: t for t in json.loads(out)["tools"]}
    assert report["words_random"]["stored"] == "ok"
    assert report["words_empty"]["stored"] is None and report["words_empty"]["no_fixture"]
    assert report["words_broken"]["stored"] is None
    assert "not stored" in report["words_broken"]["result"]
    assert sorted(up.requests) == ["/api/broken", "/api/empty", "/api/random", "/api/word"]

    tools = {t.name: t for a in load_file(imported) for t in a.tools}
    (rec,) = tools["words_random"].fixtures
    assert rec.origin == "recorded" and rec.body == '{"word": "serendipity"}'
    assert rec.recorded_at is not None and rec.recorded_at.endswith("Z")
    assert "GET https://words.example/api/random -> 200" in rec.source
    assert f"via upstream {up.url}" in rec.source
    assert rec.content_type == JSON + "; charset=utf-8"
    assert tools["words_random"].no_fixture is None
    # the documentation example stays, beside the recorded body
    assert [f.origin for f in tools["words_word"].fixtures] == ["documentation", "recorded"]
    assert "HTTP 204 with an empty body" in (tools["words_empty"].no_fixture or "")
    assert tools["words_broken"].no_fixture  # still nothing to serve

    # now sandbox-ready: the sandbox serves the recorded body
    cat = Catalog.load([imported])
    with sandbox_client(cat) as client:
        got = call_tool_sync(cat.get("words_random"), {}, client)
    assert got.ok and got.data == {"word": "serendipity"}


def test_record_fixtures_selected_tools_through_a_sandbox(imported: Path, tmp_path: Path) -> None:
    cat = Catalog.load([imported])
    out = tmp_path / "recorded.yaml"
    with sandbox_running("calm", latency_scale=0, catalog=cat) as url:
        code, _, err = cli(
            "catalog",
            "record-fixtures",
            str(imported),
            "--tools",
            "words_word",
            "--sandbox",
            url,
            "--interval",
            "0",
            "-o",
            str(out),
        )
    assert code == 0, err
    tools = {t.name: t for a in load_file(out) for t in a.tools}
    doc, rec = tools["words_word"].fixtures
    assert rec.origin == "recorded" and rec.body == doc.body == '{"word":"documented"}'
    assert f"via sandbox {url}" in rec.source
    assert tools["words_random"].fixtures == []  # not selected, untouched


def test_record_fixtures_bad_input_is_one_line(imported: Path, tmp_path: Path) -> None:
    for args, needle in (
        (["--sandbox", "http://127.0.0.1:1", "--upstream", "http://127.0.0.1:2"], "exclude"),
        (["--upstream", "ftp://x"], "expected a URL"),
        (["--tools", "nope"], "unknown tool"),
        (["--interval", "-1"], "--interval"),
    ):
        code, _, err = cli("catalog", "record-fixtures", str(imported), *args)
        assert code == 2 and needle in err, (args, err)
    code, _, err = cli("catalog", "record-fixtures", str(tmp_path / "missing.json"))
    assert code == 2 and "missing.json" in err and "no such file" in err, err


def test_unreachable_upstream_stores_nothing_and_says_so(imported: Path) -> None:
    before = imported.read_bytes()
    code, out, err = cli(
        "catalog",
        "record-fixtures",
        str(imported),
        "--upstream",
        "http://127.0.0.1:9",
        "--interval",
        "0",
        "--timeout",
        "2",
        "--json",
    )
    assert code == 0, err
    results = json.loads(out)["tools"]
    assert all(r["stored"] is None and "NETWORK_ERROR" in r["result"] for r in results)
    assert json.loads(imported.read_bytes()) == json.loads(before)


def test_hand_written_tools_keep_their_bodies_with_a_family_on_the_same_host(
    catalog: Catalog,
) -> None:
    """pokeapi (hand-written) and pokeapi-v2 (imported) share pokeapi.co: each request is
    served from a route with a real body when one exists, else 'no fixture'."""
    cat = Catalog.load(["pokeapi"])
    with sandbox_client(cat) as client:
        hand = call_tool_sync(cat.get("pokeapi_version"), {"id_or_name": "1"}, client)
        same_path = call_tool_sync(cat.get("pokeapi_version_retrieve"), {"id": "1"}, client)
        missing = call_tool_sync(cat.get("pokeapi_ability_retrieve"), {"id": "1"}, client)
    assert hand.ok and hand.data is not None and hand.data["name"] == "red"
    assert same_path.ok and same_path.data is not None and same_path.data["name"] == "red"
    assert not missing.ok and missing.error is not None
    assert "no fixture" in missing.error.message


def test_record_fixtures_waits_at_the_one_host_gate_for_retry_after(imported: Path) -> None:
    """record-fixtures goes through the per-host gate like probes: a 429 with Retry-After
    pauses the host, whatever --interval says."""
    from realprobe.probes.fixture_recording import record_fixtures

    routes = {
        "/api/word": (429, JSON, b'{"error": "slow down"}', {"Retry-After": "7"}),
        "/api/random": (200, JSON, b'{"word": "ok"}'),
    }
    slept: list[float] = []
    with serving(routes) as up:
        outcomes = record_fixtures(
            load_file(imported), ["words_word", "words_random"], upstream=up.url,
            interval_s=0, timeout_s=5, sleep=slept.append,
        )
    seen = up.requests
    assert [o.status for o in outcomes] == [429, 200]
    assert len(seen) == 2 and slept and max(slept) == pytest.approx(7.0, abs=0.5)


def test_record_fixtures_never_copies_a_secret_example(tmp_path: Path) -> None:
    key = "sk-live-not-for-the-copy-8c1f"
    src = tmp_path / "keyed.toml"
    src.write_text(f"""
[[apis]]
id = "keyed"
name = "Keyed"
base_url = "https://keyed.example"
docs_url = "https://keyed.example/docs"
category = "test"
https = true
in_public_apis = false

[[apis.tools]]
name = "keyed_word"
title = "Word"
description = "A word for a key."
path = "/word"
query = {{ key = "{{key}}" }}
examples = [{{ key = "{key}" }}]
[apis.tools.input.key]
secret = true
required = true
default = "{key}"
[apis.tools.output.word]
from = "word"
""", encoding="utf-8")
    out = tmp_path / "fixtures.toml"
    with serving({"/word": (200, JSON, b'{"word": "hi"}')}) as up:
        code, _, err = cli("catalog", "record-fixtures", str(src), "--upstream", up.url,
                           "--interval", "0", "-o", str(out))
    assert code == 0, err
    assert up.requests == [f"/word?key={key}"]  # the call itself used the key
    written = out.read_text(encoding="utf-8")
    assert key not in written and "REDACTED" in written
    (tool,) = [t for a in load_file(out) for t in a.tools]
    assert tool.fixtures[0].body == '{"word": "hi"}'
    assert key in src.read_text(encoding="utf-8")  # the user's own file is left as it was
