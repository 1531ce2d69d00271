"""One record/replay core under the sync and async transports: the twins agree on chunks,
latency policy and recording metadata."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from realprobe import Catalog, Mode, TransportOptions, load_cassette, make_client, make_sync_client
from realprobe.cassettes.recording import RecordingTransport, SyncRecordingTransport
from realprobe.cassettes.replayer import ReplayTransport, SyncReplayTransport

CHUNKS = [b"alpha-", b"beta-", b"gamma"]


class _Sync(httpx.SyncByteStream):
    def __iter__(self) -> Iterator[bytes]:
        yield from CHUNKS


class _Async(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        for c in CHUNKS:
            yield c


def test_sync_and_async_recordings_are_the_same(tmp_path: Path) -> None:
    def sync_app(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_Sync())

    def async_app(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_Async())

    sync_path, async_path = tmp_path / "s.json", tmp_path / "a.json"
    transport = SyncRecordingTransport(httpx.MockTransport(sync_app), sync_path)
    with httpx.Client(transport=transport) as c:
        c.get("https://api.example.test/x")

    async def go() -> None:
        rec = RecordingTransport(httpx.MockTransport(async_app), async_path)
        async with httpx.AsyncClient(transport=rec) as c:
            await c.get("https://api.example.test/x")

    asyncio.run(go())
    s, a = load_cassette(sync_path).calls[0], load_cassette(async_path).calls[0]
    assert s.chunk_sizes == a.chunk_sizes == [len(c) for c in CHUNKS]
    assert s.body == a.body == b"".join(CHUNKS)

    seen_sync: list[bytes] = []
    with httpx.Client(transport=SyncReplayTransport.from_path(sync_path)) as c, \
            c.stream("GET", "https://api.example.test/x") as r:
        seen_sync = list(r.iter_raw())

    async def areplay() -> list[bytes]:
        async with httpx.AsyncClient(transport=ReplayTransport.from_path(async_path)) as c, \
                c.stream("GET", "https://api.example.test/x") as r:
            return [chunk async for chunk in r.aiter_raw()]

    assert seen_sync == asyncio.run(areplay()) == CHUNKS  # chunk boundaries kept by both


def test_sync_replay_reads_the_latency_environment(
    tmp_path: Path, catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "slow.json"
    rec = SyncRecordingTransport(
        httpx.MockTransport(lambda r: (time.sleep(0.2), httpx.Response(200, text="ok"))[1]), path
    )
    with httpx.Client(transport=rec) as c:
        c.get("https://api.example.test/slow")
    monkeypatch.setenv("REALPROBE_REPLAY_LATENCY", "scaled:0.5")
    opts = TransportOptions(mode=Mode.REPLAY, cassette=path)
    with make_sync_client(catalog, opts) as client:
        t0 = time.perf_counter()
        client.fetch("GET", "https://api.example.test/slow", allow_private=True)
        took = time.perf_counter() - t0
    assert took >= 0.09  # half the recorded 0.2 s was slept
    monkeypatch.setenv("REALPROBE_REPLAY_LATENCY", "none")
    with make_sync_client(catalog, opts) as client:
        t0 = time.perf_counter()
        client.fetch("GET", "https://api.example.test/slow", allow_private=True)
        assert time.perf_counter() - t0 < 0.09


def test_sync_and_async_record_the_same_metadata(
    tmp_path: Path, catalog: Catalog, calm_sandbox: str
) -> None:
    opts = dict(mode=Mode.RECORD, sandbox=calm_sandbox, seed=7)
    tool = catalog.get("catfact_fact")
    method, url, params = tool.build_request(tool.validate_args(dict(tool.examples[0])))
    with make_sync_client(catalog, TransportOptions(cassette=tmp_path / "s.json", **opts)) as c:
        c.fetch(method, url, params=params)

    async def go() -> None:
        async with make_client(
            catalog, TransportOptions(cassette=tmp_path / "a.json", **opts)
        ) as c:
            await c.fetch(method, url, params=params)

    asyncio.run(go())
    ms = load_cassette(tmp_path / "s.json").meta
    ma = load_cassette(tmp_path / "a.json").meta
    for key in ("source", "sandbox", "seed", "catalog_tools"):
        assert ms[key] == ma[key], key
    assert ms["seed"] == 7 and ms["catalog_tools"] == len(catalog)


def test_record_mode_in_transport_options(tmp_path: Path, catalog: Catalog) -> None:
    path = tmp_path / "rm.json"
    assert TransportOptions(cassette=path, record_mode="once").normalised().mode is Mode.RECORD
    assert TransportOptions(cassette=path, record_mode="none").normalised().mode is Mode.REPLAY
    path.write_text('{"version": 1, "interactions": []}')
    assert TransportOptions(cassette=path, record_mode="once").normalised().mode is Mode.REPLAY
    assert TransportOptions(cassette=path, record_mode="all").normalised().mode is Mode.RECORD
    from realprobe import RealprobeError

    with pytest.raises(RealprobeError, match="needs cassette"):
        TransportOptions(record_mode="once").normalised()
    with pytest.raises(RealprobeError, match="choose one of"):
        TransportOptions(cassette=path, record_mode="twice").normalised()


def test_new_episodes_through_make_client(
    tmp_path: Path, catalog: Catalog, calm_sandbox: str
) -> None:
    path = tmp_path / "epi.json"
    tools = [catalog.get("catfact_fact"), catalog.get("jsonplaceholder_post")]
    reqs = [t.build_request(t.validate_args(dict(t.examples[0]))) for t in tools]

    async def run(which: list[int]) -> None:
        opts = TransportOptions(cassette=path, sandbox=calm_sandbox, record_mode="new_episodes")
        async with make_client(catalog, opts) as c:
            for i in which:
                m, u, p = reqs[i]
                await c.fetch(m, u, params=p)

    asyncio.run(run([0]))
    first = load_cassette(path).calls
    asyncio.run(run([0, 1]))
    both = load_cassette(path).calls
    assert len(first) == 1 and len(both) == 2
    assert both[0].body == first[0].body and both[0].uri == first[0].uri
