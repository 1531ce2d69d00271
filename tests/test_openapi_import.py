"""`realprobe catalog import-openapi`: real descriptions import into valid, unique, deterministic
tools; URLs, Swagger 2.0 and broken documents give results or one-line messages."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml
from cli_runner import invoke
from mcp.types import Tool as McpTool

from realprobe import Catalog, RealprobeError, call_tool_sync, make_sync_client
from realprobe.adapters.catalog import builtin_specs, load_file, parse_catalog
from realprobe.adapters.openapi import ImportOptions, OpenApiError, import_openapi
from realprobe.adapters.spec import TOOL_NAME_RE
from realprobe.mcp.definitions import mcp_tool
from tests.loopback_http import serving

DATA = Path(__file__).parent / "data" / "openapi"
JSON_TYPE = "application/json"
DOCS = sorted(DATA.glob("*.yml"))
FAMILIES = Path(__file__).parents[1] / "realprobe" / "adapters" / "families"


def cli(*args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) as `realprobe` gives them: a RealprobeError is exit 2 with
    one line; anything else escaping is a traceback, which fails the test."""
    res = invoke(list(args))
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        if isinstance(res.exception, RealprobeError):
            return 2, res.stdout, res.stderr + f"error: {res.exception}\n"
        raise res.exception
    return res.exit_code, res.stdout, res.stderr


def imported(path: Path, **kw: Any) -> Any:
    return import_openapi(path.read_text(encoding="utf-8"), path.name, ImportOptions(**kw))


def write(tmp: Path, name: str, doc: dict[str, Any] | str) -> Path:
    p = tmp / name
    p.write_text(
        doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False), encoding="utf-8"
    )
    return p


def small_doc(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": "Tiny", "version": "1"},
        "servers": [{"url": "https://tiny.example/v1"}],
        "paths": {
            "/things/{id}": {
                "get": {
                    "operationId": "getThing",
                    "summary": "Get a thing",
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/Thing"},
                                    "example": {"id": 1, "name": "a"},
                                }
                            },
                        }
                    },
                }
            }
        },
        "components": {
            "schemas": {
                "Thing": {
                    "type": "object",
                    "required": ["id", "name"],
                    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                }
            }
        },
    }
    doc.update(over)
    return doc


# -- every real document ---------------------------------------------------------------------


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_real_document_imports_into_valid_mcp_and_openai_tools(path: Path) -> None:
    report = imported(path)
    assert report.tools >= 1 and not report.skipped
    apis = parse_catalog({"apis": report.apis}, path.name)
    cat = Catalog(apis)
    names = [t.name for t in cat]
    assert len(names) == len(set(names)) == report.tools
    for tool in cat:
        assert TOOL_NAME_RE.match(tool.name)
        definition = tool.mcp_definition()
        jsonschema.Draft202012Validator.check_schema(definition["inputSchema"])
        jsonschema.Draft202012Validator.check_schema(definition["outputSchema"])
        McpTool.model_validate(mcp_tool(tool).model_dump(by_alias=True))
        fn = tool.openai_definition()
        assert fn["type"] == "function" and fn["function"]["name"] == tool.name
        assert fn["function"]["parameters"]["type"] == "object"
        jsonschema.Draft202012Validator.check_schema(fn["function"]["parameters"])
        assert 0 < len(fn["function"]["description"]) <= 1024
        # the examples fill every required input and pass both the model and the schema
        required = fn["function"]["parameters"].get("required", [])
        for example in tool.examples:
            assert set(required) <= set(example)
            tool.input_model.model_validate(example)
            jsonschema.validate(example, tool.input_schema)


def test_pokeapi_imports_about_a_hundred_get_operations() -> None:
    report = imported(DATA / "pokeapi__openapi.yml", prefix="pokeapi", api_id="pokeapi-v2")
    assert report.tools == 100
    tools = {t["name"]: t for t in report.apis[0]["tools"]}
    ability = tools["pokeapi_ability_retrieve"]
    assert ability["path"] == "/api/v2/ability/{id}/"
    assert ability["input"]["id"]["required"] is True
    assert ability["examples"][0] == {"id": "1"}
    # $refs resolved: the list's results are {name, url} items
    listing = tools["pokeapi_ability_list"]
    assert set(listing["output"]["results"]["items"]) == {"name", "url"}
    assert listing["query"] == {"limit": "{limit}", "offset": "{offset}", "q": "{q}"}
    assert report.apis[0]["base_url"] == "https://pokeapi.co"


