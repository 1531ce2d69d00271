"""The MCP server in process, through the SDK's own Client: listing, success, every fault code,
bad arguments, unknown tools, probe rows, simulate mode."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client, MCPError
from mcp.types import CallToolResult, TextContent

from realprobe import (
    Catalog,
    ErrorCode,
    McpService,
    Mode,
    Profile,
    RealprobeError,
    ServiceOptions,
    Tool,
    ToolProfile,
    TransportOptions,
)
from realprobe.mcp.rendering import META_KEY


def plain_json_tool(catalog: Catalog) -> Tool:
    """A JSON tool whose first example takes no arguments (any answer shape will do)."""
    return next(t for t in catalog if t.spec.response == "json" and t.examples[0] == {})


def tool_with_typed_arg(catalog: Catalog) -> tuple[Tool, str]:
    for t in catalog:
        for name, f in t.spec.input.items():
            if f.type in ("integer", "number") and not f.enum:
                return t, name
    raise AssertionError("the catalogue has no tool with a numeric argument")


@asynccontextmanager
async def served(catalog: Catalog, **kw: Any) -> AsyncIterator[tuple[McpService, Client]]:
    transport = kw.pop("transport", TransportOptions())
    service = McpService(catalog, ServiceOptions(transport=transport, **kw))
    async with service, Client(service.server) as client:
        yield service, client


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def call_meta(result: CallToolResult) -> dict[str, Any]:
    assert result.meta is not None
    meta: dict[str, Any] = result.meta[META_KEY]
    return meta


async def test_lists_every_tool_with_schemas_and_read_only_hints(catalog: Catalog) -> None:
    async with served(catalog, transport=TransportOptions(mode=Mode.SIMULATE)) as (_, client):
        listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == [t.name for t in catalog]
    for wire_tool, tool in zip(listed, catalog, strict=True):
        wire = wire_tool.model_dump(by_alias=True, exclude_none=True, mode="json")
        assert wire["title"] == tool.spec.title
        assert tool.spec.description in wire["description"]
        assert wire["inputSchema"] == tool.input_schema
        assert wire["inputSchema"]["type"] == "object"
        assert wire["outputSchema"] == tool.output_schema
        jsonschema.Draft202012Validator.check_schema(wire["outputSchema"])
        assert wire["annotations"]["readOnlyHint"] is True
        assert wire["annotations"]["destructiveHint"] is False
        assert wire["annotations"]["openWorldHint"] is True


async def test_tools_option_serves_only_those(catalog: Catalog) -> None:
    names = [t.name for t in catalog][:2]
    other = [t.name for t in catalog][2]
    async with served(catalog, tools=",".join(names)) as (_, client):
        assert [t.name for t in (await client.list_tools()).tools] == names
        with pytest.raises(MCPError) as err:
            await client.call_tool(other, {})
    assert "started without it" in str(err.value)
    with pytest.raises(RealprobeError, match="unknown tool"):
        McpService(catalog, ServiceOptions(tools="no_such_tool_at_all"))


async def test_success_returns_structured_content_and_text(
    catalog: Catalog, calm_sandbox: str
) -> None:
    tool = plain_json_tool(catalog)
    async with served(catalog, transport=TransportOptions(sandbox=calm_sandbox)) as (_, client):
        result = await client.call_tool(tool.name, {})
    assert result.is_error is False
    data = result.structured_content
    assert isinstance(data, dict) and data
    jsonschema.validate(data, tool.output_schema)
    assert json.loads(text_of(result)) == data
    meta = call_meta(result)
    assert meta["ok"] is True and meta["code"] is None and meta["http_status"] == 200


# variant -> (code, retryable, has Retry-After)
FAULTS: dict[str, tuple[ErrorCode, bool, bool]] = {
    "hang": (ErrorCode.TIMEOUT, True, False),
    "reset": (ErrorCode.NETWORK_ERROR, True, False),
    "429": (ErrorCode.RATE_LIMIT_ERROR, True, True),
    "503": (ErrorCode.SERVER_ERROR, True, True),
    "500": (ErrorCode.SERVER_ERROR, True, False),
    "400": (ErrorCode.INVALID_INPUT, False, False),
    "404": (ErrorCode.NOT_FOUND, False, False),
    "403": (ErrorCode.AUTH_ERROR, False, False),
    "bad_json": (ErrorCode.INVALID_RESPONSE, False, False),
    "redirect_private": (ErrorCode.OPERATION_FAILED, False, False),
}


@pytest.mark.parametrize("variant", list(FAULTS))
async def test_each_fault_is_an_error_result_a_model_can_act_on(
    catalog: Catalog, calm_sandbox: str, variant: str
) -> None:
    code, retryable, has_retry_after = FAULTS[variant]
    tool = plain_json_tool(catalog)
    transport = TransportOptions(sandbox=f"{calm_sandbox}/_fault/{variant}")
    timeout = 0.5
    async with served(catalog, transport=transport, timeout_s=timeout) as (_, client):
        t0 = time.perf_counter()
        result = await client.call_tool(tool.name, {})
        elapsed = time.perf_counter() - t0
        # the server keeps serving after a failure
        assert len((await client.list_tools()).tools) == len(catalog)
    assert result.is_error is True
    assert result.structured_content is None
    text = text_of(result)
    assert text.startswith(code.value), text
    meta = call_meta(result)
    assert meta["code"] == code.value and meta["retryable"] is retryable
    if retryable:
        assert "Retry may help: yes, after" in text
    else:
        assert "Retry may help: no" in text
    if has_retry_after:
        wait = meta["retry_after_s"]
        assert wait is not None and wait > 0
        assert f"after {wait:g} s (Retry-After from the API)" in text
    else:
        assert "Retry-After from the API" not in text
    if variant == "hang":
        assert f"{timeout:g}s" in text
    assert elapsed < timeout + 2.0


async def test_wrong_argument_types_are_invalid_input_and_nothing_is_sent(
    catalog: Catalog, calm_sandbox: str, tmp_path: Path
) -> None:
    tool, arg = tool_with_typed_arg(catalog)
    db = tmp_path / "rp.db"
    transport = TransportOptions(sandbox=calm_sandbox)
    async with served(catalog, transport=transport, db=str(db)) as (service, client):
        wrong_type = await client.call_tool(tool.name, {**tool.examples[0], arg: "not a number"})
        extra = await client.call_tool(tool.name, {**tool.examples[0], "bogus_arg": 1})
        ok = await client.call_tool(tool.name, dict(tool.examples[0]))
        run_id = service.run_id
    for bad, where in ((wrong_type, arg), (extra, "bogus_arg")):
        assert bad.is_error is True
        text = text_of(bad)
        assert text.startswith("INVALID_INPUT: ") and where in text
        assert "Retry may help: no; fix the arguments" in text
    assert ok.is_error is False
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT tool, outcome, source FROM probes WHERE run_id = ?", [run_id])
        # the two rejected calls never reached the API, so they are not probe rows
        assert rows.fetchall() == [(tool.name, "ok", "mcp")]


async def test_unknown_tool_is_a_protocol_error_and_the_server_keeps_serving(
    catalog: Catalog, calm_sandbox: str
) -> None:
    tool = plain_json_tool(catalog)
    misspelt = tool.name[:-1] + "x"
    async with served(catalog, transport=TransportOptions(sandbox=calm_sandbox)) as (_, client):
        with pytest.raises(MCPError) as err:
            await client.call_tool(misspelt, {})
        assert err.value.error.code == -32602
        assert f"Unknown tool: {misspelt!r}" in str(err.value) and tool.name in str(err.value)
        after = await client.call_tool(tool.name, {})
    assert after.is_error is False


async def test_db_stores_served_calls_as_probe_rows(
    catalog: Catalog, sandbox_factory: Any, tmp_path: Path
) -> None:
    tool = plain_json_tool(catalog)
    url = sandbox_factory("calm")
    db = tmp_path / "rp.db"
    async with served(
        catalog, transport=TransportOptions(sandbox=f"{url}/_fault/429"), db=str(db),
        vantage="ci-test",
    ) as (service, client):
        await client.call_tool(tool.name, {})
        await client.call_tool(tool.name, {})
        run_id = service.run_id
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute("SELECT * FROM probes ORDER BY id")]
        run = dict(conn.execute("SELECT * FROM probe_runs WHERE id = ?", [run_id]).fetchone())
    assert len(rows) == 2
    for i, row in enumerate(rows):
        assert row["run_id"] == run_id and row["source"] == "mcp" and row["vantage"] == "ci-test"
        assert row["tool"] == tool.name and row["api"] == tool.api_id and row["round"] == i
        assert row["outcome"] == "error" and row["error_code"] == "RATE_LIMIT_ERROR"
        assert row["http_status"] == 429 and row["retry_after"] > 0
        assert row["started_at"].endswith("Z") and row["timeout_s"] > 0
    assert run["status"] == "done" and run["n_calls"] == 2 and run["n_error"] == 2
    # labelled like `realprobe probe` runs, so stats can tell sandbox traffic from live
    assert (run["mode"], run["target"]) == ("live", f"sandbox:{url}/_fault/429")
    assert run["target_kind"] == "sandbox" and run["source"] == "mcp"
    assert all(r["target_kind"] == "sandbox" for r in rows)


async def test_simulate_mode_follows_the_profile_and_the_seed(catalog: Catalog) -> None:
    tool = plain_json_tool(catalog)
    profile = Profile(
        tools={tool.name: ToolProfile(success_rate=0.5, errors={ErrorCode.SERVER_ERROR: 1.0})}
    )

    async def codes(seed: int) -> list[str | None]:
        transport = TransportOptions(mode=Mode.SIMULATE, profile=profile, seed=seed)
        async with served(catalog, transport=transport) as (_, client):
            out = []
            for _ in range(20):
                meta = call_meta(await client.call_tool(tool.name, {}))
                out.append(meta["code"])
            return out

    first = await codes(7)
    assert await codes(7) == first
    assert set(first) == {None, "SERVER_ERROR"}
