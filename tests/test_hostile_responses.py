"""Every hostile case of the loopback server, through every way in: `call_tool_sync`,
`call_tool`, the `call` and `probe` commands, and the MCP server in process. Nothing a server
sends may crash a caller, stop a probe round, or hold a call past its deadline."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_runner import main
from mcp import Client

from realprobe import (
    BadResponse,
    Catalog,
    McpService,
    ServiceOptions,
    call_tool,
    call_tool_sync,
    make_client,
    make_sync_client,
)
from realprobe.adapters.bounded import ParseLimits, load_json, load_text

sys.path.insert(0, str(Path(__file__).parent))
from hostile_server import EXPECTED, HostileServer, hostile, tool_name

DEADLINE_S = 1.0
#: what a call may take past its deadline on a loaded machine
SLACK_S = 1.5


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HostileServer, Path]]:
    with hostile(tmp_path_factory.mktemp("hostile")) as pair:
        yield pair


@pytest.fixture(scope="module")
def cat(server: tuple[HostileServer, Path]) -> Catalog:
    return Catalog.load([server[1]])


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The installed entry point, in process: (exit code, stdout, stderr)."""
    old = sys.argv
    sys.argv = ["realprobe", *argv]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        sys.argv = old
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", list(EXPECTED))
def test_sync_call_never_raises_and_keeps_its_deadline(cat: Catalog, case: str) -> None:
    with make_sync_client(cat) as client:
        t0 = time.monotonic()
        result = call_tool_sync(cat.get(tool_name(case)), {}, client, timeout_s=DEADLINE_S)
        took = time.monotonic() - t0
    assert not result.ok and result.error is not None
    assert result.error.code.value == EXPECTED[case], result.error.message
    assert took < DEADLINE_S + SLACK_S, f"{case} took {took:.1f}s"


@pytest.mark.parametrize("case", list(EXPECTED))
async def test_async_call_never_raises_and_keeps_its_deadline(cat: Catalog, case: str) -> None:
    client = make_client(cat)
    try:
        t0 = time.monotonic()
        result = await call_tool(cat.get(tool_name(case)), {}, client, timeout_s=DEADLINE_S)
        took = time.monotonic() - t0
    finally:
        await client.aclose()
    assert not result.ok and result.error is not None
    assert result.error.code.value == EXPECTED[case], result.error.message
    assert took < DEADLINE_S + SLACK_S, f"{case} took {took:.1f}s"


def test_messages_say_what_limit_was_hit(cat: Catalog) -> None:
    with make_sync_client(cat) as client:

        def message(case: str) -> str:
            r = call_tool_sync(cat.get(tool_name(case)), {}, client, timeout_s=DEADLINE_S)
            assert r.error is not None
            return r.error.message

        assert "nested 200000 levels deep (limit 64)" in message("deep")
        assert "number of 100001 characters" in message("huge_int")
        assert "out of range" in message("huge_float")
        assert "NaN" in message("nan")
        assert "string of 400000 characters" in message("huge_string")
        assert "expected plain text" in message("json_object_as_text")


def test_sync_deadline_holds_on_a_reused_connection(cat: Catalog) -> None:
    """The second request on a kept-alive connection drips its headers: still cut off."""
    with make_sync_client(cat) as client:
        assert call_tool_sync(cat.get(tool_name("fine")), {}, client, timeout_s=5).ok
        t0 = time.monotonic()
        r = call_tool_sync(cat.get(tool_name("slow_headers")), {}, client, timeout_s=DEADLINE_S)
        took = time.monotonic() - t0
    assert r.error is not None and r.error.code.value == "TIMEOUT"
    assert r.error.phase == "headers" and r.error.reached is True
    assert took < DEADLINE_S + SLACK_S


def test_slow_tls_handshake_ends_at_the_deadline(
    server: tuple[HostileServer, Path], cat: Catalog
) -> None:
    """An https URL on a server that accepts and never speaks: the handshake stalls."""
    url = server[0].url.replace("http://", "https://") + "/silent"
    with make_sync_client(cat) as client:
        t0 = time.monotonic()
        with pytest.raises(Exception) as caught:
            client.fetch("GET", url, timeout_s=DEADLINE_S, allow_private=True)
        took = time.monotonic() - t0
    assert getattr(caught.value, "code", None) is not None
    assert caught.value.code.value == "TIMEOUT"  # type: ignore[attr-defined]
    assert caught.value.phase == "connect"  # type: ignore[attr-defined]
    assert took < DEADLINE_S + SLACK_S

    async def go() -> tuple[str, float]:
        client = make_client(cat)
        t0 = time.monotonic()
        try:
            await client.fetch("GET", url, timeout_s=DEADLINE_S, allow_private=True)
        except Exception as exc:
            return getattr(exc, "code").value, time.monotonic() - t0  # noqa: B009
        finally:
            await client.aclose()
        return "ok", 0.0

    code, took = asyncio.run(go())
    assert code == "TIMEOUT" and took < DEADLINE_S + SLACK_S


