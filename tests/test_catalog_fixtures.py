"""The built-in catalogue holds together: names, schemas, examples, and real fixture bodies.

Every tool must parse its real `ok` bodies into data that passes its output schema, turn its
real soft-failure bodies into the right error code, and accept its own examples. A broken
user catalogue must fail with a message naming the file, the API/tool and the field.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import zlib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from realprobe import BadResponse, CatalogError, ErrorCode, Tool, default_catalog
from realprobe.adapters import parsers
from realprobe.adapters.catalog import load_file
from realprobe.adapters.spec import TOOL_NAME_RE
from realprobe.errors import code_for_status

CATALOG = default_catalog()
TOOLS = sorted(CATALOG, key=lambda t: t.name)


def _tool_id(tool: Tool) -> str:
    return tool.name


def _fixtures(kind: str) -> list[tuple[Tool, int]]:
    return [(t, i) for t in TOOLS for i, f in enumerate(t.spec.fixtures) if f.kind == kind]


def _fixture_id(param: tuple[Tool, int]) -> str:
    return f"{param[0].name}[{param[1]}]"


# -- the catalogue as a whole --------------------------------------------------------------


def test_catalogue_size() -> None:
    assert len(CATALOG) >= 25
    apis_with_tools = {t.api_id for t in CATALOG}
    assert len(apis_with_tools) >= 20
    joke_apis = {t.api_id for t in CATALOG if "joke" in t.api_id or "joke" in t.name}
    assert len(joke_apis) >= 2, joke_apis


def test_api_flags_match_base_url() -> None:
    for api in CATALOG.apis.values():
        assert api.base_url.startswith("https://" if api.https else "http://"), api.id
        assert api.docs_url.startswith(("http://", "https://")), api.id
        assert api.description, api.id
    not_listed = {a.id for a in CATALOG.apis.values() if not a.in_public_apis}
    assert not_listed <= {"stoic-quotes-com"}


def test_politeness_follows_documented_limits() -> None:
    assert CATALOG.apis["opentdb"].politeness.min_interval_s >= 5.0
    assert CATALOG.apis["open-meteo"].politeness.daily_budget <= 10_000
    for shared_quota in ("agify", "genderize", "nationalize"):
        if shared_quota in CATALOG.apis:
            assert CATALOG.apis[shared_quota].politeness.daily_budget <= 50


# -- per tool -------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", TOOLS, ids=_tool_id)
def test_tool_name_and_texts(tool: Tool) -> None:
    assert TOOL_NAME_RE.match(tool.name)
    assert tool.spec.title.strip()
    assert len(tool.spec.description) >= 30, "describe what the tool returns and what args mean"
    for name, field in tool.spec.input.items():
        assert field.description, f"input {name} needs a description"
    for name, field in tool.spec.output.items():
        assert field.description, f"output {name} needs a description"


@pytest.mark.parametrize("tool", TOOLS, ids=_tool_id)
def test_schemas_are_valid_json_schema(tool: Tool) -> None:
    jsonschema.Draft202012Validator.check_schema(tool.input_schema)
    jsonschema.Draft202012Validator.check_schema(tool.output_schema)
    definition = tool.mcp_definition()
    assert definition["inputSchema"]["type"] == "object"
    json.dumps(tool.catalog_entry())  # serialisable as is


@pytest.mark.parametrize("tool", TOOLS, ids=_tool_id)
def test_examples_validate_and_build_requests(tool: Tool) -> None:
    assert tool.examples
    for example in tool.examples:
        args = tool.validate_args(example)
        jsonschema.validate(example, tool.input_schema)
        method, url, params = tool.build_request(args)
        assert method == tool.spec.method
        assert url.startswith(tool.api.base_url)
        assert all(isinstance(v, str) for v in params.values())


@pytest.mark.parametrize("tool", TOOLS, ids=_tool_id)
def test_every_tool_has_a_sourced_ok_fixture(tool: Tool) -> None:
    oks = [f for f in tool.spec.fixtures if f.kind == "ok"]
    assert oks, f"{tool.name} has no real ok fixture"
    for fixture in tool.spec.fixtures:
        assert fixture.source.strip()
        assert fixture.body is not None


@pytest.mark.parametrize("tool", TOOLS, ids=_tool_id)
def test_named_parsers_exist(tool: Tool) -> None:
    if tool.spec.parser:
        assert tool.spec.parser in parsers.names()


@pytest.mark.parametrize("param", _fixtures("ok"), ids=_fixture_id)
def test_ok_fixture_parses_into_output_schema(param: tuple[Tool, int]) -> None:
    tool, i = param
    fixture = tool.spec.fixtures[i]
    assert fixture.status == 200
    data = tool.parse(fixture.body.encode("utf-8"))
    tool.output_model.model_validate(data)
    jsonschema.validate(data, tool.output_schema)
    required = [k for k, f in tool.spec.output.items() if not f.optional]
    for key in required:
        assert data[key] is not None, key


@pytest.mark.parametrize("param", _fixtures("soft_failure"), ids=_fixture_id)
def test_soft_failure_fixture_raises_its_code(param: tuple[Tool, int]) -> None:
    tool, i = param
    fixture = tool.spec.fixtures[i]
    with pytest.raises(BadResponse) as caught:
        tool.parse(fixture.body.encode("utf-8"))
    assert caught.value.code == fixture.code


@pytest.mark.parametrize("param", _fixtures("error"), ids=_fixture_id)
def test_error_fixture_code_matches_its_status(param: tuple[Tool, int]) -> None:
    tool, i = param
    fixture = tool.spec.fixtures[i]
    assert fixture.status >= 400
    assert fixture.code == code_for_status(fixture.status)


def test_soft_failure_codes_cover_the_known_traps() -> None:
    def codes(name: str) -> set[ErrorCode]:
        return {r.code for r in CATALOG.get(name).spec.soft_failures}

    assert ErrorCode.RATE_LIMIT_ERROR in codes("zenquotes_random")
    assert ErrorCode.RATE_LIMIT_ERROR in codes("opentdb_questions")
    assert ErrorCode.RATE_LIMIT_ERROR in codes("openmeteo_forecast")
    assert ErrorCode.INVALID_RESPONSE in codes("advice_random")
    assert ErrorCode.INVALID_RESPONSE in codes("numbers_trivia")
    assert ErrorCode.INVALID_RESPONSE in codes("dogceo_random_image")


def test_opentdb_response_codes() -> None:
    tool = CATALOG.get("opentdb_questions")
    for code, expected in [(5, ErrorCode.RATE_LIMIT_ERROR), (1, ErrorCode.INVALID_RESPONSE),
                           (4, ErrorCode.INVALID_RESPONSE)]:
        body = json.dumps({"response_code": code, "results": []}).encode()
        with pytest.raises(BadResponse) as caught:
            tool.parse(body)
        assert caught.value.code == expected


# -- fixture bodies are verbatim copies of the real-world sources ---------------------------

REALWORLD = Path(os.environ.get("REALPROBE_REALWORLD_DIR", "/work/shared/realworld"))


class _VcrLoader(yaml.SafeLoader):
    pass


def _binary(loader: yaml.SafeLoader, node: yaml.Node) -> bytes:
    return base64.b64decode(loader.construct_scalar(node))  # type: ignore[arg-type]


_VcrLoader.add_constructor("!binary", _binary)
_VcrLoader.add_constructor("tag:yaml.org,2002:binary", _binary)


def _cassette_bodies(path: Path) -> list[str]:
    doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_VcrLoader)
    out = []
    for interaction in doc.get("http_interactions") or doc.get("interactions") or []:
        resp = interaction["response"]
        body: Any = resp["body"]
        raw = body.get("string") if isinstance(body, dict) else body
        if isinstance(raw, bytes):
            headers = resp.get("headers", {})
            encodings = [v for k, v in headers.items() if k.lower() == "content-encoding"]
            for enc in encodings[0] if encodings else []:
                if enc == "gzip":
                    raw = gzip.decompress(raw)
                elif enc == "deflate":
                    try:
                        raw = zlib.decompress(raw)
                    except zlib.error:
                        raw = zlib.decompress(raw, -15)
            raw = raw.decode("utf-8")
        out.append(raw)
    return out


def _real_bodies() -> set[str]:
    bodies: set[str] = set()
    for api in json.loads((REALWORLD / "apis.json").read_text(encoding="utf-8")):
        for item in api["examples"] + api["errors"]:
            if item.get("body_raw") is not None:
                bodies.add(item["body_raw"])
            if isinstance(item.get("body"), str):
                bodies.add(item["body"])
    for path in (REALWORLD / "cassettes").glob("*.yaml"):
        bodies.update(_cassette_bodies(path))
    return bodies


@pytest.mark.skipif(
    not (REALWORLD / "apis.json").exists(), reason="shared real-world corpus not present"
)
def test_fixture_bodies_are_verbatim_real_bodies() -> None:
    real = _real_bodies()
    invented = [
        f"{t.name}[{i}]" for t in TOOLS for i, f in enumerate(t.spec.fixtures) if f.body not in real
    ]
    assert not invented, f"fixture bodies not found verbatim in the real-world sources: {invented}"


# -- broken user catalogues -----------------------------------------------------------------

_API_HEAD = """\
id = "my-api"
name = "Mine"
base_url = "https://example.org/api"
docs_url = "https://example.org"
category = "Test"
https = true
"""


def _write(tmp_path: Path, text: str, name: str = "mine.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_user_catalogue_loads(tmp_path: Path) -> None:
    path = _write(tmp_path, _API_HEAD + """
