"""OpenAPI descriptions are input a user hands in: bounded like cassettes (aliases, depth,
size), and every refusal is one line naming the document."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest

import realprobe
from realprobe import RealprobeError
from realprobe.adapters.openapi.document import OpenApiError, parse_text

BOMB = "openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths: {}\n" + "".join(
    f"x{i}: &x{i} [" + ",".join([f"*x{i - 1}"] * 9 if i else ['"lol"'] * 9) + "]\n"
    for i in range(9)
)


def test_a_yaml_alias_bomb_is_refused_without_expanding(tmp_path: Path) -> None:
    assert len(BOMB) < 1200
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    with pytest.raises(OpenApiError, match="aliases expand to more than"):
        parse_text(BOMB, "bomb.yml")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert time.monotonic() - t0 < 5 and grown_mb < 100


@pytest.mark.parametrize("depth", [900, 5000])
def test_a_deep_schema_is_one_line_not_a_recursion_error(tmp_path: Path, depth: int) -> None:
    spec = tmp_path / "deep.json"
    spec.write_text(_deep_json(depth), encoding="utf-8")
    with pytest.raises(RealprobeError) as info:
        realprobe.import_openapi(spec, tmp_path / "out.json")
    assert "nested" in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "out.json").exists()


def _deep_json(depth: int) -> str:
    """JSON text too deep for `json.dumps` to write (it recurses too)."""
    head = '{"openapi":"3.0.0","info":{"title":"deep","version":"1"},"paths":{"/x":{"get":'
    head += '{"responses":{"200":{"description":"ok","content":{"application/json":{"schema":'
    body = '{"type":"object","properties":{"x":' * depth + '{"type":"string"}' + "}}" * depth
    return head + body + "}}}}}}}}"


def test_a_webhooks_only_31_document_is_named_for_what_it_is(tmp_path: Path) -> None:
    spec = tmp_path / "hooks.yaml"
    spec.write_text(
        "openapi: 3.1.0\ninfo: {title: hooks, version: '1'}\n"
        "webhooks:\n  ping:\n    post:\n      responses: {'200': {description: ok}}\n",
        encoding="utf-8",
    )
    with pytest.raises(RealprobeError) as info:
        realprobe.import_openapi(spec, tmp_path / "out.json")
    message = str(info.value)
    assert "valid OpenAPI 3.1 document without `paths`" in message and "webhooks" in message
    assert "no `paths` mapping" not in message
