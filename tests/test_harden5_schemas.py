"""The scrubber takes credential values out, never a schema's keywords: a recorded `tools/list`
whose input schema has a credential property keeps `{"type": "string", ...}` (a replay serves
a valid schema), while the credential the client sent and its echoes are gone, in an HTTP
cassette and in an MCP session cassette alike. A client that sent Swagger UI's placeholder
"string" as its key does not turn every `"type": "string"` into the placeholder either.

The tool and its input schema are built from the real Open-Meteo elevation OpenAPI document
(tests/data/openapi/open-meteo__elevation.yml, see tests/data/openapi/SOURCES.md): its
`latitude`, `longitude` and `apikey` query parameters, as an MCP server lists them."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_runner import main

from realprobe import load_cassette

SPEC = Path(__file__).parent / "data" / "openapi" / "open-meteo__elevation.yml"
SECRET = "om-live-5f1c9a27d4e84b0c"
URL = "https://mcp.example.test/mcp"


def _tool() -> dict[str, Any]:
    spec = yaml.safe_load(SPEC.read_text())
    (path, item), = spec["paths"].items()
    op = item["get"]
    props = {}
    for param in op["parameters"]:
        prop = dict(param["schema"])
        if param.get("description"):
            prop["description"] = param["description"]
        props[param["name"]] = prop
    assert "apikey" in props and props["apikey"]["type"] == "string"
    return {"name": "elevation", "description": op.get("summary", path),
            "inputSchema": {"type": "object", "properties": props,
                            "required": ["latitude", "longitude"]}}


def _exchange(key: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(request, answer) pairs: the tool list, then a call that sends `key`, echoed back."""
    listed = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [_tool()]}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "elevation",
                       "arguments": {"latitude": "52.52", "longitude": "13.41", "apikey": key}}}
    echoed = {"jsonrpc": "2.0", "id": 2, "result": {"content": [
        {"type": "text", "text": f"GET /v1/elevation?latitude=52.52&apikey={key}: the key "
                                 f"{key} was refused"}]}}
    return [({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, listed), (call, echoed)]


def _http_cassette(tmp: Path, key: str) -> Path:
    interactions = [{
        "request": {"method": "POST", "uri": URL, "body": json.dumps(req),
                    "headers": {"Content-Type": ["application/json"]}},
        "response": {"status": {"code": 200, "message": "OK"},
                     "headers": {"Content-Type": ["application/json"]},
                     "body": {"string": json.dumps(ans)}},
    } for req, ans in _exchange(key)]
    path = tmp / "http.yaml"
    path.write_text(yaml.safe_dump({"interactions": interactions, "version": 1}))
    return path


def _http_messages(path: Path) -> list[dict[str, Any]]:
    out = []
    for call in load_cassette(path).calls:
        out += [json.loads(call.request_body or b"{}"), json.loads(call.body)]
    return out


def _session_cassette(tmp: Path, key: str) -> Path:
    lines: list[dict[str, Any]] = [{"realprobe_mcp_cassette": 1, "meta": {}}]
    for i, (req, ans) in enumerate(_exchange(key)):
        lines += [{"t": i, "dir": "c2s", "msg": req}, {"t": i + 0.5, "dir": "s2c", "msg": ans}]
    path = tmp / "session.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _session_messages(path: Path) -> list[dict[str, Any]]:
    return [rec["msg"] for rec in map(json.loads, path.read_text().splitlines()[1:])]


SURFACES: dict[str, tuple[Callable[[Path, str], Path], Callable[[Path], list[Any]]]] = {
    "http cassette": (_http_cassette, _http_messages),
    "mcp session": (_session_cassette, _session_messages),
}


def _scrub(src: Path, out: Path, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["realprobe", "cassette", "scrub", str(src), "-o", str(out)])
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err


@pytest.mark.parametrize("surface", sorted(SURFACES))
@pytest.mark.parametrize("key", [SECRET, "string"])
def test_a_credential_property_keeps_its_schema_and_the_credential_goes(
    surface: str, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make, read = SURFACES[surface]
    src = make(tmp_path, key)
    out = tmp_path / f"out{src.suffix}"
    _scrub(src, out, monkeypatch, capsys)
    listed, called, echoed = read(out)[1], read(out)[2], read(out)[3]
    assert listed["result"]["tools"] == [_tool()]  # the schema as the server listed it
    assert called["params"]["arguments"]["apikey"] == "REDACTED"
    assert called["params"]["arguments"]["latitude"] == "52.52"
    if key == SECRET:
        assert SECRET not in out.read_text()
        assert SECRET not in echoed["result"]["content"][0]["text"]


def test_a_schema_under_a_credential_name_loses_the_values_it_carries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """`default`, `const`, `enum`, `examples` and any word that is no schema keyword hold
    values: those go, in nested schemas too; a dict that is no schema goes whole."""
    schema = {"type": "string", "description": "Your key", "default": SECRET,
              "anyOf": [{"type": "string", "const": SECRET}], "examples": [SECRET],
              "value": SECRET}
    lines = [{"realprobe_mcp_cassette": 1, "meta": {}},
             {"t": 0, "dir": "c2s", "msg": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "x", "arguments": {"api_key": schema,
                                                    "token": {"kind": "bearer",
                                                              "v": SECRET}}}}}]
    src = tmp_path / "s.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "o.jsonl"
    _scrub(src, out, monkeypatch, capsys)
    args = _session_messages(out)[0]["params"]["arguments"]
    assert args["api_key"] == {"type": "string", "description": "Your key",
                               "default": "REDACTED", "anyOf": [{"type": "string",
                                                                 "const": "REDACTED"}],
                               "examples": ["REDACTED"], "value": "REDACTED"}
    assert args["token"] == {"kind": "REDACTED", "v": "REDACTED"}
    assert SECRET not in out.read_text()


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_a_message_nested_as_deep_as_the_limits_allow_is_scrubbed(
    surface: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Data nested to the input limits' depth (lists are the costliest) is walked without a
    RecursionError: the credential in it goes, the shape stays."""
    from realprobe.limits import MAX_NESTING

    deep: Any = {"password": SECRET}
    for _ in range(MAX_NESTING - 12):
        deep = [deep]
    make, read = SURFACES[surface]
    src = make(tmp_path, SECRET)
    if surface == "mcp session":
        lines = src.read_text().splitlines()
        rec = json.loads(lines[3])
        rec["msg"]["params"]["arguments"]["deep"] = deep
        lines[3] = json.dumps(rec)
        src.write_text("\n".join(lines) + "\n")
    else:
        data = yaml.safe_load(src.read_text())
        body = json.loads(data["interactions"][1]["request"]["body"])
        body["params"]["arguments"]["deep"] = deep
        data["interactions"][1]["request"]["body"] = json.dumps(body)
        src.write_text(yaml.safe_dump(data))
    out = tmp_path / f"out{src.suffix}"
    _scrub(src, out, monkeypatch, capsys)
    assert SECRET not in out.read_text()
    got = read(out)[2]["params"]["arguments"]["deep"]
    for _ in range(MAX_NESTING - 12):
        got = got[0]
    assert got == {"password": "REDACTED"}


def test_data_that_refers_to_itself_ends_in_the_placeholder_not_a_loop() -> None:
    """Built data with a cycle (no parsed input has one) is walked to a bounded depth; what
    lies past it is replaced, so nothing below is kept unscrubbed."""
    from realprobe.secrets import MAX_WALK_DEPTH, scrub_data

    loop: dict[str, Any] = {"token": SECRET, "note": "x"}
    loop["again"] = loop
    out = scrub_data(loop)
    levels = []
    while isinstance(out, dict):
        levels.append(out)
        out = out["again"]
    assert len(levels) == MAX_WALK_DEPTH + 1 and out == "REDACTED"
    assert all(lv["token"] == "REDACTED" and lv["note"] == "x" for lv in levels[:-1])
    assert levels[-1] == {"token": "REDACTED", "note": "REDACTED", "again": "REDACTED"}


def test_a_live_session_recording_takes_a_sent_key_out_of_later_answers(tmp_path: Path) -> None:
    """The MCP session recorder scrubs as it writes: the key the client sent, then its echo
    in the server's free text."""
    from realprobe.mcp.session_cassette import SessionRecorder

    path = tmp_path / "live.jsonl"
    recorder = SessionRecorder(path, {"argv": ["server"]})
    for req, ans in _exchange(SECRET):
        recorder.message("c2s", req)
        recorder.message("s2c", ans)
    recorder.close()
    text = path.read_text()
    assert SECRET not in text
    assert _session_messages(path)[1]["result"]["tools"] == [_tool()]
