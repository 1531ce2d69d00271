"""The `mcp_server` fixture in a real pytest session (pytester): an agent's suite records
its MCP session when allowed, then runs offline from the cassette with no server installed;
a request the cassette lacks is one line naming it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

BIN = Path(sys.executable).parent
TIME = shutil.which("mcp-server-time") or str(BIN / "mcp-server-time")

pytestmark = pytest.mark.skipif(not Path(TIME).exists(), reason="mcp-server-time not installed")


@pytest.fixture(autouse=True)
def own_settings(pytester: pytest.Pytester) -> None:
    """The agent's project has settings of its own, so this suite's do not leak into it. Its
    sessions run in this process (`runpytest_inprocess`: no interpreter and plugin start per
    session); the MCP servers they start are processes of their own as ever."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")

AGENT_TEST = '''
import asyncio

import pytest
from mcp import Client


async def agent(question, client):
    """A tiny agent: it reads the tools, then asks the server for Tokyo's time at noon UTC."""
    tools = {t.name for t in (await client.list_tools()).tools}
    assert "convert_time" in tools
    got = await client.call_tool("convert_time", {"source_timezone": "UTC", "time": "12:00",
                                                  "target_timezone": "ZONE"})
    return got.structured_content["target"]["datetime"][11:16]


@pytest.mark.mcp_cassette(server=SERVER)
def test_agent_answers(mcp_server):
    async def run():
        async with Client(mcp_server.params, mode="legacy", cache=None) as client:
            return await agent("What time is it in Tokyo at noon UTC?", client)

    assert asyncio.run(run()) == "ANSWER"
'''


def agent_test(server: str, zone: str = "Asia/Tokyo", answer: str = "21:00") -> str:
    return (AGENT_TEST.replace("SERVER", server).replace("ZONE", zone)
            .replace("ANSWER", answer))


def test_records_when_allowed_then_replays_offline_with_no_server(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=agent_test(repr([TIME])))
    cassette = pytester.path / "cassettes" / "test_suite" / "test_agent_answers.jsonl"

    refused = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    refused.assert_outcomes(errors=1)  # record mode none, no cassette: nothing is started
    assert "no MCP cassette" in refused.stdout.str() and not cassette.exists()

    recorded = pytester.runpytest_inprocess("--realprobe-record-mode=once")
    recorded.assert_outcomes(passed=1)
    assert cassette.exists() and "tools/call" in cassette.read_text()

    # the server is gone: the command names a program that does not exist
    pytester.makepyfile(test_suite=agent_test(repr(["/nonexistent/mcp-server-time"])))
    replayed = pytester.runpytest_inprocess("--realprobe-block-network")
    replayed.assert_outcomes(passed=1)

    # a request the cassette lacks: one line naming it and the cassette
    pytester.makepyfile(test_suite=agent_test(repr(["/nonexistent/mcp-server-time"]),
                                              zone="Europe/Paris", answer="13:00"))
    missed = pytester.runpytest_inprocess()
    missed.assert_outcomes(failed=1)
    lines = [ln for ln in missed.stdout.lines if "MCP cassette miss" in ln]
    assert lines and "tools/call/convert_time" in lines[0] and cassette.name in lines[0]


def test_a_test_that_fails_while_recording_keeps_no_cassette(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=agent_test(repr([TIME]), answer="99:99"))
    result = pytester.runpytest_inprocess("--realprobe-record-mode=all")
    result.assert_outcomes(failed=1)
    assert not list(pytester.path.glob("cassettes/**/*.jsonl"))
    assert not list(pytester.path.glob("cassettes/**/*.partial"))


URL_TEST = '''
import asyncio

import pytest
from mcp import Client


@pytest.mark.mcp_cassette(server=SERVER)
def test_over_a_url(mcp_server):
    async def run():
        async with Client(mcp_server.url, cache=None) as client:  # streamable HTTP
            got = await client.call_tool("get_current_time", {"timezone": "UTC"})
            return got.structured_content["timezone"]

    assert asyncio.run(run()) == "UTC"
'''


def test_the_server_as_a_url_records_and_replays(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_url=URL_TEST.replace("SERVER", repr([TIME])))
    pytester.runpytest_inprocess("--realprobe-record-mode=once").assert_outcomes(passed=1)
    assert (pytester.path / "cassettes" / "test_url" / "test_over_a_url.jsonl").exists()
    assert not list(pytester.path.glob("cassettes/**/*.sessions"))
    pytester.makepyfile(test_url=URL_TEST.replace("SERVER", repr(["/nonexistent/server"])))
    pytester.runpytest_inprocess().assert_outcomes(passed=1)
