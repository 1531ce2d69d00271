"""The four prompt variants of the paper, rendered from task data: baseline, chain-of-thought
(`cot`), optimal workflow, and flawed workflow (`flawed:<type>`, one per flaw type); and
`failure-unaware`, ToolMaze's ablation: the baseline without the system prompt's word that
tools fail and how to handle it (every other variant says it).

The flawed prompt presents the flawed workflow exactly as the optimal one is presented: the
agent is not told it is flawed. Two protocols: `native` (OpenAI tool calling) and `text`
(the paper's `<tool_search>` / `<tool_info>` / `<tool_call>` tags, one tool per turn).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from realprobe.errors import RealprobeError
from realprobe.tasks.flaws import ALL_FLAW_TYPES, parse_flaw
from realprobe.tasks.model import FLAW_TYPES, Arg, Step, Task
from realprobe.tasks.state import COMPLETION_PHRASE

BASE_VARIANTS = ("baseline", "cot", "optimal", "failure-unaware")
#: the variants that show no workflow: the agent has the task's text only
TEXT_ONLY = ("baseline", "cot", "failure-unaware")


def prompt_variants(spec: str) -> list[str]:
    """`baseline|cot|optimal|flawed:<type>[@<severity>]|flawed:all[@<severity>]`,
    comma-separated, to concrete names. `flawed:all` is the seven stored variants;
    `flawed:all@30` every flaw type, the graded ones included, at severity 30."""
    out: list[str] = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        if part in BASE_VARIANTS:
            out.append(part)
        elif part == "flawed:all":
            out.extend(f"flawed:{t}" for t in FLAW_TYPES)
        elif part.startswith("flawed:"):
            out.extend(_flawed(part))
        else:
            raise RealprobeError(
                f"prompt {part!r}: choose baseline, cot, optimal, failure-unaware, "
                f"flawed:all[@<severity>] or "
                f"flawed:<type>[@<severity>] with type one of {', '.join(ALL_FLAW_TYPES)}",
                param="prompt",
            )
    if not out:
        raise RealprobeError("prompt is empty", param="prompt")
    return out


def _flawed(part: str) -> list[str]:
    """`flawed:<type>[@<severity>]` or `flawed:all@<severity>` as concrete prompt names."""
    flaw = part.split(":", 1)[1]
    kinds = ALL_FLAW_TYPES if flaw.startswith("all@") else [flaw.split("@")[0]]
    sev = flaw.partition("@")[1:]
    try:
        return [f"flawed:{parse_flaw(k + ''.join(sev)).name}" for k in kinds]
    except RealprobeError as exc:
        raise RealprobeError(f"prompt {part[:60]!r}: {exc}", param="prompt") from None


@dataclass
class Prompt:
    system: str
    user: str


def _arg_text(task: Task, steps: list[Step], arg: Arg) -> str:
    if arg.input is not None:
        shown = json.dumps(task.inputs[arg.input], ensure_ascii=False)
        return f"the task input `{arg.input}` ({shown})"
    if arg.step is not None:
        tool = next((s.tool for s in steps if s.id == arg.step), "?")
        return f"`{arg.output}` from step `{arg.step}` ({tool})"
    if arg.template is not None:
        shown = json.dumps(arg.template, ensure_ascii=False)
        return f"text like {shown} with the real values filled in"
    return json.dumps(arg.value, ensure_ascii=False)


def render_workflow(task: Task, steps: list[Step]) -> str:
    lines = []
    for n, s in enumerate(steps, 1):
        line = f"{n}. `{s.id}`: call `{s.tool}`: {s.purpose}."
        if s.args:
            line += (
                " Arguments: "
                + "; ".join(f"{k} = {_arg_text(task, steps, a)}" for k, a in s.args.items())
                + "."
            )
        if s.outputs:
            line += f" Gives: {', '.join(s.outputs)}."
        if s.alternatives:
            line += (
                " If it keeps failing, use "
                + " or ".join(f"`{a.tool}`" for a in s.alternatives)
                + " instead."
            )
        lines.append(line)
    return "\n".join(lines)


#: what the system prompt says about failures (left out by `failure-unaware`)
FAILURE_HINTS = (
    "Tools can fail (timeouts, rate limits, server errors); an error result starts with "
    "`ERROR <CODE>`. Retry a failing tool when the error is temporary, or switch to a "
    "similar tool. "
)


def _system(protocol: str, max_turns: int, failure_aware: bool = True) -> str:
    rules = (
        "You are an agent that completes tasks by calling tools that wrap real public web APIs. "
        + (FAILURE_HINTS if failure_aware else "")
        + "Use only what tools really returned: never invent facts, quotes or "
        "numbers. Store the final result with the output tool the task names (`compose_post` "
        "or `save_report`), copying the gathered items verbatim. Then reply with a final "
        f"message that starts with `{COMPLETION_PHRASE}`. You have at most {max_turns} turns."
    )
    if protocol == "native":
        return rules
    return rules + (
        "\n\nTool protocol: each reply holds exactly ONE of these tags, and nothing is run "
        "unless it is inside a tag.\n"
        "- `<tool_search>keywords</tool_search>` lists tools matching the keywords.\n"
        "- `<tool_info>tool_name</tool_info>` shows a tool's description and JSON arguments.\n"
        '- `<tool_call>{"name": "tool_name", "arguments": {...}}</tool_call>` runs one tool.\n'
        "One tool per turn: after each tag, wait for the result before the next step. When "
        f"the output is stored, reply with `{COMPLETION_PHRASE}` and a one-line summary."
    )


def render(task: Task, variant: str, *, protocol: str = "native") -> Prompt:
    """System and user messages for one task under one prompt variant."""
    if protocol not in ("native", "text"):
        raise ValueError(protocol)
    inputs = json.dumps(task.inputs, ensure_ascii=False) if task.inputs else "(none)"
    user = (
        f"Task `{task.instance_id}` ({task.task_type}, {task.complexity}).\n"
        f"{task.description}\n\nInputs: {inputs}\n"
        f"Store the result with `{task.expected_outputs.artifact_tool}`."
    )
    if variant == "cot":
        user += (
            "\n\nThink step by step: first write a short plan (which tools, in which order, "
            "which output feeds which input), then carry it out one call at a time, checking "
            "each result before the next call."
        )
    elif variant == "optimal" or variant.startswith("flawed:"):
        user += "\n\nRecommended workflow:\n" + render_workflow(task, task.steps_for(variant))
    elif variant not in ("baseline", "failure-unaware"):
        raise RealprobeError(f"unknown prompt variant {variant!r}")
    aware = variant != "failure-unaware"
    return Prompt(_system(protocol, task.constraints.max_turns, aware), user)
