"""The call path's shortcuts give what the long way gives: requests built once per tool and
arguments, an ok result made without validating it again, a flat output checked by the
model's field validator alone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from realprobe import (
    ApiSpec,
    BadResponse,
    Catalog,
    Tool,
    ToolResult,
    call_tool,
    call_tool_sync,
    default_catalog,
)
from realprobe.adapters import adapter as adapter_mod
from realprobe.adapters import parsers
from realprobe.adapters.http import Fetched
from realprobe.adapters.tool import _extract
from realprobe.result import answered


def _tool(**spec: Any) -> Tool:
    api = ApiSpec.model_validate({
        "id": "echo", "name": "Echo", "base_url": "http://api.example/v1",
        "docs_url": "https://example.org", "category": "Test", "https": False,
        "tools": [{"name": "echo_get", "title": "t", "description": "d", "examples": [{}],
                   "fixtures": [{"body": "{}", "source": "test"}], **spec}],
    })
    return Catalog([api]).get("echo_get")


class Answers:
    """A SyncFetcher and Fetcher answering every call with one response, keeping what it
    was asked."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.answer = (status, headers, body)
        self.asked: list[tuple[str, str, dict[str, Any]]] = []

    def _fetched(self, method: str, url: str, **kw: Any) -> Fetched:
        self.asked.append((method, url, kw))
        status, headers, body = self.answer
        return Fetched(status, dict(headers), body, url + "?x=1", 0.25,
                       redirects=["302 http://api.example/v1/a"],
                       phases={"dns_ms": 0.0, "ttfb_ms": 1.5, "new_connection": False})

    def fetch(self, method: str, url: str, **kw: Any) -> Fetched:
        return self._fetched(method, url, **kw)

    async def afetch(self, method: str, url: str, **kw: Any) -> Fetched:
        return self._fetched(method, url, **kw)


ANSWERED = {
    "tool": "echo_get", "ok": True, "data": {"n": 3, "s": "x", "f": 2.0}, "error": None,
    "latency_ms": 250.0, "http_status": 200, "bytes": 34,
    "redirects": ["302 http://api.example/v1/a"],
    "rate_limit_headers": {"X-RateLimit-Remaining": "9", "retry-after": "3"},
}


def test_a_call_gives_the_same_result_and_request_every_time() -> None:
    tool = _tool(path="/v/{q}", input={"q": {"required": True}}, query={"k": "{q}"},
                 examples=[{"q": "a"}],
                 output={"n": {"type": "integer"}, "s": {"type": "string"},
                         "f": {"type": "number"}})
    answers = Answers(200, {"X-RateLimit-Remaining": "9", "retry-after": "3",
                            "x-request-id": "r1", "content-type": "application/json"},
                      b'{"n": 3, "s": "x", "f": 2, "z": 1}')
    async_answers = Answers(*answers.answer)

    class Async:
        fetch = async_answers.afetch

    results = [call_tool_sync(tool, {"q": "a b"}, answers, timeout_s=2.0) for _ in range(3)]
    results += [asyncio.run(call_tool(tool, {"q": "a b"}, Async())) for _ in range(2)]  # type: ignore[arg-type]
    for r in results:
        assert r.model_dump() == ANSWERED
        assert type(r.data["f"]) is float  # type: ignore[index]
        assert r.phases == {"dns_ms": 0.0, "ttfb_ms": 1.5, "new_connection": False}
        assert r.request_id == "r1"
        assert r.model_fields_set == set(ToolResult.model_fields) - {"error"}
    sent = ("GET", "http://api.example/v1/v/a%20b",
            {"params": {"k": "a b"}, "headers": {"Accept": "application/json"},
             "allow_private": False})
    for method, url, kw in answers.asked + async_answers.asked:
        assert (method, url, {k: v for k, v in kw.items() if k != "timeout_s"}) == sent
    assert [kw["timeout_s"] for _, _, kw in answers.asked] == [2.0] * 3