def test_open_meteo_servers_per_path_arrays_and_defaults() -> None:
    report = imported(DATA / "open-meteo__flood.yml", prefix="om")
    (api,) = report.apis
    assert api["base_url"] == "https://flood-api.open-meteo.com"  # declared on the path
    (tool,) = api["tools"]
    assert tool["name"] == "om_flood"
    daily = tool["input"]["daily"]  # explode: false array of an enum
    assert daily["type"] == "string"
    assert re.fullmatch(daily["pattern"], "river_discharge,river_discharge_max")
    assert not re.fullmatch(daily["pattern"], "river_discharge,bogus")
    assert tool["input"]["forecast_days"] == {
        "type": "integer",
        "description": "Number of forecast days. Up to 366 days.",
        "default": 92,
        "minimum": 0,
        "maximum": 366,
    }
    assert tool["input"]["timeformat"]["enum"] == ["iso8601", "unixtime"]
    assert tool["examples"][0] == {"latitude": "52.52", "longitude": "13.41"}
    assert "apikey" not in tool["input"]  # an optional credential is left out...
    assert any("apikey" in w.text for w in report.warnings)  # ...and said so
    with_auth = imported(DATA / "open-meteo__flood.yml", prefix="om", include_auth=True)
    key = with_auth.apis[0]["tools"][0]["input"]["apikey"]
    assert key["secret"] is True


def test_import_is_deterministic_and_matches_the_shipped_families(tmp_path: Path) -> None:
    forecast = [
        str(DATA / f"open-meteo__{n}.yml")
        for n in ("forecast", "air-quality", "marine", "elevation", "flood")
    ]
    for args, family in (
        ([*forecast, "--prefix", "om", "--category", "Weather"], "openmeteo.json"),
        (
            [
                str(DATA / "pokeapi__openapi.yml"),
                "--api-id",
                "pokeapi-v2",
                "--prefix",
                "pokeapi",
                "--category",
                "Games & Comics",
            ],
            "pokeapi.json",
        ),
    ):
        outs = []
        for i in range(2):
            out = tmp_path / f"{i}-{family}"
            code, _, err = cli("catalog", "import-openapi", *args, "-o", str(out))
            assert code == 0, err
            outs.append(out.read_bytes())
        assert outs[0] == outs[1]
        assert outs[0] == (FAMILIES / family).read_bytes(), f"regenerate {family}"


def test_families_load_by_name_with_the_builtin_catalogue() -> None:
    cat = Catalog.load(["pokeapi", "openmeteo"])
    builtin = {t.name for a in builtin_specs() for t in a.tools}
    assert builtin <= set(cat.tools)  # the hand-written tools stay
    assert len(cat) == len(builtin) + 105
    assert all(TOOL_NAME_RE.match(n) for n in cat.tools)
    code, out, _ = cli(
        "catalog", "--catalog", "pokeapi", "--catalog", "openmeteo", "--json", "--format", "openai"
    )
    assert code == 0
    assert len(json.loads(out)) == len(cat)
    code, _, err = cli("catalog", "--catalog", "nosuchfamily")
    assert code == 2 and "nosuchfamily" in err and "pokeapi" in err


@pytest.mark.parametrize("suffix", [".yaml", ".toml"])
def test_yaml_and_toml_output_load_like_json(tmp_path: Path, suffix: str) -> None:
    as_json = tmp_path / "flood.json"
    out = tmp_path / f"flood{suffix}"
    for target in (as_json, out):
        code, _, err = cli(
            "catalog", "import-openapi", str(DATA / "open-meteo__flood.yml"), "-o", str(target)
        )
        assert code == 0, err
    assert load_file(out) == load_file(as_json)
    assert [t.name for a in load_file(out) for t in a.tools] == [
        "open_meteo_flood_forecast_api_flood"
    ]


