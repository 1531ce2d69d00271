"""The one small agent interface: `await agent.run(ctx)` fills `ctx.state` through `ctx.box`."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

import httpx

from realprobe.adapters import Catalog
from realprobe.secrets import remember
from realprobe.tasks.agents.limits import LlmLimiter
from realprobe.tasks.model import Task
from realprobe.tasks.state import RunState, ToolBox


@dataclass
class LlmSettings:
    base_url: str
    model: str
    api_key: str
    timeout_s: float = 120.0
    temperature: float = 0.0
    #: strict function calling: True always, False never, None tries it and falls back
    #: to plain tools when the endpoint rejects strict schemas
    strict_tools: bool | None = None

    def __post_init__(self) -> None:
        remember(self.api_key)  # the key is never written, even if the model echoes it


@dataclass
class AgentContext:
    task: Task
    prompt: str  # baseline | cot | optimal | flawed:<type>
    catalog: Catalog
    box: ToolBox
    state: RunState
    rng: random.Random  # seeded per run: the only randomness an agent may use
    llm: LlmSettings | None = None
    llm_transport: httpx.AsyncBaseTransport | None = None  # the run's transport seam
    #: the endpoint's shared limits (requests, tokens, concurrency, 429 pauses)
    llm_limiter: LlmLimiter | None = None


class Agent(Protocol):
    name: str

    @property
    def model(self) -> str: ...

    async def run(self, ctx: AgentContext) -> None: ...
