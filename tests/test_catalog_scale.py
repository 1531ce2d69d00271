"""The catalogue with the shipped families on (100+ tools): the directly written schemas equal
pydantic's, MCP tools/list serves every tool valid, and probe runs imported tools."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import jsonschema
import pytest
from cli_runner import invoke
from mcp import Client

from realprobe import (
    Catalog,
    McpService,
    ServiceOptions,
    TransportOptions,
    sandbox_running,
)
from realprobe.adapters.spec import TOOL_NAME_RE

FAMILIES = ["pokeapi", "openmeteo"]


@pytest.fixture(scope="module")
def big() -> Catalog:
    return Catalog.load(FAMILIES)


def test_direct_schemas_equal_pydantic_schemas_for_every_tool(big: Catalog) -> None:
    assert len(big) > 130
    for tool in big:
        assert tool.input_schema == tool.input_model.model_json_schema(), tool.name
        assert tool.output_schema == tool.output_model.model_json_schema(), tool.name
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)


def test_a_bad_example_still_fails_at_load(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "apis": [
                    {
                        "id": "x",
                        "name": "X",
                        "base_url": "https://x.example",
                        "docs_url": "https://x.example",
                        "category": "Test",
                        "https": True,
                        "tools": [
                            {
                                "name": "x_get",
                                "title": "X",
                                "description": "d",
                                "path": "/{n}",
                                "input": {"n": {"type": "integer", "required": True, "maximum": 5}},
                                "output": {"v": {"type": "any", "from": ""}},
                                "examples": [{"n": 7}],
                            }
                        ],
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    from realprobe import CatalogError

    with pytest.raises(CatalogError, match=r"examples\[0\] fails the input schema at n"):
        Catalog.load([bad])


def test_mcp_tools_list_serves_every_tool_of_the_families(big: Catalog) -> None:
    async def go() -> list[object]:
        service = McpService(big, ServiceOptions(transport=TransportOptions(profile="calm")))
        async with service, Client(service.server) as client:
            return list((await client.list_tools()).tools)

    listed = asyncio.run(go())
    names = [t.name for t in listed]  # type: ignore[attr-defined]
    assert len(names) == len(set(names)) == len(big)
    assert all(TOOL_NAME_RE.match(n) for n in names)
    assert "pokeapi_pokemon_retrieve" in names and "om_forecast" in names


def test_probe_runs_imported_tools_through_the_sandbox(big: Catalog, tmp_path: Path) -> None:
    tools = "pokeapi_version_retrieve,pokeapi_ability_list,pokeapi_ability_retrieve,om_forecast"
    db = tmp_path / "p.db"
    with sandbox_running("calm", latency_scale=0, catalog=big) as url:
        res = invoke(
            [
                "probe",
                "--tools",
                tools,
                "--rounds",
                "1",
                "--sandbox",
                url,
                "--db",
                str(db),
                "--politeness",
                "off",
                "--catalog",
                "pokeapi",
                "--catalog",
                "openmeteo",
                "--json",
            ],
        )
    assert res.exit_code == 0, res.output
    import sqlite_utils

    rows = {r["tool"]: r for r in sqlite_utils.Database(db)["probes"].rows}
    assert set(rows) == set(tools.split(","))
    assert rows["pokeapi_version_retrieve"]["outcome"] == "ok"  # served the real body
    assert rows["pokeapi_ability_list"]["outcome"] == "ok"
    assert rows["om_forecast"]["outcome"] == "ok"
    missing = rows["pokeapi_ability_retrieve"]
    assert missing["error_code"] == "OPERATION_FAILED" and "no fixture" in missing["detail"]