# -- selection, auth, names -------------------------------------------------------------------


def test_select_by_operation_id_path_glob_and_tag() -> None:
    doc = DATA / "pokeapi__openapi.yml"
    by_id = imported(doc, select=("ability_*",))
    assert sorted(t["name"] for t in by_id.apis[0]["tools"]) == [
        "pokeapi_ability_list",
        "pokeapi_ability_retrieve",
    ]
    by_path = imported(doc, select=("/api/v2/berry/{*}/",))
    assert {t["path"] for t in by_path.apis[0]["tools"]} == {"/api/v2/berry/{id}/"}
    by_tag = imported(doc, select=("tag:utility",))
    assert by_tag.tools >= 1 and by_tag.not_selected == 100 - by_tag.tools


def test_auth_operations_are_skipped_unless_asked_and_then_take_secret_inputs(
    tmp_path: Path,
) -> None:
    doc = small_doc()
    op = doc["paths"]["/things/{id}"]["get"]
    doc["paths"]["/private"] = {
        "get": {**op, "operationId": "private", "parameters": [], "security": [{"key": []}]}
    }
    doc["paths"]["/oauth"] = {
        "get": {**op, "operationId": "mine", "parameters": [], "security": [{"oauth": ["read"]}]}
    }
    doc["components"]["securitySchemes"] = {
        "key": {"type": "apiKey", "in": "query", "name": "api_key"},
        "oauth": {"type": "oauth2", "flows": {}},
    }
    path = write(tmp_path, "auth.yaml", doc)
    plain = imported(path)
    assert [t["name"] for t in plain.apis[0]["tools"]] == ["tiny_get_thing"]
    reasons = {n.operation: n.text for n in plain.skipped}
    assert "API key 'api_key' in query" in reasons["GET /private"]
    assert "OAuth" in reasons["GET /oauth"]
    full = imported(path, include_auth=True)
    tools = {t["name"]: t for t in full.apis[0]["tools"]}
    key = tools["tiny_private"]
    assert key["input"]["api_key"] == {
        "type": "string",
        "required": True,
        "secret": True,
        "description": "API key (sent as query 'api_key')",
    }
    assert key["query"] == {"api_key": "{api_key}"}
    bearer = tools["tiny_mine"]
    assert bearer["headers"] == {"Authorization": "Bearer {access_token}"}
    assert bearer["input"]["access_token"]["secret"] is True
    cat = Catalog(parse_catalog({"apis": full.apis}, "x"))
    assert cat.get("tiny_mine").request_headers({"access_token": "t0k"}) == {
        "Authorization": "Bearer t0k",
        "Accept": "application/json",
    }


def test_names_without_operation_id_are_readable_and_unique(tmp_path: Path) -> None:
    op = {"responses": {"200": {"description": "ok"}}}
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "Names", "version": "1"},
        "servers": [{"url": "https://n.example"}],
        "paths": {
            "/v2/users/{user-id}/posts": {
                "get": {
                    **op,
                    "parameters": [
                        {
                            "name": "user-id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "integer", "minimum": 5},
                        }
                    ],
                }
            },
            "/v2/users": {"get": op, "post": op},
            "/users": {"get": op},
            "/x" + "y" * 80: {"get": op},
        },
    }
    report = imported(write(tmp_path, "n.yaml", doc))
    tools = report.apis[0]["tools"]
    names = [t["name"] for t in tools]
    assert names[:3] == ["names_users_by_user_id_posts", "names_users", "names_users_2"]
    assert len(set(names)) == len(names) and all(TOOL_NAME_RE.match(n) for n in names)
    first = tools[0]
    assert first["path"] == "/v2/users/{user_id}/posts"
    assert first["examples"] == [{"user_id": 5}]  # derived from the minimum
    assert [n.text for n in report.skipped] == ["POST is not a safe method"]


# -- served by URL, called against a loopback upstream ------------------------------------------


