"""Fault plans: faults at chosen calls, the same for every agent and model that runs them.

A plan is a list of rules. Each rule names the tools it touches (a name or a glob), which of
their calls it hits (`first`, `n`, `every`, `after`, a time `window`), the fault to play (any
explicit variant or error code, an implicit variant, `implicit`, or `dead`) and how long the
fault lasts once it starts (`duration`: calls, or `permanent`). The first rule that hits a
call decides it. A plan sits on top of a profile (`base = "profile"`) or replaces its
failures (`base = "none"`: calls no rule hits succeed).

Calls are counted per tool (`count = "tool"`) or across the run (`count = "run"`, so
`n = 1` is the run's first tool call, whatever the tool).

A rule may instead name a place on the task's preferred path (`on`, ToolMaze's per-task
perturbation): `step:N` is the preferred tool of the N-th step, `group:N` the N-th step's
group (its tool and alternatives: the fault binds to the one the agent enters first), and
`branch` the first group that has an alternative (the first step when the task has one
path). Calls off that place never meet the rule. Task runs tell the plan their path; where
no task is known (a sandbox serving any agent), the group is whichever tool is called first.

Where a choice is left open (an error code's variant, which implicit variant), it is drawn
from (seed, tool, call): the same plan and seed give the same faults to every agent that
makes the same calls.
"""

from __future__ import annotations

import fnmatch
import math
import random
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from realprobe.errors import ErrorCode
from realprobe.limits import read_document
from realprobe.simulator.faults import Outcome
from realprobe.simulator.profile import IMPLICIT_VARIANTS, ProfileError
from realprobe.simulator.render import VARIANTS

PLAN_FORMAT = "realprobe-fault-plan/1"
#: the fault a `dead` tool answers with, on every call from the first hit on
DEAD_VARIANT = "503"
BUILTIN_PLANS = (
    "toolmaze-explicit-transient",
    "toolmaze-explicit-permanent",
    "toolmaze-implicit-transient",
    "toolmaze-implicit-permanent",
)


class FaultPlanError(ProfileError):
    """A fault plan that cannot be used (unknown name, bad rule, bad file); one line."""


def _fault_names() -> list[str]:
    explicit = [v for v, c in VARIANTS.items() if c is not None]
    return [*explicit, *(c.value for c in ErrorCode), *IMPLICIT_VARIANTS, "implicit", "dead"]


class PlanRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str = "*"
    count: Literal["tool", "run"] = "tool"
    first: int | None = Field(default=None, ge=1)
    n: list[int] | None = None
    every: int | None = Field(default=None, ge=1)
    after: int | None = Field(default=None, ge=0)
    #: seconds since the run's first call: [start, end)
    window: tuple[float, float] | None = None
    #: a place on the task's preferred path: `step:N`, `group:N` or `branch`
    on: str | None = Field(default=None, pattern=r"^((step|group):[1-9][0-9]*|branch)$")
    fault: str
    #: calls the fault lasts once a call triggers it (default 1; `dead`: permanent)
    duration: int | Literal["permanent"] | None = None

    @field_validator("n", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, int) else v

    @field_validator("fault")
    @classmethod
    def _known_fault(cls, v: str) -> str:
        if v not in _fault_names():
            raise ValueError(
                f"unknown fault {v!r}; use an explicit variant (500, hang, ...), an error code "
                f"(TIMEOUT, ...), an implicit variant ({', '.join(IMPLICIT_VARIANTS)}), "
                "implicit or dead"
            )
        return v

    @model_validator(mode="after")
    def _sane(self) -> PlanRule:
        if self.window is not None and not self.window[0] < self.window[1]:
            raise ValueError("window must be [start, end) with start < end")
        if isinstance(self.duration, int) and self.duration < 1:
            raise ValueError("duration must be at least 1 call (or permanent)")
        if self.n is not None and any(k < 1 for k in self.n):
            raise ValueError("n counts calls from 1")
        return self

    @property
    def names_tools(self) -> bool:
        """Whether `tool` names some tools (`catfact_fact`, `*joke*`), not every tool."""
        return bool(rule_literal(self.tool))

    @property
    def lasts(self) -> float:
        if self.duration == "permanent" or (self.duration is None and self.fault == "dead"):
            return math.inf
        return float(self.duration or 1)

    def hits(self, k: int, elapsed: float) -> bool:
        """Whether the k-th call (counted as the rule counts), `elapsed` seconds into the
        run, triggers the rule."""
        if self.first is not None and k > self.first:
            return False
        if self.n is not None and k not in self.n:
            return False
        if self.every is not None and k % self.every:
            return False
        if self.after is not None and k <= self.after:
            return False
        return self.window is None or self.window[0] <= elapsed < self.window[1]


