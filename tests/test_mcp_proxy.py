"""realprobe in front of real MCP servers (mcp-server-time, mcp-server-git, a hostile one,
server-everything where node has it): relay, seeded faults, session cassettes, probe rows."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run
from mcp import Client, MCPError, StdioServerParameters

from realprobe import load_cassette
from realprobe.cassettes.mcp_session import session_calls
from realprobe.mcp.proxy import Proxy, ProxyOptions

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TIME = shutil.which("mcp-server-time") or str(BIN / "mcp-server-time")
GIT = shutil.which("mcp-server-git") or str(BIN / "mcp-server-git")
HOSTILE = [sys.executable, str(ROOT / "tests" / "mcp_hostile_server.py")]
CONVERT = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
ENV = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")}

pytestmark = pytest.mark.skipif(not Path(TIME).exists(), reason="mcp-server-time not installed")


def realprobe(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "realprobe.cli", *args],
                                 env=ENV)


def proxy(*args: str, server: list[str] | None = None) -> StdioServerParameters:
    return realprobe("mcp", "proxy", *args, "--", *(server or [TIME]))


def dumped(r: Any) -> dict[str, Any]:
    out = r.model_dump(by_alias=True, exclude_none=True, mode="json")
    out.pop("_meta", None)
    return out


async def session(params: StdioServerParameters, calls: int = 1, read_timeout: float = 60.0,
                  tool: str = "convert_time", args: dict[str, Any] | None = None) -> list[Any]:
    """tools/list, then `calls` calls: each an answer, or `MCPError(code)`."""
    out: list[Any] = []
    async with Client(params, read_timeout_seconds=read_timeout) as c:
        out.append(dumped(await c.list_tools()))
        for _ in range(calls):
            try:
                out.append(dumped(await c.call_tool(tool, args if args is not None else CONVERT)))
            except MCPError as exc:
                out.append(f"MCPError {exc.error.code}")
    return out


@pytest.fixture(scope="module")
def direct() -> list[Any]:
    """tools/list and two calls of `session` straight to mcp-server-time, asked once for the
    module's comparisons with the proxy (the server answers the same every time)."""
    import asyncio

    return asyncio.run(session(StdioServerParameters(command=TIME), calls=2))


def rows(db: Path, sql: str = "SELECT * FROM probes ORDER BY id") -> list[dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql)]
    finally:
        con.close()


def fault_profile(tmp_path: Path, errors: dict[str, float], success: float = 0.5,
                  **extra: Any) -> Path:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"format": "realprobe-profile/1", "name": "test", "default": {
        "success_rate": success, "errors": errors, "latency_ms": {"p50": 5}}, **extra}))
    return path


async def test_a_calm_proxy_shows_the_same_tools_and_answers_as_the_server(
    tmp_path: Path, direct: list[Any]
) -> None:
    db = tmp_path / "p.db"
    through = await session(proxy("--profile", "calm", "--db", str(db)), calls=2)
    assert through == direct
    stored = rows(db)
    assert [(r["tool"], r["api"], r["outcome"], r["source"]) for r in stored] == [
        ("convert_time", "mcp-time", "ok", "mcp")] * 2


