"""The first verbs as a user runs them: catalog, call, bad input, user catalogues."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
from cli_runner import invoke


def rp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "realprobe.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_catalog_json_lists_25_plus_valid_tool_definitions() -> None:
    res = invoke(["catalog", "--json"])
    assert res.exit_code == 0, res.output
    tools = json.loads(res.output)
    assert len(tools) >= 25
    assert len({t["api"]["id"] for t in tools}) >= 20
    for t in tools:
        jsonschema.Draft202012Validator.check_schema(t["inputSchema"])
        jsonschema.Draft202012Validator.check_schema(t["outputSchema"])
        assert t["api"]["docs_url"] and t["api"]["category"] and t["fixtures"]


def test_catalog_openai_and_mcp_formats() -> None:
    oa = json.loads(invoke(["catalog", "--json", "--format", "openai"]).output)
    assert all(t["type"] == "function" and "." not in t["function"]["name"] for t in oa)
    mcp = json.loads(invoke(["catalog", "--json", "--format", "mcp"]).output)
    assert all({"name", "inputSchema", "outputSchema"} <= set(t) for t in mcp["tools"])


def test_call_success_and_fault_against_sandbox(calm_sandbox: str) -> None:
    ok = invoke(["call", "advice_random", "--sandbox", calm_sandbox, "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["ok"] is True
    bad = invoke(
        ["call", "advice_random", "--sandbox", f"{calm_sandbox}/_fault/429", "--timeout", "2"]
    )
    assert bad.exit_code == 1
    assert "RATE_LIMIT_ERROR" in bad.output and "retry after" in bad.output


def test_unknown_tool_suggests_close_names() -> None:
    res = rp("call", "advise_random")
    assert res.returncode == 2
    assert "unknown tool 'advise_random'" in res.stderr and "advice_random" in res.stderr
    assert "Traceback" not in res.stderr


def test_bad_arguments_are_invalid_input_and_nothing_is_sent(
    sandbox_factory,
    catalog,  # type: ignore[no-untyped-def]
) -> None:
    url = sandbox_factory("calm")

    def constrained(f):  # type: ignore[no-untyped-def]
        return f.enum or f.type in ("integer", "number")

    tool = next(t for t in catalog if any(constrained(f) for f in t.spec.input.values()))
    field = next(n for n, f in tool.spec.input.items() if constrained(f))
    wrong = "zz-not-allowed-zz"
    res = invoke(
        ["call", tool.name, "--arg", f"{field}={wrong}", "--sandbox", url, "--json"]
    )
    out = json.loads(res.output)
    assert out["error"]["code"] == "INVALID_INPUT"
    assert field in out["error"]["message"]
    import httpx

    health = httpx.get(f"{url}/_health").json()
    assert health["requests"] == 0  # the bad call never reached the server


def test_user_catalogue_is_merged_and_called_live_on_loopback(
    calm_sandbox: str, tmp_path: Path
) -> None:
    """A user's own API, declared in TOML, through the live transport to a loopback server."""
    cat = tmp_path / "mine.toml"
    cat.write_text(
        f'''
[[apis]]
id = "my-facts"
name = "My facts mirror"
base_url = "{calm_sandbox}/uselessfacts"
docs_url = "https://example.invalid/docs"
category = "Testing"
https = false

[[apis.tools]]
name = "my_fact"
title = "A fact from my mirror"
description = "Returns a fact."
path = "/api/v2/facts/random"
query = {{ language = "{{language}}" }}
[apis.tools.input.language]
type = "string"
enum = ["en", "de"]
default = "en"
[apis.tools.output.fact]
from = "text"
[[apis.tools.fixtures]]
body = '{{"text": "x"}}'
source = "test"
'''
    )
    res = invoke(["call", "my_fact", "--catalog", str(cat), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["data"]["fact"]
    listed = invoke(["catalog", "--catalog", str(cat), "--json"])
    names = {t["name"] for t in json.loads(listed.output)}
    assert "my_fact" in names and "zenquotes_random" in names


def test_broken_user_catalogue_names_file_entry_and_field(tmp_path: Path) -> None:
    cat = tmp_path / "broken.toml"
    cat.write_text(
        '[[apis]]\nid = "mine"\nname = "x"\nbase_url = "https://x.example"\n'
        'docs_url = "https://x.example"\ncategory = "c"\nhttps = true\n'
        '[[apis.tools]]\nname = "t1"\ntitle = "t"\ndescription = "d"\npath = "/a"\n'
        '[apis.tools.output.f]\ntype = "strnig"\n'
    )
    res = rp("catalog", "--catalog", str(cat))
    assert res.returncode == 2
    assert str(cat) in res.stderr and "'mine'" in res.stderr and "'t1'" in res.stderr
    assert "output.f.type" in res.stderr
