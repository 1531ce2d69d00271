"""The `openai` and `openai-text` agents against a scripted OpenAI-compatible server on
loopback: correct calls, malformed calls, unknown tools, invalid arguments, refusals, and a
made-up final answer that the grounding check fails. Plus record and replay of a whole LLM
conversation through the transport seam."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from realprobe import Catalog, Mode, plan_tasks
from realprobe.tasks.agents import LlmSettings
from realprobe.tasks.runner import RunConfig, RunOutcome, run_batch
from tests.llm_server import ScriptedLLM, Turn, refusal, text, tool_calls, tool_results

TASK = plan_tasks(["pet_newsletter"]).tasks[0]
FETCHES = ("catfact_fact", "dogceo_random_image", "icanhazdadjoke_random")


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM([])
    server.start()
    yield server
    server.stop()


def run(
    catalog: Catalog, server: ScriptedLLM, agent: str, script: list[Turn], **cfg: Any
) -> RunOutcome:
    server.script = list(script)
    settings = LlmSettings(base_url=server.base_url, model="scripted-1", api_key="test-key")
    config = RunConfig(
        agent=agent, prompts=["optimal"], mode=Mode.SIMULATE, profile="calm", llm=settings, **cfg
    )
    (result,) = asyncio.run(run_batch([TASK], config, catalog))
    return result


def grounded_post(body: dict[str, Any]) -> str:
    cat, dog, joke = tool_results(body)[-3:]
    return f"Cat fact: {cat['fact']}\nDog of the day: {dog['image_url']}\nJoke: {joke['joke']}"


def tool_msgs(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


# -- native tool calling --------------------------------------------------------------------


def test_openai_correct_calls_reach_strict_success(catalog: Catalog, llm: ScriptedLLM) -> None:
    r = run(
        catalog,
        llm,
        "openai",
        [
            tool_calls(*((name, {}) for name in FETCHES)),
            lambda body: tool_calls(("compose_post", {"text": grounded_post(body)})),
            text("TASK COMPLETE: the newsletter blurb is stored."),
        ],
    )
    assert (r.row["outcome"], r.row["grounded"], r.row["strict"]) == ("full", 1, 1), r.score.reasons
    assert r.row["model"] == "scripted-1" and r.row["turns"] == 3
    assert (r.row["tokens_in"], r.row["tokens_out"]) == (300, 30)
    first = llm.requests[0]
    assert first["model"] == "scripted-1"
    names = {t["function"]["name"] for t in first["tools"]}
    assert (
        set(FETCHES) | {"compose_post", "save_report"} <= names and len(names) == len(catalog) + 2
    )
    assert "Recommended workflow" in first["messages"][1]["content"]
    second = llm.requests[1]
    assert [m["tool_call_id"] for m in second["messages"] if m["role"] == "tool"] == [
        f"call_{i}_{n}" for i, n in enumerate(FETCHES)
    ]


def test_openai_malformed_unknown_and_invalid_calls_then_a_refusal(
    catalog: Catalog, llm: ScriptedLLM
) -> None:
    r = run(
        catalog,
        llm,
        "openai",
        [
            tool_calls(
                ("catfact_fact", "{not json"),
                ("get_weather_now", {}),
                ("catfact_fact", {"max_length": "long"}),
            ),
            refusal("I can't continue with this task."),
        ],
    )
    kinds = [(s["kind"], s["tool"], s["ok"], s["error_code"]) for s in r.steps]
    assert kinds == [
        ("malformed", "catfact_fact", 0, "INVALID_INPUT"),
        ("unknown", "get_weather_now", 0, "INVALID_INPUT"),
        ("api", "catfact_fact", 0, "INVALID_INPUT"),
    ]
    back = tool_msgs(llm.requests[1])
    assert back[0].startswith("ERROR INVALID_INPUT: arguments: not valid JSON at line 1")
    assert back[1].startswith("ERROR INVALID_INPUT: unknown tool 'get_weather_now'")
    assert back[2].startswith("ERROR INVALID_INPUT: max_length")
    assert r.row["outcome"] == "failure" and not r.state.completion_signal
    assert r.row["final_message"] == "I can't continue with this task."


def test_openai_made_up_answer_fails_grounding(catalog: Catalog, llm: ScriptedLLM) -> None:
    invented = "Cat fact: cats have nine lives.\nDog: a good boy.\nJoke: knock knock."
    r = run(
        catalog,
        llm,
        "openai",
        [
            tool_calls(*((name, {}) for name in FETCHES)),
            tool_calls(("compose_post", {"text": invented})),
            text("TASK COMPLETE"),
        ],
    )
    assert r.row["outcome"] == "full"  # the paper's rules see every tool and a signal...
    assert not r.row["grounded"] and not r.row["strict"]  # ...grounding sees the invention
    assert r.row["artifact"] == invented
    assert any(x.startswith("grounding: cat.fact") for x in r.score.reasons)


def test_openai_turn_limit_and_loop_detection(catalog: Catalog, llm: ScriptedLLM) -> None:
    r = run(catalog, llm, "openai", [tool_calls((n, {})) for n in FETCHES], max_turns=3)
    assert r.row["termination"] == "turn_limit" and r.row["turns"] == 3
    assert r.row["outcome"] == "partial" and len(llm.requests) == 3  # 3 tools ok, no output
    looped = run(catalog, llm, "openai", [tool_calls(("catfact_fact", {}))] * 5)
    assert looped.row["termination"] == "loop" and looped.row["tool_calls"] == 3
    assert looped.row["outcome"] == "failure"


def test_llm_endpoint_failure_is_an_error_row(catalog: Catalog, llm: ScriptedLLM) -> None:
    r = run(catalog, llm, "openai", [])  # the server answers 500 at once
    assert r.row["outcome"] == "error" and r.row["termination"] == "llm_error"


def test_openai_reads_tool_calls_left_as_text_by_a_server_without_a_parser(
    catalog: Catalog, llm: ScriptedLLM
) -> None:
    r = run(
        catalog,
        llm,
        "openai",
        [
            *(
                text(f'<tool_call>{{"name": "{n}", "arguments": {{}}}}</tool_call>')
                for n in FETCHES
            ),
            lambda body: tool_calls(("compose_post", {"text": grounded_post(body)})),
            text("TASK COMPLETE"),
        ],
    )
    assert r.row["strict"] == 1, r.score.reasons
    assert llm.requests[1]["messages"][-1]["content"].startswith("<tool_result>{")


# -- the paper's text protocol --------------------------------------------------------------


def call_tag(name: str, args: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def test_text_protocol_search_info_calls_and_completion(catalog: Catalog, llm: ScriptedLLM) -> None:
    r = run(
        catalog,
        llm,
        "openai-text",
        [
            text("<tool_search>cat fact</tool_search>"),
            text("<tool_info>catfact_fact</tool_info>"),
            *(text(f"Next: {call_tag(name, {})}") for name in FETCHES),
            lambda body: text(call_tag("compose_post", {"text": grounded_post(body)})),
            text("TASK COMPLETE: stored."),
        ],
    )
    assert (r.row["outcome"], r.row["strict"]) == ("full", 1), r.score.reasons
    assert "tools" not in llm.requests[0]
    assert "<tool_call>" in llm.requests[0]["messages"][0]["content"]
    search_reply = llm.requests[1]["messages"][-1]["content"]
    assert "catfact_fact" in search_reply.splitlines()[0]
    info_reply = json.loads(llm.requests[2]["messages"][-1]["content"])
    assert info_reply["name"] == "catfact_fact" and "max_length" in json.dumps(info_reply)
    assert r.row["tool_calls"] == 4 and r.row["turns"] == 7


def test_text_protocol_reminders_bad_calls_and_a_refusal(
    catalog: Catalog, llm: ScriptedLLM
) -> None:
    r = run(
        catalog,
        llm,
        "openai-text",
        [
            text("Sure, let me think about it."),
            text('<tool_call>{"name": "catfact_fact", "arguments": {oops}}</tool_call>'),
            text(call_tag("nope_tool", {})),
            text(call_tag("catfact_fact", {"max_length": "long"})),
            text(call_tag("catfact_fact", {}) + call_tag("dogceo_random_image", {})),
            text("I'm sorry, but I can't help with that."),
        ],
        max_turns=6,
    )
    reqs = llm.requests
    assert reqs[1]["messages"][-1]["content"].startswith("Format reminder")
    assert "ERROR INVALID_INPUT" in reqs[2]["messages"][-1]["content"]
    assert "unknown tool 'nope_tool'" in reqs[3]["messages"][-1]["content"]
    assert "ERROR INVALID_INPUT: max_length" in reqs[4]["messages"][-1]["content"]
    assert "1 more tag(s) ignored" in reqs[5]["messages"][-1]["content"]
    assert [(s["kind"], s["ok"]) for s in r.steps] == [
        ("malformed", 0),
        ("unknown", 0),
        ("api", 0),
        ("api", 1),
    ]
    assert r.row["termination"] == "turn_limit" and r.row["outcome"] == "failure"
    assert not r.state.completion_signal


def test_text_protocol_made_up_answer_fails_grounding(catalog: Catalog, llm: ScriptedLLM) -> None:
    r = run(
        catalog,
        llm,
        "openai-text",
        [
            *(text(call_tag(name, {})) for name in FETCHES),
            text(call_tag("compose_post", {"text": "Cats! Dogs! Jokes! Trust me."})),
            text("TASK COMPLETE"),
        ],
    )
    assert r.row["outcome"] == "full" and not r.row["grounded"] and not r.row["strict"]


# -- the conversation goes through the transport seam ---------------------------------------


def test_llm_conversation_records_and_replays_without_the_server(
    catalog: Catalog, sandbox_factory: Any, tmp_path: Path
) -> None:
    url = sandbox_factory("calm")
    script: list[Turn] = [
        tool_calls(*((name, {}) for name in FETCHES)),
        lambda body: tool_calls(("compose_post", {"text": grounded_post(body)})),
        text("TASK COMPLETE"),
    ]
    server = ScriptedLLM(script)
    server.start()
    settings = LlmSettings(base_url=server.base_url, model="scripted-1", api_key="sk-secret-123")
    cassette = tmp_path / "llm.json"
    rec_cfg = RunConfig(
        agent="openai",
        prompts=["optimal"],
        mode=Mode.RECORD,
        sandbox=url,
        cassette=cassette,
        llm=settings,
    )
    (recorded,) = asyncio.run(run_batch([TASK], rec_cfg, catalog))
    server.stop()
    assert recorded.row["strict"] == 1
    saved = cassette.read_text()
    assert "/chat/completions" in saved and "sk-secret-123" not in saved
    rep_cfg = RunConfig(
        agent="openai", prompts=["optimal"], mode=Mode.REPLAY, cassette=cassette, llm=settings
    )
    (replayed,) = asyncio.run(run_batch([TASK], rep_cfg, catalog))

    def strip(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in s.items() if k not in ("run_id", "latency_ms")} for s in rs]

    assert strip(replayed.steps) == strip(recorded.steps)
    for k in ("outcome", "score", "grounded", "strict", "turns", "tokens_in", "artifact"):
        assert replayed.row[k] == recorded.row[k], k


def test_the_documented_one_command_evaluation(
    sandbox_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`realprobe run ... --agent openai --base-url ... --model ...` end to end, tools on the
    loopback sandbox, the key from the named environment variable."""
    from cli_runner import invoke

    url = sandbox_factory("calm")
    monkeypatch.setenv("MY_KEY", "sk-test-999")
    script: list[Turn] = [
        tool_calls(*((name, {}) for name in FETCHES)),
        lambda body: tool_calls(("compose_post", {"text": grounded_post(body)})),
        text("TASK COMPLETE"),
    ]
    with ScriptedLLM(script) as server:
        res = invoke(
            [
                "run",
                "pet_newsletter",
                "--agent",
                "openai",
                "--base-url",
                server.base_url,
                "--model",
                "scripted-1",
                "--api-key-env",
                "MY_KEY",
                "--sandbox",
                url,
                "--db",
                str(tmp_path / "e.db"),
                "--json",
            ],
        )
    assert res.exit_code == 0, res.output
    (run_row,) = json.loads(res.output)["runs"]
    assert (run_row["agent"], run_row["model"], run_row["prompt"]) == (
        "openai",
        "scripted-1",
        "baseline",
    )
    assert run_row["strict"] == 1 and run_row["mode"] == "live"
    assert "Recommended workflow" not in server.requests[0]["messages"][1]["content"]
    assert server.headers[0]["authorization"] == "Bearer sk-test-999"