def test_spec_served_on_loopback_imports_by_url(tmp_path: Path) -> None:
    flood = (DATA / "open-meteo__flood.yml").read_bytes()
    swagger = yaml.safe_dump(
        {
            "swagger": "2.0",
            "info": {"title": "No host", "version": "1"},
            "basePath": "/api",
            "paths": {
                "/ping": {
                    "get": {
                        "operationId": "ping",
                        "responses": {
                            "200": {
                                "description": "ok",
                                "schema": {
                                    "type": "object",
                                    "properties": {"ok": {"type": "boolean"}},
                                },
                            }
                        },
                    }
                }
            },
        }
    ).encode()
    routes = {
        "/specs/flood.yml": (200, "application/yaml", flood),
        "/specs/nohost.yaml": (200, "application/yaml", swagger),
    }
    with serving(routes) as srv:
        out = tmp_path / "flood.json"
        code, stdout, err = cli(
            "catalog", "import-openapi", f"{srv.url}/specs/flood.yml", "-o", str(out)
        )
        assert code == 0, err
        assert "1 tools" in stdout.replace("\n", " ")
        out2 = tmp_path / "nohost.json"
        code, _, err = cli(
            "catalog", "import-openapi", f"{srv.url}/specs/nohost.yaml", "-o", str(out2)
        )
        assert code == 0, err
        code, _, err = cli(
            "catalog",
            "import-openapi",
            f"{srv.url}/specs/missing.yml",
            "-o",
            str(tmp_path / "m.json"),
        )
    assert code == 2 and "HTTP 404" in err and len(err.strip().splitlines()) == 1
    (api,) = load_file(out)
    assert api.tools[0].path == "/v1/flood"
    (api2,) = load_file(out2)
    assert api2.base_url == srv.url + "/api"  # no host: the URL it came from, plus basePath
    assert srv.requests[:2] == ["/specs/flood.yml", "/specs/nohost.yaml"]


def _with_base(report_apis: list[dict[str, Any]], base: str) -> Catalog:
    """The imported APIs with their host replaced by a loopback server's (paths kept)."""
    apis = [{**a, "base_url": base + urlsplit(a["base_url"]).path} for a in report_apis]
    return Catalog(parse_catalog({"apis": apis}, "upstream"))


def test_imported_tools_called_against_a_loopback_upstream_parse_real_bodies(
    catalog: Catalog,
) -> None:
    """The hand-written tools' recorded PokéAPI and Open-Meteo bodies, served on loopback at
    the documented paths, parse into the imported tools' output fields."""
    version_body = catalog.get("pokeapi_version").spec.fixtures[0].body.encode()
    ability_body = catalog.get("pokeapi_resource_list").spec.fixtures[0].body.encode()
    forecast_body = catalog.get("openmeteo_forecast").spec.fixtures[0].body.encode()
    json_type = "application/json; charset=utf-8"
    routes = {
        "/api/v2/version/1/": (200, json_type, version_body),
        "/api/v2/ability/": (200, json_type, ability_body),
        "/v1/forecast": (200, json_type, forecast_body),
    }
    poke = imported(DATA / "pokeapi__openapi.yml", prefix="pokeapi", api_id="pokeapi-v2")
    meteo = imported(DATA / "open-meteo__forecast.yml", prefix="om")
    with serving(routes) as srv:
        cat = _with_base(poke.apis + meteo.apis, srv.url)
        with make_sync_client(cat) as client:
            version = call_tool_sync(cat.get("pokeapi_version_retrieve"), {"id": "1"}, client)
            ability = call_tool_sync(
                cat.get("pokeapi_ability_list"), {"limit": 10, "offset": 10}, client
            )
            forecast = call_tool_sync(
                cat.get("om_forecast"), cat.get("om_forecast").examples[0], client
            )
    assert version.ok, version.error
    assert version.data is not None and version.data["name"] == "red"
    assert version.data["version_group"]["name"] == "red-blue"
    assert ability.ok, ability.error
    assert ability.data is not None and ability.data["count"] == 293
    assert ability.data["results"][0] == {
        "name": "water-absorb",
        "url": "https://pokeapi.co/api/v2/ability/11/",
    }
    assert forecast.ok, forecast.error
    assert forecast.data is not None and forecast.data["daily"]["time"][0] == "2025-10-01"
    assert "/api/v2/ability/?limit=10&offset=10" in srv.requests
    assert any(r.startswith("/v1/forecast?latitude=52.52&longitude=13.41") for r in srv.requests)