async def test_faults_are_seeded_labelled_and_replay_with_the_server_gone(tmp_path: Path) -> None:
    profile = fault_profile(tmp_path, {"SERVER_ERROR": 0.5, "RATE_LIMIT_ERROR": 0.5})
    runs = []
    for n in range(2):
        args = ["--profile", str(profile), "--seed", "7", "--db", str(tmp_path / f"{n}.db"),
                "--record", str(tmp_path / f"{n}.jsonl")]
        runs.append(await session(proxy(*args), calls=16))
    assert runs[0] == runs[1]  # the same calls fail, the same way
    failed = [r for r in runs[0][1:] if r["isError"]]
    assert 3 <= len(failed) <= 13, runs[0]
    assert all(f["content"][0]["text"].split(":")[0] in ("SERVER_ERROR", "RATE_LIMIT_ERROR")
               for f in failed)
    stored = rows(tmp_path / "0.db")
    assert [r["outcome"] == "error" for r in stored] == [r["isError"] for r in runs[0][1:]]
    # injected failures are simulate; the server's own answers in the session are live
    assert {r["target_kind"] for r in stored if r["outcome"] == "error"} == {"simulate"}
    assert {r["target_kind"] for r in stored if r["outcome"] == "ok"} <= {"live", "simulate"}
    assert all(r["detail"].startswith("injected explicit-transient") for r in stored
               if r["outcome"] == "error")

    recorded = load_cassette(tmp_path / "0.jsonl")
    meta, records = recorded.meta, recorded.records or []
    assert meta["server"] == "mcp-server-time" and meta["scrubbed"]
    assert sum("injected" in r for r in records) == len(failed)
    replayed = await session(realprobe("mcp", "replay", str(tmp_path / "0.jsonl")), calls=16)
    assert replayed == runs[0]


async def test_a_replay_with_faults_of_its_own_drops_the_recorded_ones(tmp_path: Path) -> None:
    profile = fault_profile(tmp_path, {"SERVER_ERROR": 1.0})
    cassette = tmp_path / "faulty.jsonl"
    recorded = await session(proxy("--profile", str(profile), "--seed", "7", "--record",
                                   str(cassette)), calls=12)
    server = [r for r in recorded[1:] if not r["isError"]]
    assert 0 < len(server) < 12
    # recorded injections on top of the replay's own would double its failure share: at rate
    # 0 the replay answers with the server's answers only, in their order
    clean = await session(realprobe("mcp", "replay", str(cassette), "--fault-rate", "0"),
                          calls=len(server))
    assert clean[1:] == server
    half = await session(realprobe("mcp", "replay", str(cassette), "--profile", str(profile),
                                   "--fault-rate", "0.5", "--seed", "3", "--on-exhausted",
                                   "cycle"), calls=12)
    from realprobe import FaultModel, load_profile

    model = FaultModel(load_profile(profile).scaled(0.5), 3)
    assert [r["isError"] for r in half[1:]] == [not model.draw("convert_time").ok
                                                for _ in range(12)]


async def test_replay_runs_out_as_http_cassettes_do(tmp_path: Path) -> None:
    cassette = tmp_path / "one.jsonl"
    recorded = await session(proxy("--record", str(cassette)), calls=1)
    again = await session(realprobe("mcp", "replay", str(cassette), "--on-exhausted",
                                    "repeat-last"), calls=3)
    assert again == [*recorded, recorded[1], recorded[1]]
    missed = await session(realprobe("mcp", "replay", str(cassette)), calls=2)
    assert missed[2] == "MCPError -32602"


async def test_a_hang_is_held_until_the_client_gives_up(tmp_path: Path) -> None:
    profile = fault_profile(tmp_path, {"TIMEOUT": 1.0}, success=0.0)
    db = tmp_path / "h.db"
    out = await session(proxy("--profile", str(profile), "--db", str(db)), calls=2,
                        read_timeout=0.5)
    assert out[1:] == ["MCPError -32001", "MCPError -32001"]  # the client's own timeout
    stored = rows(db)
    assert [(r["error_code"], r["detail"].split(" (")[0]) for r in stored] == [
        ("TIMEOUT", "injected explicit-transient TIMEOUT")] * 2


async def test_an_implicit_fault_rewrites_the_structured_result(
    tmp_path: Path, direct: list[Any]
) -> None:
    profile = fault_profile(tmp_path, {}, success=1.0, implicit={"*": {"rates": {"wrong": 1.0}}})
    db = tmp_path / "i.db"
    out = await session(proxy("--profile", str(profile), "--db", str(db)), calls=1)
    assert not out[1]["isError"]
    assert out[1]["structuredContent"] != direct[1]["structuredContent"]
    assert json.loads(out[1]["content"][0]["text"]) == out[1]["structuredContent"]
    (row,) = rows(db)
    assert row["outcome"] == "ok" and row["implicit"] == "wrong"
    assert row["detail"].startswith("injected implicit-transient wrong")


