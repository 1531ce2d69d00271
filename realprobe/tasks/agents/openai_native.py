"""The `openai` agent: native tool calling on any OpenAI-compatible endpoint."""

from __future__ import annotations

import contextlib
from typing import Any

import openai

from realprobe.adapters.exports import drop_nulls
from realprobe.tasks.agents.base import AgentContext
from realprobe.tasks.agents.llm import LlmLoop, parse_arguments, run_tool
from realprobe.tasks.agents.openai_text import TAG, text_call
from realprobe.tasks.outputs import OUTPUT_TOOLS
from realprobe.tasks.state import tool_message

_DEFINITIONS: dict[tuple[int, bool], list[dict[str, Any]]] = {}


def tool_definitions(ctx: AgentContext, *, strict: bool = False) -> list[dict[str, Any]]:
    """The tools offered to the model (computed once per catalogue and mode)."""
    key = (id(ctx.catalog), strict)
    cached = _DEFINITIONS.get(key)
    if cached is None:
        cached = [t.openai_definition(strict=strict) for t in ctx.catalog] + [
            t.openai_definition(strict=strict) for t in OUTPUT_TOOLS.values()
        ]
        if len(_DEFINITIONS) > 64:
            _DEFINITIONS.clear()
        _DEFINITIONS[key] = cached
    return cached


def _tools(ctx: AgentContext, strict: bool) -> dict[str, Any]:
    """The tools as request-body fields. Sent as `extra_body`: they are plain JSON already,
    and the SDK's typed-dict transform of ~35 schemas would cost more than the request."""
    return {"extra_body": {"tools": tool_definitions(ctx, strict=strict), "tool_choice": "auto"}}


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
        messages.append(
            {
                "role": "assistant",
                "content": msg.content,
                "tool_calls": [
                    {
                        "id": c.id or f"call_{turn}_{i}",
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for i, c in enumerate(calls)
                ],
            }
        )
        for i, c in enumerate(calls):
            args: Any = c.function.arguments
            # strict schemas send null for "not given" (and many models do without them);
            # malformed arguments are left for run_tool to record
            with contextlib.suppress(ValueError):
                args = drop_nulls(parse_arguments(args))
            rec = await run_tool(ctx, c.function.name, args, turn)
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": c.id or f"call_{turn}_{i}",
                    "content": tool_message(rec),
                }
            )
        return False


#: what the Reflexion variant asks after a failed step, and when the model stops unfinished
REFLECT = (
    "Reflect before your next step: in two or three sentences, say why that did not work "
    "and what you will do differently (retry, another tool, other arguments); then go on."
)
#: times a run that stopped without storing its result is sent back after a reflection
MAX_REFLECTIONS = 2


class OpenAIReflexionAgent(OpenAIToolAgent):
    """ReliabilityBench's second architecture: the ReAct-style tool loop plus Reflexion's
    verbal self-reflection. After a turn with a failed tool call, and when the model stops
    without the completion signal, it is asked to reflect; the reflection stays in its
    context (its episodic memory) for the rest of the run, within the same turn limit."""

    name = "openai-reflexion"

    async def loop(self, ctx: AgentContext, client: openai.AsyncOpenAI) -> None:
        self.reflections = 0
        await super().loop(ctx, client)

    async def turn(
        self,
        ctx: AgentContext,
        client: openai.AsyncOpenAI,
        messages: list[dict[str, Any]],
        turn: int,
    ) -> bool:
        before = len(ctx.state.steps)
        if await super().turn(ctx, client, messages, turn):
            if ctx.state.completion_signal or self.reflections >= MAX_REFLECTIONS:
                return True
            self.reflections += 1
            messages.append({"role": "assistant", "content": ctx.state.final_message})
            messages.append({"role": "user", "content": "The task is not done. " + REFLECT})
            return False
        if any(not s.ok for s in ctx.state.steps[before:]):
            messages.append({"role": "user", "content": REFLECT})
        return False
