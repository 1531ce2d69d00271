"""`realprobe cassette export` writes every cassette in another tool's format: an HTTP
cassette as realprobe, Ruby VCR or HAR, an MCP session as mcp-cassette's or mcp-recorder's
JSON; what it writes imports back to the same interactions. `mcp export` is its old spelling.

The HTTP cassette is a real Ruby VCR recording of PokeAPI (tests/data/realworld_cassettes,
sources in its SOURCES.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
TIME = shutil.which("mcp-server-time") or str(Path(sys.executable).parent / "mcp-server-time")
POKEAPI = ROOT / "tests/data/realworld_cassettes/pokeapi__rdavid1099-poke-api-v2.yaml"


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "realprobe.cli", *args], input=stdin,
                          capture_output=True, text=True, env=ENV, timeout=120)


def rows(path: Path) -> list[tuple[str, str, Any]]:
    done = cli("cassette", "inspect", str(path), "--json")
    assert done.returncode == 0, done.stderr
    return [(r["method"], r["url"], r["status"]) for r in json.loads(done.stdout)["interactions"]]


@pytest.mark.parametrize(("fmt", "name"), [("har", "out.har"), ("ruby-vcr", "out.yml"),
                                           ("realprobe", "out.json")])
def test_an_http_cassette_exports_and_reads_back_the_same(tmp_path: Path, fmt: str,
                                                          name: str) -> None:
    out = tmp_path / name
    done = cli("cassette", "export", str(POKEAPI), "-o", str(out), "--format", fmt, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    original = rows(POKEAPI)
    assert report == {"file": str(out), "format": fmt, "items": len(original)}
    assert original and rows(out) == original
    if fmt == "har":
        assert json.loads(out.read_text())["log"]["version"] == "1.2"
    if fmt == "ruby-vcr":
        assert out.read_text().startswith("---\nhttp_interactions:")


def test_the_http_format_follows_the_output_suffix(tmp_path: Path) -> None:
    out = tmp_path / "from-vcr.har"
    done = cli("cassette", "export", str(POKEAPI), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert f"-> {out} (har)" in done.stdout
    assert "entries" in json.loads(out.read_text())["log"]


def test_a_format_of_the_other_kind_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "never.json"
    done = cli("cassette", "export", str(POKEAPI), "-o", str(out), "--format", "mcp-recorder")
    assert done.returncode == 2
    assert "is an HTTP cassette; choose one of realprobe, ruby-vcr, har" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()
    missing = cli("cassette", "export", str(tmp_path / "none.yaml"), "-o", str(out))
    assert missing.returncode == 2 and not out.exists()


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session recorded through the proxy in front of mcp-server-time."""
    if not Path(TIME).exists():
        pytest.skip("mcp-server-time not installed")
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    lines = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}]
    path = tmp_path_factory.mktemp("s") / "time.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "realprobe.cli", "mcp", "proxy", "--record",
                             str(path), "--", TIME], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdin is not None and proc.stdout is not None
    for msg in lines:  # each request's answer awaited before the next line
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()
        want = f'"id":{msg["id"]}' if "id" in msg else None
        while want is not None and want not in proc.stdout.readline().replace(" ", ""):
            pass
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    return path


@pytest.mark.parametrize("fmt", ["mcp-cassette", "mcp-recorder"])
def test_an_mcp_session_exports_and_imports_back(session: Path, tmp_path: Path,
                                                 fmt: str) -> None:
    theirs, back = tmp_path / f"{fmt}.json", tmp_path / "back.jsonl"
    done = cli("cassette", "export", str(session), "-o", str(theirs), "--format", fmt)
    assert done.returncode == 0, done.stderr
    assert f"-> {theirs} ({fmt})" in done.stdout
    doc = json.loads(theirs.read_text())
    assert (doc["format_version"] == 3) if fmt == "mcp-cassette" else (doc["version"] == "1.0")
    assert cli("cassette", "import", str(theirs), "-o", str(back)).returncode == 0
    assert rows(back) == rows(session) == [
        ("MCP", "mcp://session/initialize", 200), ("MCP", "mcp://session/tools/list", 200)]


def test_mcp_export_is_the_old_spelling(session: Path, tmp_path: Path) -> None:
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    assert cli("cassette", "export", str(session), "-o", str(new)).returncode == 0
    done = cli("mcp", "export", str(session), "-o", str(old))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("\n") == 1 and "use `cassette export" in done.stderr
    assert old.read_bytes() == new.read_bytes()
    assert "export" not in cli("mcp", "--help").stdout.split("Commands")[-1]
    http = cli("mcp", "export", str(POKEAPI), "-o", str(old))
    assert http.returncode == 2 and "is an HTTP cassette" in http.stderr