async def test_a_hostile_server_gets_error_rows_and_never_a_hung_proxy(tmp_path: Path) -> None:
    db, cassette = tmp_path / "x.db", tmp_path / "x.jsonl"
    args = ["--db", str(db), "--record", str(cassette), "--max-message-bytes", "100000"]
    results: list[Any] = []
    async with Client(proxy(*args, server=HOSTILE), read_timeout_seconds=1.0) as c:
        for tool in ("garbage", "huge", "silent", "echo", "die"):
            try:
                r = await c.call_tool(tool, {"text": "hi"} if tool == "echo" else {})
                results.append((tool, r.is_error, r.content[0].text[:20]))  # type: ignore[union-attr]
            except MCPError as exc:
                results.append((tool, "MCPError", exc.error.code))
    assert results == [
        ("garbage", False, "after garbage"),
        ("huge", "MCPError", -32603),
        ("silent", "MCPError", -32001),
        ("echo", False, "hi"),
        ("die", "MCPError", -32000),
    ]
    stored = {r["tool"]: (r["outcome"], r["error_code"]) for r in rows(db)}
    assert stored == {"garbage": ("ok", None), "huge": ("error", "INVALID_RESPONSE"),
                      "silent": ("error", "TIMEOUT"), "echo": ("ok", None),
                      "die": ("error", "NETWORK_ERROR")}
    records = load_cassette(cassette).records or []
    assert any(r.get("garbage") == "this is not JSON-RPC" for r in records)
    assert any(r.get("event") == "too_long" for r in records)
    assert records[-1].get("event") == "exit" or any(r.get("event") == "exit" for r in records)


