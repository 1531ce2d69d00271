"""The seeded fault model and the in-process simulate transport."""

from __future__ import annotations

import asyncio
import itertools

from realprobe import (
    Burst,
    Catalog,
    ErrorCode,
    FaultModel,
    Profile,
    ToolProfile,
    TransportOptions,
    call_tool,
    load_profile,
    make_client,
)


def outcomes(catalog: Catalog, profile: str, seed: int, rounds: int = 6) -> list[tuple[str, str]]:
    async def go() -> list[tuple[str, str]]:
        client = make_client(catalog, TransportOptions(profile=profile, seed=seed))
        out = []
        try:
            for _ in range(rounds):
                for tool in catalog:
                    r = await call_tool(tool, dict(tool.examples[0]), client)
                    out.append((tool.name, r.code.value if r.code else "ok"))
        finally:
            await client.aclose()
        return out

    return asyncio.run(go())


def test_same_seed_same_outcomes_different_seed_differs(catalog: Catalog, no_network: None) -> None:
    a = outcomes(catalog, "harsh", seed=7, rounds=20)
    b = outcomes(catalog, "harsh", seed=7, rounds=20)
    c = outcomes(catalog, "harsh", seed=8, rounds=20)
    assert a == b
    assert a != c
    codes = {code for _, code in a}
    assert "ok" in codes and len(codes) >= 4


def test_simulate_does_not_sleep_for_real(catalog: Catalog) -> None:
    import time

    started = time.perf_counter()
    outcomes(catalog, "harsh", seed=1, rounds=3)  # many hangs of 10 s each on the virtual clock
    assert time.perf_counter() - started < 10


def test_tool_streams_are_independent_of_call_order() -> None:
    prof = load_profile("harsh")
    m1, m2 = FaultModel(prof, 3), FaultModel(prof, 3)
    seq1 = [m1.draw("a") for _ in range(20)]
    seq2 = []
    for _ in range(20):
        m2.draw("b")
        seq2.append(m2.draw("a"))
    assert seq1 == seq2


def test_burst_chain_and_rates_follow_the_profile() -> None:
    tp = ToolProfile(
        success_rate=0.7,
        errors={ErrorCode.SERVER_ERROR: 1.0},
        burst=Burst(p_fail_after_fail=0.5, p_fail_after_ok=0.3 * 0.5 / 0.7),
    )
    model = FaultModel(Profile(tools={"t": tp}), seed=11)
    fails = [not model.draw("t").ok for _ in range(40_000)]
    rate = sum(fails) / len(fails)
    after_fail = [b for a, b in itertools.pairwise(fails) if a]
    assert abs(rate - 0.3) < 0.015
    assert abs(sum(after_fail) / len(after_fail) - 0.5) < 0.02


def test_published_profile_mix() -> None:
    prof = load_profile("published")
    tp = prof.for_tool("anything")
    assert abs(tp.success_rate - 0.527) < 1e-9
    assert max(tp.errors, key=lambda c: tp.errors[c]) is ErrorCode.TIMEOUT
    assert tp.burst is not None and abs(tp.burst.stationary_fail - 0.473) < 0.001
