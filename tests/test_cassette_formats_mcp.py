"""One cassette concept: MCP sessions (realprobe's and other recorders' transcripts) go
through the one loader, so `cassette inspect/verify/scrub/import/recover` work on them as on
HTTP cassettes and `mcp replay` takes whatever `cassette` takes; hostile session files and
transcripts are one line and exit 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import realprobe

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
BIN = Path(sys.executable).parent
TIME = shutil.which("mcp-server-time") or str(BIN / "mcp-server-time")
CONVERT = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
HTTP_CASSETTE = Path("/work/shared/realworld/cassettes")


def cli(*args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "realprobe.cli", *args], input=stdin,
                          capture_output=True, text=True, env=ENV, cwd=cwd, timeout=120)


def rpc(rid: int, method: str, params: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


INIT = rpc(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "t", "version": "1"}})
SCRIPT = "\n".join([
    INIT, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    rpc(1, "tools/list", {}),
    rpc(2, "tools/call", {"name": "convert_time", "arguments": CONVERT})]) + "\n"


def answers(out: str) -> dict[Any, dict[str, Any]]:
    return {m.get("id"): m for m in map(json.loads, out.splitlines()) if "id" in m}


def converse(*args: str) -> tuple[dict[Any, dict[str, Any]], int, str]:
    """SCRIPT through a realprobe MCP command, each request's answer awaited before the next
    line (the client's EOF ends a session): answers by id, exit code, stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "realprobe.cli", *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdin is not None and proc.stdout is not None
    got: dict[Any, dict[str, Any]] = {}
    try:
        for line in SCRIPT.splitlines():
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            rid = json.loads(line).get("id")
            while rid is not None and rid not in got:
                out = proc.stdout.readline()
                if not out:
                    break
                msg = json.loads(out)
                got[msg.get("id")] = msg
    finally:
        _, err = proc.communicate(timeout=60)
    return got, proc.returncode, err


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session recorded through the proxy in front of mcp-server-time."""
    if not Path(TIME).exists():
        pytest.skip("mcp-server-time not installed")
    path = tmp_path_factory.mktemp("s") / "time.jsonl"
    got, code, err = converse("mcp", "proxy", "--record", str(path), "--", TIME)
    assert code == 0 and "result" in got[2], err[-2000:]
    return path


def test_cassette_verbs_read_an_mcp_session(session: Path, tmp_path: Path) -> None:
    done = cli("cassette", "inspect", str(session), "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["interactions"]
    assert [r["url"] for r in rows] == ["mcp://session/initialize", "mcp://session/tools/list",
                                        "mcp://session/tools/call/convert_time"]
    assert rows[-1]["tool"] == "convert_time" and rows[-1]["status"] == 200
    assert cli("cassette", "verify", str(session)).returncode == 0
    listing = realprobe.inspect_cassette(session)  # the front door is the same door
    assert [r["url"] for r in listing.rows] == [r["url"] for r in rows]

    scrubbed = tmp_path / "scrubbed.jsonl"
    done = cli("cassette", "scrub", str(session), "--secret", "Asia/Tokyo", "-o", str(scrubbed))
    assert done.returncode == 0, done.stderr
    assert "Asia/Tokyo" in session.read_text() and "Asia/Tokyo" not in scrubbed.read_text()
    assert len(scrubbed.read_text().splitlines()) == len(session.read_text().splitlines())


def test_a_transcript_imports_and_replays_as_it_is(session: Path, tmp_path: Path) -> None:
    records = [json.loads(x) for x in session.read_text().splitlines()[1:]]
    tape = tmp_path / "tape.jsonl"  # mcp-tape v1: {"t", "dir": "in"|"out", "raw"}
    tape.write_text("".join(json.dumps({"t": 1_700_000_000_000 + int(r["t"] * 1000),
                                        "dir": "in" if r["dir"] == "c2s" else "out",
                                        "raw": r["msg"]}) + "\n"
                            for r in records if "msg" in r))
    for cassette in (tape, session):  # a transcript replays without an import first
        got, code, err = converse("mcp", "replay", str(cassette))
        assert code == 0, err[-2000:]
        assert got[2]["result"]["structuredContent"]["target"]["timezone"] == "Asia/Tokyo"
    imported = tmp_path / "imported.jsonl"
    done = cli("cassette", "import", str(tape), "-o", str(imported))
    assert done.returncode == 0, done.stderr
    assert json.loads(imported.read_text().splitlines()[0])["realprobe_mcp_cassette"] == 1
    assert cli("cassette", "inspect", str(imported)).returncode == 0


def test_recover_drops_a_torn_last_line(session: Path, tmp_path: Path) -> None:
    torn = tmp_path / "torn.jsonl"
    torn.write_text(session.read_text() + '{"t": 9, "dir": "s2c", "msg": {"jsonr')
    done = cli("cassette", "recover", str(torn))
    assert done.returncode == 0, done.stderr
    assert torn.read_text().endswith("\n") and "jsonr\n" not in torn.read_text()
    assert len(torn.read_text().splitlines()) == len(session.read_text().splitlines())


def test_an_http_cassette_is_not_an_mcp_session(tmp_path: Path) -> None:
    http = next(HTTP_CASSETTE.rglob("*.json"), None) or next(HTTP_CASSETTE.rglob("*.y*ml"))
    done = cli("mcp", "replay", str(http), stdin=INIT + "\n")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "not an MCP session" in done.stderr


HEADER = '{"realprobe_mcp_cassette": 1, "pid": 1, "meta": {"server": "x"}}\n'
CALL = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "a"}}'


@pytest.mark.parametrize("line", [
    HEADER + '{"t": "abc", "dir": "c2s", "msg": ' + CALL + "}\n",
    HEADER + '{"t": [1], "dir": "c2s", "msg": ' + CALL + "}\n",
    HEADER + '{"t": 1' + "0" * 400 + ', "dir": "c2s", "msg": ' + CALL + "}\n",
    HEADER + '{"t": 1, "dir": ["c2s"], "msg": ' + CALL + "}\n",
    '{"realprobe_mcp_cassette": 1, "meta": "a string"}\n',
    '{"realprobe_mcp_cassette": "one", "meta": {}}\n',
], ids=["t-text", "t-list", "t-huge", "dir-list", "meta-string", "version-text"])
def test_a_hostile_session_is_one_line_and_exit_2(tmp_path: Path, line: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(line)
    for args in (["mcp", "replay", str(bad)], ["cassette", "inspect", str(bad)],
                 ["cassette", "import", str(bad), "-o", str(tmp_path / "out.jsonl")]):
        done = cli(*args, stdin=INIT + "\n")
        assert done.returncode == 2, (args, done.stderr[-1500:])
        assert done.stderr.strip().count("\n") == 0, done.stderr
        assert "bad.jsonl: line" in done.stderr
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("t", ["[1]", "1" + "0" * 400, '{"a": 1}', "1e999"],
                         ids=["list", "huge-integer", "object", "infinite"])
def test_a_hostile_transcript_is_one_line_and_exit_2(tmp_path: Path, t: str) -> None:
    tape = tmp_path / "tape.jsonl"
    tape.write_text('{"t": ' + t + ', "dir": "in", "raw": ' + CALL + "}\n"
                    '{"t": 2, "dir": "out", "raw": {"jsonrpc": "2.0", "id": 1, "result": {}}}\n')
    out = tmp_path / "out.jsonl"
    for args in (["mcp", "import", str(tape), str(out)],
                 ["cassette", "import", str(tape), "-o", str(out)],
                 ["mcp", "replay", str(tape)]):
        done = cli(*args, stdin=INIT + "\n")
        assert done.returncode == 2, (args, done.stderr[-1500:])
        lines = [x for x in done.stderr.strip().splitlines() if not x.startswith("note:")]
        assert len(lines) == 1 and "tape.jsonl: line 1" in lines[0], done.stderr
    assert not out.exists()