@pytest.mark.parametrize("case", ["deep", "huge_string", "json_as_text", "garbage", "slow_headers"])
def test_call_command_prints_one_line_and_exits_1(
    server: tuple[HostileServer, Path], case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        ["call", tool_name(case), "--catalog", str(server[1]), "--timeout", str(DEADLINE_S)],
        capsys,
    )
    assert code == 1, (out, err)
    assert "Traceback" not in out + err
    assert EXPECTED[case] in out


def test_call_command_json_carries_the_code(
    server: tuple[HostileServer, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(
        ["call", tool_name("deep"), "--catalog", str(server[1]), "--json"], capsys
    )
    assert code == 1
    assert json.loads(out)["error"]["code"] == "INVALID_RESPONSE"


def test_probe_round_completes_and_stores_every_row(
    server: tuple[HostileServer, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "p.db"
    tools = ",".join(tool_name(c) for c in EXPECTED)
    argv = ["probe", "--catalog", str(server[1]), "--tools", tools, "--rounds", "2"]
    argv += ["--timeout", str(DEADLINE_S), "--db", str(db), "--json"]
    _code, out, err = run_cli(argv, capsys)
    assert "Traceback" not in out + err
    summary = json.loads(out)
    assert summary["status"] == "done", summary
    assert summary["n_calls"] == 2 * len(EXPECTED)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT tool, error_code FROM probes").fetchall()
    assert len(rows) == 2 * len(EXPECTED)
    assert {tool: code for tool, code in rows} == {tool_name(c): e for c, e in EXPECTED.items()}


async def test_mcp_answers_every_case_with_a_tool_error_and_a_row(
    cat: Catalog, tmp_path: Path
) -> None:
    db = tmp_path / "mcp.db"
    service = McpService(cat, ServiceOptions(timeout_s=DEADLINE_S, db=str(db)))
    codes: dict[str, Any] = {}
    async with service, Client(service.server) as client:
        for case in EXPECTED:
            r = await client.call_tool(tool_name(case), {})
            assert r.is_error, case
            codes[case] = (r.meta or {}).get("realprobe/call", {}).get("code")
            assert r.content and EXPECTED[case] in r.content[0].text  # type: ignore[union-attr]
    assert codes == EXPECTED
    with sqlite3.connect(db) as conn:
        stored = dict(conn.execute("SELECT tool, error_code FROM probes").fetchall())
    assert stored == {tool_name(c): e for c, e in EXPECTED.items()}


# -- the limits themselves -----------------------------------------------------------------


def test_depth_ignores_brackets_inside_strings() -> None:
    for body in (b'{"a": "[[[[[[[[[[[[", "b": [1, [2]]}', b'["\\"[[[[", [[]]]'):
        assert load_json(body, ParseLimits(max_depth=3))
        with pytest.raises(BadResponse, match="nested more than 2 levels deep"):
            load_json(body, ParseLimits(max_depth=2))
    assert load_json(b'{"a": "' + b"[" * 1000 + b'"}') == {"a": "[" * 1000}


def test_limits_are_adjustable_and_exact() -> None:
    tight = ParseLimits(max_depth=2, max_number_chars=3, max_string_chars=5)
    assert load_json(b"[[1]]", tight) == [[1]]
    for body in (b"[[[1]]]", b"[1234]", b'["123456"]', b'{"123456": 1}'):
        with pytest.raises(BadResponse):
            load_json(body, tight)
    assert load_text(b"  hello ", tight) == "hello"
    with pytest.raises(BadResponse):
        load_text(b"hello!", tight)


def test_text_tools_keep_ordinary_sentences() -> None:
    assert load_text(b"42 is the answer [citation needed].") == (
        "42 is the answer [citation needed]."
    )
    assert load_text(b"[laughs] I am a fine quote") == "[laughs] I am a fine quote"
    for body in (b'["a", "b"]', b'{"fact": "x"}', b"[[[[[[", b'{"a"'):
        with pytest.raises(BadResponse):
            load_text(body)