def test_llm_retries_and_fallbacks_are_labelled_in_task_steps(
    catalog: Catalog, llm: ScriptedLLM, sandbox_factory: Any
) -> None:
    url = sandbox_factory("calm") + "/_fault/503"  # every API answers 503
    llm.script = [
        tool_calls(("icanhazdadjoke_random", {})),
        tool_calls(("icanhazdadjoke_random", {})),
        tool_calls(("chucknorris_random", {})),
        tool_calls(("catfact_fact", {})),
        text("I could not get the data."),
    ]
    settings = LlmSettings(base_url=llm.base_url, model="scripted-1", api_key="k")
    cfg = RunConfig(agent="openai", prompts=["baseline"], mode=Mode.LIVE, sandbox=url, llm=settings)
    (r,) = asyncio.run(run_batch([TASK], cfg, catalog))
    got = [(s["tool"], s["step_id"], s["role"], s["error_code"]) for s in r.steps]
    assert got == [
        ("icanhazdadjoke_random", "joke", "call", "SERVER_ERROR"),
        ("icanhazdadjoke_random", "joke", "retry", "SERVER_ERROR"),
        ("chucknorris_random", "joke", "fallback", "SERVER_ERROR"),
        ("catfact_fact", "cat", "call", "SERVER_ERROR"),
    ]
    assert (r.row["retries"], r.row["fallbacks"], r.row["failures"]) == (1, 1, 4)
    assert r.row["outcome"] == "failure"


