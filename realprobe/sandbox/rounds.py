"""A round: every catalogue tool called once with its first example arguments, recorded
through the sandbox into a cassette, or replayed from one (the shipped cassettes are such
rounds)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from realprobe.adapters import ToolResult, call_tool
from realprobe.adapters.catalog import Catalog
from realprobe.cassettes.cassette import Cassette
from realprobe.http.client import ClientConfig, HttpClient

#: the shipped round, in the package's cassettes folder
SHIPPED_ROUND = "sandbox-published-round.json"


async def call_round(
    cat: Catalog,
    client: HttpClient,
    timeout: float,
    *,
    concurrent: bool,
    on_call: Callable[[ToolResult], None] | None = None,
) -> list[ToolResult]:
    """Every tool once (first example arguments), all at once or one after another; the
    client is closed at the end."""
    tools = list(cat)
    try:
        if concurrent:
            return list(await asyncio.gather(
                *(call_tool(t, dict(t.examples[0]), client, timeout_s=timeout) for t in tools)
            ))
        results = []
        for t in tools:
            results.append(await call_tool(t, dict(t.examples[0]), client, timeout_s=timeout))
            if on_call is not None:
                on_call(results[-1])
        return results
    finally:
        await client.aclose()


def record_round(
    cat: Catalog, out: Path, *, profile: str, seed: int, timeout: float,
    sandbox_url: str | None = None,
) -> list[ToolResult]:
    """Every catalogue tool once through a sandbox (started here on loopback with `profile`,
    or the running one at `sandbox_url`), recorded into the cassette `out`."""
    from realprobe.cassettes.recording import RecordingTransport
    from realprobe.http.simulate import origins_of, routes_from_catalog
    from realprobe.http.transports import SandboxRouter, live_transport
    from realprobe.sandbox.server import Sandbox, running
    from realprobe.simulator.profile import load_profile

    config = ClientConfig(deadline_s=timeout, read_timeout_s=timeout)
    meta: dict[str, Any] = {
        "source": "realprobe sandbox",
        "label": "sandbox recording: realprobe's loopback sandbox serving catalogue fixture "
                 "bodies with faults drawn from the profile; not a live recording",
        "profile": profile, "seed": seed, "timeout_s": timeout,
        "date": datetime.now(UTC).date().isoformat(), "catalog_tools": len(cat),
        "round": "one call of every catalogue tool with its first example arguments",
    }

    def go(url: str) -> list[ToolResult]:
        router = SandboxRouter(url, origins_of(cat), live_transport())
        recorder = RecordingTransport(router, out, meta=meta)
        client = HttpClient(recorder, config=config)
        return asyncio.run(call_round(cat, client, timeout, concurrent=True))

    if sandbox_url:
        meta["sandbox"] = sandbox_url
        return go(sandbox_url)
    sb = Sandbox(routes_from_catalog(cat), load_profile(profile), seed=seed, latency_scale=1.0)
    with running(sb) as url:
        return go(url)


def replay_round(
    cat: Catalog,
    file: Path | None = None,
    *,
    replay_latency: str | None = None,
    on_exhausted: str | None = None,
    on_call: Callable[[ToolResult], None] | None = None,
) -> tuple[Cassette, list[ToolResult]]:
    """Replay a recorded round offline (default: the shipped one), one call after another,
    with the deadline it was recorded with."""
    from realprobe.cassettes.importers import load_any
    from realprobe.clients import TransportOptions, make_client
    from realprobe.data import data_dir
    from realprobe.http.mode import Mode

    file = file or data_dir("cassettes") / SHIPPED_ROUND
    cassette = load_any(file)
    timeout = float(cassette.meta.get("timeout_s") or 2.0)
    opts = TransportOptions(
        mode=Mode.REPLAY, cassette=file, replay_latency=replay_latency, on_exhausted=on_exhausted
    )
    client = make_client(cat, opts, config=ClientConfig(deadline_s=timeout, read_timeout_s=timeout))
    results = asyncio.run(
        call_round(cat, client, timeout, concurrent=False, on_call=on_call)
    )
    return cassette, results
