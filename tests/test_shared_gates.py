"""Politeness shared across processes: `SharedGates` in each process, one `GateState`
holding the claims, slots and pauses (here reached in process; on Ray through an actor)."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
from typing import Any

import pytest

from realprobe import ErrorCode, HeldBack, ToolError, ToolResult
from realprobe.hosts import GateState, SharedGates, host_key, sent_at, strictest


class Api:
    def __init__(self, interval: float, in_flight: int = 1) -> None:
        self.name = "Loop"
        self.base_url = "http://127.0.0.1:9"
        self.politeness = type("P", (), {
            "max_in_flight": in_flight, "min_interval_s": interval, "jitter_s": 0.0,
            "daily_budget": 100,
        })()


class Link:
    """The state reached directly, as a Ray actor handle would reach it."""

    def __init__(self, state: GateState) -> None:
        self.state = state

    async def call(self, method: str, *args: Any) -> Any:
        out = getattr(self.state, method)(*args)
        return await out if inspect.isawaitable(out) else out

    def send(self, method: str, *args: Any) -> None:
        getattr(self.state, method)(*args)


def ok() -> ToolResult:
    return ToolResult(tool="t", ok=True, data={})


def test_two_processes_share_spacing_slots_and_retry_after() -> None:
    async def go() -> None:
        state = GateState()
        a, b = SharedGates(Link(state)), SharedGates(Link(state))
        api = Api(0.2)
        starts = []
        for gates in (a, b, a):
            async with gates.turn(api, 5.0):
                starts.append(time.time())
            gates.note(api, ok())
        gaps = [y - x for x, y in itertools.pairwise(starts)]
        assert min(gaps) >= 0.19, gaps
        # a slot held by one process keeps the other out until it is given back
        async with a.turn(api, 5.0):
            with pytest.raises(HeldBack, match="in flight"):
                async with b.turn(api, 0.3):
                    pass
        a.note(api, ok())
        # a Retry-After seen by one process pauses the host for the other
        async with b.turn(api, 5.0):
            pass
        b.note(api, ToolResult(tool="t", ok=False, error=ToolError(
            code=ErrorCode.RATE_LIMIT_ERROR, message="slow down", retry_after_s=30.0)))
        with pytest.raises(HeldBack, match="pause"):
            async with a.turn(api, 5.0):
                pass

    asyncio.run(go())


def test_a_lease_lapses_when_its_holder_never_gives_it_back() -> None:
    async def go() -> None:
        state = GateState()
        policy = SharedGates(Link(state))
        api = Api(0.0)

        key, pol = host_key(api), strictest(api.politeness)
        lease = await state.acquire(key, pol, 1.0, 0.5)  # a holder that dies
        assert lease
        assert await state.acquire(key, pol, 0.01, 1.0) == 0  # still held
        expiry = state._leases[lease][1]  # wait on the lease's own deadline, not a guess
        while time.time() <= expiry:
            await asyncio.sleep(0.01)
        async with policy.turn(api, 1.0):  # lapsed: the slot is free again
            pass

    asyncio.run(go())


def test_a_late_start_pushes_the_next_one_back() -> None:
    """The spacing holds from when a call really went out, however late its holder got
    there (a slow message, a busy worker)."""

    async def go() -> None:
        state = GateState()
        api = Api(0.5)
        key, pol = host_key(api), strictest(api.politeness)
        lease = await state.acquire(key, pol, 1.0, 10.0)
        first, _, _ = state.reserve(key, pol, 5.0)
        assert first is not None
        late = first + 0.3  # the call went out 0.3 s after its claimed start
        state.note_and_release(lease, key, pol, None, None, late)
        lease = await state.acquire(key, pol, 1.0, 10.0)
        second, _, _ = state.reserve(key, pol, 5.0)
        assert second is not None and second >= late + 0.5 - 1e-6

    asyncio.run(go())


def test_a_call_is_taken_to_start_when_its_request_left() -> None:
    """The time a new connection took to open is not spacing: the request left after it."""

    res = ToolResult(tool="t", ok=True, data={}, latency_ms=300.0,
                     phases={"dns_ms": 10.0, "connect_ms": 50.0, "tls_ms": 40.0})
    assert sent_at(res, now=100.0) == pytest.approx(100.0 - 0.2)
    # with the time to first byte and the transfer, the request left that long before now
    res.phases = {**(res.phases or {}), "ttfb_ms": 120.0, "transfer_ms": 30.0}
    assert sent_at(res, now=100.0) == pytest.approx(100.0 - 0.15)
    assert sent_at(ToolResult(tool="t", ok=True, data={}), now=100.0) is None
