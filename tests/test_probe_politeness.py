"""Politeness: start spacing with jitter, Retry-After, 429 back-off, daily budgets in the DB."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from pathlib import Path

import pytest

from realprobe import (
    ApiSpec,
    Catalog,
    ErrorCode,
    HttpClient,
    Mode,
    Politeness,
    PolitenessConfig,
    Profile,
    Store,
    TransportOptions,
    VirtualClock,
    make_client,
    run_probes,
)
from realprobe.hosts import Backoff, HostLimiter, host_key, merge
from realprobe.http.simulate import SimulateTransport
from realprobe.probes.politeness import Budget
from realprobe.simulator.profile import LatencyModel, ToolProfile, resolve_profile
from realprobe.target import Target

ZERO = Politeness(min_interval_s=0, jitter_s=0)


def limiter(**kw: float) -> tuple[HostLimiter, VirtualClock]:
    clock = VirtualClock(start_wall=1_700_000_000.0)
    pol = Politeness(**kw)  # type: ignore[arg-type]
    return HostLimiter("h:443", pol, clock, Backoff(), random.Random(1)), clock


async def test_starts_are_spaced_by_interval_plus_jitter() -> None:
    lim, clock = limiter(min_interval_s=2.0, jitter_s=1.0)
    starts = []
    for _ in range(20):
        assert await lim.wait_turn()
        starts.append(clock.now())
        clock.advance(0.3)  # the call itself
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert all(2.0 <= g <= 3.0 + 1e-9 for g in gaps), gaps
    assert max(gaps) - min(gaps) > 0.1  # the jitter is really random


async def test_retry_after_pauses_the_host() -> None:
    lim, clock = limiter(min_interval_s=0.5, jitter_s=0.0)
    assert await lim.wait_turn()
    lim.note(ErrorCode.RATE_LIMIT_ERROR, 7.0)
    t = clock.now()
    assert await lim.wait_turn()
    assert clock.now() - t >= 7.0


async def test_429_without_retry_after_backs_off_exponentially_then_gives_up() -> None:
    clock = VirtualClock()
    lim = HostLimiter("h:443", Politeness(min_interval_s=0, jitter_s=0), clock,
                      Backoff(backoff_429_s=2.0))
    pauses = []
    for _ in range(4):
        assert await lim.wait_turn(give_up_after=10.0)
        t = clock.now()
        pauses.append(lim.note(ErrorCode.RATE_LIMIT_ERROR, None))
    assert pauses == [2.0, 4.0, 8.0, 16.0]  # doubling per 429 in a row
    assert clock.now() - t == 0  # the last pause (16 s) is not waited
    assert await lim.wait_turn(give_up_after=10.0) is False  # over the limit: give up
    assert await lim.wait_turn() is True and clock.now() - t == 16.0


async def test_the_limiter_is_shared_and_an_agent_is_held_back_by_a_probe_pause() -> None:
    from realprobe import HeldBack, HostGates

    clock = VirtualClock()
    gates = HostGates(clock)
    pol = Politeness(min_interval_s=1.0, jitter_s=0)
    probe_side = gates.limiter("h:443", pol)
    assert gates.limiter("h:443", Politeness(min_interval_s=3.0, jitter_s=0)) is probe_side
    assert probe_side.policy.min_interval_s == 3.0  # the stricter policy wins
    assert await probe_side.wait_turn()
    probe_side.note(ErrorCode.RATE_LIMIT_ERROR, 30.0)  # the API said: 30 s
    with pytest.raises(HeldBack) as held:
        probe_side.reserve(budget_s=5.0)
    assert held.value.retry_after_s == 30.0 and "asked for a pause" in str(held.value)
    assert probe_side.reserve(budget_s=31.0) == 30.0


async def test_success_resets_the_429_backoff() -> None:
    lim, clock = limiter(min_interval_s=0.0, jitter_s=0.0)
    lim.note(ErrorCode.RATE_LIMIT_ERROR, None)
    lim.note(None, None)
    await lim.wait_turn()
    t = clock.now()
    lim.note(ErrorCode.RATE_LIMIT_ERROR, None)
    await lim.wait_turn()
    assert clock.now() - t == Backoff().backoff_429_s


async def test_stop_interrupts_a_long_real_wait() -> None:
    from realprobe import RealClock

    lim = HostLimiter("h:443", Politeness(min_interval_s=60, jitter_s=0), RealClock())
    stop = asyncio.Event()
    assert await lim.wait_turn(stop)
    asyncio.get_running_loop().call_later(0.05, stop.set)
    t = time.perf_counter()
    assert await lim.wait_turn(stop) is False
    assert time.perf_counter() - t < 30  # not the 60 s turn (a bound, not a margin)


def test_host_key_and_merge(catalog: Catalog) -> None:
    api = next(iter(catalog.apis.values()))
    assert host_key(api).endswith((":443", ":80"))
    strict = merge([Politeness(max_in_flight=2, min_interval_s=1), Politeness(min_interval_s=5)])
    assert strict.max_in_flight == 1 and strict.min_interval_s == 5


def test_daily_budget_persists_across_stores_and_days(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    clock = VirtualClock(start_wall=1_700_000_000.0)
    with Store(db) as store:
        budget = Budget(store, "live", clock, enabled=True)
        assert [budget.take("opentdb", 3) for _ in range(4)] == [True, True, True, False]
    with Store(db) as store:  # a later run, another process: the same ledger
        budget = Budget(store, "live", clock, enabled=True)
        assert budget.take("opentdb", 3) is False
        assert budget.take("agify", 3) is True
        assert store.budget_used(budget.day(), "opentdb", "live") == 3
        clock.advance(86_400)  # next UTC day
        assert budget.take("opentdb", 3) is True


def _profile(code: ErrorCode) -> Profile:
    return Profile(
        default=ToolProfile(
            success_rate=0.0, errors={code: 1.0}, latency_ms=LatencyModel(p50=100, p90=150)
        )
    )


async def test_run_honours_retry_after_on_the_virtual_clock(
    catalog: Catalog, tmp_path: Path
) -> None:
    tool = next(iter(catalog))
    client = make_client(
        catalog, TransportOptions(mode=Mode.SIMULATE, profile=_profile(ErrorCode.RATE_LIMIT_ERROR))
    )
    cfg = PolitenessConfig(override=ZERO)
    with Store(tmp_path / "p.db") as store:
        t = time.perf_counter()
        summary = await run_probes(catalog, [tool], 12, client, store, politeness=cfg,
                                   mode="simulate", target="simulate")
        assert time.perf_counter() - t < 5  # waits are virtual
        rows = store.probes_for_run(summary.run_id)
    await client.aclose()
    assert len(rows) == 12 and all(r["error_code"] == "RATE_LIMIT_ERROR" for r in rows)
    for prev, cur in itertools.pairwise(rows):
        assert prev["retry_after"] is not None and prev["retry_after"] > 0
        gap = cur["virtual_s"] - prev["virtual_s"]  # the simulated run's own timeline
        assert gap >= prev["retry_after"] + prev["latency_ms"] / 1000 - 1e-3, (prev, cur)


async def test_run_daily_budget_skips_calls_and_holds_across_runs(
    catalog: Catalog, tmp_path: Path
) -> None:
    tool = next(iter(catalog))
    cfg = PolitenessConfig(
        override=Politeness(min_interval_s=0, jitter_s=0, daily_budget=3), budgets=True
    )
    with Store(tmp_path / "p.db") as store:
        for expected_rows, expected_skipped in ((3, 2), (0, 5)):
            # a client labelled live (budgets count live calls only) over the simulator, so
            # nothing leaves the machine
            clock = VirtualClock()
            client = HttpClient(
                SimulateTransport(catalog, resolve_profile("calm"), clock=clock),
                clock=clock,
                target=Target.live(),
            )
            s = await run_probes(catalog, [tool], 5, client, store, politeness=cfg)
            await client.aclose()
            assert (s.n_calls, s.n_skipped) == (expected_rows, expected_skipped)
            assert any("daily budget of 3 calls spent" in n for n in s.notes)


async def test_budgets_do_not_count_sandbox_or_simulated_calls_by_default(
    catalog: Catalog, tmp_path: Path
) -> None:
    tool = next(iter(catalog))
    cfg = PolitenessConfig(override=Politeness(min_interval_s=0, jitter_s=0, daily_budget=2))
    with Store(tmp_path / "p.db") as store:
        client = make_client(catalog, TransportOptions(mode=Mode.SIMULATE, profile="calm"))
        s = await run_probes(catalog, [tool], 5, client, store, politeness=cfg,
                             mode="simulate", target="simulate:calm")
        await client.aclose()
    assert s.n_calls == 5 and s.n_skipped == 0


async def test_catalogue_politeness_applies_per_api(tmp_path: Path) -> None:
    def api(i: int, interval: float) -> ApiSpec:
        return ApiSpec.model_validate({
            "id": f"slow{i}", "name": f"Slow {i}", "base_url": f"https://slow{i}.example",
            "docs_url": "https://example.org", "category": "Test", "https": True,
            "politeness": {"min_interval_s": interval, "jitter_s": 0},
            "tools": [{
                "name": f"slow{i}_get", "title": "t", "description": "d", "path": "/x",
                "output": {"v": {"from": "v", "type": "integer"}},
                "fixtures": [{"body": '{"v": 1}', "source": "test"}],
            }],
        })

    cat = Catalog([api(1, 5.0), api(2, 0.5)])
    client = make_client(cat, TransportOptions(mode=Mode.SIMULATE, profile="calm"))
    with Store(tmp_path / "p.db") as store:
        s = await run_probes(cat, None, 6, client, store, mode="simulate", target="simulate")
        rows = store.probes_for_run(s.run_id)
    await client.aclose()
    for tool, interval in (("slow1_get", 5.0), ("slow2_get", 0.5)):
        ts = [r["virtual_s"] for r in rows if r["tool"] == tool]
        assert len(ts) == 6
        assert min(b - a for a, b in itertools.pairwise(ts)) >= interval - 1e-6


async def test_one_in_flight_per_host_but_hosts_in_parallel(
    catalog: Catalog, sandbox_factory, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    url = sandbox_factory("calm", latency_scale=0.3)  # about 55 ms a call
    tools = [t for t in catalog][:4]
    client = make_client(catalog, TransportOptions(sandbox=url))
    cfg = PolitenessConfig(override=ZERO)
    with Store(tmp_path / "p.db") as store:
        t = time.perf_counter()
        s = await run_probes(catalog, tools, 5, client, store, politeness=cfg, target=url)
        elapsed = time.perf_counter() - t
        rows = store.probes_for_run(s.run_id)
    await client.aclose()
    assert s.n_ok == 20
    for tool in tools:  # never two calls in flight on one host
        mine = [r for r in rows if r["api"] == tool.api_id]
        for a, b in itertools.pairwise(mine):
            assert b["started_ts"] >= a["started_ts"] + a["latency_ms"] / 1000 - 0.005
    # ...while hosts overlap: some call on one host ran while a call on another was in flight
    spans = [(r["api"], r["started_ts"], r["started_ts"] + r["latency_ms"] / 1000) for r in rows]
    assert any(a != b and s1 < e2 and s2 < e1
               for (a, s1, e1), (b, s2, e2) in itertools.combinations(spans, 2)), elapsed