[[tools]]
name = "my_tool"
title = "Mine"
description = "Returns a thing"
path = "/thing/{id}"
examples = [{id = 3}]
[tools.input.id]
type = "integer"
required = true
[tools.output.text]
from = "data.text"
""")
    [api] = load_file(path)
    tool = Tool(api, api.tools[0])
    assert tool.build_request({"id": 3})[1] == "https://example.org/api/thing/3"
    assert tool.parse(b'{"data": {"text": "hi"}}') == {"text": "hi"}


def test_bad_tool_name_names_file_api_tool_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, _API_HEAD + """
[[tools]]
name = "my.tool"
title = "Mine"
description = "d"
path = "/x"
[tools.output.text]
from = "t"
""")
    with pytest.raises(CatalogError) as caught:
        load_file(path)
    msg = str(caught.value)
    assert str(path) in msg
    assert "my-api" in msg and "my.tool" in msg
    assert "name" in msg


def test_unknown_output_type_names_file_api_tool_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, _API_HEAD + """
[[tools]]
name = "my_tool"
title = "Mine"
description = "d"
path = "/x"
[tools.output.text]
type = "blob"
""")
    with pytest.raises(CatalogError) as caught:
        load_file(path)
    msg = str(caught.value)
    assert str(path) in msg
    assert "my-api" in msg and "my_tool" in msg
    assert "output.text.type" in msg


def test_undeclared_placeholder_is_reported(tmp_path: Path) -> None:
    path = _write(tmp_path, _API_HEAD + """
[[tools]]
name = "my_tool"
title = "Mine"
description = "d"
path = "/x/{missing}"
[tools.output.text]
from = "t"
""")
    with pytest.raises(CatalogError) as caught:
        load_file(path)
    msg = str(caught.value)
    assert str(path) in msg and "my_tool" in msg and "missing" in msg


def test_multi_api_file_names_the_api(tmp_path: Path) -> None:
    path = _write(tmp_path, """
[[apis]]
id = "first"
name = "First"
base_url = "https://a.example"
docs_url = "https://a.example"
category = "Test"
https = true
tools = []

[[apis]]
id = "second"
name = "Second"
base_url = "not a url"
docs_url = "https://b.example"
category = "Test"
https = true
tools = []
""", name="many.toml")
    with pytest.raises(CatalogError) as caught:
        load_file(path)
    msg = str(caught.value)
    assert str(path) in msg and "second" in msg and "base_url" in msg


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "id = \n")
    with pytest.raises(CatalogError) as caught:
        load_file(path)
    assert str(path) in str(caught.value)