def rule_literal(pattern: str) -> str:
    """The name part of a tool glob: what is left without its wildcards."""
    return "".join(c for c in pattern if c not in "*?[]!")


class FaultPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: str = PLAN_FORMAT
    name: str | None = None
    description: str | None = None
    base: Literal["profile", "none"] = "profile"
    rules: list[PlanRule] = Field(default_factory=list)
    #: how the faults of calls no rule hits are labelled (`rate` when the fault-rate dial
    #: drew them: `plan_for`); set by a door, never by a plan file
    _elsewhere: str = PrivateAttr(default="profile")

    @field_validator("format")
    @classmethod
    def _known_format(cls, v: str) -> str:
        if v != PLAN_FORMAT:
            raise ValueError(f"unsupported plan format {v!r}; this realprobe reads {PLAN_FORMAT!r}")
        return v

    def start(self, seed: int | str) -> PlanState:
        return PlanState(self, seed)


@dataclass
class PlanState:
    """A plan applied to one run's calls: counters and the faults still lasting."""

    plan: FaultPlan
    seed: int | str
    run_calls: int = 0
    t0: float | None = None
    #: (rule index, tool) -> calls left of a fault that started earlier
    lasting: dict[tuple[int, str], float] = field(default_factory=dict)
    #: (rule index, tool) -> the variant chosen when it started (kept while it lasts)
    chosen: dict[tuple[int, str], str] = field(default_factory=dict)
    #: the task's preferred path: per step, its tool then its alternatives (None: unknown)
    path: list[list[str]] | None = None
    #: rule index -> the tool of its group the agent entered first
    entered: dict[int, str] = field(default_factory=dict)

    def bind(self, path: list[list[str]]) -> None:
        self.path = path

    def _on_place(self, i: int, rule: PlanRule, tool: str) -> bool:
        """Whether a call of `tool` is at the rule's place on the path (binding a group to
        the first of its tools the agent enters). With no task's path, the place is the
        tools the rule names (the first of them called); a rule that names none never hits
        (doors without a task refuse such plans: `without_task`)."""
        if rule.on is None:
            return True
        if self.path is None and not rule.names_tools:
            return False
        group: list[str] | None = None
        if self.path is not None:
            kind, _, n = rule.on.partition(":")
            if kind == "branch":
                idx = next((j for j, g in enumerate(self.path) if len(g) > 1), 0)
            else:
                idx = int(n) - 1
            if idx >= len(self.path):
                return False
            group = self.path[idx][:1] if kind == "step" else self.path[idx]
        if group is not None and tool not in group:
            return False
        return self.entered.setdefault(i, tool) == tool

    def apply(self, tool: str, call: int, now: float | None, out: Outcome) -> Outcome:
        self.run_calls += 1
        if now is not None and self.t0 is None:
            self.t0 = now
        elapsed = 0.0 if now is None or self.t0 is None else now - self.t0
        for i, rule in enumerate(self.plan.rules):
            if not fnmatch.fnmatchcase(tool, rule.tool) or not self._on_place(i, rule, tool):
                continue
            key = (i, tool)
            left = self.lasting.get(key, 0.0)
            if left > 0:
                self.lasting[key] = left - 1
                return self._fault(rule, key, tool, call, out)
            k = call if rule.count == "tool" else self.run_calls
            if rule.hits(k, elapsed):
                self.lasting[key] = rule.lasts - 1
                self.chosen.pop(key, None)
                return self._fault(rule, key, tool, call, out)
        if self.plan.base == "none":
            latency = 0.0 if math.isinf(out.latency_s) else out.latency_s
            return Outcome(None, latency, out.pick)
        if out.injected_by == "profile" and self.plan._elsewhere != "profile":
            return replace(out, injected_by=self.plan._elsewhere)
        return out

    def _fault(
        self, rule: PlanRule, key: tuple[int, str], tool: str, call: int, out: Outcome
    ) -> Outcome:
        pick = random.Random(f"{self.seed}:{tool}:plan:{call}").getrandbits(30)
        variant = self.chosen.get(key)
        if variant is None:
            variant = self.chosen[key] = _variant_for(rule.fault, pick)
        permanent = math.isinf(rule.lasts)
        latency = out.latency_s if not math.isinf(out.latency_s) else 0.2
        if variant in IMPLICIT_VARIANTS:
            return Outcome(None, latency, pick, variant=variant, injected_by="plan",
                           permanent=permanent)  # fmt: skip
        code = VARIANTS[variant]
        if code is ErrorCode.TIMEOUT:
            latency = math.inf
        return replace(
            out, code=code, latency_s=latency, pick=pick, variant=variant,
            injected_by="plan", permanent=permanent, retry_after_s=None,
            retry_after_measured=False,
        )  # fmt: skip


