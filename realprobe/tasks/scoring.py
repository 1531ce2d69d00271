"""Scoring one run: the paper's full / partial / failure, our grounding check, and strict.

Paper rules (ResiliBench / WorkflowBench `interactive_executor.py`):

- full: every required tool executed successfully, the first successful executions in the
  order the workflow's data flow needs (a step after every step whose output it reads, the
  output step last; independent steps in any order), the output produced, and an explicit
  completion signal. The paper's code demands the list's total order; ReliabilityBench's
  expected-state relation under rewording is identity, and a reordered text would otherwise
  be penalised by the scorer rather than the agent. A required tool
  counts as executed when it or one of the step's declared alternatives succeeded.
- partial: at least two of (A) >= 60% of the required API tools succeeded, (B) an output tool
  ran successfully, (C) the task type's minimum number of successful calls was met,
  (D) an explicit completion signal.
- failure: anything else, and any run that ended on repeated consecutive failures or a loop.

A call whose answer was an injected implicit fault (HTTP 200, wrong content) is not a
successful execution: the evaluator knows what the agent could not see.

Grounding (ours): the artifact must contain, verbatim up to case and whitespace, every
`expected_outputs.grounded_in` value as a tool really returned it in this run. Strict = full
and grounded. Score multipliers are the paper's 1.0 / 0.6 / 0.0.

Trajectory (how near a run came to the optimal workflow, beyond yes/no): each successful
call is mapped to the workflow step whose tool or alternative it called (other tools stay
unmatched), then Chain F1 and Kendall tau compare that sequence with the optimal step order,
and Graph F1 compares the data flow the run used (an edge u -> v when a value step u
returned appears in the arguments of step v's call) with the workflow's dependency edges;
Graph node F1 is WorkflowPerturb's stricter MCIS node F1 over the same two graphs.
Formulas in `metrics.py`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from realprobe.tasks.metrics import chain_f1, graph_f1, kendall_tau, mcis_node_f1
from realprobe.tasks.model import MIN_CALLS, Task
from realprobe.tasks.state import RunState, StepRecord
from realprobe.tasks.values import as_text, extract_outputs, leaves, normalise

SCORES = {"full": 1.0, "partial": 0.6, "failure": 0.0}
FAILURE_TERMINATIONS = frozenset({"consecutive_failures", "loop"})


@dataclass
class Grounding:
    ok: bool
    checked: dict[str, bool] = field(default_factory=dict)  # "step.output" -> found
    missing: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Trajectory:
    chain_f1: float
    kendall_tau: float | None  # None: fewer than two workflow steps succeeded
    graph_f1: float | None  # None: the workflow has no dependency edges
    graph_node_f1: float = 0.0  # WorkflowPerturb's MCIS node F1

    def as_dict(self) -> dict[str, float | None]:
        return {
            "chain_f1": round(self.chain_f1, 4),
            "kendall_tau": None if self.kendall_tau is None else round(self.kendall_tau, 4),
            "graph_f1": None if self.graph_f1 is None else round(self.graph_f1, 4),
            "graph_node_f1": round(self.graph_node_f1, 4),
        }


@dataclass
class Score:
    outcome: str  # full | partial | failure | error
    score: float
    grounded: bool
    strict: bool
    reasons: list[str]
    conditions: dict[str, bool]
    grounding: Grounding
    trajectory: Trajectory = field(default_factory=lambda: Trajectory(0.0, None, None))

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.trajectory.as_dict(),
            "outcome": self.outcome,
            "score": self.score,
            "grounded": self.grounded,
            "strict": self.strict,
            "reasons": self.reasons,
            "conditions": self.conditions,
            "grounding": self.grounding.checked,
        }


def _first_success(steps: list[StepRecord], tools: list[str]) -> int | None:
    """The first call of these tools that really succeeded: an answer injected as an
    implicit fault looked ok to the agent but was wrong, so it does not count."""
    for s in steps:
        if s.ok and s.tool in tools and not s.implicit_fault:
            return s.idx
    return None


def returned_values(task: Task, steps: list[StepRecord], ref: str) -> list[str]:
    """Every value `step.output` took in this run's successful calls (any of the step's tools)."""
    step_id, _, out = ref.partition(".")
    wf = task.step(step_id)
    maps = {wf.tool: wf.outputs, **{a.tool: a.outputs for a in wf.alternatives}}
    values = []
    for s in steps:
        if s.ok and s.tool in maps and s.kind == "api":
            got = extract_outputs(maps[s.tool], s.data)
            if out in got:
                values.append(as_text(got[out]))
    return values


def check_grounding(task: Task, state: RunState) -> Grounding:
    if state.artifact is None:
        refs = task.expected_outputs.grounded_in
        return Grounding(False, dict.fromkeys(refs, False), ["no artifact was stored"])
    art = normalise(state.artifact)
    checked: dict[str, bool] = {}
    missing: list[str] = []
    for ref in task.expected_outputs.grounded_in:
        values = returned_values(task, state.steps, ref)
        found = any(normalise(v) in art for v in values if normalise(v))
        checked[ref] = found
        if not values:
            missing.append(f"{ref}: no tool returned it in this run")
        elif not found:
            missing.append(f"{ref}: the artifact does not contain what the tool returned")
    return Grounding(all(checked.values()), checked, missing)


def _step_map(task: Task) -> dict[str, str]:
    """tool -> the workflow step it serves (the step's tool or one of its alternatives)."""
    return {t: s.id for s in task.workflow.steps for t in s.tools()}


def executed_steps(task: Task, steps: list[StepRecord]) -> list[str]:
    """The successful calls as workflow step ids; a tool of no step stays `tool:<name>`."""
    where = _step_map(task)
    return [where.get(s.tool, f"tool:{s.tool}") for s in steps if s.ok]


def attempted_steps(task: Task, steps: list[StepRecord]) -> list[str]:
    """Every call of a workflow step's tools, ok or not, as step ids: the order the agent
    took the steps in (a step called too early and failing was still taken there)."""
    where = _step_map(task)
    return [where[s.tool] for s in steps if s.tool in where]


def workflow_edges(task: Task) -> set[tuple[str, str]]:
    """(u, v): step v reads an output of step u (its arguments or its template)."""
    return {(ref, s.id) for s in task.workflow.steps for ref, _ in s.refs()}


def _flows(values: list[str], leaves: list[str]) -> bool:
    """A returned value reached an argument: equal to it, inside it (4+ chars), or a whole
    word of it (2+ chars: a country code, an age in a sentence)."""
    return any(
        v == leaf or (len(v) >= 4 and v in leaf)
        or (len(v) >= 2 and re.search(rf"(?<!\w){re.escape(v)}(?!\w)", leaf) is not None)
        for v in values for leaf in leaves
    )


def run_edges(task: Task, steps: list[StepRecord]) -> set[tuple[str, str]]:
    """(u, v): a value step u returned in this run appears in the arguments of step v."""
    where = _step_map(task)
    outputs = {t: o for s in task.workflow.steps
               for t, o in [(s.tool, s.outputs), *((a.tool, a.outputs) for a in s.alternatives)]}
    ok = [s for s in steps if s.ok and s.tool in where]
    edges: set[tuple[str, str]] = set()
    for i, v in enumerate(ok):
        args = [normalise(as_text(x)) for x in leaves(v.args)]
        for u in ok[:i]:
            if where[u.tool] == where[v.tool]:
                continue
            got = extract_outputs(outputs[u.tool], u.data)
            values = [normalise(as_text(x)) for x in got.values()]
            if _flows([x for x in values if x], args):
                edges.add((where[u.tool], where[v.tool]))
    return edges


def trajectory(task: Task, steps: list[StepRecord]) -> Trajectory:
    executed = executed_steps(task, steps)
    optimal = [s.id for s in task.workflow.steps]
    used, wanted = run_edges(task, steps), workflow_edges(task)
    return Trajectory(
        chain_f1(executed, optimal),
        kendall_tau(attempted_steps(task, steps), optimal),
        graph_f1(used, wanted),
        mcis_node_f1(executed, used, optimal, wanted),
    )


def order_edges(task: Task) -> set[tuple[str, str]]:
    """The order a run must respect: step u before step v where v reads u's output (the
    data-flow edges), and every API step before the output step. Independent steps may come
    in any order: the end state, not the wording's order, is what counts."""
    steps = task.workflow.steps
    return workflow_edges(task) | {(s.id, steps[-1].id) for s in steps[:-1]}


def out_of_order(task: Task, firsts: list[int | None]) -> list[tuple[str, str]]:
    """The (u, v) order edges whose first successes came v first (`firsts` per step)."""
    at = {s.id: f for s, f in zip(task.workflow.steps, firsts, strict=True)}
    return sorted((u, v) for u, v in order_edges(task)
                  if at[u] is not None and at[v] is not None and at[v] < at[u])  # type: ignore[operator]


def score_run(task: Task, state: RunState) -> Score:
    grounding = check_grounding(task, state)
    path = trajectory(task, state.steps)
    if state.error is not None:
        return Score(
            "error", 0.0, grounding.ok, False, [f"infrastructure: {state.error}"], {}, grounding,
            path,
        )
    steps = state.steps
    groups = [s.tools() for s in task.workflow.steps]
    firsts = [_first_success(steps, g) for g in groups]
    all_ok = all(f is not None for f in firsts)
    late = out_of_order(task, firsts) if all_ok else []
    in_order = all_ok and not late
    api_ok = sum(1 for f in firsts[:-1] if f is not None)
    output_ran = any(s.ok and s.kind == "output" for s in steps)
    n_ok = sum(1 for s in steps if s.ok)
    conditions = {
        "coverage_60": api_ok >= 0.6 * (len(groups) - 1),
        "output_ran": output_ran,
        "min_calls": n_ok >= MIN_CALLS[task.task_type],
        "completion_signal": state.completion_signal,
    }
    reasons: list[str] = []
    if state.termination in FAILURE_TERMINATIONS:
        outcome = "failure"
        reasons.append(f"terminated: {state.termination}")
    elif all_ok and in_order and output_ran and state.completion_signal:
        outcome = "full"
    else:
        if not all_ok:
            missed = [g[0] for g, f in zip(groups, firsts, strict=True) if f is None]
            reasons.append("required tools never succeeded: " + ", ".join(missed))
        elif not in_order:
            reasons.append("required tools succeeded out of order: " + ", ".join(
                f"{v} before {u}, whose output it reads" for u, v in late))
        if not state.completion_signal:
            reasons.append("no completion signal")
        outcome = "partial" if sum(conditions.values()) >= 2 else "failure"
    if not grounding.ok:
        reasons.extend("grounding: " + m for m in grounding.missing)
    if state.termination not in ("finished", *FAILURE_TERMINATIONS):
        reasons.append(f"ended by {state.termination}")
    return Score(
        outcome,
        SCORES[outcome],
        grounding.ok,
        outcome == "full" and grounding.ok,
        reasons,
        conditions,
        grounding,
        path,
    )
