"""Record a harsh sandbox run with a tenacity retry policy; replay it twice offline: the same
results, the same retry sequences, the same error codes, and no socket opened."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_attempt, wait_none

from realprobe import (
    Catalog,
    ClientConfig,
    Mode,
    ToolResult,
    TransportOptions,
    call_tool,
    make_client,
)

FAST = ClientConfig(deadline_s=0.5, read_timeout_s=0.3)


def _retryable(result: ToolResult) -> bool:
    return result.error is not None and result.error.retryable


async def run_with_retries(catalog: Catalog, opts: TransportOptions) -> list[dict[str, Any]]:
    """Every tool, sequentially, each retried up to 4 attempts while the error is retryable."""
    client = make_client(catalog, opts, config=FAST)
    out: list[dict[str, Any]] = []
    try:
        for tool in catalog:
            attempts: list[ToolResult] = []

            async def once(t: Any = tool, log: list[ToolResult] = attempts) -> ToolResult:
                r = await call_tool(t, dict(t.examples[0]), client, timeout_s=0.5)
                log.append(r)
                return r

            def last(state: RetryCallState) -> ToolResult:
                assert state.outcome is not None
                return state.outcome.result()  # type: ignore[no-any-return]

            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(4), wait=wait_none(),
                retry=retry_if_result(_retryable), retry_error_callback=last,
            ):
                with attempt:
                    result = await once()
                if attempt.retry_state.outcome and not attempt.retry_state.outcome.failed:
                    attempt.retry_state.set_result(result)
            out.append({
                "tool": tool.name,
                "attempts": [
                    {"ok": a.ok, "code": a.code.value if a.code else None,
                     "message": a.error.message if a.error else None,
                     "http": a.http_status, "data": a.data, "bytes": a.bytes,
                     "retry_after": a.error.retry_after_s if a.error else None,
                     "latency_ms": a.latency_ms}
                    for a in attempts
                ],
            })
    finally:
        await client.aclose()
    return out


def without_latency(run: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**t, "attempts": [
            {k: v for k, v in a.items() if k != "latency_ms"} for a in t["attempts"]
        ]}
        for t in run
    ]


@pytest.fixture
def recorded(
    catalog: Catalog, sandbox_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[dict[str, Any]]]:
    import asyncio

    url = sandbox_factory("harsh", seed=3, latency_scale=0.0)
    path = tmp_path_factory.mktemp("faults") / "harsh.json"
    opts = TransportOptions(mode=Mode.RECORD, sandbox=url, cassette=path)
    live = asyncio.run(run_with_retries(catalog, opts))
    return path, live


def test_replay_twice_gives_the_recorded_retry_sequences_offline(
    catalog: Catalog, recorded: tuple[Path, list[dict[str, Any]]], no_network: None
) -> None:
    import asyncio

    path, live = recorded
    codes = {a["code"] for t in live for a in t["attempts"]}
    # the recording really holds the failure kinds this test is about
    assert {"TIMEOUT", "NETWORK_ERROR", "RATE_LIMIT_ERROR", "SERVER_ERROR"} <= codes, codes
    assert any(len(t["attempts"]) > 1 for t in live)

    opts = TransportOptions(mode=Mode.REPLAY, cassette=path)
    first = asyncio.run(run_with_retries(catalog, opts))
    second = asyncio.run(run_with_retries(catalog, opts))
    assert first == second  # byte-identical, latencies included (virtual clock)
    assert without_latency(first) == without_latency(live)
    for t_live, t_rep in zip(live, first, strict=True):
        for a_live, a_rep in zip(t_live["attempts"], t_rep["attempts"], strict=True):
            assert a_rep["latency_ms"] == pytest.approx(a_live["latency_ms"], abs=0.01)

    data = json.loads(path.read_text())
    kinds = {(e["error"]["type"], e["error"]["phase"])
             for e in data["realprobe"]["beyond_vcrpy"] if e.get("error")}
    assert any(t == "ReadTimeout" for t, _ in kinds), kinds
    assert any(p == "body" for _, p in kinds) or any(t == "ReadError" for t, _ in kinds), kinds


    # instant replay: the same codes and sequences, no time at all
    opts = TransportOptions(mode=Mode.REPLAY, cassette=path, replay_latency="none")
    instant = asyncio.run(run_with_retries(catalog, opts))
    assert without_latency(instant) == without_latency(live)
    assert all(a["latency_ms"] == 0.0 for t in instant for a in t["attempts"])
