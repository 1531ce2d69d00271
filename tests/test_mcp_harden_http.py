"""MCP over HTTP on a network address: `mcp proxy` and `mcp replay` keep the guards of
`mcp` and `sandbox` (the warning off loopback, `--auth-token-env`, `--allowed-host`), and the
per-client session cap of every MCP server counts the real peer, never `X-Forwarded-For`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = [sys.executable, str(ROOT / "tests" / "mcp_hostile_server.py")]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, list[str]]]:
    """`realprobe *args` until it says where it serves: (its /mcp URL on loopback, the lines
    it wrote before)."""
    proc = subprocess.Popen([sys.executable, "-m", "realprobe.cli", *args],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    assert proc.stderr is not None
    said: list[str] = []
    try:
        for line in proc.stderr:
            said.append(line.rstrip("\n"))
            found = re.search(r"http://[^ ]+?:(\d+)/mcp", line)
            if found:
                yield f"http://127.0.0.1:{found[1]}/mcp", said
                break
        else:
            pytest.fail("\n".join(said))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def opens(url: str, **headers: str) -> int:
    with httpx.Client(timeout=30) as client:
        return client.post(url, json=INIT, headers={**HEADERS, **headers}).status_code


PROXY = ["mcp", "proxy", "--transport", "http", "--port", "0"]
SERVERS = {"proxy": [*PROXY, "--host", "0.0.0.0", "--auth-token-env", "RP_TOKEN",
                     "--allowed-host", "mcp.example", "--", *HOSTILE],
           "mcp": ["mcp", "--transport", "http", "--port", "0", "--host", "0.0.0.0",
                   "--auth-token-env", "RP_TOKEN", "--allowed-host", "mcp.example",
                   "--mode", "simulate"]}
TOKEN = "t" * 40


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_off_loopback_the_guards_hold(server: str) -> None:
    with serving(*SERVERS[server], env={"RP_TOKEN": TOKEN}) as (url, said):
        assert any("0.0.0.0" in line and "--allowed-host" in line for line in said), said
        assert opens(url) == 401  # a client that sends Host: 127.0.0.1 needs the token too
        assert opens(url, Host="evil.example", Authorization=f"Bearer {TOKEN}") == 421
        assert opens(url, Host="mcp.example", Authorization=f"Bearer {TOKEN}") == 200


def test_guard_flags_need_http() -> None:
    done = subprocess.run([sys.executable, "-m", "realprobe.cli", "mcp", "proxy",
                           "--allowed-host", "x", "--", *HOSTILE], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr


CAPPED = {"proxy": [*PROXY, "--max-sessions", "2", "--", *HOSTILE],
          "mcp": ["mcp", "--transport", "http", "--port", "0", "--max-sessions", "2",
                  "--mode", "simulate"]}


@pytest.mark.parametrize("server", sorted(CAPPED))
def test_the_session_cap_counts_the_peer_not_a_forwarded_header(server: str) -> None:
    with serving(*CAPPED[server]) as (url, _):
        got = [opens(url, **{"X-Forwarded-For": f"10.0.0.{i}"}) for i in range(1, 4)]
        assert got == [200, 200, 503]
