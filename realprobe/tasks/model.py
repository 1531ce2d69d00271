"""The task file format: one pydantic model validates every file in `tasks_realworld/`.

A task carries the ResiliBench fields, its optimal workflow (ordered steps, each with its
tool, where its arguments come from, what it yields, and alternatives), the flawed variants
generated from that workflow (`flaws.py`), and, in `expected_outputs`, which tool results the
final artifact must contain (the grounding check).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Container
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from realprobe.errors import RealprobeError
from realprobe.limits import read_document

FLAW_TYPES: tuple[str, ...] = (
    "sequential_inversion",  # ordering error
    "tool_misuse",  # a plausible but wrong tool
    "parameter_error",
    "missing_step",  # a critical step left out
    "redundant_operation",
    "logical_discontinuity",  # an output that does not fit the next input
    "semantic_drift",  # the workflow drifts away from the goal
)

#: Minimum successful calls per task type (the paper's partial-success condition C).
MIN_CALLS: dict[str, int] = {
    "content_creation": 3,
    "api_data_retrieval": 2,
    "data_multistep_processing": 3,
    "batch_processing": 2,
    "advanced_processing": 3,
}

TaskType = Literal[
    "content_creation",
    "api_data_retrieval",
    "data_multistep_processing",
    "batch_processing",
    "advanced_processing",
]

#: a `{step.output}` placeholder in a text template
PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\}")
_ID = r"^[a-z][a-z0-9_]*$"


class TaskFileError(RealprobeError):
    pass


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Arg(_Model):
    """Where one argument comes from: exactly one of a literal value, a task input, an
    earlier step's output, or a text template over earlier outputs (`{step.output}`)."""

    value: Any = None
    input: str | None = None
    step: str | None = None
    output: str | None = None
    template: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Arg:
        kinds = [
            "value" in self.model_fields_set,
            self.input is not None,
            self.step is not None,
            self.template is not None,
        ]
        if sum(kinds) != 1:
            raise ValueError(
                "an argument has exactly one of: value, input, step(+output), template"
            )
        if (self.step is None) != (self.output is None):
            raise ValueError("`step` and `output` go together")
        return self

    @property
    def kind(self) -> str:
        if self.input is not None:
            return "input"
        if self.step is not None:
            return "step"
        if self.template is not None:
            return "template"
        return "value"

    def refs(self) -> list[tuple[str, str]]:
        """(step, output) pairs this argument reads."""
        if self.step is not None and self.output is not None:
            return [(self.step, self.output)]
        if self.template is not None:
            return PLACEHOLDER.findall(self.template)
        return []


#: canonical output name -> a dotted path into the tool's data, or several tried in order
Outputs = dict[str, str | list[str]]


class Alternative(_Model):
    tool: str
    args: dict[str, Arg] = Field(default_factory=dict)
    outputs: Outputs = Field(default_factory=dict)


class Step(_Model):
    id: str = Field(pattern=_ID)
    tool: str
    purpose: str
    args: dict[str, Arg] = Field(default_factory=dict)
    outputs: Outputs = Field(default_factory=dict)
    alternatives: list[Alternative] = Field(default_factory=list)

    def refs(self) -> list[tuple[str, str]]:
        return [r for a in self.args.values() for r in a.refs()]

    def tools(self) -> list[str]:
        return [self.tool, *(a.tool for a in self.alternatives)]


class Constraints(_Model):
    timeout_s: float = Field(
        default=180.0, gt=0, description="wall-clock deadline for the whole task"
    )
    max_retries: int = Field(default=3, ge=0, description="retries per step before switching tools")
    max_turns: int = Field(default=10, ge=1, description="LLM turn limit (the paper's 10)")
    call_timeout_s: float = Field(default=10.0, gt=0, description="deadline of one tool call")
    max_consecutive_failures: int = Field(
        default=10,
        ge=1,
        description="a run ends as a failure after this many failed calls in a row",
    )
    backoff_base_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=8.0, ge=0)


class ExpectedOutputs(_Model):
    artifact_tool: str = Field(description="the local output tool that stores the artifact")
    grounded_in: list[str] = Field(
        min_length=1, description="`step.output` values the artifact must contain verbatim"
    )
    notes: str = ""


class FlawedWorkflow(_Model):
    type: str
    seed: int = 0  # the generator's seed (0: the variants stored in the task files)
    change: str = Field(description="what differs from the optimal workflow, for humans")
    detail: dict[str, Any] = Field(default_factory=dict)
    steps: list[Step]


class Workflow(_Model):
    steps: list[Step] = Field(min_length=2)


