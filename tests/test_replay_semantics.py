"""Replay semantics on small recordings made in process (httpx.MockTransport as the origin)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from realprobe import (
    Catalog,
    ClientConfig,
    ErrorCode,
    HttpClient,
    Mode,
    TransportOptions,
    VirtualClock,
    call_tool,
    load_cassette,
    make_client,
)
from realprobe.cassettes.recording import RecordingTransport, SyncRecordingTransport
from realprobe.cassettes.replayer import (
    CassetteExhausted,
    CassetteMiss,
    ReplayTransport,
    SyncReplayTransport,
)

URL = "https://api.example.test/counter"


def counting_origin() -> httpx.MockTransport:
    state = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        state["n"] += 1
        return httpx.Response(200, json={"n": state["n"], "path": request.url.path})

    return httpx.MockTransport(handler)


async def record(path: Path, origin: httpx.AsyncBaseTransport, urls: list[str]) -> None:
    async with httpx.AsyncClient(transport=RecordingTransport(origin, path)) as client:
        for url in urls:
            await client.get(url)


async def test_identical_requests_replay_in_recorded_order_then_the_policy_decides(
    tmp_path: Path, no_network: None
) -> None:
    path = tmp_path / "c.json"
    await record(path, counting_origin(), [URL, URL, URL])

    async def ns(policy: str, calls: int) -> list[int]:
        t = ReplayTransport.from_path(path, on_exhausted=policy)
        async with httpx.AsyncClient(transport=t) as client:
            return [(await client.get(URL)).json()["n"] for _ in range(calls)]

    assert await ns("error", 3) == [1, 2, 3]
    assert await ns("repeat-last", 5) == [1, 2, 3, 3, 3]
    assert await ns("cycle", 5) == [1, 2, 3, 1, 2]
    t = ReplayTransport.from_path(path)
    async with httpx.AsyncClient(transport=t) as client:
        for _ in range(3):
            await client.get(URL)
        with pytest.raises(CassetteExhausted, match=r"request #4 .* holds 3 recording"):
            await client.get(URL)


async def test_unmatched_request_names_method_url_cassette_and_closest(
    tmp_path: Path, no_network: None
) -> None:
    path = tmp_path / "c.json"
    await record(path, counting_origin(), [URL + "?page=1", "https://other.test/x"])
    t = ReplayTransport.from_path(path)
    async with httpx.AsyncClient(transport=t) as client:
        with pytest.raises(CassetteMiss) as info:
            await client.get(URL + "?page=2")
    msg = str(info.value)
    assert "GET https://api.example.test/counter?page=2" in msg
    assert str(path) in msg
    assert "closest recorded: GET https://api.example.test/counter?page=1" in msg


async def test_a_miss_through_call_tool_shows_its_message_and_is_not_retryable(
    catalog: Catalog, tmp_path: Path, no_network: None
) -> None:
    path = tmp_path / "empty.json"
    await record(path, counting_origin(), [])
    client = make_client(catalog, TransportOptions(mode=Mode.REPLAY, cassette=path))
    tool = next(iter(catalog))
    result = await call_tool(tool, dict(tool.examples[0]), client)
    await client.aclose()
    assert result.error is not None
    assert result.error.code is ErrorCode.OPERATION_FAILED and not result.error.retryable
    assert "no recording for GET" in result.error.message and str(path) in result.error.message


async def test_query_order_and_default_port_do_not_matter(tmp_path: Path, no_network: None) -> None:
    path = tmp_path / "c.json"
    await record(path, counting_origin(), ["https://api.example.test:443/q?b=2&a=1"])
    t = ReplayTransport.from_path(path)
    async with httpx.AsyncClient(transport=t) as client:
        assert (await client.get("https://API.example.test/q?a=1&b=2")).json()["n"] == 1


class _FailingBody(httpx.AsyncByteStream):
    def __init__(self, head: bytes) -> None:
        self.head = head

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.head
        raise httpx.ReadError("connection reset mid-body")


class _ScriptedOrigin(httpx.AsyncBaseTransport):
    """Answers from a script, advancing a virtual clock as a slow server would."""

    def __init__(self, clock: VirtualClock, script: list[object]) -> None:
        self.clock = clock
        self.script = list(script)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        step = self.script.pop(0)
        if isinstance(step, tuple):
            delay, outcome = step
            self.clock.advance(delay)
        else:
            outcome = step
        if isinstance(outcome, Exception):
            raise outcome
        assert isinstance(outcome, httpx.Response)
        return outcome


async def test_failures_replay_as_the_same_exception_at_the_same_point(
    tmp_path: Path, no_network: None
) -> None:
    clock = VirtualClock()
    path = tmp_path / "f.json"
    origin = _ScriptedOrigin(clock, [
        (0.05, httpx.ConnectError("connection refused")),
        (0.30, httpx.ReadTimeout("timed out")),
        (0.02, httpx.Response(
            200, headers={"Content-Length": "10"}, stream=_FailingBody(b"hello")
        )),
        (0.01, httpx.Response(200, text="fine")),
    ])
    rec = RecordingTransport(origin, path, clock=clock)
    seen: list[str] = []

    async def run(client: httpx.AsyncClient) -> None:
        for _ in range(4):
            try:
                async with client.stream("GET", URL) as r:
                    got = b""
                    async for chunk in r.aiter_bytes():
                        got += chunk
                    seen.append(f"{r.status_code}:{got.decode()}")
            except httpx.HTTPError as exc:
                seen.append(f"{type(exc).__name__}:{exc}")

    async with httpx.AsyncClient(transport=rec) as client:
        await run(client)
    live = list(seen)
    assert live == [
        "ConnectError:connection refused", "ReadTimeout:timed out",
        "ReadError:connection reset mid-body", "200:fine",
    ]
    data = json.loads(path.read_text())
    extras = data["realprobe"]["beyond_vcrpy"]
    assert [(e["error"]["type"], e["error"]["phase"]) for e in extras] == [
        ("ConnectError", "connect"), ("ReadTimeout", "read"), ("ReadError", "body"),
    ]
    assert extras[2]["error"]["bytes_before"] == 5
    assert [round(e["elapsed_ms"]) for e in extras] == [50, 300, 20]
    assert len(data["interactions"]) == 1  # only the complete response is vcrpy's

    seen.clear()
    async with httpx.AsyncClient(transport=ReplayTransport.from_path(path)) as client:
        await run(client)
    assert seen == live


async def test_virtual_latency_reproduces_recorded_time_and_tighter_timeouts_fire(
    tmp_path: Path, no_network: None
) -> None:
    clock = VirtualClock()
    path = tmp_path / "slow.json"
    origin = _ScriptedOrigin(clock, [(0.25, httpx.Response(200, json=[{"q": "x", "a": "y"}]))])
    cfg = ClientConfig(deadline_s=5.0, read_timeout_s=1.0)
    client = HttpClient(RecordingTransport(origin, path, clock=clock), clock=clock, config=cfg)
    live = await client.fetch("GET", URL)
    await client.aclose()
    assert live.elapsed_s == pytest.approx(0.25)

    async def replay(latency: str, config: ClientConfig) -> tuple[float, str]:
        vclock = VirtualClock()
        t = ReplayTransport.from_path(path, clock=vclock, latency=latency)
        c = HttpClient(t, clock=vclock, config=config)
        try:
            got = await c.fetch("GET", URL)
            return got.elapsed_s, "ok"
        except Exception as exc:
            return getattr(exc, "elapsed_s", -1.0), getattr(exc, "message", str(exc))
        finally:
            await c.aclose()

    assert await replay("virtual", cfg) == (live.elapsed_s, "ok")
    assert await replay("none", cfg) == (0.0, "ok")
    elapsed, msg = await replay("virtual", ClientConfig(deadline_s=5.0, read_timeout_s=0.1))
    assert elapsed == pytest.approx(0.1) and "ReadTimeout" in msg
    elapsed, msg = await replay("virtual", ClientConfig(deadline_s=0.2, read_timeout_s=1.0))
    assert elapsed == pytest.approx(0.2) and "0.2s deadline" in msg


async def test_scaled_latency_sleeps_for_real(tmp_path: Path, no_network: None) -> None:
    import time

    clock = VirtualClock()
    path = tmp_path / "s.json"
    await record_scripted(path, clock, [(0.4, httpx.Response(200, text="x"))])
    t = ReplayTransport.from_path(path, latency="scaled:0.1")
    async with httpx.AsyncClient(transport=t) as client:
        t0 = time.perf_counter()
        await client.get(URL)
        took = time.perf_counter() - t0
    assert 0.035 <= took < 0.5


async def record_scripted(path: Path, clock: VirtualClock, script: list[object]) -> None:
    rec = RecordingTransport(_ScriptedOrigin(clock, script), path, clock=clock)
    async with httpx.AsyncClient(transport=rec) as client:
        await client.get(URL)


async def test_post_bodies_are_part_of_the_match(tmp_path: Path, no_network: None) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"echo": json.loads(request.content)["prompt"]})

    path = tmp_path / "llm.json"
    rec = RecordingTransport(httpx.MockTransport(handler), path)
    llm = "https://llm.example.test/v1/chat/completions"
    async with httpx.AsyncClient(transport=rec) as client:
        for prompt in ("first", "second"):
            await client.post(llm, json={"prompt": prompt, "model": "m"})
    t = ReplayTransport.from_path(path)
    async with httpx.AsyncClient(transport=t) as client:  # the other order, keys reordered
        r2 = await client.post(llm, json={"model": "m", "prompt": "second"})
        r1 = await client.post(llm, json={"model": "m", "prompt": "first"})
    assert (r1.json()["echo"], r2.json()["echo"]) == ("first", "second")


async def test_written_once_atomically_when_the_client_closes(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "c.yaml"
    rec = RecordingTransport(counting_origin(), path)
    client = httpx.AsyncClient(transport=rec)
    await client.get(URL)
    assert not path.exists()  # nothing until the client is closed
    await client.aclose()
    assert path.exists()
    assert sorted(p.name for p in path.parent.iterdir()) == ["c.yaml"]  # no temp file left
    again = load_cassette(path)
    assert [c.status for c in again.calls] == [200]
    assert json.loads(again.calls[0].body) == {"n": 1, "path": "/counter"}


async def test_record_mode_keeps_non_catalogue_hosts_through_the_sandbox_router(
    catalog: Catalog, calm_sandbox: str, tmp_path: Path
) -> None:
    path = tmp_path / "mixed.json"
    client = make_client(catalog, TransportOptions(mode=Mode.RECORD, sandbox=calm_sandbox,
                                                   cassette=path))
    tool = next(iter(catalog))
    ok = await call_tool(tool, dict(tool.examples[0]), client)
    health = await client.fetch("GET", calm_sandbox + "/_health", allow_private=True)
    await client.aclose()
    cassette = load_cassette(path)
    uris = [c.uri for c in cassette.calls]
    assert any(u.startswith(calm_sandbox + "/_health") for u in uris)  # not a catalogue host
    assert any(u.startswith(tool.api.base_url) for u in uris)  # canonical, not the sandbox port
    assert cassette.meta["source"] == "realprobe sandbox"
    replay = make_client(catalog, TransportOptions(mode=Mode.REPLAY, cassette=path))
    again = await call_tool(tool, dict(tool.examples[0]), replay)
    health2 = await replay.fetch("GET", calm_sandbox + "/_health", allow_private=True)
    await replay.aclose()
    assert (again.ok, again.data) == (ok.ok, ok.data)
    assert health2.body == health.body


async def test_recording_the_simulator_replays_identically_on_virtual_clocks(
    catalog: Catalog, tmp_path: Path, no_network: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sim.json"

    async def run(opts: TransportOptions) -> list[tuple[object, ...]]:
        config = ClientConfig(deadline_s=2.0, read_timeout_s=1.0)
        client = make_client(catalog, opts, config=config)
        out: list[tuple[object, ...]] = []
        for tool in catalog:
            r = await call_tool(tool, dict(tool.examples[0]), client)
            out.append((tool.name, r.code, r.data, r.http_status, round(r.latency_ms, 3)))
        await client.aclose()
        return out

    live = await run(TransportOptions(mode=Mode.RECORD, profile="harsh", seed=4, cassette=path))
    assert load_cassette(path).meta["source"] == "realprobe simulator"
    assert len({r[1] for r in live}) > 3  # a mix of outcomes
    assert await run(TransportOptions(mode=Mode.REPLAY, cassette=path)) == live
    # the policy also comes from the environment (for commands without the options)
    monkeypatch.setenv("REALPROBE_REPLAY_LATENCY", "none")
    instant = await run(TransportOptions(mode=Mode.REPLAY, cassette=path))
    assert [r[:4] for r in instant] == [r[:4] for r in live]
    assert all(r[4] == 0.0 for r in instant)


class _SyncFailingBody(httpx.SyncByteStream):
    def __iter__(self) -> Iterator[bytes]:
        yield b"partial"
        raise httpx.RemoteProtocolError("peer closed connection without sending complete body")


def test_sync_clients_record_and_replay_failures_too(tmp_path: Path, no_network: None) -> None:
    script: list[object] = [
        httpx.ConnectTimeout("connect timed out"),
        httpx.Response(200, headers={"Content-Length": "99"}, stream=_SyncFailingBody()),
        httpx.Response(200, json={"ok": True}),
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        step = script.pop(0)
        if isinstance(step, Exception):
            raise step
        assert isinstance(step, httpx.Response)
        return step

    def run(transport: httpx.BaseTransport) -> list[str]:
        seen = []
        with httpx.Client(transport=transport) as client:
            for _ in range(3):
                try:
                    seen.append(client.get(URL).text)
                except httpx.HTTPError as exc:
                    seen.append(f"{type(exc).__name__}: {exc}")
        return seen

    path = tmp_path / "sync.json"
    live = run(SyncRecordingTransport(httpx.MockTransport(handler), path))
    assert live[0].startswith("ConnectTimeout") and live[1].startswith("RemoteProtocolError")
    assert run(SyncReplayTransport.from_path(path)) == live


FORCED = (
    "ok", "hang", "drip", "reset", "reset_mid_body", "truncated", "429_date", "503",
    "bad_json", "gzip_bomb", "oversized", "redirect_ok", "redirect_private",
)


async def test_every_forced_sandbox_fault_replays_to_the_same_result(
    catalog: Catalog, sandbox_factory: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    assert callable(sandbox_factory)
    base = sandbox_factory("calm")
    tool = catalog.get("catfact_fact")
    config = ClientConfig(deadline_s=0.5, read_timeout_s=0.3)
    recorded = {}
    for variant in FORCED:
        opts = TransportOptions(mode=Mode.RECORD, sandbox=f"{base}/_fault/{variant}",
                                cassette=tmp_path / f"{variant}.json")
        client = make_client(catalog, opts, config=config)
        recorded[variant] = await call_tool(tool, dict(tool.examples[0]), client)
        await client.aclose()
    assert {r.code for r in recorded.values()} >= {
        None, ErrorCode.TIMEOUT, ErrorCode.NETWORK_ERROR, ErrorCode.RATE_LIMIT_ERROR,
        ErrorCode.SERVER_ERROR, ErrorCode.INVALID_RESPONSE, ErrorCode.OPERATION_FAILED,
    }

    def guard(*a: object, **k: object) -> None:
        raise AssertionError("socket opened during replay")

    monkeypatch.setattr(socket.socket, "connect", guard)
    for variant, live in recorded.items():
        opts = TransportOptions(mode=Mode.REPLAY, cassette=tmp_path / f"{variant}.json")
        client = make_client(catalog, opts, config=config)
        again = await call_tool(tool, dict(tool.examples[0]), client)
        await client.aclose()
        assert again.latency_ms == pytest.approx(live.latency_ms, abs=1e-3), variant
        assert again.model_dump(exclude={"latency_ms"}) == live.model_dump(
            exclude={"latency_ms"}), variant