def test_the_reflexion_agent_reflects_on_a_failed_attempt_and_tries_again(
    catalog: Catalog, llm: ScriptedLLM
) -> None:
    from realprobe.tasks.agents.openai_native import REFLECT

    reflection = "I gave up when the joke failed; next time I ask for it again."
    r = run(
        catalog, llm, "openai-reflexion",
        [
            tool_calls(*((name, {}) for name in FETCHES)),  # the joke meets the plan's 503
            text("The joke API failed."),  # stops unfinished: the attempt fell short
            text(reflection),  # the reflection, in plain text as asked
            tool_calls(*((name, {}) for name in FETCHES)),  # attempt 2, afresh
            tool_calls(("compose_post", {"text": "a post"})),
            text("TASK COMPLETE: stored."),
        ],
        fault_plan="toolmaze-explicit-transient",
    )
    users = [[m["content"] for m in b["messages"] if m["role"] == "user"] for b in llm.requests]
    assert users[2][-1] == REFLECT  # asked once the attempt ended short of success
    assert len(llm.requests[3]["messages"]) == 2 and reflection in users[3][0]
    assert len(llm.requests) == 6
    assert r.row["termination"] == "finished" and r.row["tool_calls"] == 7
    assert r.row["attempts"] == 2 and r.row["reflections"][0]["reflection"] == reflection
    assert r.row["agent"] == "openai-reflexion"
