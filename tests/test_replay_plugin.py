"""The pytest plugin: a user's own test records with --realprobe-record, then replays offline."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_TEST = '''
import httpx
import pytest

calls = {"n": 0}


def origin(request):
    calls["n"] += 1
    if calls["n"] == 1:
        raise httpx.ReadTimeout("slow origin", request=request)
    return httpx.Response(200, json={"n": calls["n"]})


@pytest.fixture
def realprobe_base_transport():
    return httpx.MockTransport(origin)   # stands in for the live network while recording


def block_sockets(monkeypatch):
    import socket

    def guard(*a, **k):
        raise AssertionError("socket opened")

    monkeypatch.setattr(socket.socket, "connect", guard)


async def test_retry_then_ok(realprobe_transport, monkeypatch):
    calls["n"] = 0
    block_sockets(monkeypatch)
    seen = []
    async with httpx.AsyncClient(transport=realprobe_transport) as client:
        for _ in range(2):
            try:
                seen.append((await client.get("https://api.example.test/x")).json()["n"])
            except httpx.ReadTimeout as exc:
                seen.append(f"timeout: {exc}")
    assert seen == ["timeout: slow origin", 2]


@pytest.fixture
def realprobe_base_sync_transport():
    return httpx.MockTransport(origin)


def test_sync_client(realprobe_sync_transport):
    calls["n"] = 0
    seen = []
    with httpx.Client(transport=realprobe_sync_transport) as client:
        for _ in range(2):
            try:
                seen.append(client.get("https://api.example.test/x").json()["n"])
            except httpx.ReadTimeout as exc:
                seen.append(f"timeout: {exc}")
    assert seen == ["timeout: slow origin", 2]


@pytest.mark.realprobe_cassette("named/other.json", on_exhausted="repeat-last")
async def test_marker_path(realprobe_transport):
    calls["n"] = 0
    async with httpx.AsyncClient(transport=realprobe_transport) as client:
        try:
            await client.get("https://api.example.test/x")
        except httpx.ReadTimeout:
            pass
        r = await client.get("https://api.example.test/x")
    assert r.status_code == 200
'''


def test_plugin_records_then_replays(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TEST)
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    missing = pytester.runpytest_inprocess("-q")
    missing.assert_outcomes(failed=3)  # at the first request, not at setup
    assert "no cassette there" in missing.stdout.str()

    recorded = pytester.runpytest_inprocess("-q", "--realprobe-record")
    recorded.assert_outcomes(passed=3)
    assert (pytester.path / "cassettes" / "test_user" / "test_retry_then_ok.json").exists()
    assert (pytester.path / "named" / "other.json").exists()

    replayed = pytester.runpytest_inprocess("-q")
    replayed.assert_outcomes(passed=3)