def test_an_error_answer_keeps_its_code_and_context() -> None:
    tool = _tool(path="/v", output={"n": {"type": "integer"}})
    answers = Answers(429, {"retry-after": "7", "x-request-id": "r2"}, b"slow down\nplease")
    for _ in range(2):
        r = call_tool_sync(tool, {}, answers)
        assert r.model_dump(mode="json") == {
            **ANSWERED, "ok": False, "data": None, "http_status": 429, "bytes": 16,
            "rate_limit_headers": {"retry-after": "7"},
            "error": {"code": "RATE_LIMIT_ERROR", "http_status": 429, "retry_after_s": 7.0,
                      "message": "HTTP 429 from http://api.example/v1/v?x=1: slow down please"},
        }
        assert r.request_id == "r2"
    answers.answer = (200, {}, b'{"n": "three"}')
    bad = call_tool_sync(tool, {}, answers)
    assert bad.code is not None and bad.code.value == "INVALID_RESPONSE"
    assert bad.error is not None and bad.error.message.startswith("output fails schema at n:")


def test_answered_is_the_result_the_constructor_validates() -> None:
    fields: dict[str, Any] = {
        "tool": "t", "data": {"a": [1, {"b": None}]}, "http_status": 203, "latency_ms": 1.5,
        "bytes": 9, "redirects": ["301 http://x/"], "rate_limit_headers": {"ratelimit": "1"},
        "phases": {"dns_ms": 1.0}, "request_id": "id",
    }
    fast = answered(**fields)
    slow = ToolResult(ok=True, **fields)
    assert list(fast.__dict__.items()) == list(slow.__dict__.items())  # order: repr, dumps
    assert fast.model_fields_set == slow.model_fields_set
    assert (fast.__pydantic_extra__, fast.__pydantic_private__) == (
        slow.__pydantic_extra__, slow.__pydantic_private__)
    assert fast == slow and repr(fast) == repr(slow)
    assert fast.model_dump_json() == slow.model_dump_json()
    assert fast.model_dump(exclude_unset=True) == slow.model_dump(exclude_unset=True)
    fast.error = None  # an assignment marks the field set on this result alone
    assert "error" not in answered(**fields).model_fields_set


def test_requests_are_built_once_per_arguments_of_the_same_types() -> None:
    tool = _tool(path="/v/{v}", input={"v": {"enum": [1, True, "1"]}, "n": {"type": "number"}},
                 query={"n": "{n}"}, output={"n": {"type": "integer"}})
    prepare = adapter_mod._prepare
    first = prepare(tool, {"v": 1})
    assert prepare(tool, {"v": 1}) is first  # reused
    # equal but of another type: True == 1, yet the API is sent `true`
    urls = [prepare(tool, {"v": v}).url for v in (1, True, "1")]  # type: ignore[union-attr]
    assert urls == ["http://api.example/v1/v/1", "http://api.example/v1/v/true",
                    "http://api.example/v1/v/1"]
    # floats are not keys: -0.0 == 0.0, yet they print apart
    params = [prepare(tool, {"v": 1, "n": n}).params for n in (0.0, -0.0, 0.0)]  # type: ignore[union-attr]
    assert params == [{"n": "0.0"}, {"n": "-0.0"}, {"n": "0.0"}]
    for _ in range(2):  # a refusal is not kept: each call says it again
        refused = prepare(tool, {"v": 2})
        assert isinstance(refused, ToolResult) and refused.code is not None
        assert refused.code.value == "INVALID_INPUT"
    for i in range(adapter_mod.PREPARED_PER_TOOL + 5):
        prepare(tool, {"v": "1", "n": i})
    assert len(tool.prepared) <= adapter_mod.PREPARED_PER_TOOL


def test_a_pickled_tool_leaves_its_prepared_requests_and_their_secrets_behind() -> None:
    cloudpickle = pytest.importorskip("ray.cloudpickle")
    tool = _tool(path="/v", input={"key": {"secret": True}}, query={"key": "{key}"},
                 output={"n": {"type": "integer"}})
    secret = "sk-live-0123456789abcdef"
    assert adapter_mod._prepare(tool, {"key": secret}).params == {"key": secret}  # type: ignore[union-attr]
    assert tool.prepared
    shipped = cloudpickle.loads(cloudpickle.dumps(tool))
    assert secret.encode() not in cloudpickle.dumps(tool)
    assert shipped.prepared == {} and shipped.name == tool.name
    assert adapter_mod._prepare(shipped, {"key": "x" * 20}).url == "http://api.example/v1/v"  # type: ignore[union-attr]