def test_the_dead_server_is_a_clear_error_and_the_cassette_survives_a_kill(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "k.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "mcp", "proxy", "--record", str(cassette), "--",
         *HOSTILE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, **ENV},
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(msg: dict[str, Any]) -> None:
        proc.stdin.write((json.dumps(msg) + "\n").encode())  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    assert json.loads(proc.stdout.readline())["id"] == 1
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": {"name": "echo", "arguments": {"text": "kept"}}})
    assert json.loads(proc.stdout.readline())["id"] == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    records = load_cassette(cassette).records or []  # every relayed message is on file
    assert [r["msg"].get("id") for r in records if "msg" in r] == [1, 1, None, 2, 2]

    dead = subprocess.Popen(  # the client stays: the server's exit ends the session
        [sys.executable, "-m", "realprobe.cli", "mcp", "proxy", "--", sys.executable, "-c",
         "import sys; sys.exit(4)"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env={**os.environ, **ENV},
    )
    dead.wait(timeout=60)
    assert dead.stderr is not None and dead.stdin is not None
    err = dead.stderr.read()
    dead.stdin.close()
    assert dead.returncode == 3, err
    assert b"error: the MCP server exited with code 4" in err


async def test_probing_a_server_feeds_stats(tmp_path: Path) -> None:
    from realprobe import probe_mcp, stats

    calls = tmp_path / "calls.toml"
    calls.write_text('get_current_time = [{timezone = "Europe/Paris"}, {timezone = "No/Where"}]\n'
                     'convert_time = {source_timezone = "UTC", time = "09:30", '
                     'target_timezone = "Asia/Tokyo"}\n')
    db = tmp_path / "probe.db"
    summary = await _in_thread(probe_mcp, calls, mcp_server=TIME, rounds=4, db=db)
    assert (summary.n_calls, summary.n_ok) == (8, 6)
    stored = rows(db)
    assert {(r["api"], r["source"], r["target_kind"]) for r in stored} == {
        ("mcp-time", "probe", "live")}
    by_tool = {s.tool: s.success for s in stats(db=db).tools}
    assert (by_tool["get_current_time"].n, by_tool["get_current_time"].successes) == (4, 2)
    assert (by_tool["convert_time"].n, by_tool["convert_time"].successes) == (4, 4)


async def test_git_server_probed_on_a_throwaway_repository(tmp_path: Path) -> None:
    from realprobe import probe_mcp

    if not Path(GIT).exists():
        pytest.skip("mcp-server-git not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    for cmd in (["init", "-q"], ["-c", "user.email=a@b", "-c", "user.name=t", "commit", "-q",
                                 "--allow-empty", "-m", "first"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True)
    db = tmp_path / "git.db"
    summary = await _in_thread(
        probe_mcp, {"git_status": {"repo_path": str(repo)},
                    "git_log": {"repo_path": str(repo), "max_count": 1}},
        mcp_server=f"{GIT} --repository {repo}", rounds=2, db=db)
    assert summary.n_ok == 4, summary
    assert {r["api"] for r in rows(db)} == {"mcp-git"}


async def test_server_everything_through_the_proxy() -> None:
    exe = shutil.which("mcp-server-everything")
    if exe is None:
        pytest.skip("node's @modelcontextprotocol/server-everything is not installed "
                    "(npm install -g @modelcontextprotocol/server-everything)")
    direct = await session(StdioServerParameters(command=exe, args=["stdio"]), calls=1,
                           tool="echo", args={"message": "hello"})
    through = await session(proxy(server=[exe, "stdio"]), calls=1, tool="echo",
                            args={"message": "hello"})
    assert through == direct and direct[1]["content"][0]["text"].endswith("hello")


async def test_another_recorders_transcript_imports_and_replays(tmp_path: Path) -> None:
    recorded = tmp_path / "rec.jsonl"
    original = await session(proxy("--record", str(recorded)), calls=1)
    records = load_cassette(recorded).records or []
    tape = tmp_path / "tape.jsonl"
    lines = [json.dumps({"v": 1, "type": "meta", "label": "time", "command": [TIME]})]
    lines += [json.dumps({"t": f"2026-05-12T23:00:{r['t']:06.3f}Z",
                          "dir": "in" if r["dir"] == "c2s" else "out", "raw": r["msg"]})
              for r in records if "msg" in r]
    tape.write_text("\n".join(lines) + "\n")
    out = tmp_path / "imported.jsonl"
    res = await _in_thread(run, ["mcp", "import", str(tape), str(out)])
    assert res.returncode == 0, res.stderr
    assert await session(realprobe("mcp", "replay", str(out)), calls=1) == original


async def _in_thread(fn: Any, *args: Any, **kw: Any) -> Any:
    import asyncio

    return await asyncio.to_thread(fn, *args, **kw)


async def test_an_agent_is_scored_on_its_own_server_under_faults(tmp_path: Path) -> None:
    from realprobe import evaluate
    from realprobe.mcp.evaluation import McpToolbox

    async def agent(prompt: str, box: McpToolbox) -> str:
        assert {t["name"] for t in box.tools} == {"get_current_time", "convert_time"}
        for _ in range(4):  # retries until the fault passes
            got = await box.call("convert_time", CONVERT)
            if got.ok:
                return f"It is {got.data['target']['datetime'][11:16]} in Tokyo."
        return "I could not find out."

    def says_21(answer: str, calls: list[Any]) -> bool:
        return "21:00" in answer

    db = tmp_path / "eval.db"
    tasks = [{"id": "tokyo", "prompt": "Noon UTC in Tokyo?", "check": says_21},
             {"id": "tokyo-json", "prompt": "Noon UTC in Tokyo?",
              "expect": {"answer_contains": ["21:00"], "calls_include": ["convert_time"],
                         "calls_at_most": 1}}]
    runs = await _in_thread(evaluate, agent, tasks, mcp_server=TIME, fault_rate=0.5, seed=2,
                            repeat=2, db=db)
    assert len(runs) == 4
    for r in runs:
        failed_calls = [c for c in r.calls if not c.ok]
        assert all(c.fault and c.fault["origin"] == "injected" for c in failed_calls), r
        if r.task == "tokyo":
            assert r.success == any(c.ok for c in r.calls)
        else:  # the expectation allows one call: a run that needed a retry fails it
            assert r.success == (len(r.calls) == 1 and r.calls[0].ok), r
    stored = rows(db, "SELECT task, outcome, tool_faults FROM task_runs ORDER BY started_at")
    assert sorted((s["task"], s["outcome"]) for s in stored) == sorted(
        (r.task, "full" if r.success else "failure") for r in runs)
    steps = rows(db, "SELECT ok, fault_origin FROM task_steps")
    assert {(s["ok"], s["fault_origin"]) for s in steps} <= {(1, None), (0, "injected")}


async def test_the_workflow_agent_on_git_over_a_throwaway_repository(tmp_path: Path) -> None:
    from realprobe import evaluate

    if not Path(GIT).exists():
        pytest.skip("mcp-server-git not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=t", "commit", "-q",
                    "--allow-empty", "-m", "the first commit"], cwd=repo, check=True)
    task = {"id": "last-commit", "prompt": "What is the last commit message?",
            "expect": {"answer_contains": ["the first commit"], "calls_include": ["git_log"]},
            "workflow": [{"tool": "git_log", "args": {"repo_path": str(repo), "max_count": 1}}]}
    (run,) = await _in_thread(evaluate, "workflow", [task], mcp_server=[GIT, "--repository",
                                                                         str(repo)])
    assert run.success, run