#: the variants an error code named in a plan is played as (seeded choice)
_CODE_VARIANTS: dict[ErrorCode, tuple[str, ...]] = {
    ErrorCode.TIMEOUT: ("hang",),
    ErrorCode.NETWORK_ERROR: ("reset", "truncated"),
    ErrorCode.RATE_LIMIT_ERROR: ("429",),
    ErrorCode.SERVER_ERROR: ("500", "502", "503"),
    ErrorCode.INVALID_INPUT: ("400",),
    ErrorCode.NOT_FOUND: ("404",),
    ErrorCode.AUTH_ERROR: ("401", "403"),
    ErrorCode.INVALID_RESPONSE: ("bad_json", "html"),
    ErrorCode.OPERATION_FAILED: ("418",),
}


def _variant_for(fault: str, pick: int) -> str:
    if fault == "dead":
        return DEAD_VARIANT
    if fault == "implicit":
        return IMPLICIT_VARIANTS[pick % len(IMPLICIT_VARIANTS)]
    if fault in ErrorCode.__members__:
        options = _CODE_VARIANTS[ErrorCode(fault)]
        return options[pick % len(options)]
    return fault


def _validated(raw: Any, where: str) -> FaultPlan:
    try:
        return FaultPlan.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        at = ".".join(str(p) for p in err["loc"]) or "top level"
        raise FaultPlanError(f"{where}: invalid fault plan at {at}: {err['msg']}") from exc


def load_plan(ref: str | Path | FaultPlan) -> FaultPlan:
    """A plan by built-in name (`toolmaze-explicit-transient`, ...) or by file (.toml or
    .json)."""
    if isinstance(ref, FaultPlan):
        return ref
    ref_s = str(ref)
    if ref_s in BUILTIN_PLANS:
        data = resources.files("realprobe.simulator").joinpath("plans", f"{ref_s}.toml")
        with resources.as_file(data) as shipped:  # read as any plan file is
            return _validated(read_document(shipped, "fault plan"), ref_s)
    path = Path(ref_s)
    if not (path.exists() or path.is_symlink()):
        raise FaultPlanError(
            f"fault plan {ref_s!r} is neither a file nor a built-in ({', '.join(BUILTIN_PLANS)})"
        )
    fmt = "toml" if path.suffix.lower() == ".toml" else "json"
    return _validated(read_document(path, "fault plan", fmt), str(path))


def plan_for(
    ref: str | Path | FaultPlan | None, fault_rate: float | None, rule: str = "burst",
) -> FaultPlan | None:
    """The plan a door applies beside its profile (already scaled by `fault_rate` when the
    dial is set), so that every setting stored with the calls applies to them:

    - with the dial, a plan's faults play at their places and the dial's everywhere else
      (a `base = "none"` plan is run on top of the scaled profile), the dial's faults
      labelled `rate` and the plan's `plan`; the dial alone is labelled `rate` too;
    - a `base = "none"` plan drops the profile's failures, so beside a profile whose success
      chance follows a ResiliBench `rule` (which it could not honour) it is refused."""
    if ref is None and fault_rate is None:
        return None
    plan = load_plan(ref) if ref is not None else FaultPlan(name="fault-rate")
    if fault_rate is not None:
        plan = plan.model_copy(update={"base": "profile"})
        plan._elsewhere = "rate"
    elif plan.base == "none" and rule != "burst":
        raise FaultPlanError(
            f"fault plan {plan.name or ref} has base = \"none\" (calls it does not hit "
            f"succeed), so the profile's rule {rule} would not apply: use a plan with "
            "base = \"profile\", or a profile without the rule"
        )
    return plan


def without_task(plan: FaultPlan | None, door: str) -> FaultPlan | None:
    """The plan at a door that serves no task (the sandbox, `mcp` without a task, the MCP
    proxy): a rule placed on a task's path (`on`) binds to the tools it names; one that
    names none would land on whatever tool is called first, so the plan is refused in one
    line."""
    if plan is None:
        return None
    for i, rule in enumerate(plan.rules, 1):
        if rule.on is not None and not rule.names_tools:
            raise FaultPlanError(
                f"fault plan {plan.name or '(unnamed)'} places rule {i} on a task's path "
                f"(on = {rule.on!r}) and {door} serves no task: give the rule a name to bind "
                "to (tool = \"catfact_fact\"), or run the plan with a task (realprobe run)"
            )
    return plan


__all__ = [
    "BUILTIN_PLANS", "FaultPlan", "FaultPlanError", "PlanRule", "PlanState", "load_plan",
    "plan_for", "without_task",
]
