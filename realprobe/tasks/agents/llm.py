"""What both LLM agents share: the OpenAI SDK client on the run's transport, and the loop's
bookkeeping (tokens, turn limit, endpoint failures)."""

from __future__ import annotations

import contextlib
import json
from abc import ABC, abstractmethod
from typing import Any

import httpx
import openai

from realprobe.errors import RealprobeError
from realprobe.limits import input_cap, load_json_text
from realprobe.retry_after import retry_after_of
from realprobe.secrets import clip
from realprobe.tasks.agents.base import AgentContext, LlmSettings
from realprobe.tasks.prompts import render
from realprobe.tasks.state import StepRecord, Terminated, says_complete


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict; raises ValueError with a message for the model."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    try:
        value = load_json_text(raw, "arguments", max_bytes=input_cap())
    except RealprobeError as exc:
        raise ValueError(str(exc)) from exc
    if not isinstance(value, dict):
        raise ValueError("arguments must be a JSON object")
    return value


async def run_tool(ctx: AgentContext, name: str, raw_args: Any, turn: int) -> StepRecord:
    """One model-requested call: malformed arguments and unknown names are recorded, not run."""
    try:
        args = parse_arguments(raw_args)
    except ValueError as exc:
        shown = raw_args if isinstance(raw_args, str) else json.dumps(raw_args, default=str)
        return ctx.box.record_bad_call(
            name, {"_raw": clip(str(shown), 500)}, turn, "malformed", str(exc)
        )
    return await ctx.box.call(name, args, turn=turn)


class LlmLoop(ABC):
    """Base for LLM agents: the turn loop and its ending; subclasses do one turn each."""

    name = "llm"
    protocol = "native"

    def __init__(self, settings: LlmSettings | None = None) -> None:
        self.settings = settings

    @property
    def model(self) -> str:
        return self.settings.model if self.settings else "?"

    async def run(self, ctx: AgentContext) -> None:
        if ctx.llm is None:
            raise RealprobeError("this agent needs base_url and model", param=("base_url", "model"))
        # the SDK client on the run's transport, so record/replay capture the conversation
        http = httpx.AsyncClient(transport=ctx.llm_transport, timeout=ctx.llm.timeout_s,
                                 event_hooks={"response": [_bounded_answer]})
        client = openai.AsyncOpenAI(
            base_url=ctx.llm.base_url,
            api_key=ctx.llm.api_key,
            http_client=http,  # type: ignore[arg-type]
            max_retries=0,  # a retry would change the recorded conversation; failures are reported
            timeout=ctx.llm.timeout_s,
        )
        try:
            await self.loop(ctx, client)
        except openai.APIError as exc:
            ctx.state.error = clip(f"LLM endpoint: {type(exc).__name__}: {exc}", 300)
            ctx.state.termination = "llm_error"
        finally:
            await http.aclose()

    async def loop(self, ctx: AgentContext, client: openai.AsyncOpenAI) -> None:
        await self.attempt(ctx, client, self.opening(ctx))

    def opening(self, ctx: AgentContext, memory: str = "") -> list[dict[str, Any]]:
        """The conversation's first messages (`memory`: what the user message carries on)."""
        p = render(ctx.task, ctx.prompt, protocol=self.protocol)
        user = p.user + ("\n\n" + memory if memory else "")
        return [{"role": "system", "content": p.system}, {"role": "user", "content": user}]

    async def attempt(
        self, ctx: AgentContext, client: openai.AsyncOpenAI, messages: list[dict[str, Any]]
    ) -> None:
        """Turns until the model is done, at most the task's turn limit (the run's turns
        count on across attempts)."""
        for _ in range(ctx.task.constraints.max_turns):
            ctx.state.turns += 1
            ctx.box.check_deadline()
            if await self.turn(ctx, client, messages, ctx.state.turns):
                return
        raise Terminated("turn_limit")

    async def complete(
        self,
        ctx: AgentContext,
        client: openai.AsyncOpenAI,
        messages: list[dict[str, Any]],
        **extra: Any,
    ) -> Any:
        """The model's next message: one chat completion within the endpoint's limits
        (429/503 pause and retry), its tokens counted."""
        assert ctx.llm is not None
        limiter = ctx.llm_limiter
        attempt = 0
        while True:
            gate = limiter.slot() if limiter is not None else contextlib.nullcontext()
            async with gate:
                try:
                    resp = await client.chat.completions.create(
                        model=ctx.llm.model,
                        messages=[],  # the real ones go in the body as they are (below)
                        temperature=ctx.llm.temperature,
                        **_as_body(messages, extra),
                    )
                    break
                except openai.APIStatusError as exc:
                    if limiter is None or exc.status_code not in (429, 503):
                        raise
                    limits = limiter.limits
                    wait = retry_after_of(exc.response.headers)
                    if wait is None:
                        wait = limits.backoff_s * 2**attempt
                    if attempt >= limits.max_retries or wait > limits.max_pause_s:
                        raise
                    limiter.pause(wait)
            attempt += 1
        if resp.usage is not None:
            ctx.state.tokens_in += resp.usage.prompt_tokens or 0
            ctx.state.tokens_out += resp.usage.completion_tokens or 0
            if limiter is not None:
                limiter.used_tokens(resp.usage.total_tokens or 0)
        if not resp.choices:
            raise openai.APIError("the endpoint answered with no choices", request=None, body=None)  # type: ignore[arg-type]
        return resp.choices[0].message

    def finish(self, ctx: AgentContext, text: str) -> bool:
        ctx.state.final_message = text
        ctx.state.completion_signal = says_complete(text)
        return True

    @abstractmethod
    async def turn(
        self,
        ctx: AgentContext,
        client: openai.AsyncOpenAI,
        messages: list[dict[str, Any]],
        turn: int,
    ) -> bool:
        """One model turn (native tool calls or the text protocol); True ends the run."""


__all__ = ["LlmLoop", "parse_arguments", "run_tool"]


async def _bounded_answer(response: httpx.Response) -> None:
    """An answer read under the input limits before the SDK parses it: its parser recurses
    once per nesting level, so a deeply nested body would otherwise end in a RecursionError."""
    if response.is_success:
        try:
            load_json_text(await response.aread(), "the answer", max_bytes=input_cap())
        except RealprobeError as exc:
            raise openai.APIError(str(exc), request=response.request, body=None) from None  # type: ignore[arg-type]


def _as_body(messages: list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    """The conversation as a request-body field (`extra_body` wins over the typed argument):
    it is plain JSON already, and the SDK's typed-dict transform of a growing conversation
    costs more CPU per request than the rest of a run."""
    body = {**extra.get("extra_body", {}), "messages": messages}
    return {**extra, "extra_body": body}

