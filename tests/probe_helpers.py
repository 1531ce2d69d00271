"""Helpers for the statistics tests: a known-truth profile, probing it, synthetic rows, and
probe arrays built from row dicts."""

from __future__ import annotations

import asyncio
import math
import random
from pathlib import Path
from typing import Any

import numpy as np

from realprobe import (
    Burst,
    Catalog,
    ClientConfig,
    ErrorCode,
    LatencyModel,
    Lognormal,
    Mode,
    Profile,
    Store,
    Tool,
    ToolProfile,
    TransportOptions,
    make_client,
)
from realprobe.probes.loading import CODES, ProbeArrays

# the truth of the closed loop
TRUE_SUCCESS = 0.70
TRUE_MU, TRUE_SIGMA = 5.0, 0.5  # ln(latency in ms)
TRUE_P_FF = 0.45
# p_fail_after_ok chosen so that the chain's stationary failure rate is exactly 0.30
TRUE_P_FO = (1 - TRUE_SUCCESS) * (1 - TRUE_P_FF) / TRUE_SUCCESS
TRUE_ERRORS = {
    ErrorCode.TIMEOUT: 0.3,
    ErrorCode.SERVER_ERROR: 0.3,
    ErrorCode.NETWORK_ERROR: 0.2,
    ErrorCode.INVALID_RESPONSE: 0.2,
}


def truth_profile(*, burst: bool = True, errors: dict[ErrorCode, float] | None = None) -> Profile:
    tp = ToolProfile(
        success_rate=TRUE_SUCCESS,
        errors=dict(errors or TRUE_ERRORS),
        latency_ms=LatencyModel(lognormal=Lognormal(mu=TRUE_MU, sigma=TRUE_SIGMA)),
        burst=Burst(p_fail_after_fail=TRUE_P_FF, p_fail_after_ok=TRUE_P_FO) if burst else None,
    )
    return Profile(name="closed-loop-truth", default=tp)


def distinct_host_tools(catalog: Catalog, k: int) -> list[Tool]:
    """k tools on k different hosts with JSON responses, so each is probed on its own chain."""
    seen: set[str] = set()
    out = []
    for t in catalog:
        host = t.api.base_url.split("/")[2]
        if host in seen or t.spec.response != "json":
            continue
        seen.add(host)
        out.append(t)
        if len(out) == k:
            break
    return out


def probe(
    catalog: Catalog,
    tools: list[Tool],
    rounds: int,
    opts: TransportOptions,
    db: Path,
    timeout_s: float,
) -> None:
    """Probe through part A's runner: one tool per host, sequential per host, no politeness
    waits (the sandbox and the simulator are ours to hammer)."""
    probe_concurrently(catalog, tools, rounds, [(opts, db)], timeout_s)


def probe_concurrently(
    catalog: Catalog,
    tools: list[Tool],
    rounds: int,
    targets: list[tuple[TransportOptions, Path]],
    timeout_s: float,
) -> None:
    """Several probe runs at once in one event loop (one per target, each into its own db)."""
    from realprobe import Politeness, PolitenessConfig, run_probes

    config = PolitenessConfig(
        override=Politeness(max_in_flight=1, min_interval_s=0.0, jitter_s=0.0, daily_budget=10**9),
        honour_retry_after=False,
        budgets=False,
    )

    async def one(opts: TransportOptions, db: Path) -> None:
        client = make_client(catalog, opts, config=ClientConfig(deadline_s=timeout_s))
        try:
            with Store(db) as store:
                await run_probes(
                    catalog, tools, rounds, client, store, timeout_s=timeout_s,
                    mode=opts.mode.value, target="sandbox" if opts.sandbox else opts.mode.value,
                    politeness=config,
                )
        finally:
            await client.aclose()

    async def go() -> None:
        await asyncio.gather(*(one(o, d) for o, d in targets))

    asyncio.run(go())


def simulate_opts(profile: Profile, seed: int) -> TransportOptions:
    return TransportOptions(mode=Mode.SIMULATE, profile=profile, seed=seed)


def synthetic_rows(
    tool: str,
    n: int,
    *,
    p_fail: float = 0.2,
    mu: float = 5.0,
    sigma: float = 0.5,
    timeout_s: float = 10.0,
    t0: float = 1_790_000_000.0,
    step_s: float = 60.0,
    seed: int = 0,
    codes: tuple[str, ...] = ("TIMEOUT", "SERVER_ERROR"),
) -> list[dict[str, Any]]:
    """Independent calls: success with 1 - p_fail, lognormal latency, failures split evenly."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        fail = rng.random() < p_fail
        code = codes[i % len(codes)] if fail else None
        lat = math.exp(rng.gauss(mu, sigma))
        if code == "TIMEOUT":
            lat = timeout_s * 1000
        rows.append({
            "run_id": "r", "tool": tool, "api": tool, "round": i, "started_at": "",
            "started_ts": t0 + i * step_s, "latency_ms": lat,
            "outcome": "error" if fail else "ok", "error_code": code, "timeout_s": timeout_s,
            "excluded": 0, "source": "probe",
        })
    return rows


def arrays_from_rows(rows: list[dict[str, Any]]) -> ProbeArrays:
    """Row dicts as the arrays `load_probes` reads from a database, by the same rules
    (excluded rows left out, by tool and time, an unknown code OPERATION_FAILED): the
    statistics' input without a file, and the reference the SQL loader is checked against."""
    kept = sorted((r for r in rows if not r.get("excluded")),
                  key=lambda r: (r["tool"], r["started_ts"]))
    tools = sorted({r["tool"] for r in kept})
    counts = [sum(1 for r in kept if r["tool"] == t) for t in tools]
    index = {c.value: i for i, c in enumerate(CODES)}
    other = CODES.index(ErrorCode.OPERATION_FAILED)
    codes = [-1 if r.get("outcome") == "ok" else index.get(str(r.get("error_code")), other)
             for r in kept]

    def numbers(name: str) -> np.ndarray:
        return np.array([math.nan if r.get(name) is None else float(r[name]) for r in kept])

    return ProbeArrays(tools, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                       numbers("started_ts"), numbers("latency_ms"),
                       np.array(codes, dtype=np.int64), numbers("timeout_s"))