# -- real-world flaws and broken documents ---------------------------------------------------


def test_rule_breaking_document_imports_what_it_can_with_one_line_per_operation(
    tmp_path: Path,
) -> None:
    doc = small_doc()
    ok_op = doc["paths"]["/things/{id}"]["get"]
    doc["paths"]["/forecast"] = {
        "get": {
            "operationId": "forecast",
            "parameters": [
                {
                    "name": "latitude",
                    "in": "query",
                    "required": True,
                    "schema": {"type": "number", "example": "13.419.52"},
                },
                {"name": "days", "in": "query", "schema": {"type": "int", "default": "seven"}},
            ],
            "responses": {
                "200": {
                    "description": "ok",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "hourly": {"type": "HourlyResponse"},
                                    "n": {"type": "int"},
                                },
                            }
                        }
                    },
                }
            },
        }
    }
    doc["paths"]["/gone"] = {
        "get": {
            **ok_op,
            "operationId": "gone",
            "parameters": [],
            "responses": {
                "200": {
                    "description": "ok",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Missing"}}
                    },
                }
            },
        }
    }
    doc["paths"]["/body"] = {
        "get": {
            **ok_op,
            "operationId": "body",
            "parameters": [
                {
                    "name": "filter",
                    "in": "query",
                    "required": True,
                    "style": "deepObject",
                    "schema": {"type": "object"},
                }
            ],
        }
    }
    doc["paths"]["/undeclared/{x}"] = {
        "get": {**ok_op, "operationId": "undeclared", "parameters": []}
    }
    path = write(tmp_path, "flawed.yaml", doc)
    code, _, err = cli("catalog", "import-openapi", str(path), "-o", str(tmp_path / "f.json"))
    assert code == 0, err
    lines = err.strip().splitlines()
    assert all(line.startswith(("skipped ", "warning ")) for line in lines), lines
    by_op = {line.split(":", 1)[0]: line for line in lines}
    assert "points to nothing" in by_op["warning GET /gone"]
    assert "object" in by_op["skipped GET /body"]
    assert "{x}" in by_op["skipped GET /undeclared/{x}"]
    flaws = by_op["warning GET /forecast"]
    for needle in (
        "'13.419.52' is not a valid number",
        "`type: int`",
        "HourlyResponse",
        "default 'seven'",
    ):
        assert needle in flaws
    tools = {t.name: t for a in load_file(tmp_path / "f.json") for t in a.tools}
    forecast = tools["tiny_forecast"]
    assert forecast.examples[0] == {"latitude": 52.52}  # derived, not the impossible example
    assert forecast.input["days"].type == "integer" and forecast.input["days"].default is None
    assert forecast.output["hourly"].type == "any"
    assert set(tools) == {"tiny_get_thing", "tiny_forecast", "tiny_gone"}
    # the documented example became a fixture labelled as documentation
    (fx,) = tools["tiny_get_thing"].fixtures
    assert fx.origin == "documentation" and "documentation example" in fx.source
    assert json.loads(fx.body) == {"id": 1, "name": "a"}
    assert tools["tiny_gone"].no_fixture


def test_ref_cycle_is_a_warning_not_a_hang_or_traceback(tmp_path: Path) -> None:
    doc = small_doc()
    doc["components"]["schemas"]["A"] = {"$ref": "#/components/schemas/B"}
    doc["components"]["schemas"]["B"] = {"$ref": "#/components/schemas/A"}
    doc["components"]["schemas"]["Node"] = {
        "type": "object",
        "properties": {
            "child": {"$ref": "#/components/schemas/Node"},
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
        },
    }
    op = doc["paths"]["/things/{id}"]["get"]
    for name, ref in (("cycle", "A"), ("tree", "Node")):
        doc["paths"][f"/{name}"] = {
            "get": {
                **op,
                "operationId": name,
                "parameters": [],
                "responses": {
                    "200": {
                        "description": "ok",
                        "content": {
                            "application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}
                        },
                    }
                },
            }
        }
    path = write(tmp_path, "cycle.yaml", doc)
    code, _, err = cli("catalog", "import-openapi", str(path), "-o", str(tmp_path / "c.json"))
    assert code == 0, err
    cycle_line = next(line for line in err.splitlines() if "GET /cycle" in line)
    assert "$ref cycle" in cycle_line
    tools = {t.name: t for a in load_file(tmp_path / "c.json") for t in a.tools}
    assert tools["tiny_cycle"].output["body"].type == "any"
    tree = tools["tiny_tree"].output
    assert tree["child"].type == "object" and tree["children"].type == "array"


