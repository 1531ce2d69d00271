"""Canary secrets go in; no written file contains them; the scrubbed cassette still replays."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from cli_runner import invoke

from realprobe import Cassette, save_cassette
from realprobe.cassettes.cassette import Call
from realprobe.cassettes.recording import RecordingTransport
from realprobe.cassettes.replayer import ReplayTransport

AUTH = "CANARYauthTOKEN0001"
COOKIE = "CANARYcookie0002"
HEADER_KEY = "CANARYheaderkey0003"
QUERY_KEY = "CANARYquerykey0004"
JSON_SECRET = "CANARYjsonsecret0005"
SET_COOKIE = "CANARYsetcookie0006"
CANARIES = (AUTH, COOKIE, HEADER_KEY, QUERY_KEY, JSON_SECRET, SET_COOKIE)
URL = "https://api.example.test/v1/things?api_key=" + QUERY_KEY + "&q=cats"


def echoing_origin() -> httpx.MockTransport:
    """An origin that leaks: echoes the token in a response header and the body."""

    def handler(request: httpx.Request) -> httpx.Response:
        auth = request.headers.get("authorization", "")
        return httpx.Response(
            200,
            headers=[("Set-Cookie", f"sid={SET_COOKIE}; Path=/"), ("X-Echo-Auth", auth)],
            json={"you_sent": auth, "token": "server-token-CANARYresp", "items": [1, 2],
                  "query": str(request.url)},
        )

    return httpx.MockTransport(handler)


async def _exercise(client: httpx.AsyncClient) -> httpx.Response:
    await client.post(
        "https://api.example.test/v1/login",
        json={"user": "me", "password": JSON_SECRET, "nested": {"api_key": JSON_SECRET}},
    )
    return await client.get(
        URL,
        headers={"Authorization": f"Bearer {AUTH}", "Cookie": f"session={COOKIE}",
                 "X-Api-Key": HEADER_KEY},
    )


@pytest.mark.parametrize("name", ["scrub.json", "scrub.yaml"])
async def test_no_canary_reaches_any_written_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    async with httpx.AsyncClient(transport=RecordingTransport(echoing_origin(), path)) as client:
        live = await _exercise(client)
    assert AUTH in live.text  # the origin really did echo it
    for f in tmp_path.rglob("*"):
        text = f.read_bytes().decode("utf-8", "replace")
        for canary in (*CANARIES, "CANARYresp"):
            assert canary not in text, f"{canary} leaked into {f.name}"
    assert "REDACTED" in path.read_text()

    # the scrubbed recording still replays for the same request, secrets and all
    async with httpx.AsyncClient(transport=ReplayTransport.from_path(path)) as client:
        replayed = await _exercise(client)
    assert replayed.status_code == 200
    assert replayed.json()["items"] == [1, 2]


def test_scrub_command_cleans_an_existing_cassette(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    call = Call(
        seq=0, method="GET", uri=f"https://x.test/a?token={QUERY_KEY}",
        request_headers=[("Authorization", f"token {AUTH}")],
        status=200, headers=[("Content-Type", "application/json")],
        body=json.dumps({"client_secret": JSON_SECRET, "echo": AUTH}).encode(),
    )
    save_cassette(Cassette([call], {"source": "hand-made"}), path)
    assert AUTH in path.read_text()
    result = invoke(["cassette", "scrub", str(path), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["total"] >= 3
    text = path.read_text()
    assert not any(c in text for c in (AUTH, QUERY_KEY, JSON_SECRET))


async def test_extra_params_scrubbed_by_the_cli_still_match_on_replay(tmp_path: Path) -> None:
    path = tmp_path / "extra.json"
    url = "https://api.example.test/v1/x?custom_cred=CANARYcustom0007&n=1"
    async with httpx.AsyncClient(transport=RecordingTransport(echoing_origin(), path)) as client:
        await client.get(url)
    result = invoke(["cassette", "scrub", str(path), "--param", "custom_cred"])
    assert result.exit_code == 0, result.output
    assert "CANARYcustom0007" not in path.read_text()
    async with httpx.AsyncClient(transport=ReplayTransport.from_path(path)) as client:
        assert (await client.get(url)).status_code == 200
