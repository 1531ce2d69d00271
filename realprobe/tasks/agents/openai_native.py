"""The `openai` agent: native tool calling on any OpenAI-compatible endpoint."""

from __future__ import annotations

from typing import Any

import openai

from realprobe.tasks.agents.base import AgentContext
from realprobe.tasks.agents.llm import LlmLoop, run_tool
from realprobe.tasks.agents.openai_text import TAG, text_call
from realprobe.tasks.outputs import OUTPUT_TOOLS
from realprobe.tasks.state import tool_message


def tool_definitions(ctx: AgentContext) -> list[dict[str, Any]]:
    return [t.openai_definition() for t in ctx.catalog] + [
        t.openai_definition() for t in OUTPUT_TOOLS.values()
    ]


class OpenAIToolAgent(LlmLoop):
    name = "openai"
    protocol = "native"

    async def turn(
        self,
        ctx: AgentContext,
        client: openai.AsyncOpenAI,
        messages: list[dict[str, Any]],
        turn: int,
    ) -> bool:
        msg = await self.complete(
            ctx, client, messages, tools=tool_definitions(ctx), tool_choice="auto"
        )
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
            rec = await run_tool(ctx, c.function.name, c.function.arguments, turn)
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": c.id or f"call_{turn}_{i}",
                    "content": tool_message(rec),
                }
            )
        return False
