"""Shared by the replay benchmarks: a 2,000-interaction cassette of real loopback traffic.

Every catalogue tool in turn, each URL made distinct with `?i=N`, recorded by realprobe's
RecordingTransport through the sandbox (forced `ok` variant, so every interaction is a
complete response that vcrpy can replay too).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from realprobe.adapters.catalog import default_catalog
from realprobe.cassettes.recording import RecordingTransport
from realprobe.http.simulate import origins_of, routes_from_catalog
from realprobe.http.transports import SandboxRouter, live_transport
from realprobe.sandbox.server import Sandbox, running
from realprobe.simulator.profile import load_profile


def urls_for(n: int) -> list[str]:
    cat = default_catalog()
    bases = []
    for tool in cat:
        method, url, params = tool.build_request(tool.validate_args(dict(tool.examples[0])))
        if method == "GET":
            bases.append(str(httpx.URL(url, params=params or None)))
    out = []
    for i in range(n):
        base = bases[i % len(bases)]
        out.append(base + ("&" if "?" in base else "?") + f"i={i}")
    return out


def make_cassette(path: Path, n: int = 2000) -> list[str]:
    cat = default_catalog()
    urls = urls_for(n)
    sb = Sandbox(routes_from_catalog(cat), load_profile("calm"), seed=0, latency_scale=0.0)
    with running(sb) as base:
        router = SandboxRouter(base + "/_fault/ok", origins_of(cat), live_transport())

        async def go() -> None:
            async with httpx.AsyncClient(transport=RecordingTransport(router, path)) as client:
                for url in urls:
                    r = await client.get(url)
                    r.raise_for_status()

        asyncio.run(go())
    return urls