def test_swagger_2_with_base_path(tmp_path: Path) -> None:
    doc = {
        "swagger": "2.0",
        "info": {"title": "Petstore", "version": "1.0"},
        "host": "petstore.example.com",
        "basePath": "/v2",
        "schemes": ["http", "https"],
        "paths": {
            "/pet/findByStatus": {
                "get": {
                    "operationId": "findPetsByStatus",
                    "parameters": [
                        {
                            "name": "status",
                            "in": "query",
                            "required": True,
                            "type": "array",
                            "collectionFormat": "multi",
                            "items": {"type": "string", "enum": ["available", "pending", "sold"]},
                        },
                        {
                            "name": "tags",
                            "in": "query",
                            "type": "array",
                            "collectionFormat": "csv",
                            "items": {"type": "string"},
                        },
                    ],
                    "responses": {
                        "200": {
                            "description": "ok",
                            "schema": {"type": "array", "items": {"$ref": "#/definitions/Pet"}},
                            "examples": {"application/json": [{"id": 1, "name": "rex"}]},
                        },
                        "400": {"description": "bad"},
                    },
                }
            },
            "/pet": {
                "post": {"operationId": "addPet", "responses": {"200": {"description": "ok"}}}
            },
        },
        "definitions": {
            "Pet": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "id": {"type": "integer", "format": "int64"},
                    "name": {"type": "string"},
                },
            }
        },
    }
    report = imported(write(tmp_path, "petstore.yaml", doc))
    (api,) = report.apis
    assert api["base_url"] == "https://petstore.example.com/v2"
    (tool,) = api["tools"]
    assert tool["path"] == "/pet/findByStatus"
    assert tool["input"]["status"]["enum"] == ["available", "pending", "sold"]  # one value
    assert tool["input"]["tags"]["type"] == "string"  # csv: a joined list
    assert tool["examples"][0] == {"status": "available"}
    assert tool["output"]["items"]["items"] == {
        "id": {"type": "integer", "optional": True},
        "name": {"type": "string"},
    }
    assert tool["fixtures"][0]["origin"] == "documentation"
    assert [n.text for n in report.skipped] == ["POST is not a safe method"]
    assert any("explode=true" in w.text for w in report.warnings)


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("bad.yaml", "openapi: 3.0.0\npaths: {a: [1, 2\n", "not valid YAML at line"),
        ("bad.json", '{"openapi": "3.0.0", "paths": ', "not valid JSON"),
        ("list.yaml", "- 1\n- 2\n", "expected a mapping"),
        ("none.yaml", "title: x\npaths: {}\n", "not an OpenAPI document"),
        ("v4.yaml", "openapi: 4.0.0\npaths: {}\n", "not supported"),
        ("sw1.yaml", "swagger: '1.2'\npaths: {}\n", "not supported"),
        ("nopaths.yaml", "openapi: 3.1.0\ninfo: {title: x}\n", "no `paths`"),
    ],
)
def test_broken_documents_are_one_line_errors(
    tmp_path: Path, name: str, text: str, needle: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    code, _, err = cli("catalog", "import-openapi", str(path), "-o", str(tmp_path / "o.json"))
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.json").exists()


def test_document_with_nothing_importable_writes_nothing(tmp_path: Path) -> None:
    doc = small_doc()
    doc["paths"]["/things/{id}"]["get"]["security"] = [{"k": []}]
    doc["components"]["securitySchemes"] = {"k": {"type": "http", "scheme": "basic"}}
    path = write(tmp_path, "auth.yaml", doc)
    code, _, err = cli("catalog", "import-openapi", str(path), "-o", str(tmp_path / "o.json"))
    assert code == 2 and "nothing written" in err
    assert "skipped GET /things/{id}: needs credentials (HTTP basic auth)" in err
    code, _, err = cli(
        "catalog", "import-openapi", str(path), "--include-auth", "-o", str(tmp_path / "o.json")
    )
    assert code == 2 and "credentials not supported" in err


def test_five_megabyte_document_imports_and_oversized_ones_are_refused(tmp_path: Path) -> None:
    doc = small_doc()
    doc["info"]["description"] = "x" * 100
    op = doc["paths"]["/things/{id}"]["get"]
    for i in range(2500):
        doc["paths"][f"/r{i}/{{id}}"] = {
            "get": {**op, "operationId": f"r{i}", "description": "word " * 360}
        }
    text = json.dumps(doc)
    assert 4.5e6 < len(text) < 6e6
    big = tmp_path / "big.json"
    big.write_text(text, encoding="utf-8")
    report = import_openapi(text, "big.json")
    assert report.tools == 2501 and not report.skipped
    assert len({t["name"] for t in report.apis[0]["tools"]}) == 2501
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({**doc, "x": "y" * (21 * 1024 * 1024)}), encoding="utf-8")
    code, _, err = cli("catalog", "import-openapi", str(huge), "-o", str(tmp_path / "o.json"))
    assert code == 2 and "over the 20 MB limit" in err
    with pytest.raises(OpenApiError, match="over the 20 MB limit"):
        import_openapi("y" * (21 * 1024 * 1024), "mem")


