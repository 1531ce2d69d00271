"""The `openai` agent sends strict tool schemas, and falls back when an endpoint refuses them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from realprobe import Catalog
from tests.llm_server import ScriptedLLM, http_error, text, tool_calls
from tests.test_tasks_llm import FETCHES, grounded_post, run


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM([])
    server.start()
    yield server
    server.stop()


def _script() -> list:  # type: ignore[type-arg]
    return [
        # a strict model sends every key; null for optional ones
        tool_calls(*((name, {}) for name in FETCHES)),
        lambda body: tool_calls(
            ("compose_post", {"text": grounded_post(body), "hashtags": None})
        ),
        text("TASK COMPLETE: the newsletter blurb is stored."),
    ]


def test_strict_schemas_are_sent_and_nulls_mean_not_given(
    catalog: Catalog, llm: ScriptedLLM
) -> None:
    r = run(catalog, llm, "openai", _script())
    assert r.row["outcome"] == "full", r.score.reasons
    tools = llm.requests[0]["tools"]
    assert all(t["function"]["strict"] is True for t in tools)
    post = next(t for t in tools if t["function"]["name"] == "compose_post")
    assert post["function"]["parameters"]["required"] == ["text", "hashtags"]


def test_an_endpoint_that_refuses_strict_schemas_gets_plain_tools(
    catalog: Catalog, llm: ScriptedLLM
) -> None:
    refused = http_error(400, "Invalid schema for function 'agify_age': strict mode is not "
                              "supported by this model")
    r = run(catalog, llm, "openai", [refused, *_script()])
    assert r.row["outcome"] == "full", r.score.reasons
    assert all(t["function"].get("strict") for t in llm.requests[0]["tools"])
    assert all("strict" not in t["function"] for t in llm.requests[1]["tools"])
    assert all("strict" not in t["function"] for t in llm.requests[-1]["tools"])


def test_a_bad_request_that_is_not_about_schemas_is_not_retried(
    catalog: Catalog, llm: ScriptedLLM
) -> None:
    r = run(catalog, llm, "openai", [http_error(400, "model 'scripted-1' does not exist")])
    assert r.row["termination"] == "llm_error"
    assert len(llm.requests) == 1
