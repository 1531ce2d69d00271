"""The probe runner: one committed row per call, local outages excluded, hostile servers bounded."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from realprobe import (
    ApiSpec,
    Catalog,
    ErrorCode,
    Mode,
    Politeness,
    PolitenessConfig,
    RealprobeError,
    Store,
    ToolError,
    ToolResult,
    TransportOptions,
    make_client,
    run_probes,
)
from realprobe.adapters.deadline import GRACE_S
from realprobe.probes.runner import reached_server

ZERO = PolitenessConfig(override=Politeness(min_interval_s=0, jitter_s=0))


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def probe(
    catalog: Catalog, opts: TransportOptions, tools: Any, rounds: int, db: Path, **kw: Any
) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    client = make_client(catalog, opts)
    try:
        with Store(db) as store:
            summary = await run_probes(catalog, tools, rounds, client, store, **kw)
            return summary, store.probes_for_run(summary.run_id), store.run(summary.run_id)
    finally:
        await client.aclose()


async def test_every_call_is_one_complete_row(catalog: Catalog, tmp_path: Path) -> None:
    opts = TransportOptions(mode=Mode.SIMULATE, profile="published", seed=3)
    s, rows, run = await probe(catalog, opts, None, 3, tmp_path / "p.db", politeness=ZERO,
                               vantage="ci", mode="simulate", target="simulate:published",
                               timeout_s=5.0)
    assert len(rows) == 3 * len(catalog) == s.n_calls == run["n_calls"]
    assert run["status"] == "done" and run["excluded"] == 0 and run["vantage"] == "ci"
    assert s.n_ok + s.n_error == s.n_calls and 0 < s.n_ok < s.n_calls
    for r in rows:
        assert r["run_id"] == s.run_id and r["source"] == "probe" and r["vantage"] == "ci"
        assert r["api"] == catalog.get(r["tool"]).api_id
        assert r["started_at"].endswith("Z") and r["started_ts"] > 1.6e9
        assert r["latency_ms"] >= 0 and r["timeout_s"] == 5.0 and r["excluded"] == 0
        assert r["outcome"] in ("ok", "error")
        assert (r["error_code"] is None) == (r["outcome"] == "ok")
        assert r["outcome"] == "ok" or r["detail"]
        if r["error_code"] == "TIMEOUT":  # right-censored at the deadline
            assert r["latency_ms"] == pytest.approx(5000, abs=1)
        json.loads(r["rate_limit"])
        json.loads(r["redirects"])
    per_tool = {t.tool: t for t in s.tools}
    for name, t in per_tool.items():
        mine = [r for r in rows if r["tool"] == name]
        assert t.n == len(mine) and t.ok == sum(r["outcome"] == "ok" for r in mine)
        assert sum(t.errors.values()) == t.n - t.ok


async def test_examples_are_cycled_per_round(tmp_path: Path) -> None:
    api = ApiSpec.model_validate({
        "id": "echo", "name": "Echo", "base_url": "https://echo.example", "docs_url": "https://e.org",
        "category": "Test", "https": True,
        "tools": [{
            "name": "echo_get", "title": "t", "description": "d", "path": "/{word}",
            "input": {"word": {"type": "string", "required": True}},
            "output": {"v": {"from": "v", "type": "integer"}},
            "examples": [{"word": "a"}, {"word": "b"}, {"word": "c"}],
            "fixtures": [{"body": '{"v": 1}', "source": "test"}],
        }],
    })
    cat = Catalog([api])
    opts = TransportOptions(mode=Mode.SIMULATE, profile="calm")
    _, rows, _ = await probe(cat, opts, "echo_get", 7, tmp_path / "p.db", politeness=ZERO)
    assert [json.loads(r["args"])["word"] for r in rows] == list("abcabca")
    assert [r["round"] for r in rows] == list(range(7))


async def test_simulated_many_rounds_are_fast_with_real_politeness(
    catalog: Catalog, tmp_path: Path
) -> None:
    tools = list(catalog)[:5]
    opts = TransportOptions(mode=Mode.SIMULATE, profile="calm")
    t = time.perf_counter()
    s, rows, _ = await probe(catalog, opts, tools, 200, tmp_path / "p.db",
                             mode="simulate", target="simulate:calm")
    elapsed = time.perf_counter() - t
    slowest = max(t.api.politeness.min_interval_s for t in tools)
    assert len(rows) == 1000
    assert s.duration_s >= 199 * slowest  # catalogue intervals were honoured, virtually
    assert elapsed < s.duration_s / 4  # ...not waited for (a loaded machine is not that slow)


async def test_nothing_reachable_is_a_local_network_failure(
    catalog: Catalog, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    s, rows, run = await probe(catalog, TransportOptions(sandbox=url), None, 5,
                               tmp_path / "p.db", politeness=ZERO, target=url, timeout_s=2)
    assert s.status == run["status"] == "local_network_failure"
    assert s.excluded and run["excluded"] == 1
    assert rows and all(r["excluded"] == 1 and r["error_code"] == "NETWORK_ERROR" for r in rows)
    assert len(rows) < 5 * len(catalog)  # stopped once every host had failed to connect
    assert s.n_skipped == 5 * len(catalog) - len(rows)


async def test_a_server_that_resets_is_the_apis_failure_not_ours(
    catalog: Catalog, calm_sandbox: str, tmp_path: Path
) -> None:
    url = f"{calm_sandbox}/_fault/reset"
    _s, rows, run = await probe(catalog, TransportOptions(sandbox=url), list(catalog)[:3], 2,
                               tmp_path / "p.db", politeness=ZERO, target=url)
    assert run["status"] == "done" and run["excluded"] == 0
    assert len(rows) == 6 and all(r["error_code"] == "NETWORK_ERROR" for r in rows)


@pytest.mark.parametrize("variant", ["hang", "drip"])
async def test_hostile_servers_never_hold_a_probe_past_its_deadline(
    catalog: Catalog, calm_sandbox: str, tmp_path: Path, variant: str
) -> None:
    url = f"{calm_sandbox}/_fault/{variant}"
    tools = list(catalog)[:4]
    s, rows, _ = await probe(catalog, TransportOptions(sandbox=url), tools, 2, tmp_path / "p.db",
                             politeness=ZERO, target=url, timeout_s=0.6)
    assert len(rows) == 8 and all(r["error_code"] == "TIMEOUT" for r in rows)
    assert s.status == "done" and not s.excluded  # a hanging server is the API's failure
    # each ended by the client's own deadline, never by the guard's backstop after it
    assert all(r["latency_ms"] < (0.6 + GRACE_S) * 1000 for r in rows)


async def test_retry_after_rate_limit_headers_and_redirects_are_stored(
    catalog: Catalog, calm_sandbox: str, tmp_path: Path
) -> None:
    tool = list(catalog)[:1]
    url = f"{calm_sandbox}/_fault/429"
    cfg = PolitenessConfig(override=Politeness(min_interval_s=0, jitter_s=0),
                           honour_retry_after=False)
    _, rows, _ = await probe(catalog, TransportOptions(sandbox=url), tool, 1, tmp_path / "a.db",
                             politeness=cfg, target=url)
    assert rows[0]["http_status"] == 429 and rows[0]["retry_after"] >= 1
    assert "retry-after" in json.loads(rows[0]["rate_limit"])
    url = f"{calm_sandbox}/_fault/redirect_ok"
    _, rows, _ = await probe(catalog, TransportOptions(sandbox=url), tool, 1, tmp_path / "b.db",
                             politeness=ZERO, target=url)
    assert rows[0]["outcome"] == "ok" and json.loads(rows[0]["redirects"])


async def test_stop_ends_the_run_after_calls_in_flight(catalog: Catalog, tmp_path: Path) -> None:
    stop = asyncio.Event()
    seen: list[str] = []

    def on_call(row: dict[str, Any], result: ToolResult) -> None:
        seen.append(row["tool"])
        if len(seen) == 7:
            stop.set()

    opts = TransportOptions(mode=Mode.SIMULATE, profile="calm")
    s, rows, run = await probe(catalog, opts, None, 3, tmp_path / "p.db", politeness=ZERO,
                               stop=stop, on_call=on_call)
    assert run["status"] == "interrupted" == s.status
    assert len(rows) == len(seen) == 7 == s.n_calls
    assert s.n_skipped == 3 * len(catalog) - 7


async def test_bad_arguments_raise_user_errors(catalog: Catalog, tmp_path: Path) -> None:
    client = make_client(catalog, TransportOptions(mode=Mode.SIMULATE, profile="calm"))
    with Store(tmp_path / "p.db") as store:
        with pytest.raises(RealprobeError, match="rounds must be at least 1"):
            await run_probes(catalog, None, 0, client, store)
        with pytest.raises(RealprobeError, match="Did you mean"):
            await run_probes(catalog, "uselesfacts_random", 1, client, store)
        name = next(iter(catalog)).name
        twice = await run_probes(catalog, f"{name},{name}", 2, client, store, politeness=ZERO)
        assert twice.n_calls == 2 and [t.tool for t in twice.tools] == [name]
    await client.aclose()


async def test_a_failing_database_fails_the_run_with_a_clear_error(
    catalog: Catalog, tmp_path: Path
) -> None:
    client = make_client(catalog, TransportOptions(mode=Mode.SIMULATE, profile="calm"))
    store = Store(tmp_path / "p.db")
    store.conn.execute("DROP TABLE probes")  # the database goes bad under the prober
    with pytest.raises(RealprobeError, match="no such table"):
        await run_probes(catalog, None, 2, client, store, politeness=ZERO)
    run = next(store.runs())
    assert run["status"] == "failed"
    store.close()
    await client.aclose()


def test_what_counts_as_reaching_a_server() -> None:
    def err(code: ErrorCode, message: str, reached: bool | None = None, **kw: Any) -> ToolResult:
        error = ToolError(code=code, message=message, reached=reached)
        return ToolResult(tool="t", ok=False, error=error, **kw)

    # the typed `reached` field decides, never the message text
    refused = err(ErrorCode.NETWORK_ERROR, "anything", reached=False)
    dns = err(ErrorCode.NETWORK_ERROR, "ConnectError: lookalike", reached=False)
    connect_timeout = err(ErrorCode.TIMEOUT, "timed out", reached=False)
    hang = err(ErrorCode.TIMEOUT, "no complete answer within the 3s deadline")
    drip = err(ErrorCode.TIMEOUT, "no complete answer within the 3s deadline", bytes=12)
    reset = err(ErrorCode.NETWORK_ERROR, "ConnectError: says the message", reached=True)
    http = err(ErrorCode.SERVER_ERROR, "HTTP 503", http_status=503)
    assert [reached_server(r) for r in (refused, dns, connect_timeout)] == [False] * 3
    assert reached_server(hang) is None
    assert [reached_server(r) for r in (drip, reset, http)] == [True] * 3
    assert reached_server(ToolResult(tool="t", ok=True, data={})) is True
