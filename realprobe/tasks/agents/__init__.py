"""Agents behind one interface: `reference`, `openai` (native tools), `openai-text`, and
`openai-reflexion` (native tools with Reflexion's self-reflection)."""

from __future__ import annotations

from realprobe.errors import RealprobeError
from realprobe.tasks.agents.base import Agent, AgentContext, LlmSettings
from realprobe.tasks.agents.reference import ReferenceAgent

AGENT_NAMES = ("reference", "openai", "openai-text", "openai-reflexion")


def make_agent(name: str, llm: LlmSettings | None = None) -> Agent:
    if name == "reference":
        return ReferenceAgent()
    if name in AGENT_NAMES[1:]:
        if llm is None:
            raise RealprobeError(
                f"agent {name} needs base_url=URL and model=NAME "
                "(and the API key in $OPENAI_API_KEY or in the variable api_key_env names)",
                param=("agent", "base_url", "model", "api_key_env"),
            )
        # imported here: the openai SDK costs ~0.3 s at start-up, and most runs never need it
        if name == "openai":
            from realprobe.tasks.agents.openai_native import OpenAIToolAgent

            return OpenAIToolAgent(llm)
        if name == "openai-reflexion":
            from realprobe.tasks.agents.openai_native import OpenAIReflexionAgent

            return OpenAIReflexionAgent(llm)
        from realprobe.tasks.agents.openai_text import OpenAITextAgent

        return OpenAITextAgent(llm)
    raise RealprobeError(
        f"agent {name!r}: choose one of {', '.join(AGENT_NAMES)}", param="agent"
    )


__all__ = ["AGENT_NAMES", "Agent", "AgentContext", "LlmSettings", "make_agent"]
