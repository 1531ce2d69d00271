"""Record a session over MCP against the sandbox, replay it over MCP offline: same results."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from cli_runner import main
from mcp import Client

from realprobe import Catalog, McpService, Mode, ServiceOptions, TransportOptions

ROUNDS = 2
#: the sandbox answers at once (latency scale 0) and holds each drawn hang to the deadline,
#: so recording takes about ROUNDS x DEADLINE_S
DEADLINE_S = 3.0


async def run_session(catalog: Catalog, transport: TransportOptions) -> list[dict[str, Any]]:
    """Every tool with its first example, concurrently within a round; rounds in sequence, so
    identical requests repeat in a known order."""
    # a deadline far from every drawn latency (hangs still end at it): an answer that lands
    # as the deadline fires on a loaded machine is a TIMEOUT live and a success replayed
    service = McpService(catalog, ServiceOptions(transport=transport, timeout_s=DEADLINE_S))
    out: list[dict[str, Any]] = []

    async def one(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
        r = await client.call_tool(name, args)
        return {
            "tool": name,
            "is_error": r.is_error,
            "text": r.content[0].text if r.content else None,  # type: ignore[union-attr]
            "structured": r.structured_content,
            "code": (r.meta or {}).get("realprobe/call", {}).get("code"),
        }

    async with service, Client(service.server) as client:
        for _ in range(ROUNDS):
            calls = (one(client, t.name, dict(t.examples[0])) for t in catalog)
            out += await asyncio.gather(*calls)
    return out


async def test_replay_over_mcp_gives_the_recorded_results_offline(
    catalog: Catalog, sandbox_factory: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = sandbox_factory("harsh", seed=3)
    cassette = tmp_path / "session.json"
    recorded = await run_session(
        catalog, TransportOptions(mode=Mode.RECORD, sandbox=url, cassette=cassette)
    )
    assert cassette.exists()
    codes = {r["code"] for r in recorded}
    assert None in codes and len(codes - {None}) >= 3, codes  # successes and several faults

    request.getfixturevalue("no_network")  # from here on, any socket connect fails
    replayed = await run_session(catalog, TransportOptions(mode=Mode.REPLAY, cassette=cassette))
    assert replayed == recorded


def test_replay_with_a_missing_cassette_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.json"
    with pytest.raises(SystemExit) as exited:
        main(["mcp", "--mode", "replay", "--cassette", str(missing)])
    out, err = capsys.readouterr()
    assert exited.value.code == 2
    assert err.startswith("error: ") and str(missing) in err
    assert "Traceback" not in err and out == ""