async def test_over_http_and_in_front_of_an_http_server(direct: list[Any]) -> None:
    """`--transport http` serves one streamable-HTTP session; a stdio proxy with
    `--upstream URL` relays to it: the client sees the server's tools and answers."""
    import re

    served = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "mcp", "proxy", "--transport", "http", "--port",
         "0", "--profile", "calm", "--", TIME], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, env={**os.environ, **ENV})
    try:
        assert served.stderr is not None
        line = served.stderr.readline()
        found = re.search(r"on (http://127\.0\.0\.1:\d+/mcp)", line)
        assert found, line
        through = await session(realprobe("mcp", "proxy", "--upstream", found.group(1)), calls=1)
        assert through == direct[:2]
    finally:
        served.send_signal(signal.SIGINT)
        assert served.wait(timeout=30) == 130


class QueueWire:
    """One side of the proxy in process: lines in through `incoming`, out into `sent`."""

    def __init__(self) -> None:
        import asyncio

        self.incoming: asyncio.Queue[str | None] = asyncio.Queue()
        self.sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def recv(self) -> str | None:
        return await self.incoming.get()

    async def send(self, line: str) -> None:
        await self.sent.put(json.loads(line))


async def test_an_id_used_again_after_its_answer_is_a_new_request() -> None:
    import asyncio

    client, server = QueueWire(), QueueWire()
    proxy = Proxy(ProxyOptions(), server_hint="fake")
    task = asyncio.ensure_future(proxy.run(client, server))
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}
    await client.incoming.put(json.dumps(call))
    assert (await server.sent.get())["method"] == "tools/call"
    await server.incoming.put(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}))
    assert (await client.sent.get())["id"] == 1
    await client.incoming.put(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    assert (await server.sent.get())["method"] == "tools/list"
    await server.incoming.put(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}))
    assert (await client.sent.get())["result"] == {"tools": []}
    await client.incoming.put(None)
    summary = await task
    assert (summary.calls, summary.ok) == (1, 1)


