"""`realprobe mcp --task TASK`: the connected agent's calls as one scored task run.

Besides the catalogue tools the server lists the task's output tools (`compose_post`,
`save_report`), `task_prompt` (the task as the built-in agents read it) and `finish`
(the final answer). Every catalogue or output call is recorded like a built-in agent's;
`finish`, or the end of the session, scores the run and stores it; the next call starts
the next run. `task_prompt` and `finish` are not calls of the task and are not recorded.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.types import CallToolResult, TextContent
from mcp.types import Tool as McpTool

from realprobe.adapters.catalog import Catalog
from realprobe.tasks.evaluate import FINISH_TOOL, TaskSession, ToolCall
from realprobe.tasks.outputs import OUTPUT_TOOLS
from realprobe.tasks.settings import EvalSettings

PROMPT_TOOL = "task_prompt"


def _text(text: str, *, error: bool = False, data: Any = None) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], is_error=error,
        structured_content=data if isinstance(data, dict) else None,
    )


def _count(args: dict[str, Any], key: str) -> int:
    """A token count the client gave, else 0 (unknown): a count past 64 bits is no count."""
    value = args.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63:
        return value
    return 0


class McpTaskSession:
    """The MCP face of a TaskSession: extra tool definitions and the call router."""

    def __init__(self, session: TaskSession) -> None:
        self.session = session
        p = session.prompt
        self.instructions = f"{p.system}\n\n{p.user}\n\nWhen done, call `{FINISH_TOOL}`."
        self.definitions = [
            McpTool(name=t.name, title=t.title, description=t.description,
                    input_schema=t.input_schema)
            for t in OUTPUT_TOOLS.values()
        ] + [
            McpTool(name=PROMPT_TOOL, title="The task",
                    description="The task to carry out, with its inputs (not a task step).",
                    input_schema={"type": "object", "properties": {}}),
            McpTool(name=FINISH_TOOL, title="Finish the task",
                    description="End the task with your final answer; start it with "
                    "`TASK COMPLETE` when the result is stored. The run is scored then. "
                    "Optionally report the model tokens the run used (for its cost).",
                    input_schema={"type": "object",
                                  "properties": {"answer": {"type": "string"},
                                                 "tokens_in": {"type": "integer", "minimum": 0},
                                                 "tokens_out": {"type": "integer", "minimum": 0}},
                                  "required": ["answer"]}),
        ]

    def serves(self, name: str) -> bool:
        return name in OUTPUT_TOOLS or name in (PROMPT_TOOL, FINISH_TOOL)

    async def handle(self, name: str, arguments: dict[str, Any] | None) -> CallToolResult:
        if name == PROMPT_TOOL:
            return _text(self.instructions)
        if name == FINISH_TOOL:
            args = arguments or {}
            outcome = await self.session.finish(
                str(args.get("answer", "")), tokens=(_count(args, "tokens_in"),
                                                     _count(args, "tokens_out")))
            if outcome is None:
                return _text("no tool was called: nothing to score", error=True)
            detail = {k: outcome.row[k] for k in
                      ("outcome", "score", "grounded", "chain_f1", "kendall_tau", "graph_f1")}
            return _text(json.dumps(detail), data=detail)
        call: ToolCall = await self.session.call(name, arguments)
        return _text(call.text, error=not call.ok, data=call.data)

    async def close(self) -> None:
        await self.session.close()


def open_session(catalog: Catalog, options: Any) -> McpTaskSession:
    """The session of `ServiceOptions` with a task (its db, target and prompt)."""
    from realprobe.store import open_db

    db = open_db(options.db)
    settings = options.settings or EvalSettings.given(target=options.transport)
    return McpTaskSession(
        TaskSession(options.task, catalog, settings=settings, db=db, model=options.model)
    )
