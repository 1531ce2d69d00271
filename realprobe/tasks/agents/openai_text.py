"""The `openai-text` agent: the paper's text protocol on any OpenAI-compatible endpoint.

The model writes one tag per turn: `<tool_search>`, `<tool_info>` or `<tool_call>` (a JSON
object with `name` and `arguments`). Only the first tag runs; a reply with no tag and no
completion signal gets the paper's format reminder.
"""

from __future__ import annotations

import json
import re
from typing import Any

import openai

from realprobe.limits import json_or_none
from realprobe.tasks.agents.base import AgentContext
from realprobe.tasks.agents.llm import LlmLoop, run_tool
from realprobe.tasks.outputs import OUTPUT_TOOLS
from realprobe.tasks.state import COMPLETION_PHRASE, says_complete, tool_message

TAG = re.compile(r"<(tool_search|tool_info|tool_call)>(.*?)</\1>", re.S)
FORMAT_REMINDER = (
    "Format reminder: put exactly one tag in your reply: <tool_search>keywords</tool_search>, "
    "<tool_info>tool_name</tool_info>, or "
    '<tool_call>{"name": "tool_name", "arguments": {...}}</tool_call>. '
    f"When the output is stored, reply with {COMPLETION_PHRASE}."
)


def search(ctx: AgentContext, query: str, limit: int = 8) -> str:
    words = [w for w in re.split(r"\W+", query.casefold()) if w]
    entries = [(t.name, t.spec.title, t.spec.description, t.api.name) for t in ctx.catalog]
    entries += [(t.name, t.title, t.description, "local output") for t in OUTPUT_TOOLS.values()]
    scored = []
    for e in entries:
        hay = " ".join(e).casefold()
        score = sum(hay.count(w) for w in words)
        if score:
            scored.append((-score, e[0], e))
    scored.sort()
    if not scored:
        return f"No tool matches {query!r}. Try other keywords."
    return "\n".join(f"- {e[0]}: {e[1]} ({e[3]})" for _, _, e in scored[:limit])


def info(ctx: AgentContext, name: str) -> str:
    name = name.strip()
    if name in OUTPUT_TOOLS:
        out = OUTPUT_TOOLS[name]
        description, schema = out.description, out.input_schema
    elif name in ctx.catalog:
        tool = ctx.catalog.get(name)
        description, schema = tool.spec.description, tool.input_schema
    else:
        return f"ERROR INVALID_INPUT: unknown tool {name!r}.{ctx.box.suggest(name)}"
    return json.dumps({"name": name, "description": description, "arguments": schema})


def parse_call(body: str) -> tuple[str, Any]:
    """(name, raw arguments) from a <tool_call> body: JSON {"name", "arguments"}, or
    `name {json}`; raises ValueError when neither."""
    body = body.strip()
    obj = json_or_none(body)
    if obj is None:
        name, _, rest = body.partition(" ")
        if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            return name, rest.strip() or "{}"
        raise ValueError("a <tool_call> holds a JSON object with `name` and `arguments`") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise ValueError("a <tool_call> holds a JSON object with `name` and `arguments`")
    return obj["name"], obj.get("arguments", {})


async def text_call(ctx: AgentContext, body: str, turn: int) -> str:
    """Run the call in a <tool_call> body; the reply is a <tool_result> block."""
    try:
        name, raw = parse_call(body)
    except ValueError as exc:
        rec = ctx.box.record_bad_call("?", {"_raw": body[:500]}, turn, "malformed", str(exc))
    else:
        rec = await run_tool(ctx, name, raw, turn)
    return f"<tool_result>{tool_message(rec)}</tool_result>"


class OpenAITextAgent(LlmLoop):
    name = "openai-text"
    protocol = "text"

    async def turn(
        self,
        ctx: AgentContext,
        client: openai.AsyncOpenAI,
        messages: list[dict[str, Any]],
        turn: int,
    ) -> bool:
        msg = await self.complete(ctx, client, messages)
        text = msg.content or msg.refusal or ""
        messages.append({"role": "assistant", "content": text})
        tags = TAG.findall(text)
        if not tags:
            if says_complete(text):
                return self.finish(ctx, text)
            ctx.state.final_message = text
            messages.append({"role": "user", "content": FORMAT_REMINDER})
            return False
        kind, body = tags[0]
        if kind == "tool_search":
            reply = search(ctx, body)
        elif kind == "tool_info":
            reply = info(ctx, body)
        else:
            reply = await text_call(ctx, body, turn)
        if len(tags) > 1:
            reply += f"\n(One tool per turn: {len(tags) - 1} more tag(s) ignored.)"
        messages.append({"role": "user", "content": reply})
        return False