def test_a_schedule_probes_a_server_round_after_round(tmp_path: Path) -> None:
    calls, db = tmp_path / "calls.json", tmp_path / "s.db"
    calls.write_text(json.dumps({"convert_time": CONVERT}))
    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "schedule", "--every", "0.1s", "--max-runs", "2",
         "--mcp-server", TIME, "--mcp-calls", str(calls), "--db", str(db)],
        capture_output=True, text=True, timeout=120, env={**os.environ, **ENV})
    assert res.returncode == 0, res.stderr
    runs = rows(db, "SELECT schedule_id, status FROM probe_runs")
    assert len(runs) == 2 and len({r["schedule_id"] for r in runs}) == 1
    assert {r["status"] for r in runs} == {"done"}
    assert len(rows(db)) == 2


async def test_a_server_initiated_request_is_relayed_recorded_and_replayed(
    tmp_path: Path,
) -> None:
    """server-everything's sampling tool asks the client for a completion mid-call."""
    from mcp.types import CreateMessageResult, TextContent

    exe = shutil.which("mcp-server-everything")
    if exe is None:
        pytest.skip("node's @modelcontextprotocol/server-everything is not installed")
    cassette = tmp_path / "sampling.jsonl"

    async def sampled(params: StdioServerParameters) -> tuple[list[str], str]:
        asked: list[str] = []

        async def sampling(ctx: Any, p: Any) -> CreateMessageResult:
            asked.append(p.messages[0].content.text)
            return CreateMessageResult(role="assistant", model="fake",
                                       content=TextContent(type="text", text="sampled!"))

        async with Client(params, mode="legacy", sampling_callback=sampling,
                          read_timeout_seconds=30) as c:
            tool = next(t.name for t in (await c.list_tools()).tools
                        if "sampl" in t.name.lower())
            r = await c.call_tool(tool, {"prompt": "hello", "maxTokens": 10})
        return asked, r.content[0].text  # type: ignore[union-attr]

    live = await sampled(proxy("--record", str(cassette), server=[exe, "stdio"]))
    assert live[0] and "hello" in live[0][0] and "sampled!" in live[1]
    assert await sampled(realprobe("mcp", "replay", str(cassette))) == live


async def test_a_request_the_server_never_answers_is_a_clear_error() -> None:
    async with Client(proxy("--timeout", "1", server=[*HOSTILE, "--mute"]),
                      read_timeout_seconds=120) as c:
        with pytest.raises(MCPError) as caught:  # tools/list: the proxy's deadline
            await c.list_tools()
    assert caught.value.error.code == -32001
    assert "no answer from the MCP server within 1 s" in caught.value.error.message


