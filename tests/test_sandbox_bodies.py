"""The sandbox answers arguments: recorded responses first, then fixtures chosen by `when`, the
API's real unknown-input answer, or the nearest fixture, and says which in a header."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_runner import invoke

from realprobe import (
    Cassette,
    Catalog,
    ErrorCode,
    Profile,
    RealprobeError,
    ToolProfile,
    TransportOptions,
    call_tool,
    make_client,
    save_cassette,
)
from realprobe.cassettes.cassette import Call
from realprobe.sandbox.bodies import SOURCE_HEADER, BodySource, Recordings
from realprobe.sandbox.server import SandboxThread
from realprobe.sandbox.setup import sandbox_for
from realprobe.simulator.routes import Route

# Genderize answers recorded from the real API (kim: a VCR cassette of 2021; harry: a README
# sample, compacted). Two requests to one endpoint with different arguments and bodies.
KIM = b'{"name":"kim","gender":"female","probability":0.56,"count":51609}'
HARRY = b'{"count":177229,"gender":"male","name":"harry","probability":1.0}'


def _cassette(path: Path) -> Path:
    calls = [
        Call(
            seq=0,
            method="GET",
            uri="https://api.genderize.io/?name=kim",
            status=200,
            headers=[
                ("Content-Type", "application/json; charset=utf-8"),
                ("X-Rate-Limit-Remaining", "999"),
                ("Content-Length", str(len(KIM))),
            ],
            body=KIM,
        ),
        Call(
            seq=1,
            method="GET",
            uri="https://api.genderize.io/?name=harry",
            status=200,
            headers=[("Content-Type", "application/json"), ("X-Rate-Limit-Remaining", "998")],
            body=HARRY,
        ),
    ]
    return save_cassette(Cassette(calls, meta={}), path / "night.json")


@pytest.fixture
def recorded_sandbox(catalog: Catalog, tmp_path: Path) -> Iterator[str]:
    cassette = _cassette(tmp_path)
    sb = sandbox_for(catalog, "calm", latency_scale=0.0, cassettes=[cassette.parent])
    thread = SandboxThread(sb)
    try:
        yield thread.start()
    finally:
        thread.stop()


def _get(url: str) -> httpx.Response:
    return httpx.get(url, timeout=5)


def test_each_recorded_request_gets_its_own_body(recorded_sandbox: str) -> None:
    kim = _get(f"{recorded_sandbox}/genderize/?name=kim")
    harry = _get(f"{recorded_sandbox}/genderize/?name=harry")
    assert kim.content == KIM and harry.content == HARRY
    assert kim.headers[SOURCE_HEADER] == harry.headers[SOURCE_HEADER] == "cassette"
    assert kim.headers["x-rate-limit-remaining"] == "999"
    assert harry.headers["x-rate-limit-remaining"] == "998"
    # the query is matched canonically: order and spelling of the pairs do not matter
    again = _get(f"{recorded_sandbox}/genderize/?name=kim&")
    assert again.content == KIM


def test_unrecorded_argument_falls_back_to_fixtures(recorded_sandbox: str) -> None:
    r = _get(f"{recorded_sandbox}/genderize/?name=zed")
    assert r.status_code == 200
    assert r.headers[SOURCE_HEADER] == "nearest-fixture"
    assert r.json()["name"] == "zed"  # the echo field carries the argument
    # an API with a real unknown-input answer gives it
    r = _get(f"{recorded_sandbox}/swapi/api/people/99/")
    assert r.status_code == 404 and r.json() == {"detail": "Not found"}
    assert r.headers[SOURCE_HEADER] == "unknown-input"


def test_tool_results_follow_the_recordings(recorded_sandbox: str, catalog: Catalog) -> None:
    async def go() -> list[dict[str, object]]:
        client = make_client(catalog, TransportOptions(sandbox=recorded_sandbox))
        try:
            tool = catalog.get("genderize_gender")
            out = []
            for name in ("kim", "harry", "kim"):
                res = await call_tool(tool, {"name": name}, client)
                assert res.ok, res.summary()
                assert res.data is not None
                out.append(dict(res.data))
            return out
        finally:
            await client.aclose()

    kim, harry, kim2 = asyncio.run(go())
    assert (kim["name"], kim["count"]) == ("kim", 51609)
    assert (harry["name"], harry["count"]) == ("harry", 177229)
    assert kim2 == kim


def test_faults_apply_on_top_of_recordings(catalog: Catalog, tmp_path: Path) -> None:
    failing = Profile(
        tools={
            "genderize_gender": ToolProfile(
                success_rate=0.0, errors={ErrorCode.SERVER_ERROR: 1.0}
            )
        }
    )
    sb = sandbox_for(catalog, failing, latency_scale=0.0, cassettes=[_cassette(tmp_path)])
    with SandboxThread(sb) as url:
        r = _get(f"{url}/genderize/?name=kim")
        assert r.status_code >= 500
        assert r.headers["x-realprobe-fault"] in ("500", "502", "503", "520", "522", "523", "524")


def test_forced_body_fault_cuts_the_recorded_body(catalog: Catalog, tmp_path: Path) -> None:
    sb = sandbox_for(catalog, "calm", latency_scale=0.0, cassettes=[_cassette(tmp_path)])
    with SandboxThread(sb) as url:
        r = _get(f"{url}/_fault/bad_json/genderize/?name=harry")
        assert r.content == HARRY[: len(HARRY) // 2]
        assert r.headers[SOURCE_HEADER] == "cassette"
        assert r.headers["x-realprobe-fault"] == "bad_json"


def test_request_bodies_select_recordings() -> None:
    def call(seq: int, body: bytes, answer: bytes) -> Call:
        return Call(
            seq=seq,
            method="POST",
            uri="https://api.example.org/search",
            request_body=body,
            status=200,
            headers=[("Content-Type", "application/json")],
            body=answer,
        )

    rec = Recordings(
        [
            Cassette(
                [call(0, b'{"q": "a", "n": 1}', b"[1]"), call(1, b'{"q": "b"}', b"[2]")],
                meta={"match_on": ["method", "url", "body"]},
            )
        ]
    )
    route = Route("ex", "ex_search", "POST", "/search", "json", [])
    source = BodySource({"ex": "https://api.example.org"}, rec)
    hit = source.choose(route, "POST", "/search", "", b'{"n":1,"q":"a"}', 0)  # keys reordered
    assert (hit.source, hit.body.body) == ("cassette", b"[1]")
    hit = source.choose(route, "POST", "/search", "", b'{"q": "b"}', 0)
    assert hit.body.body == b"[2]"
    assert rec.lookup("POST", "https://api.example.org/search", b'{"q": "c"}') is None


@pytest.fixture
def fixtures_sandbox(catalog: Catalog) -> Iterator[str]:
    with SandboxThread(sandbox_for(catalog, "calm", latency_scale=0.0)) as url:
        yield url


@pytest.mark.parametrize(
    ("path", "status", "source", "check"),
    [
        ("/agify/?name=harry", 200, "fixture", {"name": "harry", "age": 72}),
        ("/agify/?name=michael", 200, "nearest-fixture", {"name": "michael"}),
        ("/agify/?name=anna&country_id=DE", 200, "nearest-fixture",
         {"name": "anna", "country_id": "DE"}),
        ("/genderize/?name=kim", 200, "fixture", {"name": "kim", "count": 51609}),
        # `when` compares case-insensitively; the echo field keeps the spelling asked for
        ("/genderize/?name=HARRY", 200, "fixture", {"name": "HARRY", "count": 177229}),
        ("/nationalize/?name=harry", 200, "fixture", {"name": "harry"}),
        ("/restcountries/v3.1/name/france", 200, "fixture", None),
        ("/swapi/api/people/7/", 200, "fixture", {"name": "Beru Whitesun lars"}),
        # an example of the catalogue is an input the real API knows: never "unknown"
        ("/swapi/api/people/1/", 200, "nearest-fixture", None),
        ("/swapi/api/people/9999/", 404, "unknown-input", {"detail": "Not found"}),
        ("/pokeapi/api/v2/version/1", 200, "fixture", {"name": "red"}),
        ("/pokeapi/api/v2/version/gold", 200, "nearest-fixture", None),
        ("/pokeapi/api/v2/version/notaversion", 404, "unknown-input", None),
        ("/jsonplaceholder/posts/6", 200, "fixture", {"id": 6}),
        ("/jsonplaceholder/posts/5", 200, "fixture", {"id": 5}),
    ],
)
def test_fixtures_are_chosen_by_argument(
    fixtures_sandbox: str,
    path: str,
    status: int,
    source: str,
    check: dict[str, object] | None,
) -> None:
    r = _get(fixtures_sandbox + path)
    assert r.status_code == status, r.text
    assert r.headers[SOURCE_HEADER] == source
    assert r.headers["x-realprobe-fault"] == "ok"  # the calm profile drew a success
    if check:
        body = r.json()
        for k, v in check.items():
            assert body[k] == v


def test_cli_call_echoes_the_argument(fixtures_sandbox: str) -> None:
    res = invoke(
        ["call", "agify_age", "--arg", "name=michael", "--sandbox", fixtures_sandbox,
              "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["data"]["name"] == "michael"


def test_cli_refuses_an_unknown_fault_variant(fixtures_sandbox: str) -> None:
    res = invoke(
        ["call", "agify_age", "--arg", "name=x", "--sandbox", f"{fixtures_sandbox}/_fault/50O"]
    )
    # `realprobe` turns a RealprobeError into one line on stderr and exit 2
    assert isinstance(res.exception, RealprobeError)
    assert "unknown fault variant '50O'" in str(res.exception) and "503" in str(res.exception)
    r = _get(f"{fixtures_sandbox}/_fault/50O/agify/?name=x")
    assert r.status_code == 400 and r.headers["x-realprobe-error"] == "unknown-fault-variant"
    assert "503" in r.json()["known_variants"]


def test_missing_cassette_is_a_one_line_error(tmp_path: Path) -> None:
    res = invoke(["sandbox", "--from-cassettes", str(tmp_path / "nope.json")])
    assert isinstance(res.exception, RealprobeError)
    assert "no such file" in str(res.exception)


def test_cli_serves_several_cassettes(tmp_path: Path) -> None:
    """`realprobe sandbox --from-cassettes a.json b.json`: one recording in each file."""
    import os
    import re
    import signal
    import subprocess
    import sys

    paths = []
    for i, (name, body) in enumerate((("kim", KIM), ("harry", HARRY))):
        call = Call(seq=0, method="GET", uri=f"https://api.genderize.io/?name={name}",
                    status=200, headers=[("Content-Type", "application/json")], body=body)
        paths.append(str(save_cassette(Cassette([call], meta={}), tmp_path / f"c{i}.json")))
    proc = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "sandbox", "--port", "0", "--latency-scale", "0",
         "--from-cassettes", *paths],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "300"},
    )
    try:
        assert proc.stdout is not None
        match = re.search(r"http://127\.0\.0\.1:\d+", proc.stdout.readline())
        assert match, "sandbox did not start"
        url = match.group(0)
        assert _get(f"{url}/genderize/?name=kim").content == KIM
        harry = _get(f"{url}/genderize/?name=harry")
        assert harry.content == HARRY and harry.headers[SOURCE_HEADER] == "cassette"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(10)


def test_tool_without_fixtures_is_served_from_recordings(catalog: Catalog, tmp_path: Path) -> None:
    api = catalog.get("genderize_gender").api
    bare = api.model_copy(
        update={"tools": [t.model_copy(update={"fixtures": []}) for t in api.tools]}
    )
    sb = sandbox_for(Catalog([bare]), "calm", latency_scale=0.0, cassettes=[_cassette(tmp_path)])
    with SandboxThread(sb) as url:
        kim = _get(f"{url}/genderize/?name=kim")
        other = _get(f"{url}/genderize/?name=zed")
    assert kim.content == KIM and kim.headers[SOURCE_HEADER] == "cassette"
    assert other.status_code >= 400 and other.json()["error"] == "no fixture"


@pytest.mark.parametrize(
    ("tool", "args", "check"),
    [
        ("agify_age", {"name": "michael"}, {"name": "michael"}),
        ("genderize_gender", {"name": "kim"}, {"name": "kim", "count": 51609}),
        ("pokeapi_version", {"id_or_name": "red"}, {"name": "red", "id": 1}),
        ("swapi_person", {"id": "7"}, {"name": "Beru Whitesun lars"}),
    ],
)
def test_the_in_process_simulator_chooses_fixtures_like_the_sandbox(
    catalog: Catalog, fixtures_sandbox: str, tool: str, args: dict[str, str],
    check: dict[str, object],
) -> None:
    """`--simulate` and `--sandbox` answer the same arguments with the same fixture."""
    from realprobe import call, options

    answers = []
    for opts in (options(profile="calm"), options(sandbox=fixtures_sandbox)):
        result = call(tool, args, target=opts, catalog=catalog)
        assert result.ok, result.error
        answers.append(result.data)
    assert answers[0] == answers[1]
    for k, v in check.items():
        assert answers[0][k] == v


def test_the_in_process_simulator_answers_unknown_input_like_the_api(catalog: Catalog) -> None:
    from realprobe import ErrorCode, call, options

    result = call("swapi_person", {"id": "9999"}, target=options(profile="calm"), catalog=catalog)
    assert not result.ok and result.error is not None
    assert result.error.code is ErrorCode.NOT_FOUND