def test_yaml_alias_bomb_is_refused_fast(tmp_path: Path) -> None:
    lines = ["openapi: 3.0.0", "paths: {}", "a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 300)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines), encoding="utf-8")
    code, _, err = cli("catalog", "import-openapi", str(path), "-o", str(tmp_path / "o.json"))
    assert code == 2 and "YAML aliases" in err


def test_command_line_errors_have_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("openapi: 3.0.0\npaths: {a: [1, 2\n", encoding="utf-8")
    for args in (
        [str(bad), "-o", str(tmp_path / "o.json")],
        [str(tmp_path / "missing.yaml"), "-o", str(tmp_path / "o.json")],
        [str(DATA / "open-meteo__flood.yml"), "-o", str(tmp_path / "o.txt")],
    ):
        res = subprocess.run(
            [sys.executable, "-m", "realprobe.cli", "catalog", "import-openapi", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 2, res.stderr
        assert "Traceback" not in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_soft_failure_documented_inside_2xx_becomes_a_rule(tmp_path: Path) -> None:
    doc = small_doc()
    doc["components"]["schemas"]["Result"] = {
        "oneOf": [{"$ref": "#/components/schemas/Thing"}, {"$ref": "#/components/schemas/ApiError"}]
    }
    doc["components"]["schemas"]["ApiError"] = {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "boolean"}, "reason": {"type": "string"}},
    }
    op = doc["paths"]["/things/{id}"]["get"]
    media = op["responses"]["200"]["content"]["application/json"]
    media["schema"] = {"$ref": "#/components/schemas/Result"}
    media.pop("example")
    media["examples"] = {
        "found": {"value": {"id": 1, "name": "a"}},
        "failed": {"value": {"error": True, "reason": "no such thing"}},
    }
    report = imported(write(tmp_path, "soft.yaml", doc))
    tool = report.apis[0]["tools"][0]
    assert {"path": "error", "exists": True}.items() <= tool["soft_failures"][0].items()
    kinds = {f.get("kind", "ok") for f in tool["fixtures"]}
    assert kinds == {"ok", "soft_failure"}
    cat = Catalog(parse_catalog({"apis": report.apis}, "soft"))
    from realprobe import BadResponse

    with pytest.raises(BadResponse) as exc:
        cat.get("tiny_get_thing").parse(b'{"error": true, "reason": "no such thing"}')
    assert exc.value.code.value == "INVALID_RESPONSE"
    data = cat.get("tiny_get_thing").parse(b'{"id": 2, "name": "b"}')
    assert data["id"] == 2 and data["name"] == "b"  # the error branch's fields are optional


def test_servers_variables_relative_urls_and_shared_parameters(tmp_path: Path) -> None:
    doc = small_doc(
        servers=[
            {
                "url": "https://{region}.tiny.example/{version}",
                "variables": {"region": {"default": "eu"}, "version": {"default": "v2"}},
            }
        ]
    )
    doc["components"]["parameters"] = {
        "Lang": {"name": "lang", "in": "query", "schema": {"type": "string", "default": "en"}}
    }
    doc["paths"]["/things/{id}"]["parameters"] = [{"$ref": "#/components/parameters/Lang"}]
    doc["paths"]["/ext"] = {
        "get": {
            "operationId": "ext",
            "responses": {
                "200": {
                    "description": "ok",
                    "content": {JSON_TYPE: {"schema": {"$ref": "other.yaml#/X"}}},
                }
            },
        }
    }
    report = imported(write(tmp_path, "vars.yaml", doc))
    (api,) = report.apis
    assert api["base_url"] == "https://eu.tiny.example/v2"
    thing = api["tools"][0]
    assert thing["query"] == {"lang": "{lang}"} and thing["input"]["lang"]["default"] == "en"
    assert any("external $ref 'other.yaml#/X'" in w.text for w in report.warnings)
    relative = small_doc(servers=[{"url": "/api/v3"}])
    path = write(tmp_path, "rel.yaml", relative)
    code, _, err = cli("catalog", "import-openapi", str(path), "-o", str(tmp_path / "r.json"))
    assert code == 2 and "no absolute server URL" in err
    code, _, err = cli(
        "catalog",
        "import-openapi",
        str(path),
        "--base-url",
        "https://given.example/x",
        "-o",
        str(tmp_path / "r.json"),
    )
    assert code == 0, err
    assert load_file(tmp_path / "r.json")[0].base_url == "https://given.example/x"
    with serving({"/specs/rel.yaml": (200, "application/yaml", path.read_bytes())}) as srv:
        code, _, err = cli(
            "catalog", "import-openapi", f"{srv.url}/specs/rel.yaml", "-o", str(tmp_path / "u.json")
        )
    assert code == 0, err
    assert load_file(tmp_path / "u.json")[0].base_url == srv.url + "/api/v3"
    code, _, err = cli(
        "catalog",
        "import-openapi",
        str(path),
        "--select",
        "nothing*",
        "-o",
        str(tmp_path / "n.json"),
    )
    assert code == 2 and "no operation matches --select nothing*" in err


def test_mutated_documents_never_crash_the_importer() -> None:
    """Random junk put into real documents: each import ends in tools and notes, or in one
    OpenApiError; never another exception, and what it writes always loads."""
    import copy
    import random

    bases = [yaml.safe_load((DATA / "open-meteo__flood.yml").read_text()), small_doc()]
    junk: list[Any] = [
        None,
        1,
        -1.5,
        "x",
        [],
        {},
        [1, "a"],
        {"$ref": "#/nope"},
        {"$ref": 5},
        {"type": "int"},
        True,
        {"$ref": "#/paths"},
        "{x}",
        {"a": {"b": []}},
    ]

    def paths(obj: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        out = [at]
        items = (
            obj.items()
            if isinstance(obj, dict)
            else enumerate(obj)
            if isinstance(obj, list)
            else []
        )
        for k, v in items:
            out += paths(v, (*at, k))
        return out

    rnd = random.Random(7)
    for _ in range(150):
        doc = copy.deepcopy(rnd.choice(bases))
        spots = [p for p in paths(doc) if p]
        for _ in range(rnd.randint(1, 6)):
            spot = rnd.choice(spots)
            node = doc
            try:
                for key in spot[:-1]:
                    node = node[key]
                node[spot[-1]] = copy.deepcopy(rnd.choice(junk))
            except (KeyError, IndexError, TypeError):
                continue
        try:
            report = import_openapi(
                json.dumps(doc), "mutated.json", ImportOptions(include_auth=rnd.random() < 0.5)
            )
        except OpenApiError as exc:
            assert "\n" not in str(exc)
            continue
        if report.apis:
            Catalog(parse_catalog({"apis": report.apis}, "mutated"))
        assert all("could not be read" not in n.text for n in report.skipped), report.skipped
