"""Tool definitions for today's LLM APIs: strict function calling, the Responses API shape,
and `catalog --format mcp` identical to what the MCP server lists."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
from typing import Any

import pytest
from openai.lib._pydantic import _ensure_strict_json_schema
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

from realprobe import Catalog
from realprobe.adapters.exports import drop_nulls, openai_chat, openai_responses, strict_schema
from realprobe.tasks.outputs import OUTPUT_TOOLS

UNSUPPORTED = {"default", "minimum", "maximum", "pattern", "minLength", "maxLength", "format",
               "minItems", "maxItems", "title", "oneOf", "exclusiveMinimum", "exclusiveMaximum"}


def walk_objects(node: Any) -> list[dict[str, Any]]:
    out = []
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            out.append(node)
        for key, value in node.items():
            if key != "properties":
                out += walk_objects(value)
            else:
                for sub in value.values():
                    out += walk_objects(sub)
    elif isinstance(node, list):
        for item in node:
            out += walk_objects(item)
    return out


def keys_anywhere(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = set()
        for k, v in node.items():
            if k != "properties":
                found.add(k)
                found |= keys_anywhere(v)
            else:
                for sub in v.values():
                    found |= keys_anywhere(sub)
        return found
    if isinstance(node, list):
        return set().union(*(keys_anywhere(i) for i in node)) if node else set()
    return set()


def test_every_strict_export_is_a_fixed_point_of_the_sdk_helper(catalog: Catalog) -> None:
    chat = TypeAdapter(ChatCompletionFunctionToolParam)
    responses = TypeAdapter(FunctionToolParam)
    for tool in [*catalog, *OUTPUT_TOOLS.values()]:
        d = tool.openai_definition(strict=True)
        chat.validate_python(d)
        params = d["function"]["parameters"]
        assert d["function"]["strict"] is True
        helped = _ensure_strict_json_schema(copy.deepcopy(params), path=(), root=params)
        assert helped == params, tool.name
        assert not keys_anywhere(params) & UNSUPPORTED, (tool.name, keys_anywhere(params))
        for obj in walk_objects(params):
            assert obj["additionalProperties"] is False
            assert obj["required"] == list(obj["properties"])
    for tool in catalog:
        r = openai_responses(tool)
        responses.validate_python(r)
        assert r["strict"] is True and "function" not in r
        assert r["parameters"] == openai_chat(tool, strict=True)["function"]["parameters"]


def test_constraints_move_into_descriptions(catalog: Catalog) -> None:
    params = openai_chat(catalog.get("openmeteo_forecast"), strict=True)["function"]["parameters"]
    lat = params["properties"]["latitude"]
    assert lat["type"] == "number" and "minimum -90" in lat["description"]
    assert "maximum 90" in lat["description"]


def test_strict_nulls_mean_not_given(catalog: Catalog) -> None:
    """What a strict model sends (every key, null for the optional ones) validates."""
    for tool in catalog:
        params = strict_schema(tool.input_schema)
        example = dict(tool.examples[0]) if tool.examples else {}
        sent = {name: example.get(name) for name in params["properties"]}
        tool.validate_args(drop_nulls(sent))


def test_catalog_mcp_export_equals_what_the_server_lists(catalog: Catalog) -> None:
    from mcp import Client

    from realprobe import McpService, Mode, ServiceOptions, TransportOptions

    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "catalog", "--json", "--format", "mcp"],
        capture_output=True, text=True, timeout=120, check=True,
    )
    exported = json.loads(res.stdout)["tools"]

    async def listed() -> list[dict[str, Any]]:
        service = McpService(catalog, ServiceOptions(
            transport=TransportOptions(mode=Mode.SIMULATE, profile="calm")))
        async with service, Client(service.server) as client:
            tools = await client.list_tools()
        return [t.model_dump(by_alias=True, exclude_none=True, mode="json")
                for t in tools.tools]

    served = asyncio.run(listed())
    assert served == exported


@pytest.mark.parametrize("fmt", ["openai-strict", "openai-responses"])
def test_catalog_cli_exports(fmt: str) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "catalog", "--json", "--format", fmt],
        capture_output=True, text=True, timeout=120, check=True,
    )
    tools = json.loads(res.stdout)
    assert len(tools) >= 30
    adapter = TypeAdapter(
        ChatCompletionFunctionToolParam if fmt == "openai-strict" else FunctionToolParam
    )
    for t in tools:
        adapter.validate_python(t)
