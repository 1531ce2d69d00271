"""Proxy mode: the sandbox in front of a (loopback) upstream, the profile's faults on top."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
from loopback_upstream import Upstream as LoopbackUpstream

from realprobe import (
    Catalog,
    ErrorCode,
    LatencyModel,
    Mode,
    Politeness,
    Profile,
    ToolProfile,
    TransportOptions,
    call_tool,
    make_client,
)
from realprobe.probes.stats import wilson
from realprobe.sandbox.bodies import SOURCE_HEADER
from realprobe.sandbox.proxy import Upstream
from realprobe.sandbox.server import SandboxThread
from realprobe.sandbox.setup import make_upstream, sandbox_for

Z99 = 2.5758293035489004
N = 300


def half_failing() -> Profile:
    return Profile(
        name="half",
        tools={
            "agify_age": ToolProfile(
                success_rate=0.5,
                errors={ErrorCode.SERVER_ERROR: 1.0},
                latency_ms=LatencyModel(p50=1.0, p90=2.0),
            )
        },
    )


def test_proxy_puts_the_profile_on_top_of_the_upstream(catalog: Catalog) -> None:
    with LoopbackUpstream() as up:
        sb = sandbox_for(catalog, half_failing(), seed=3, latency_scale=0.0, upstream=up.url)
        with SandboxThread(sb) as url, httpx.Client(timeout=5) as client:
            answers = [client.get(f"{url}/agify/?name=n{i}") for i in range(N)]
            journal = client.get(f"{url}/_journal").json()
    ok = [r for r in answers if r.status_code == 200]
    low, high = wilson(len(ok), N, Z99)
    assert low <= 0.5 <= high, (len(ok), low, high)
    # successful bodies are the upstream's bytes, in order; faults never reached it
    assert [r.content for r in ok] == up.sent
    assert len(up.requests) == len(ok)
    assert all(r.headers[SOURCE_HEADER] == "upstream" for r in ok)
    assert all(r.headers["x-upstream"] == "loopback" for r in ok)
    assert up.requests[0] == ("GET", "/?name=n" + answers.index(ok[0]).__str__())
    # the journal has every request, with its fault and byte counts
    assert len(journal) == N
    assert [e["path"] for e in journal] == [f"/agify/?name=n{i}" for i in range(N)]
    assert sum(e["fault"] == "ok" for e in journal) == len(ok)
    for e, r in zip(journal, answers, strict=True):
        assert e["status"] == r.status_code and e["tool"] == "agify_age"
        assert e["body_bytes"] == len(r.content)
        if r.status_code == 200:
            assert e["source"] == "upstream" and e["upstream_ms"] is not None


def test_api_placeholder_and_paths_outside_the_catalogue(catalog: Catalog) -> None:
    with LoopbackUpstream() as up:
        sb = sandbox_for(catalog, "calm", latency_scale=0.0, upstream=up.url + "/{api}")
        with SandboxThread(sb) as url:
            r = httpx.get(f"{url}/swapi/api/planets/1/")  # no tool for planets
            assert r.status_code == 200
            assert up.requests == [("GET", "/swapi/api/planets/1/")]
            assert r.headers[SOURCE_HEADER] == "upstream"


def test_upstream_down_is_a_502_that_says_so(catalog: Catalog) -> None:
    sb = sandbox_for(catalog, "calm", latency_scale=0.0, upstream="http://127.0.0.1:9")
    with SandboxThread(sb) as url:
        r = httpx.get(f"{url}/agify/?name=x")
    assert r.status_code == 502
    assert r.headers["x-realprobe-upstream-error"] == "NETWORK_ERROR"


def test_politeness_and_budget_hold_for_the_upstream(catalog: Catalog) -> None:
    with LoopbackUpstream() as up:
        upstream = Upstream(
            up.url,
            {a.id: a.base_url for a in catalog.apis.values()},
            politeness={"agify": Politeness(min_interval_s=0.25, jitter_s=0, daily_budget=3)},
        )
        sb = sandbox_for(catalog, "calm", latency_scale=0.0, upstream=upstream)
        with SandboxThread(sb) as url, httpx.Client(timeout=5) as client:
            started = time.perf_counter()
            first = [client.get(f"{url}/agify/?name=a{i}") for i in range(3)]
            took = time.perf_counter() - started
            over = client.get(f"{url}/agify/?name=over")
    assert [r.status_code for r in first] == [200, 200, 200]
    assert took >= 0.5  # three starts at least 0.25 s apart
    assert over.status_code == 429 and int(over.headers["retry-after"]) > 0
    assert "daily budget" in over.headers["x-realprobe-held-back"]
    assert len(up.requests) == 3  # nothing past the budget reached the upstream


def test_a_proxied_run_records_and_replays_as_a_sandbox(catalog: Catalog, tmp_path: Path) -> None:
    cassette = tmp_path / "through-proxy.json"
    with LoopbackUpstream() as up:
        sb = sandbox_for(catalog, "calm", latency_scale=0.0, upstream=up.url)
        with SandboxThread(sb) as url:

            async def record() -> None:
                opts = TransportOptions(mode=Mode.RECORD, sandbox=url, cassette=cassette)
                client = make_client(catalog, opts)
                try:
                    for name in ("ada", "bob"):
                        res = await call_tool(catalog.get("agify_age"), {"name": name}, client)
                        assert not res.ok  # the upstream's body is not Agify's shape
                finally:
                    await client.aclose()

            asyncio.run(record())
        sent = list(up.sent)
    replayed = sandbox_for(catalog, "calm", latency_scale=0.0, cassettes=[cassette])
    with SandboxThread(replayed) as url:
        bob = httpx.get(f"{url}/agify/?name=bob")
        ada = httpx.get(f"{url}/agify/?name=ada")
    assert (ada.content, bob.content) == (sent[0], sent[1])
    assert ada.headers[SOURCE_HEADER] == "cassette"


def test_live_upstream_goes_to_the_real_base_url_politely(catalog: Catalog) -> None:
    """`--upstream live` with the network replaced by a MockTransport at the client seam."""

    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json={"name": "michael", "age": 61, "count": 1})

    upstream = make_upstream(catalog, "live", transport=httpx.MockTransport(handler))
    assert upstream.polite.policies["agify"].daily_budget == 10  # the catalogue's politeness
    assert make_upstream(catalog, "http://127.0.0.1:1").polite.policies == {}
    upstream.polite.policies["agify"] = Politeness(min_interval_s=0.0, daily_budget=2)
    sb = sandbox_for(catalog, "calm", latency_scale=0.0, upstream=upstream)
    with SandboxThread(sb) as url, httpx.Client(timeout=5) as client:
        first = client.get(f"{url}/agify/?name=michael")
        client.get(f"{url}/agify/?name=michael")
        third = client.get(f"{url}/agify/?name=michael")
        planets = client.get(f"{url}/swapi/api/planets/1/")
    assert first.json()["age"] == 61
    assert seen[0] == "https://api.agify.io/?name=michael"
    assert third.status_code == 429  # agify's budget (2 here) is used up
    assert planets.status_code == 200 and seen[-1] == "https://swapi.dev/api/planets/1/"
    assert len(seen) == 3


def test_live_budget_is_the_stores_ledger(catalog: Catalog, tmp_path: Path) -> None:
    """Budgets for a live upstream are counted in the probes' store: a second sandbox (another
    process, a restart) on the same database finds today's budget already spent."""
    import datetime as dt

    from realprobe import Store

    db = tmp_path / "ledger.db"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"name": "x", "age": 1, "count": 1})

    def sandbox() -> SandboxThread:
        up = make_upstream(catalog, "live", transport=httpx.MockTransport(handler), db=db)
        up.polite.policies["agify"] = Politeness(min_interval_s=0.0, daily_budget=2)
        return SandboxThread(sandbox_for(catalog, "calm", latency_scale=0.0, upstream=up))

    with sandbox() as url:
        codes = [httpx.get(f"{url}/agify/?name=x").status_code for _ in range(2)]
    with sandbox() as url:
        again = httpx.get(f"{url}/agify/?name=x")
    assert codes == [200, 200] and again.status_code == 429
    day = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    with Store(db) as store:
        assert store.budget_used(day, "agify", "live") == 2