class Task(_Model):
    instance_id: str = Field(pattern=_ID)
    task_type: TaskType
    description: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    expected_outputs: ExpectedOutputs
    required_tools: list[str]
    constraints: Constraints = Field(default_factory=lambda: Constraints())
    complexity: Literal["easy", "medium", "hard"]
    metadata: dict[str, Any] = Field(default_factory=dict)
    workflow: Workflow
    flawed: dict[str, FlawedWorkflow] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Task:
        steps = self.workflow.steps
        ids = [s.id for s in steps]
        if len(set(ids)) != len(ids):
            raise ValueError(f"workflow step ids repeat: {ids}")
        if self.required_tools != [s.tool for s in steps]:
            raise ValueError(
                f"required_tools must list the workflow's tools in order: {[s.tool for s in steps]}"
            )
        if steps[-1].tool != self.expected_outputs.artifact_tool:
            raise ValueError("the last workflow step must call expected_outputs.artifact_tool")
        seen: dict[str, Step] = {}
        groups: set[str] = set()
        for s in steps:
            for t in s.tools():
                if t in groups:
                    raise ValueError(f"tool {t!r} appears in two steps (or twice in one)")
                groups.add(t)
            for name, a in s.args.items():
                if a.input is not None and a.input not in self.inputs:
                    raise ValueError(f"step {s.id!r} arg {name!r}: no task input {a.input!r}")
            for alt in s.alternatives:
                if set(alt.outputs) != set(s.outputs):
                    raise ValueError(
                        f"step {s.id!r}: alternative {alt.tool!r} must yield the same outputs "
                        f"{sorted(s.outputs)}"
                    )
            for ref_step, ref_out in s.refs():
                if ref_step not in seen:
                    raise ValueError(f"step {s.id!r} reads {ref_step!r}, not an earlier step")
                if ref_out not in seen[ref_step].outputs:
                    raise ValueError(f"step {s.id!r} reads {ref_step}.{ref_out}: no such output")
            seen[s.id] = s
        for g in self.expected_outputs.grounded_in:
            step_id, _, out = g.partition(".")
            if step_id not in seen or out not in seen[step_id].outputs:
                raise ValueError(f"expected_outputs.grounded_in: {g!r} is not a step output")
        return self

    def step(self, step_id: str) -> Step:
        for s in self.workflow.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    def steps_for(self, prompt: str) -> list[Step]:
        """The workflow a prompt variant shows: the flawed one for `flawed:<type>`."""
        if prompt.startswith("flawed:"):
            flaw = prompt.split(":", 1)[1]
            if flaw not in self.flawed:
                raise TaskFileError(
                    f"task {self.instance_id!r} has no {flaw!r} variant; generate the flawed "
                    "variants with `python -m realprobe.tasks.flaws [FOLDER]`"
                )
            return self.flawed[flaw].steps
        return self.workflow.steps

    def check_tools(self, known: Container[str]) -> None:
        """Every tool the task names must exist (catalogue or local output tools)."""
        names = {t for s in self.workflow.steps for t in s.tools()}
        names |= {t for f in self.flawed.values() for s in f.steps for t in s.tools()}
        missing = sorted(n for n in names if n not in known)
        if missing:
            raise TaskFileError(
                f"task {self.instance_id!r} names tools that do not exist: {', '.join(missing)} "
                "(`realprobe catalog` lists the tools)"
            )

    @property
    def topology(self) -> str:
        """ToolMaze's complexity grade of the data flow among the API steps: `C1` chains (no
        step reads two API steps or feeds two), `C2` a tree (steps that read several, or
        steps that feed several, not both), `C3` many-to-many (both in one task), `C4`
        many-to-many with an alternative tool for some step."""
        api = {s.id for s in self.workflow.steps[:-1]}
        parents = {s.id: {r for r, _ in s.refs()} & api for s in self.workflow.steps[:-1]}
        children = {u: sum(u in p for p in parents.values()) for u in api}
        joins = any(len(p) > 1 for p in parents.values())
        forks = max(children.values(), default=0) > 1
        if joins and forks:
            return "C4" if any(s.alternatives for s in self.workflow.steps) else "C3"
        return "C2" if joins or forks else "C1"

    @property
    def has_alternative(self) -> bool:
        """Some API step has another tool to switch to (recovery from a permanent fault)."""
        return any(s.alternatives for s in self.workflow.steps[:-1])


def load_task(path: Path) -> Task:
    raw = read_document(path, "task file", "json")
    try:
        return Task.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "top level"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise TaskFileError(f"{path}: {where}: {err['msg']}{more}") from exc


def task_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise TaskFileError(f"{folder}: no such task folder")
    return sorted(folder.glob("*.json"))


def load_tasks(folder: Path) -> dict[str, Task]:
    tasks: dict[str, Task] = {}
    for path in task_files(folder):
        task = load_task(path)
        if task.instance_id in tasks:
            raise TaskFileError(f"{path}: instance_id {task.instance_id!r} is used twice")
        tasks[task.instance_id] = task
    return tasks


def pick_tasks(tasks: dict[str, Task], names: list[str], all_: bool) -> list[Task]:
    if all_ or not names:
        if not all_ and not names:
            raise TaskFileError("name tasks to run, or run every task (all)", param="all")
        return list(tasks.values())
    out = []
    for name in names:
        if name not in tasks:
            close = difflib.get_close_matches(name, list(tasks), n=3, cutoff=0.4)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise TaskFileError(f"unknown task {name!r}.{hint} ({len(tasks)} tasks available)")
        out.append(tasks[name])
    return out


def default_tasks_dir() -> Path:
    from realprobe.data import data_dir

    return data_dir("tasks_realworld")
