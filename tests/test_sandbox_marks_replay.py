"""A sandbox's deadline marks (X-Realprobe-Missed, X-Realprobe-Delay-Ms) are read where the
sandbox answered, live or replayed from a recording, and nowhere else: a replay gives each
client what it got live. The sandbox here is a router over an in-process answer, and the
machine's lag a virtual clock moved past the deadline before the answer is read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from realprobe import HttpClient, SyncHttpClient, VirtualClock
from realprobe.adapters.http import Fetched, FetchFailure
from realprobe.cassettes.recording import RecordingTransport, SyncRecordingTransport
from realprobe.cassettes.replayer import ReplayTransport, SyncReplayTransport
from realprobe.http.transports import (
    DELAY_HEADER,
    MISSED_HEADER,
    SandboxRouter,
    SyncSandboxRouter,
)
from realprobe.target import Target, TargetKind

API = "https://api.example.test"
ORIGINS = {API: "ex"}
DEADLINE = 2.0
#: path -> (read this late, status, the sandbox's mark)
ANSWERS = {
    "/missed": (2.6, 504, {MISSED_HEADER: "headers"}),
    "/drawn-in-time": (2.3, 200, {DELAY_HEADER: "1480.5"}),
    "/unmarked-late": (2.4, 200, {}),
}


def answer(clock: VirtualClock | None) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        late, status, marks = ANSWERS[request.url.path.removeprefix("/ex")]
        if clock is not None:
            clock.advance(late)  # the answer is read this long after the call started
        return httpx.Response(status, headers=marks, content=b"{}")
    return httpx.MockTransport(handler)


Outcome = tuple[int | str, float, dict[str, str]]


def outcome(got: Fetched | FetchFailure) -> Outcome:
    if isinstance(got, FetchFailure):
        return got.code.value, round(got.elapsed_s, 6), {}
    marks = {k: v for k, v in got.headers.items() if k.startswith("x-realprobe")}
    return got.status, round(got.elapsed_s, 6), marks


async def fetch_all(client: HttpClient) -> dict[str, Outcome]:
    out = {}
    for path in ANSWERS:
        try:
            got: Fetched | FetchFailure = await client.fetch("GET", API + path,
                                                             timeout_s=DEADLINE)
        except FetchFailure as exc:
            got = exc
        out[path] = outcome(got)
    return out


Runs = tuple[dict[str, Outcome], dict[str, Outcome], dict[str, Outcome]]


def run_async(kind: TargetKind, cassette: Path) -> Runs:
    """Record through `kind` (sandbox: the router's), then replay on a virtual clock, then
    instantly (latency none: no time passes)."""
    async def go() -> Runs:
        clock = VirtualClock()
        inner: httpx.AsyncBaseTransport = answer(clock)
        target = Target.live()
        if kind is TargetKind.SANDBOX:
            inner = SandboxRouter("http://127.0.0.1:9", ORIGINS, inner=inner)
            target = Target(kind=kind, sandbox="http://127.0.0.1:9")
        live = HttpClient(RecordingTransport(inner, cassette, clock=clock), clock=clock,
                          target=target)
        async with live:
            recorded = await fetch_all(live)
        replayed = []
        for latency in ("virtual", "none"):
            clock = VirtualClock()
            replay = HttpClient(ReplayTransport.from_path(cassette, clock=clock, latency=latency),
                                clock=clock, target=Target(kind=TargetKind.REPLAY))
            async with replay:
                replayed.append(await fetch_all(replay))
        return recorded, replayed[0], replayed[1]
    return asyncio.run(go())


def stored_marks(cassette: Path) -> list[bool]:
    data = json.loads(cassette.read_text())
    return [i["response"]["realprobe"].get("sandbox", False) for i in data["interactions"]]


def test_a_sandbox_recording_replays_what_the_live_client_got(tmp_path: Path) -> None:
    recorded, replayed, instant = run_async(TargetKind.SANDBOX, tmp_path / "sb.json")
    assert recorded == {
        "/missed": ("TIMEOUT", DEADLINE, {}),  # a timeout at the deadline, not a 504 at 2.6
        "/drawn-in-time": (200, 1.4805, {}),  # the drawn delay, not the machine's lag
        "/unmarked-late": ("TIMEOUT", DEADLINE, {}),  # late is late
    }
    assert replayed == recorded
    assert stored_marks(tmp_path / "sb.json") == [True, True, True]
    # instantly: the same outcomes, and no time (a timeout is at the deadline, never later)
    assert instant == {"/missed": ("TIMEOUT", 0.0, {}), "/drawn-in-time": (200, 0.0, {}),
                       "/unmarked-late": (200, 0.0, {})}


def test_a_recording_of_another_target_replays_as_it_came(tmp_path: Path) -> None:
    """The same answers from a live API: no mark read, no deadline fallback, no header
    dropped, in the recording or its replay."""
    recorded, replayed, instant = run_async(TargetKind.LIVE, tmp_path / "live.json")
    assert recorded == {
        "/missed": (504, 2.6, {"x-realprobe-missed": "headers"}),
        "/drawn-in-time": (200, 2.3, {"x-realprobe-delay-ms": "1480.5"}),
        "/unmarked-late": (200, 2.4, {}),
    }
    assert replayed == recorded
    assert {p: (s, m) for p, (s, _, m) in instant.items()} == {
        p: (s, m) for p, (s, _, m) in recorded.items()}
    assert stored_marks(tmp_path / "live.json") == [False, False, False]


@pytest.mark.parametrize("kind", [TargetKind.SANDBOX, TargetKind.LIVE])
def test_the_sync_client_records_and_replays_the_same_way(kind: TargetKind,
                                                          tmp_path: Path) -> None:
    """The synchronous client and transports (real clock, the answer at once: outcomes and
    headers compared, no latencies)."""
    cassette = tmp_path / "sync.json"
    inner: httpx.BaseTransport = answer(None)
    target = Target.live()
    if kind is TargetKind.SANDBOX:
        inner = SyncSandboxRouter("http://127.0.0.1:9", ORIGINS, inner=inner)
        target = Target(kind=kind, sandbox="http://127.0.0.1:9")

    def missed(client: SyncHttpClient) -> tuple[int | str, dict[str, str]]:
        try:
            got: Fetched | FetchFailure = client.fetch("GET", API + "/missed",
                                                       timeout_s=DEADLINE)
        except FetchFailure as exc:
            got = exc
        code, elapsed, marks = outcome(got)
        assert elapsed <= DEADLINE  # a timeout is at the deadline, never later
        return code, marks

    with SyncHttpClient(SyncRecordingTransport(inner, cassette), target=target) as live:
        recorded = missed(live)
    with SyncHttpClient(SyncReplayTransport.from_path(cassette),
                        target=Target(kind=TargetKind.REPLAY)) as replay:
        assert missed(replay) == recorded
    if kind is TargetKind.SANDBOX:
        assert recorded == ("TIMEOUT", {})
    else:
        assert recorded == (504, {"x-realprobe-missed": "headers"})


def test_a_host_outside_the_catalogue_is_no_sandbox_answer() -> None:
    """Through a sandbox client, a non-catalogue host (an LLM endpoint, say) goes live: its
    marks are headers like any other, and its grace is not its own (late is late)."""
    async def go() -> list[Outcome]:
        clock = VirtualClock()

        def handler(request: httpx.Request) -> httpx.Response:
            clock.advance(1.0 if request.url.path == "/in-time" else 2.6)
            return httpx.Response(504, headers={MISSED_HEADER: "headers"})

        router = SandboxRouter("http://127.0.0.1:9", ORIGINS, inner=httpx.MockTransport(handler))
        target = Target(kind=TargetKind.SANDBOX, sandbox="http://127.0.0.1:9")
        out = []
        async with HttpClient(router, clock=clock, target=target) as client:
            for path in ("/in-time", "/late"):
                try:
                    got: Fetched | FetchFailure = await client.fetch(
                        "GET", "https://llm.example.test" + path, timeout_s=DEADLINE)
                except FetchFailure as exc:
                    got = exc
                out.append(outcome(got))
        return out

    assert asyncio.run(go()) == [(504, 1.0, {"x-realprobe-missed": "headers"}),
                                 ("TIMEOUT", DEADLINE, {})]
