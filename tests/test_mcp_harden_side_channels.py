"""What an MCP command prints and records beside its answers: no credential on a side
channel (the session cassette's argv, the start-up banner), and no traceback for a typo in a
calls file or for a server that writes lines that are not JSON-RPC."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
HOSTILE = [sys.executable, str(ROOT / "tests" / "mcp_hostile_server.py")]
TIME = shutil.which("mcp-server-time") or str(Path(sys.executable).parent / "mcp-server-time")


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "realprobe.cli", *args], input=stdin,
                          capture_output=True, text=True, env=ENV, timeout=120)


@pytest.mark.parametrize("flag", [["--api-key", "sk-live-123456"], ["--api-key=sk-live-123456"],
                                  ["--token", "sk-live-123456"]], ids=["pair", "equals", "token"])
def test_a_credential_in_the_server_command_stays_out_of_cassette_and_banner(
    tmp_path: Path, flag: list[str],
) -> None:
    record = tmp_path / "s.jsonl"
    done = cli("mcp", "proxy", "--record", str(record), "--", *HOSTILE, *flag)
    assert done.returncode == 0, done.stderr
    assert "sk-live-123456" not in done.stderr and "REDACTED" in done.stderr
    header = json.loads(record.read_text().splitlines()[0])
    assert "sk-live-123456" not in json.dumps(header)
    assert header["meta"]["argv"][:2] == HOSTILE


def test_the_banner_masks_the_upstream_password_and_token() -> None:
    done = cli("mcp", "proxy", "--upstream",
               "http://alice:pa55word@127.0.0.1:9/mcp?access_token=tok-998877&x=1")
    assert "pa55word" not in done.stderr and "tok-998877" not in done.stderr, done.stderr
    assert "http://alice:REDACTED@127.0.0.1:9/mcp?access_token=REDACTED&x=1" in done.stderr


@pytest.mark.skipif(not Path(TIME).exists(), reason="mcp-server-time not installed")
def test_a_tool_the_server_does_not_list_is_one_line(tmp_path: Path) -> None:
    calls = tmp_path / "calls.json"
    calls.write_text('{"convert_tme": {}}')
    done = cli("probe", "--mcp-server", TIME, "--mcp-calls", str(calls),
               "--db", str(tmp_path / "p.db"))
    assert done.returncode == 2
    lines = [x for x in done.stderr.splitlines() if x.strip() and "probing" not in x]
    assert lines == ["error: the server 'mcp-time' has no tool convert_tme; it lists "
                     "convert_time, get_current_time"], done.stderr


def test_a_server_writing_garbage_costs_no_traceback(tmp_path: Path) -> None:
    calls = tmp_path / "calls.json"
    calls.write_text('{"garbage": {}}')
    done = cli("probe", "--mcp-server", " ".join(HOSTILE), "--mcp-calls", str(calls),
               "--db", str(tmp_path / "p.db"), "--json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Failed to parse" not in done.stderr
    assert "Event loop is closed" not in done.stderr


@pytest.mark.parametrize("target", [["--mcp-url", "http://127.0.0.1:9/mcp"],
                                    ["--mcp-server", f"{sys.executable} -c 'raise SystemExit(3)'"]],
                         ids=["unreachable-url", "server-exits"])
def test_a_server_that_cannot_be_reached_is_one_line(tmp_path: Path, target: list[str]) -> None:
    calls = tmp_path / "calls.json"
    calls.write_text('{"echo": {}}')
    done = cli("probe", *target, "--mcp-calls", str(calls), "--db", str(tmp_path / "p.db"))
    assert done.returncode == 3, done.stderr[-2000:]
    lines = [x for x in done.stderr.splitlines() if x.strip() and "probing" not in x]
    assert len(lines) == 1 and lines[0].startswith("error: cannot talk to the MCP server")
