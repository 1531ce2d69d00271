"""Politeness toward real APIs for calls made through the MCP server."""

from __future__ import annotations

import itertools
import sqlite3
import time
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.types import TextContent

from realprobe import (
    ApiSpec,
    Catalog,
    HeldBack,
    HostGates,
    McpService,
    Politeness,
    ServiceOptions,
    VirtualClock,
)


def api_with(catalog: Catalog, **politeness: float) -> ApiSpec:
    api = next(iter(catalog)).api
    return api.model_copy(update={"politeness": Politeness(**politeness)})  # type: ignore[arg-type]


async def test_starts_are_spaced_and_a_turn_past_the_deadline_is_refused(
    catalog: Catalog,
) -> None:
    clock = VirtualClock()
    gates = HostGates(clock)
    api = api_with(catalog, max_in_flight=4, min_interval_s=5.0)
    waits = []
    for _ in range(2):
        async with gates.turn(api, budget_s=10.0) as waited:
            waits.append(waited)
    assert waits == [0.0, 5.0]
    with pytest.raises(HeldBack) as held:
        async with gates.turn(api, budget_s=2.0):
            pass
    assert held.value.retry_after_s == pytest.approx(5.0)
    assert "one call start every 5s" in str(held.value)
    assert clock.now() == 5.0  # refusing did not wait


async def test_in_flight_limit_holds_the_second_call(catalog: Catalog) -> None:
    gates = HostGates(VirtualClock())
    api = api_with(catalog, max_in_flight=1, min_interval_s=0.0)
    async with gates.turn(api, budget_s=1.0):
        with pytest.raises(HeldBack, match="already in flight"):
            async with gates.turn(api, budget_s=0.05):
                pass
    async with gates.turn(api, budget_s=1.0) as waited:  # free again
        assert waited == 0.0


def local_copy(catalog: Catalog, sandbox: str, min_interval_s: float) -> Catalog:
    """The catalogue with one API moved onto the loopback sandbox, called in live mode."""
    tool = next(t for t in catalog if t.spec.response == "json" and t.examples[0] == {})
    api = tool.api
    base = f"{sandbox}/{api.id}{httpx.URL(api.base_url).path.rstrip('/')}"
    moved = api.model_copy(
        update={
            "base_url": base,
            "tools": [tool.spec],
            "politeness": Politeness(max_in_flight=1, min_interval_s=min_interval_s),
        }
    )
    return Catalog([moved])


async def test_live_calls_through_mcp_are_spaced_and_refusals_are_not_stored(
    catalog: Catalog, calm_sandbox: str, tmp_path: Path
) -> None:
    local = local_copy(catalog, calm_sandbox, min_interval_s=120.0)
    name = next(iter(local)).name
    db = tmp_path / "rp.db"
    service = McpService(local, ServiceOptions(timeout_s=60.0, db=str(db)))
    async with service, Client(service.server) as client:
        first = await client.call_tool(name, {})
        t0 = time.perf_counter()
        refused = await client.call_tool(name, {})  # next turn 120 s away, deadline 60 s
        elapsed = time.perf_counter() - t0
        assert service.gates is not None
    assert first.is_error is False
    # refused at once, not after waiting out the 60 s deadline (a bound, not a margin)
    assert refused.is_error is True and elapsed < 30
    block = refused.content[0]
    assert isinstance(block, TextContent)
    assert block.text.startswith("RATE_LIMIT_ERROR: realprobe holds back calls to 127.0.0.1")
    assert "nothing was sent" in block.text
    assert "(realprobe's politeness, not the API)" in block.text
    meta = (refused.meta or {})["realprobe/call"]
    assert 60.0 < meta["retry_after_s"] <= 120.0  # the next turn: 120 s after the first start
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT outcome FROM probes").fetchall() == [("ok",)]

    polite_off = McpService(local, ServiceOptions(timeout_s=2.0, polite=False))
    async with polite_off, Client(polite_off.server) as client:
        results = [await client.call_tool(name, {}) for _ in range(3)]
    assert polite_off.gates is None and not any(r.is_error for r in results)


async def test_the_sandbox_is_not_held_back(catalog: Catalog, calm_sandbox: str) -> None:
    from realprobe import TransportOptions

    service = McpService(catalog, ServiceOptions(transport=TransportOptions(sandbox=calm_sandbox)))
    async with service:
        assert service.gates is None


async def test_a_probe_run_and_the_mcp_server_share_one_limiter(
    catalog: Catalog, calm_sandbox: str, tmp_path: Path
) -> None:
    """Probing while agents call the same API through MCP: the host's starts stay spaced
    across both, because both wait for the one limiter of a shared HostGates."""
    import asyncio

    from realprobe import Store, TransportOptions, make_client, run_probes

    interval = 0.25
    local = local_copy(catalog, calm_sandbox, min_interval_s=interval)
    name = next(iter(local)).name
    db = tmp_path / "rp.db"
    gates = HostGates()
    service = McpService(local, ServiceOptions(timeout_s=5.0, db=str(db)), gates=gates)
    store = Store(db)
    client = make_client(local, TransportOptions())
    try:
        async with service, Client(service.server) as mcp_client:
            assert service.gates is gates

            async def agent() -> None:
                for _ in range(3):
                    result = await mcp_client.call_tool(name, {})
                    assert result.is_error is False, result

            summary, _ = await asyncio.gather(
                run_probes(local, name, 3, client, store, timeout_s=5.0, gates=gates),
                agent(),
            )
    finally:
        await client.aclose()
        store.close()
    assert summary.n_ok == 3
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT started_ts, source FROM probes ORDER BY started_ts").fetchall()
    assert {source for _, source in rows} == {"probe", "mcp"} and len(rows) == 6
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(rows)]
    assert min(gaps) >= interval - 0.02, gaps  # spaced across the probe run and the agent
