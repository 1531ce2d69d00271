"""`realprobe mcp` as a user starts it: a subprocess over stdio and over streamable HTTP on
loopback, talked to with the SDK's own clients; clients that disconnect mid-call."""

from __future__ import annotations

import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from realprobe import Catalog, ErrorCode, Profile, Tool, ToolProfile
from realprobe.adapters.deadline import GRACE_S

CLI = [sys.executable, "-m", "realprobe.cli", "mcp"]


def no_arg_tools(catalog: Catalog) -> list[Tool]:
    return [t for t in catalog if t.spec.response == "json" and t.examples[0] == {}]


def first_text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


@contextmanager
def http_server(*args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Start `realprobe mcp --transport http --port 0 ...`; yield its URL once it listens."""
    proc = subprocess.Popen(
        [*CLI, "--transport", "http", "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stderr is not None
    stderr = proc.stderr

    def pump() -> None:
        for line in stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        deadline = time.monotonic() + 30
        url = None
        seen = []
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                continue
            seen.append(line)
            if " on http://" in line:
                url = line.rsplit(" on ", 1)[1].strip()
        assert url is not None, f"server did not come up: {''.join(seen)}"
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def hang_profile(hanging: Tool) -> Profile:
    return Profile(
        tools={hanging.name: ToolProfile(success_rate=0.0, errors={ErrorCode.TIMEOUT: 1.0})}
    )


async def test_stdio_subprocess_lists_and_calls(catalog: Catalog, calm_sandbox: str) -> None:
    tool = no_arg_tools(catalog)[0]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "realprobe.cli", "mcp", "--sandbox", calm_sandbox, "--timeout", "5"],
    )
    with anyio.fail_after(180):
        async with Client(params, read_timeout_seconds=30) as client:
            listed = (await client.list_tools()).tools
            ok = await client.call_tool(tool.name, {})
            bad = await client.call_tool(tool.name, {"nope": 1})
    assert [t.name for t in listed] == [t.name for t in catalog]
    assert ok.is_error is False and isinstance(ok.structured_content, dict)
    assert json.loads(first_text(ok)) == ok.structured_content
    assert bad.is_error is True and first_text(bad).startswith("INVALID_INPUT")


async def test_http_subprocess_lists_and_calls_and_reports_faults(
    catalog: Catalog, calm_sandbox: str
) -> None:
    tool = no_arg_tools(catalog)[0]
    with anyio.fail_after(180):
        with http_server("--sandbox", calm_sandbox, "--tools", tool.name) as (url, _):
            async with Client(url, read_timeout_seconds=30) as client:
                listed = (await client.list_tools()).tools
                ok = await client.call_tool(tool.name, {})
        with http_server("--sandbox", f"{calm_sandbox}/_fault/503") as (url, _):
            async with Client(url, read_timeout_seconds=30) as client:
                failed = await client.call_tool(tool.name, {})
    assert [t.name for t in listed] == [tool.name]
    assert listed[0].output_schema == tool.output_schema
    assert ok.is_error is False and ok.structured_content
    assert failed.is_error is True
    assert first_text(failed).startswith("SERVER_ERROR (HTTP 503)")
    assert "after 2 s (Retry-After" in first_text(failed)


async def test_http_clients_that_leave_mid_call_hang_nothing(
    catalog: Catalog, sandbox_factory: Any, tmp_path: Path
) -> None:
    """A client that cancels (`notifications/cancelled`) ends its call at once; a client
    that just vanishes leaves the call to end at its deadline, not later, stored as a
    TIMEOUT. Meanwhile other clients are served, and SIGTERM still stops the server cleanly."""
    hanging, calm = no_arg_tools(catalog)[:2]
    sandbox = sandbox_factory(hang_profile(hanging))
    db = tmp_path / "rp.db"
    deadline = 1.5
    version = "2025-11-25"
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    def hanging_rows() -> list[tuple[str, float]]:
        with sqlite3.connect(db) as conn:
            return conn.execute(
                "SELECT error_code, latency_ms FROM probes WHERE tool = ?", [hanging.name]
            ).fetchall()

    with anyio.fail_after(180):
        with http_server(
            "--sandbox", sandbox, "--timeout", str(deadline), "--db", str(db)
        ) as (url, proc):
            # 1. the SDK client cancels its call and goes away: the call is dropped, not left
            # to time out (no row for it, counted at the end once every call has ended)
            async with Client(url, read_timeout_seconds=30) as client:
                with anyio.move_on_after(0.3):
                    await client.call_tool(hanging.name, {})
            async with Client(url, read_timeout_seconds=30) as client:
                assert (await client.call_tool(calm.name, {})).is_error is False

            # 2. a raw client sends the call and drops the connection, no cancel
            async with httpx.AsyncClient(headers=headers) as raw:
                init = await raw.post(url, json={
                    "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                        "protocolVersion": version, "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "0"}}})
                session = {"mcp-session-id": init.headers["mcp-session-id"],
                           "mcp-protocol-version": version}
                await raw.post(url, headers=session,
                               json={"jsonrpc": "2.0", "method": "notifications/initialized"})
                with pytest.raises(httpx.ReadTimeout):
                    await raw.post(url, headers=session, timeout=0.3, json={
                        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": hanging.name, "arguments": {}}})
            async with Client(url, read_timeout_seconds=30) as client:
                assert (await client.call_tool(calm.name, {})).is_error is False
            rows = hanging_rows()
            while not rows:  # waited on (fail_after bounds a hung test), not timed
                await anyio.sleep(0.05)
                rows = hanging_rows()
            assert len(rows) == 1 and rows[0][0] == "TIMEOUT"
            # ended by its own deadline, not by the guard's backstop after it
            assert deadline * 1000 * 0.95 <= rows[0][1] < (deadline + GRACE_S) * 1000

            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    assert len(hanging_rows()) == 1  # the cancelled call left no row
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status, n_calls FROM probe_runs").fetchone() == ("done", 3)


def test_stdio_eof_mid_call_ends_the_server_and_stdout_is_only_json_rpc(
    catalog: Catalog, sandbox_factory: Any, tmp_path: Path
) -> None:
    hanging = no_arg_tools(catalog)[0]
    sandbox = sandbox_factory(hang_profile(hanging))
    db = tmp_path / "rp.db"
    proc = subprocess.Popen(
        # a deadline far beyond the wait below: a server that waited for the call would not
        # end in time, and its row would be a TIMEOUT; no wall-clock margin is asserted
        [*CLI, "--sandbox", sandbox, "--timeout", "120", "--db", str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdin is not None and proc.stdout is not None
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": hanging.name, "arguments": {}}},
    ]
    try:
        for m in messages:
            proc.stdin.write(json.dumps(m) + "\n")
        proc.stdin.flush()
        first = json.loads(proc.stdout.readline())
        assert first["id"] == 1 and first["result"]["serverInfo"]["name"] == "realprobe"
        # the call is in flight, hanging on the sandbox: its request is in the journal (which
        # journals a request when it arrives); the wait is bounded by the deadline, not timed
        waited_until = time.monotonic() + 60
        while not httpx.get(f"{sandbox}/_journal").json():
            assert time.monotonic() < waited_until, "the call never reached the sandbox"
            time.sleep(0.02)
        proc.stdin.close()  # the client goes away
        rc = proc.wait(timeout=60)
        out, err = proc.stdout.read(), proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 0, err
    for line in out.splitlines():  # nothing but JSON-RPC on stdout
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert "serving" in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM probe_runs").fetchone()[0] == "done"
        # the call was cancelled with its client: not an API outcome, so not a probe row
        assert conn.execute("SELECT COUNT(*) FROM probes").fetchone()[0] == 0


async def test_stdio_record_then_replay_through_the_cli(
    catalog: Catalog, calm_sandbox: str, tmp_path: Path
) -> None:
    """Record mode writes its cassette when the client goes away; replay serves it back."""
    tool = no_arg_tools(catalog)[0]
    cassette = tmp_path / "mcp.json"

    async def one_call(*args: str) -> Any:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "realprobe.cli", "mcp", "--tools", tool.name, *args]
        )
        async with Client(params, read_timeout_seconds=30) as client:
            return await client.call_tool(tool.name, {})

    with anyio.fail_after(180):
        recorded = await one_call(
            "--mode", "record", "--sandbox", calm_sandbox, "--cassette", str(cassette)
        )
        assert cassette.exists()
        replayed = await one_call("--mode", "replay", "--cassette", str(cassette))
    assert recorded.is_error is False
    assert replayed.structured_content == recorded.structured_content
    assert first_text(replayed) == first_text(recorded)


def test_stdio_sigterm_stops_cleanly_and_writes_the_recording(
    catalog: Catalog, calm_sandbox: str, tmp_path: Path
) -> None:
    """SIGTERM while the client is idle (stdin open, nothing to read) still ends the server
    at once, and record mode's cassette is written on the way out."""
    tool = no_arg_tools(catalog)[0]
    cassette = tmp_path / "rec.json"
    proc = subprocess.Popen(
        [*CLI, "--sandbox", calm_sandbox, "--mode", "record", "--cassette", str(cassette)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": tool.name, "arguments": {}}},
    ]
    try:
        for m in messages:
            proc.stdin.write(json.dumps(m) + "\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 2 and answer["result"]["isError"] is False
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)  # a bound on a hung server, not a margin
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 0
    assert cassette.exists()
    assert httpx.URL(tool.api.base_url).host in cassette.read_text()  # the call, canonical URL
