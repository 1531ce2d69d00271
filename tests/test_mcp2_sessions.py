"""`mcp proxy --transport http` serves many client sessions side by side, each with its own
upstream session (or one shared), each recorded apart and replayed apart."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from realprobe import load_cassette

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TIME = shutil.which("mcp-server-time") or str(BIN / "mcp-server-time")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ZONES = ["Europe/Paris", "Asia/Tokyo", "UTC", "America/New_York", "Europe/London",
         "Australia/Sydney", "America/Sao_Paulo", "Africa/Nairobi"]

pytestmark = pytest.mark.skipif(not Path(TIME).exists(), reason="mcp-server-time not installed")


@contextmanager
def http_proxy(*args: str) -> Iterator[str]:
    """`realprobe mcp proxy --transport http ... -- mcp-server-time`; yields its URL, ends it
    with Ctrl-C (exit status 130)."""
    served = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "mcp", "proxy", "--transport", "http", "--port",
         "0", *args, "--", TIME], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=ENV)
    try:
        assert served.stderr is not None
        line = served.stderr.readline()
        found = re.search(r"on (http://127\.0\.0\.1:\d+/mcp)", line)
        assert found, line
        yield found.group(1)
    finally:
        served.send_signal(signal.SIGINT)
        assert served.wait(timeout=60) == 130


async def one_session(url: str, zone: str) -> tuple[list[str], dict[str, Any]]:
    async with Client(url, read_timeout_seconds=120) as c:
        tools = sorted(t.name for t in (await c.list_tools()).tools)
        got = await c.call_tool("convert_time", {"source_timezone": "UTC", "time": "12:00",
                                                 "target_timezone": zone})
        assert got.structured_content is not None
        return tools, got.structured_content


def test_eight_clients_side_by_side_each_recorded_and_replayed_apart(tmp_path: Path) -> None:
    record, db = tmp_path / "sessions", tmp_path / "p.db"
    with http_proxy("--record", str(record), "--db", str(db)) as url:
        async def all_of_them() -> list[tuple[list[str], dict[str, Any]]]:
            return await asyncio.gather(*(one_session(url, z) for z in ZONES))

        answers = asyncio.run(all_of_them())
    for zone, (tools, answer) in zip(ZONES, answers, strict=True):
        assert tools == ["convert_time", "get_current_time"]
        assert answer["target"]["timezone"] == zone  # each answer reached its own client

    cassettes = sorted(record.glob("*.jsonl"))
    assert len(cassettes) == 8
    by_zone: dict[str, Path] = {}
    for path in cassettes:
        session = load_cassette(path)
        meta, records = session.meta, session.records or []
        assert meta["session"] == path.stem  # named by its session id
        asked = [r["msg"]["params"]["arguments"]["target_timezone"] for r in records
                 if r.get("dir") == "c2s" and r["msg"].get("method") == "tools/call"]
        assert len(asked) == 1  # one client's session, and only its own calls
        by_zone[asked[0]] = path
    assert sorted(by_zone) == sorted(ZONES)

    con = sqlite3.connect(db)
    try:
        runs = con.execute("SELECT id, n_calls FROM probe_runs").fetchall()
        per_run = con.execute("SELECT run_id, count(*) FROM probes GROUP BY run_id").fetchall()
    finally:
        con.close()
    assert len(runs) == 8 and {n for _, n in runs} == {1}  # a run of rows per session
    assert sorted(n for _, n in per_run) == [1] * 8

    async def replayed(zone: str) -> tuple[list[str], dict[str, Any]]:
        params = StdioServerParameters(
            command=sys.executable, env=ENV,
            args=["-m", "realprobe.cli", "mcp", "replay", str(by_zone[zone])])
        return await one_session_stdio(params, zone)

    async def every_replay() -> list[tuple[list[str], dict[str, Any]]]:
        return await asyncio.gather(*(replayed(z) for z in ZONES))

    assert asyncio.run(every_replay()) == answers


async def one_session_stdio(params: StdioServerParameters,
                            zone: str) -> tuple[list[str], dict[str, Any]]:
    async with Client(params, read_timeout_seconds=120) as c:
        tools = sorted(t.name for t in (await c.list_tools()).tools)
        got = await c.call_tool("convert_time", {"source_timezone": "UTC", "time": "12:00",
                                                 "target_timezone": zone})
        assert got.structured_content is not None
        return tools, got.structured_content


def test_clients_sharing_one_upstream_session_get_their_own_answers(tmp_path: Path) -> None:
    record = tmp_path / "shared"
    with http_proxy("--upstream-sessions", "shared", "--record", str(record)) as url:
        async def three() -> list[tuple[list[str], dict[str, Any]]]:
            return await asyncio.gather(*(one_session(url, z) for z in ZONES[:3]))

        answers = asyncio.run(three())
    assert [a["target"]["timezone"] for _, a in answers] == ZONES[:3]
    sessions = [(c.meta, c.records or []) for c in map(load_cassette,
                                                      sorted(record.glob("*.jsonl")))]
    assert len(sessions) == 3
    # one upstream session: every client's handshake answered, ids as each client sent them
    for _, records in sessions:
        ids = {r["msg"].get("id") for r in records if r.get("dir") == "c2s" and "id" in r["msg"]}
        answered = {r["msg"].get("id") for r in records if r.get("dir") == "s2c"}
        assert ids <= answered


def test_a_client_over_its_session_cap_is_refused_and_others_are_not(tmp_path: Path) -> None:
    import httpx

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    with http_proxy("--max-sessions", "1", "--timeout", "60") as url, \
            httpx.Client(timeout=120) as http:
        listing = http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                            headers=headers)
        assert listing.status_code == 400  # no session id: nothing is opened for it
        first = http.post(url, json=init, headers=headers)
        assert first.status_code == 200 and first.headers.get("mcp-session-id")
        second = http.post(url, json=init, headers=headers)
        assert second.status_code == 503
        ended = http.delete(url, headers={"mcp-session-id": first.headers["mcp-session-id"]})
        assert ended.status_code == 200
        again = http.post(url, json=init, headers=headers)
        assert again.status_code == 200  # its place back


def test_a_shared_upstream_tells_every_session_what_changed() -> None:
    """Client A's call changes the shared server's tool list: client B, idle on its own
    session, hears `notifications/tools/list_changed` too (on its GET stream)."""
    scripted = [sys.executable, str(ROOT / "tests" / "mcp2_scripted_server.py")]
    served = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "mcp", "proxy", "--transport", "http", "--port",
         "0", "--upstream-sessions", "shared", "--", *scripted], stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, env=ENV)

    async def two_clients(url: str) -> tuple[str, bool, str]:
        heard = asyncio.Event()

        async def note(message: Any) -> None:
            if getattr(getattr(message, "root", message), "method", None) == \
                    "notifications/tools/list_changed":
                heard.set()

        async with Client(url, cache=None, read_timeout_seconds=120) as a, \
                Client(url, cache=None, message_handler=note, read_timeout_seconds=120) as b:
            await b.list_tools()
            touched = (await a.call_tool("touch", {})).content[0].text  # type: ignore[union-attr]
            with suppress(TimeoutError):
                await asyncio.wait_for(heard.wait(), 60)
            echoed = (await b.call_tool("echo", {"text": "b"})).content[0].text  # type: ignore[union-attr]
            return touched, heard.is_set(), echoed

    try:
        assert served.stderr is not None
        found = re.search(r"on (http://127\.0\.0\.1:\d+/mcp)", served.stderr.readline())
        assert found
        assert asyncio.run(two_clients(found.group(1))) == ("touched", True, "b")
    finally:
        served.send_signal(signal.SIGINT)
        assert served.wait(timeout=60) == 130
