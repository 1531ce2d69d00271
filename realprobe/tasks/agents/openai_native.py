"""The `openai` agent: native tool calling on any OpenAI-compatible endpoint."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import openai

from realprobe.adapters import Catalog
from realprobe.adapters.exports import drop_nulls
from realprobe.tasks.agents.base import AgentContext
from realprobe.tasks.agents.llm import LlmLoop, parse_arguments, run_tool
from realprobe.tasks.agents.openai_text import TAG, text_call
from realprobe.tasks.outputs import OUTPUT_TOOLS
from realprobe.tasks.state import Terminated, tool_message


@functools.lru_cache(maxsize=64)
def tool_definitions(catalog: Catalog, strict: bool = False) -> list[dict[str, Any]]:
    """The tools offered to the model (computed once per catalogue and mode)."""
    return [t.openai_definition(strict=strict) for t in [*catalog, *OUTPUT_TOOLS.values()]]


def _tools(ctx: AgentContext, strict: bool) -> dict[str, Any]:
    """The tools as request-body fields. Sent as `extra_body`: they are plain JSON already,
    and the SDK's typed-dict transform of ~35 schemas would cost more than the request."""
    return {"extra_body": {"tools": tool_definitions(ctx.catalog, strict), "tool_choice": "auto"}}


_STRICT_WORDS = ("strict", "additionalproperties", "json schema", "json_schema", "schema")


def rejects_strict(exc: openai.BadRequestError) -> bool:
    """A 400 that is about the strict tool schemas (not, say, a bad model name)."""
    text = str(exc).lower()
    return any(w in text for w in _STRICT_WORDS)


class OpenAIToolAgent(LlmLoop):
    """Native tool calling; strict function schemas when the endpoint accepts them."""

    name = "openai"
    protocol = "native"

    def __init__(self, settings: Any = None) -> None:
        super().__init__(settings)
        wanted = getattr(settings, "strict_tools", None)
        #: None until an endpoint has answered a strict request (auto mode)
        self.strict: bool | None = wanted
        self._auto = wanted is None

    async def _complete(
        self, ctx: AgentContext, client: openai.AsyncOpenAI, messages: list[dict[str, Any]]
    ) -> Any:
        strict = self.strict is not False
        try:
            return await self.complete(ctx, client, messages, **_tools(ctx, strict))
        except openai.BadRequestError as exc:
            if not (strict and self._auto and rejects_strict(exc)):
                raise
            self.strict = False  # this endpoint does not take strict schemas: plain tools
            return await self.complete(ctx, client, messages, **_tools(ctx, False))

    async def turn(
        self,
        ctx: AgentContext,
        client: openai.AsyncOpenAI,
        messages: list[dict[str, Any]],
        turn: int,
    ) -> bool:
        msg = await self._complete(ctx, client, messages)
        calls = msg.tool_calls or []
        if not calls:
            text = msg.content or msg.refusal or ""
            embedded = TAG.search(text)
            if embedded is None or embedded.group(1) != "tool_call":
                return self.finish(ctx, text)
            # a server without a tool-call parser leaves Hermes-style tags in the text
            messages.append({"role": "assistant", "content": text})
            messages.append(
                {"role": "user", "content": await text_call(ctx, embedded.group(2), turn)}
            )
            return False
        ids = [c.id or f"call_{turn}_{i}" for i, c in enumerate(calls)]
        messages.append(
            {
                "role": "assistant",
                "content": msg.content,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for call_id, c in zip(ids, calls, strict=True)
                ],
            }
        )
        for call_id, c in zip(ids, calls, strict=True):
            args: Any = c.function.arguments
            # strict schemas send null for "not given" (and many models do without them);
            # malformed arguments are left for run_tool to record
            with contextlib.suppress(ValueError):
                args = drop_nulls(parse_arguments(args))
            rec = await run_tool(ctx, c.function.name, args, turn)
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": tool_message(rec),
                }
            )
        return False


#: what the Reflexion agent asks after an attempt that did not succeed (free text expected)
REFLECT = (
    "That attempt did not complete the task. In a few sentences, reflect: say why it did not "
    "work and what you will do differently next time (retry, another tool, other "
    "arguments). Answer in plain text only; do not call a tool now."
)
#: how the next attempt's prompt carries the reflections of the earlier ones
REFLECTIONS_HEADER = "Reflections on your earlier attempts at this task (learn from them):"
#: attempts a Reflexion run makes at most (the first and up to two more after reflecting)
MAX_ATTEMPTS = 3


class OpenAIReflexionAgent(OpenAIToolAgent):
    """ReliabilityBench's second architecture, Reflexion over the ReAct tool loop: an
    attempt; when the evaluator (the task's own scoring) says it fell short of full success,
    a verbal self-reflection on it; then a fresh attempt whose prompt carries every
    reflection so far (the episodic memory), up to `attempts` attempts. The run ends only by
    success, the attempt cap or the task's deadline; the turn limit, a loop or ten failed
    calls in a row end one attempt. Every attempt and its reflection are stored; the run is
    scored on its final attempt."""

    name = "openai-reflexion"
    attempts = MAX_ATTEMPTS

    async def loop(self, ctx: AgentContext, client: openai.AsyncOpenAI) -> None:
        from realprobe.tasks.scoring import score_run  # the evaluator: the run's own scoring

        reflections: list[str] = []
        for attempt in range(1, self.attempts + 1):
            messages = self.opening(ctx, _memory(reflections) if reflections else "")
            try:
                await self.attempt(ctx, client, messages)
            except Terminated as exc:
                if exc.reason == "deadline":
                    raise
                ctx.state.termination = exc.reason  # this attempt's end, not the run's
            outcome = score_run(ctx.task, ctx.state).outcome
            if outcome == "full" or attempt == self.attempts:
                return
            ctx.box.check_deadline()
            reflection = await self.reflect(ctx, client, messages)
            reflections.append(reflection)
            ctx.box.new_attempt(outcome, reflection)

    async def reflect(
        self, ctx: AgentContext, client: openai.AsyncOpenAI, messages: list[dict[str, Any]]
    ) -> str:
        """The model's reflection on the attempt in `messages`: its text, whatever else the
        reply holds. A tool call beside it (or instead of it) is not run; a reply with no
        text is an empty reflection, and the next attempt starts all the same."""
        if ctx.state.final_message and (not messages or messages[-1]["role"] != "assistant"):
            messages.append({"role": "assistant", "content": ctx.state.final_message})
        _close_open_calls(messages)
        messages.append({"role": "user", "content": REFLECT})
        msg = await self._complete(ctx, client, messages)
        return (msg.content or "").strip()


def _close_open_calls(messages: list[dict[str, Any]]) -> None:
    """Answer the calls an attempt ended in the middle of (a limit cut a turn of several
    calls short): a conversation with an unanswered tool call is refused by endpoints."""
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    for m in reversed(messages):
        if m["role"] == "assistant" and m.get("tool_calls"):
            for c in m["tool_calls"]:
                if c["id"] not in answered:
                    messages.append({"role": "tool", "tool_call_id": c["id"],
                                     "content": "ERROR: not run (the attempt ended)"})
            return


def _memory(reflections: list[str]) -> str:
    lines = [REFLECTIONS_HEADER]
    lines += [f"Attempt {i}: {r or '(no reflection given)'}" for i, r in enumerate(reflections, 1)]
    return "\n".join(lines)
