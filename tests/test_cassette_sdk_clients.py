"""Every client a project has: the OpenAI SDK (which uses `httpx2`, its own copy of httpx)
recorded and replayed by `use_cassette`, streaming included, with the fake LLM server stopped
for the replay; LLM requests match on what changes the answer, and a miss names the closest
recording and the fields that differ."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import httpx2
import openai
import pytest
import requests

import realprobe
from realprobe import load_cassette
from realprobe.cassettes.core import CassetteMiss


class FakeLLM(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeLLM.seen.append(body)
        words = ["Hello", " from", " the", " fake"]
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i, w in enumerate(words):
                chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1,
                         "model": body["model"], "choices": [{"index": 0, "delta": {
                             "content": w}, "finish_reason": "stop" if i == 3 else None}]}
                self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
            return
        payload = json.dumps({
            "id": "c0", "object": "chat.completion", "created": 1, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "".join(words)}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")


@pytest.fixture
def fake_llm() -> Iterator[str]:
    FakeLLM.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeLLM)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield url
    server.shutdown()
    server.server_close()


def ask(base_url: str, **extra: Any) -> tuple[str, str]:
    client = openai.OpenAI(base_url=base_url, api_key="sk-fake-0123456789", max_retries=0)
    whole = client.chat.completions.create(
        model="m1", messages=[{"role": "user", "content": "hi"}], **extra)
    stream = client.chat.completions.create(
        model="m1", messages=[{"role": "user", "content": "hi"}], stream=True, **extra)
    parts = "".join(c.choices[0].delta.content or "" for c in stream)
    client.close()
    return str(whole.choices[0].message.content), parts


def test_the_openai_sdk_runs_on_httpx2() -> None:
    assert isinstance(openai.OpenAI(api_key="x")._client, httpx2.Client)


def test_openai_sdk_calls_record_and_replay_offline(fake_llm: str, tmp_path: Path) -> None:
    path = tmp_path / "llm.yaml"
    with realprobe.use_cassette(path, record_mode="once"):
        recorded = ask(fake_llm)
    assert recorded == ("Hello from the fake", "Hello from the fake")
    assert len(FakeLLM.seen) == 2
    cassette = load_cassette(path)
    assert [c.uri.endswith("/chat/completions") for c in cassette.calls] == [True, True]
    assert "sk-fake-0123456789" not in path.read_text()
    FakeLLM.seen.clear()
    # replay only: the server is still up, so a leak would show in `seen`
    with realprobe.use_cassette(path, record_mode="none"):
        replayed = ask(fake_llm, timeout=33.0, user="someone-else")  # answer-neutral fields
    assert replayed == recorded
    assert FakeLLM.seen == []


def test_a_replay_miss_names_the_closest_recording_and_the_fields(
    fake_llm: str, tmp_path: Path
) -> None:
    path = tmp_path / "llm.json"
    with realprobe.use_cassette(path, record_mode="once"):
        ask(fake_llm)
    FakeLLM.seen.clear()
    client = openai.OpenAI(base_url=fake_llm, api_key="sk-fake-0123456789", max_retries=0)
    with realprobe.use_cassette(path, record_mode="none"), pytest.raises(CassetteMiss) as miss:
        client.chat.completions.create(model="m2", messages=[{"role": "user", "content": "yo"}])
    text = str(miss.value)
    assert "closest recorded: POST" in text and "/chat/completions" in text
    assert "messages[0].content" in text and "model" in text
    assert FakeLLM.seen == []


def test_requests_and_httpx_share_the_cassette(fake_llm: str, tmp_path: Path) -> None:
    path = tmp_path / "mixed.json"
    body = {"model": "m1", "messages": [{"role": "user", "content": "hi"}]}
    with realprobe.use_cassette(path, record_mode="once"):
        a = requests.post(f"{fake_llm}/chat/completions", json=body, timeout=5).json()
        b = httpx.post(f"{fake_llm}/chat/completions", json=body).json()
    FakeLLM.seen.clear()
    with realprobe.use_cassette(path, record_mode="none"):
        assert requests.post(f"{fake_llm}/chat/completions", json=body, timeout=5).json() == a
        assert httpx.post(f"{fake_llm}/chat/completions", json=body).json() == b
    assert FakeLLM.seen == []


def test_a_recorded_llm_task_run_replays_under_another_call_timeout(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    import asyncio

    from realprobe import Mode, default_catalog
    from realprobe.tasks.agents import LlmSettings
    from realprobe.tasks.runner import RunConfig, run_batch
    from tests.llm_server import ScriptedLLM, text, tool_calls
    from tests.test_tasks_llm import FETCHES, TASK, grounded_post

    catalog = default_catalog()
    server = ScriptedLLM([
        tool_calls(*((name, {}) for name in FETCHES)),
        lambda body: tool_calls(("compose_post", {"text": grounded_post(body)})),
        text("TASK COMPLETE"),
    ])
    server.start()
    settings = LlmSettings(base_url=server.base_url, model="scripted-1", api_key="sk-x-123456")
    cassette = tmp_path / "run.json"
    rec = RunConfig(agent="openai", prompts=["optimal"], mode=Mode.RECORD,
                    sandbox=sandbox_factory("calm"), cassette=cassette, llm=settings)
    (recorded,) = asyncio.run(run_batch([TASK], rec, catalog))
    server.stop()
    for call_timeout in (2.0, 30.0):  # the recording used the task's own (10 s)
        rep = RunConfig(agent="openai", prompts=["optimal"], mode=Mode.REPLAY,
                        cassette=cassette, llm=settings, call_timeout_s=call_timeout)
        (replayed,) = asyncio.run(run_batch([TASK], rep, catalog))
        assert replayed.row["outcome"] == recorded.row["outcome"], call_timeout
        assert replayed.row["strict"] == recorded.row["strict"] == 1


async def test_mcp_sdk_calls_record_and_replay_offline(
    catalog: Any, calm_sandbox: str, tmp_path: Path
) -> None:
    import anyio
    from mcp import Client

    from tests.test_mcp_transports import first_text, http_server, no_arg_tools

    tool = no_arg_tools(catalog)[0]
    path = tmp_path / "mcp.yaml"

    async def session(url: str) -> tuple[list[str], str]:
        async with Client(url, read_timeout_seconds=30) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            return names, first_text(await client.call_tool(tool.name, {}))

    with anyio.fail_after(60):
        with http_server("--sandbox", calm_sandbox, "--tools", tool.name) as (url, _), \
                realprobe.use_cassette(path, record_mode="once"):
            recorded = await session(url)
        # the MCP server has stopped: the replay can only come from the cassette
        with realprobe.use_cassette(path, record_mode="none"):
            replayed = await session(url)
    assert replayed == recorded and recorded[0] == [tool.name]
    assert {c.uri for c in load_cassette(path).calls} == {url}
