"""Every failure path through the real loopback sandbox maps to exactly one taxonomy code."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx
import pytest

from realprobe import (
    Catalog,
    ClientConfig,
    ErrorCode,
    RealprobeError,
    ToolResult,
    TransportOptions,
    call_tool,
    call_tool_sync,
    make_client,
    make_sync_client,
)
from realprobe.simulator.render import VARIANTS

FAST = ClientConfig(deadline_s=1.0, read_timeout_s=0.6, connect_timeout_s=0.5)
TOOL = "zenquotes_random"


Caller = Callable[..., ToolResult]


def _call_async(
    catalog: Catalog, url: str, tool: str, args: dict | None, config: ClientConfig
) -> ToolResult:
    async def go() -> ToolResult:
        client = make_client(catalog, TransportOptions(sandbox=url), config=config)
        try:
            t = catalog.get(tool)
            return await call_tool(t, args if args is not None else dict(t.examples[0]), client)
        finally:
            await client.aclose()

    return asyncio.run(go())


def _call_sync(
    catalog: Catalog, url: str, tool: str, args: dict | None, config: ClientConfig
) -> ToolResult:
    with make_sync_client(catalog, TransportOptions(sandbox=url), config=config) as client:
        t = catalog.get(tool)
        return call_tool_sync(t, args if args is not None else dict(t.examples[0]), client)


@pytest.fixture(params=["async", "sync"])
def call(request: pytest.FixtureRequest) -> Caller:
    """Every test runs through both clients: the policies are the same."""
    impl = _call_async if request.param == "async" else _call_sync

    def caller(
        catalog: Catalog,
        url: str,
        tool: str = TOOL,
        args: dict | None = None,
        config: ClientConfig = FAST,
    ) -> ToolResult:
        return impl(catalog, url, tool, args, config)

    return caller


FAILURES = sorted(v for v, code in VARIANTS.items() if code is not None)


@pytest.mark.parametrize("variant", FAILURES)
def test_every_fault_variant_is_classified(
    call: Caller, catalog: Catalog, calm_sandbox: str, variant: str
) -> None:
    started = time.perf_counter()
    result = call(catalog, f"{calm_sandbox}/_fault/{variant}")
    elapsed = time.perf_counter() - started
    assert not result.ok
    assert result.code is VARIANTS[variant], result.summary()
    # nothing holds a call past its deadline (plus scheduling slack)
    assert elapsed < FAST.deadline_s + 0.5


def test_drip_is_cut_at_the_total_deadline(
    call: Caller, catalog: Catalog, calm_sandbox: str
) -> None:
    config = ClientConfig(deadline_s=1.5, read_timeout_s=5.0)
    started = time.perf_counter()
    result = call(catalog, f"{calm_sandbox}/_fault/drip", config=config)
    elapsed = time.perf_counter() - started
    assert result.code is ErrorCode.TIMEOUT
    assert "deadline" in result.error.message  # type: ignore[union-attr]
    assert 1.4 < elapsed < 2.0


def test_retry_after_seconds_and_http_date(
    call: Caller, catalog: Catalog, calm_sandbox: str
) -> None:
    secs = call(catalog, f"{calm_sandbox}/_fault/429")
    date = call(catalog, f"{calm_sandbox}/_fault/429_date")
    assert secs.error and secs.error.retry_after_s is not None and secs.error.retry_after_s >= 1
    assert date.error and date.error.retry_after_s is not None
    assert 1.0 <= date.error.retry_after_s <= 7.0
    assert secs.http_status == 429 and date.http_status == 429


def test_cloudflare_52x_and_503(call: Caller, catalog: Catalog, calm_sandbox: str) -> None:
    for status in ("503", "520", "522", "523", "524"):
        r = call(catalog, f"{calm_sandbox}/_fault/{status}")
        assert r.code is ErrorCode.SERVER_ERROR and r.http_status == int(status)


def test_redirect_to_private_or_loopback_is_refused_and_recorded(
    call: Caller, catalog: Catalog, calm_sandbox: str
) -> None:
    for variant, host in (
        ("redirect_private", "10.255.255.1"),
        ("redirect_loopback", "127.0.0.1:9"),
    ):
        r = call(catalog, f"{calm_sandbox}/_fault/{variant}")
        assert r.code is ErrorCode.OPERATION_FAILED
        assert r.redirects and host in r.redirects[0]


def test_public_redirect_is_followed_and_the_chain_kept(
    call: Caller, catalog: Catalog, calm_sandbox: str
) -> None:
    r = call(catalog, f"{calm_sandbox}/_fault/redirect_ok")
    assert r.ok, r.summary()
    assert r.redirects and r.redirects[0].startswith("301 https://zenquotes.io/_moved/")


def test_json_served_as_html_content_type_is_parsed(
    call: Caller, catalog: Catalog, calm_sandbox: str
) -> None:
    r = call(catalog, f"{calm_sandbox}/_fault/ok_html_ctype")
    assert r.ok, r.summary()


def test_plain_text_404(call: Caller, catalog: Catalog, calm_sandbox: str) -> None:
    r = call(catalog, f"{calm_sandbox}/_fault/404")
    assert r.code is ErrorCode.NOT_FOUND and "Not Found" in r.error.message  # type: ignore[union-attr]


def test_gzip_bomb_and_oversized_are_capped(
    call: Caller, catalog: Catalog, calm_sandbox: str
) -> None:
    for variant in ("gzip_bomb", "oversized"):
        r = call(catalog, f"{calm_sandbox}/_fault/{variant}")
        assert r.code is ErrorCode.INVALID_RESPONSE
        assert "cap" in r.error.message  # type: ignore[union-attr]
        assert r.bytes <= FAST.max_bytes + 65536


def test_every_real_failure_fixture_through_the_sandbox(
    call: Caller, catalog: Catalog, calm_sandbox: str
) -> None:
    """Soft failures (200 bodies that are errors) and real error bodies, served for real."""
    seen = 0
    for tool in catalog:
        for i, fx in enumerate(tool.spec.fixtures):
            if fx.kind == "ok":
                continue
            r = call(catalog, f"{calm_sandbox}/_fault/fixture-{i}", tool=tool.name)
            assert r.code is fx.code, f"{tool.name} fixture {i}: {r.summary()}"
            seen += 1
    assert seen >= 3  # zenquotes, advice slip, opentdb at least


def test_every_tool_answers_under_calm(call: Caller, catalog: Catalog, calm_sandbox: str) -> None:
    for tool in catalog:
        r = call(catalog, calm_sandbox, tool=tool.name)
        assert r.ok, f"{tool.name}: {r.summary()}"
        tool.output_model.model_validate(r.data)


def test_unknown_sandbox_variant_is_a_clear_error(
    call: Caller, catalog: Catalog, calm_sandbox: str
) -> None:
    """Refused where the target is checked, before any call (as on the command line); the
    sandbox itself answers such a path with a labelled 400 for clients that get there."""
    with pytest.raises(RealprobeError, match="unknown fault variant 'nonsense'"):
        call(catalog, f"{calm_sandbox}/_fault/nonsense")
    raw = httpx.get(f"{calm_sandbox}/_fault/nonsense/x", timeout=10)
    assert raw.status_code == 400
    assert raw.headers["X-Realprobe-Error"] == "unknown-fault-variant"


def test_connection_refused_is_network_error(call: Caller, catalog: Catalog) -> None:
    r = call(catalog, "http://127.0.0.1:9")
    assert r.code is ErrorCode.NETWORK_ERROR
