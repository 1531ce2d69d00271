"""Replay plays the whole session: what the server said outside any call (server-everything's
`notifications/tools/list_changed` after the handshake) comes back where it was recorded;
and a faulted session's rows tell the server's own errors (live) from the injected ones."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError, StdioServerParameters

from realprobe import load_cassette

ROOT = Path(__file__).resolve().parents[1]
SCRIPTED = [sys.executable, str(ROOT / "tests" / "mcp2_scripted_server.py")]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def realprobe(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, env=ENV,
                                 args=["-m", "realprobe.cli", "mcp", *args])


async def session_of(params: StdioServerParameters) -> list[str]:
    """Every message the client got, in order: notifications by method, answers by what
    they answered."""
    got: list[str] = []

    async def note(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if isinstance(method, str):
            got.append(method)

    async with Client(params, mode="legacy", cache=None, message_handler=note,
                      read_timeout_seconds=60) as c:
        got.append("answer:tools/list=" + ",".join(
            sorted(t.name for t in (await c.list_tools()).tools)[:3]))
        echoed = await c.call_tool("echo", {"message": "hi"})
        got.append("answer:echo=" + echoed.content[0].text)  # type: ignore[union-attr]
    return got


async def test_a_notification_after_the_handshake_replays_where_it_was(tmp_path: Path) -> None:
    exe = shutil.which("mcp-server-everything")
    if exe is None:
        pytest.skip("node's @modelcontextprotocol/server-everything is not installed "
                    "(npm install -g @modelcontextprotocol/server-everything)")
    cassette = tmp_path / "everything.jsonl"
    live = await session_of(realprobe("proxy", "--record", str(cassette), "--", exe, "stdio"))
    records = load_cassette(cassette).records or []
    order = [(r["dir"], r["msg"].get("method")) for r in records if "msg" in r]
    at = order.index(("s2c", "notifications/tools/list_changed"))
    assert ("c2s", "tools/call") not in order[:at]  # recorded outside any call
    assert "notifications/tools/list_changed" in live

    replayed = await session_of(realprobe("replay", str(cassette)))
    assert replayed == live  # the same messages, in the same order


def rows(db: Path) -> list[dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute("SELECT * FROM probes ORDER BY id")]
    finally:
        con.close()


async def test_a_faulted_session_stores_real_errors_as_live_and_injected_as_simulate(
    tmp_path: Path,
) -> None:
    profile, db = tmp_path / "half.json", tmp_path / "f.db"
    profile.write_text(json.dumps({"format": "realprobe-profile/1", "name": "half",
                                   "default": {"success_rate": 0.5,
                                               "errors": {"RATE_LIMIT_ERROR": 1.0},
                                               "latency_ms": {"p50": 1}}}))
    params = realprobe("proxy", "--profile", str(profile), "--seed", "4", "--db", str(db), "--",
                       *SCRIPTED, "--fail", "0.5", "--jsonrpc", "0.5", "--seed", "2")
    seen: list[str] = []
    async with Client(params, mode="legacy", cache=None, read_timeout_seconds=60) as c:
        for _ in range(24):
            try:
                got = await c.call_tool("lookup", {"key": "k"})
            except MCPError as exc:
                seen.append("injected" if (exc.error.data or {}).get("realprobe/fault")
                            else "server")
                continue
            meta = got.meta or {}
            seen.append("ok" if not got.is_error else
                        "injected" if "realprobe/fault" in meta else "server")
    stored = rows(db)
    assert len(stored) == 24
    kinds = [("ok" if r["outcome"] == "ok" else
              "injected" if r["target_kind"] == "simulate" else "server") for r in stored]
    assert kinds == seen  # row by row, as the client saw it
    assert {"injected", "server"} <= set(seen)
    for r in stored:
        detail = r["detail"] or ""
        if r["outcome"] == "ok":  # the server's answer; simulate only when held to a draw
            assert (r["target_kind"] == "live") == ("held to the drawn" not in detail)
        elif r["target_kind"] == "live":
            assert not detail.startswith("injected")
        else:
            assert r["target_kind"] == "simulate" and detail.startswith("injected")
    # the server's JSON-RPC errors say so in the row; its isError results carry their text
    server_errors = [r["detail"] for r in stored if r["outcome"] == "error"
                     and r["target_kind"] == "live"]
    assert any(d.startswith("JSON-RPC error -32603") for d in server_errors)
    assert any("SERVER_ERROR" in d and not d.startswith("JSON-RPC") for d in server_errors)