async def test_a_recorded_session_keeps_no_credential_and_everything_else(
    tmp_path: Path,
) -> None:
    import asyncio

    from realprobe.secrets import PLACEHOLDER

    cassette = tmp_path / "s.jsonl"
    client, server = QueueWire(), QueueWire()
    proxy = Proxy(ProxyOptions(record=cassette), server_hint="fake")
    task = asyncio.ensure_future(proxy.run(client, server))
    args = {"api_key": "k-7f3e9a1c2b4d", "city": "Paris", "note": "token=abc123def456ghi"}
    await client.incoming.put(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                          "params": {"name": "weather", "arguments": args}}))
    assert (await server.sent.get())["params"]["arguments"] == args  # relayed as it came
    await server.incoming.put(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": "sunny in Paris"}]}}))
    await client.sent.get()
    await client.incoming.put(None)
    await task
    records = load_cassette(cassette).records or []
    sent = records[0]["msg"]["params"]["arguments"]
    assert sent["api_key"] == PLACEHOLDER and sent["city"] == "Paris"
    assert "abc123def456ghi" not in json.dumps(records)
    assert records[1]["msg"]["result"]["content"][0]["text"] == "sunny in Paris"


def test_each_task_and_repeat_meets_faults_of_its_own_and_every_agent_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from realprobe.mcp import evaluation

    seeds: list[tuple[str, str]] = []

    async def run_task(agent: Any, task: Any, params: Any, timeout_s: float) -> Any:
        seeds.append((task.id, params.args[params.args.index("--seed") + 1]))
        return "", evaluation.McpToolbox(None, [])

    monkeypatch.setattr(evaluation, "run_task", run_task)
    tasks = [{"id": t, "prompt": "p", "expect": {"answer_contains": [""]}} for t in "ab"]
    for name in ("one", "other"):
        asyncio.run(evaluation.evaluate_mcp("workflow", tasks, mcp_server=TIME, fault_rate=0.5,
                                            seed=3, repeat=2, name=name))
    first, second = seeds[:4], seeds[4:]
    assert first == second  # the agent does not move the faults
    assert len({s for _, s in first}) == 4, first  # two tasks calling one tool differ


async def test_the_proxy_fails_the_share_asked_counting_hangs_and_results(tmp_path: Path) -> None:
    import asyncio

    from realprobe import FaultModel
    from realprobe.probes.stats import wilson
    from realprobe.simulator.profile import builtin_profile

    async def server(wire: QueueWire) -> None:
        while True:
            msg = await wire.sent.get()
            await wire.incoming.put(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
                "content": [{"type": "text", "text": "ok"}]}}))

    for rate in (0.1, 0.3, 0.5, 0.9):
        client, upstream = QueueWire(), QueueWire()
        proxy = Proxy(ProxyOptions(fault_rate=rate, seed=7, timeout_s=0.01), server_hint="t")
        running = asyncio.ensure_future(proxy.run(client, upstream))
        answering = asyncio.ensure_future(server(upstream))
        failed = []
        for i in range(400):
            await client.incoming.put(json.dumps({"jsonrpc": "2.0", "id": i, "method":
                                                  "tools/call", "params": {"name": "t"}}))
            answer = await client.sent.get()
            assert answer["id"] == i
            failed.append("error" in answer or bool(answer["result"].get("isError")))
        await client.incoming.put(None)
        await running
        answering.cancel()
        model = FaultModel(builtin_profile("calm").scaled(rate), 7)
        assert failed == [not model.draw("t").ok for _ in range(400)]  # the draws, no more
        lo, hi = wilson(sum(failed), 400)
        assert lo <= rate <= hi, (rate, sum(failed))


async def test_a_hang_the_client_gave_up_on_is_marked_for_a_replay_with_faults(
    tmp_path: Path,
) -> None:
    import asyncio

    from realprobe import FaultModel, load_profile

    profile = fault_profile(tmp_path, {"TIMEOUT": 1.0})
    model = FaultModel(load_profile(profile), 7)
    hangs = [not model.draw("t").ok for _ in range(10)]
    assert 0 < sum(hangs) < 10
    cassette = tmp_path / "h.jsonl"
    client, server = QueueWire(), QueueWire()
    proxy = Proxy(ProxyOptions(profile=str(profile), seed=7, record=cassette),
                  server_hint="fake")
    task = asyncio.ensure_future(proxy.run(client, server))
    for i, hang in enumerate(hangs):
        await client.incoming.put(json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                              "params": {"name": "t"}}))
        if hang:  # held by the proxy: the client gives up on it
            await client.incoming.put(json.dumps({"jsonrpc": "2.0", "method":
                                                  "notifications/cancelled",
                                                  "params": {"requestId": i}}))
            continue
        assert (await server.sent.get())["id"] == i
        await server.incoming.put(json.dumps({"jsonrpc": "2.0", "id": i, "result": {
            "content": [{"type": "text", "text": f"answer {i}"}]}}))
        assert (await client.sent.get())["id"] == i
    await client.incoming.put(None)
    await task
    records = load_cassette(cassette).records or []
    assert len(session_calls(records)[0]) == 10  # replayed as recorded: the hangs too
    kept = session_calls(records, server_only=True)[0]
    assert [json.loads(c.body or b"{}")["result"]["content"][0]["text"] for c in kept] == [
        f"answer {i}" for i, hang in enumerate(hangs) if not hang]