def _model_way(tool: Tool, data: dict[str, Any]) -> str:
    """What the output check gave before: the model validated, then dumped as JSON values."""
    model = tool.output_model
    try:
        return repr(model.model_validate(data).model_dump(mode="json"))
    except ValidationError as exc:
        return repr([(e["loc"], e["msg"]) for e in exc.errors()])


def _fast_way(tool: Tool, data: dict[str, Any]) -> str:
    try:
        return repr(tool._validate_output(data))
    except ValidationError as exc:
        return repr([(e["loc"], e["msg"]) for e in exc.errors()])


@pytest.mark.parametrize("change", [
    {}, {"f": 1}, {"i": True}, {"i": 1.0}, {"i": 1.5}, {"i": "12"}, {"s": 1}, {"b": 1},
    {"b": "true"}, {"f": "1e3"}, {"i": 2**70}, {"o": {"k": [1, {"z": 2.5}]}}, {"o": []},
    {"a": [1, 2.0]}, {"a": ["1"]}, {"a": [True]}, {"x": {"q": [1, "2", None]}}, {"s": None},
    {"extra": 1}, {"b": None}, {"f": float("nan")}, {"i": -(2**80)}, {"s": "x" * 10_000},
])
def test_a_flat_output_is_checked_as_the_model_checks_it(change: dict[str, Any]) -> None:
    tool = _tool(path="/v", output={
        "s": {"type": "string"}, "i": {"type": "integer"}, "f": {"type": "number"},
        "b": {"type": "boolean"}, "o": {"type": "object", "optional": True},
        "a": {"type": "array", "item_type": "integer", "optional": True},
        "x": {"type": "any", "optional": True},
    })
    data = {"s": "a", "i": 1, "f": 1.5, "b": True, "o": None, "a": None, "x": None, **change}
    assert _fast_way(tool, dict(data)) == _model_way(tool, dict(data))
    # scalars only: their exact types are checked in one loop, anything else by the validator
    scalars = _tool(path="/v", output={
        "s": {"type": "string"}, "i": {"type": "integer"}, "f": {"type": "number"},
        "b": {"type": "boolean", "optional": True}, "x": {"type": "any"},
    })
    data = {k: v for k, v in data.items() if k not in ("o", "a")}
    assert _fast_way(scalars, dict(data)) == _model_way(scalars, dict(data))
    del data["s"]
    assert _fast_way(scalars, dict(data)) == _model_way(scalars, dict(data))


def _read(read: Any, body: Any) -> Any:
    try:
        return read(body)
    except BadResponse as exc:
        return (exc.code, exc.message)


@pytest.mark.parametrize("body", [
    {"s": "a", "n": 1, "l": [1, 2], "extra": True}, {"s": "a", "n": 1}, {"s": "a", "l": None},
    {"s": None, "n": 1}, {"n": 1}, {"s": "", "n": 0, "l": []}, [{"s": "a"}], "text", None,
])
def test_a_flat_output_is_read_as_the_plan_reads_it(body: Any) -> None:
    tool = _tool(path="/v", output={"s": {"type": "string"}, "n": {"type": "any"},
                                    "l": {"type": "array", "optional": True}})
    assert tool._flat_plan is not None
    assert _read(tool.extract, body) == _read(lambda b: _extract(b, tool._output_plan), body)


def test_every_catalogue_fixture_parses_as_the_model_checks_it() -> None:
    seen = 0
    for tool in default_catalog():
        for fixture in tool.spec.fixtures:
            if fixture.kind != "ok":
                continue
            try:
                data = tool.parse(fixture.body.encode())
            except Exception:
                continue
            seen += 1
            fresh = Tool(tool.api, tool.spec)  # nothing cached from the call above
            raw = _extract(_decoded(fresh, fixture.body.encode()), fresh._output_plan)
            assert repr(data) == _model_way(fresh, raw), tool.name
    assert seen >= 20


def _decoded(tool: Tool, body: bytes) -> Any:
    from realprobe.adapters.bounded import load_json, load_text

    value = load_text(body) if tool.spec.response == "text" else load_json(body)
    return parsers.get(tool.spec.parser)(value) if tool.spec.parser else value
