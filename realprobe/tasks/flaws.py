"""Flawed workflows: the paper's seven flaw types, generated from the optimal workflow, and
graded perturbations at a severity.

Reproducible: each (task, flaw type) draws from `random.Random(f"{seed}:{task}:{type}")`, and
the result is stored in the task file (`flawed`), so the data is what a prompt shows.
Regenerate with `python -m realprobe.tasks.flaws [--check] [FOLDER]`.

Graded variants, `<type>@<severity>` (WorkflowPerturb's stress levels, e.g. 10/30/50), are
built when a run asks for them, from the same seeding (`--flaw-seed`): the severity is the
share of the workflow's API steps affected, ceil(severity% x steps), at least one. Besides
the seven types graded that way, three are graded only: `missing_steps` (steps left out),
`compressed_steps` (a step folded into its neighbour's description, its tool no longer
named) and `reworded_steps` (the purpose reworded, the workflow unchanged).
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from realprobe.adapters import Catalog, default_catalog
from realprobe.errors import RealprobeError
from realprobe.outputs import write_output
from realprobe.tasks.model import (
    FLAW_TYPES,
    Arg,
    FlawedWorkflow,
    Step,
    Task,
    Workflow,
    default_tasks_dir,
    load_task,
    task_files,
)

GENERATOR_SEED = 0
_WRONG_TYPE: dict[str, Any] = {
    "string": 12345,
    "integer": "many",
    "number": "north",
    "boolean": "perhaps",
}


def _copy(steps: list[Step]) -> list[Step]:
    return [s.model_copy(deep=True) for s in steps]


def _readers(steps: list[Step], step_id: str) -> list[int]:
    return [i for i, s in enumerate(steps) if any(r[0] == step_id for r in s.refs())]


def _at(steps: list[Step], at: str | None, rng: random.Random) -> int:
    """The index of the API step `at` (a graded flaw's target), else a random API step."""
    if at is None:
        return rng.randrange(len(steps) - 1)
    return next(i for i, s in enumerate(steps[:-1]) if s.id == at)


def sequential_inversion(
    task: Task, rng: random.Random, catalog: Catalog, at: str | None = None,
    avoid: frozenset[str] = frozenset(),
) -> FlawedWorkflow:
    """`avoid`: steps an earlier inversion moved (a graded flaw's), which this one must not
    move again (that could undo the earlier disorder)."""
    steps = _copy(task.workflow.steps)
    api = list(range(len(steps) - 1))
    deps = [(i, j) for i in api for j in _readers(steps, steps[i].id) if j in api and j > i]
    read = {r for r, _ in steps[-1].refs()}  # what the output step reads
    if at is not None:  # the target moves before a step it reads, else a reader before it
        deps = [(i, j) for i, j in deps if not {steps[i].id, steps[j].id} & avoid]
        mine = [(i, j) for i, j in deps if steps[j].id == at]
        deps = mine or [(i, j) for i, j in deps if steps[i].id == at]
        if not deps and (any(j in api for i in api for j in _readers(steps, steps[i].id))
                         or at not in read):
            raise ValueError(f"step {at} cannot be inverted")
    if deps:
        i, j = rng.choice(deps)
        why = f"step {steps[j].id!r} now runs before {steps[i].id!r}, whose output it needs"
    else:  # no API step reads another: the output step moves before one it reads
        if at is not None:
            i = next(k for k in api if steps[k].id == at)
        else:
            i = max((k for k in api if steps[k].id in read), default=api[-1])
        j = len(steps) - 1
        why = f"the output step {steps[j].id!r} now runs before {steps[i].id!r}, which it reads"
    moved = steps.pop(j)
    steps.insert(i, moved)
    return FlawedWorkflow(
        type="sequential_inversion",
        change=why,
        detail={"moved": moved.id, "before": steps[i + 1].id},
        steps=steps,
    )


def tool_misuse(
    task: Task, rng: random.Random, catalog: Catalog, at: str | None = None,
    avoid: frozenset[str] = frozenset(),
) -> FlawedWorkflow:
    """`avoid`: tools never to pick as the wrong one (a graded flaw's original workflow: a
    step misused earlier frees its tool, which would then stand in for that step)."""
    steps = _copy(task.workflow.steps)
    k = _at(steps, at, rng)
    step = steps[k]
    used = {t for s in steps for t in s.tools()} | avoid
    right = catalog.get(step.tool)
    others = [t for t in catalog if t.name not in used and t.api_id != right.api_id]

    def plausibility(t: Any) -> int:
        # same kind of API first, then shared argument names, then shared output names
        return (
            4 * (t.api.category == right.api.category)
            + 2 * len(set(t.spec.input) & set(right.spec.input))
            + len(set(t.spec.output) & set(right.spec.output))
        )

    best = max(plausibility(t) for t in others)
    pool = sorted((t for t in others if plausibility(t) == best), key=lambda t: t.name)
    wrong = rng.choice(pool)
    args = {name: Arg(value=v) for name, v in (wrong.examples[0] if wrong.examples else {}).items()}
    steps[k] = step.model_copy(
        update={"tool": wrong.name, "args": args, "alternatives": []}, deep=True
    )
    return FlawedWorkflow(
        type="tool_misuse",
        change=f"step {step.id!r} calls {wrong.name!r} instead of {step.tool!r}",
        detail={"step": step.id, "expected": step.tool, "used": wrong.name},
        steps=steps,
    )


def parameter_error(
    task: Task, rng: random.Random, catalog: Catalog, at: str | None = None
) -> FlawedWorkflow:
    steps = _copy(task.workflow.steps)
    with_args = [i for i, s in enumerate(steps[:-1]) if s.args]
    if at is not None:
        with_args = [i for i in with_args if steps[i].id == at]
    if with_args:
        k = rng.choice(with_args)
        step = steps[k]
        name = rng.choice(sorted(step.args))
        field = catalog.get(step.tool).spec.input.get(name)
        kinds = ["wrong_type"] + (
            ["missing_required"] if field is not None and field.required else []
        )
        kind = rng.choice(kinds)
        was = step.args[name].model_dump(exclude_defaults=True)
        if kind == "missing_required":
            step.args = {k: v for k, v in step.args.items() if k != name}
            now: Any = None
        else:
            now = _WRONG_TYPE[field.type if field is not None else "string"]
            step.args = {**step.args, name: Arg(value=now)}
    else:
        k = _at(steps, at, rng)
        step = steps[k]
        name, kind, was, now = "limit", "unexpected_argument", None, -1
        step.args = {**step.args, name: Arg(value=now)}
    return FlawedWorkflow(
        type="parameter_error",
        change=f"step {step.id!r}: argument {name!r} {kind.replace('_', ' ')}",
        detail={"step": step.id, "arg": name, "kind": kind, "was": was, "now": now},
        steps=steps,
    )


def missing_step(
    task: Task, rng: random.Random, catalog: Catalog, at: str | None = None
) -> FlawedWorkflow:
    steps = _copy(task.workflow.steps)
    api = range(len(steps) - 1)
    critical = [i for i in api if _readers(steps, steps[i].id)]
    k = rng.choice(critical or list(api)) if at is None else _at(steps, at, rng)
    dropped = steps.pop(k)
    return FlawedWorkflow(
        type="missing_step",
        change=f"step {dropped.id!r} ({dropped.tool}) is left out",
        detail={"dropped": dropped.id, "tool": dropped.tool},
        steps=steps,
    )


def redundant_operation(
    task: Task, rng: random.Random, catalog: Catalog, at: str | None = None
) -> FlawedWorkflow:
    steps = _copy(task.workflow.steps)
    k = _at(steps, at, rng)
    again = steps[k].model_copy(
        update={"id": steps[k].id + "_again", "purpose": steps[k].purpose + " (again, to be sure)"},
        deep=True,
    )
    steps.insert(k + 1, again)
    return FlawedWorkflow(
        type="redundant_operation",
        change=f"step {steps[k].id!r} ({steps[k].tool}) is done twice in a row",
        detail={"step": steps[k].id, "tool": steps[k].tool},
        steps=steps,
    )


def logical_discontinuity(
    task: Task, rng: random.Random, catalog: Catalog, at: str | None = None
) -> FlawedWorkflow:
    steps = _copy(task.workflow.steps)
    api = list(range(1, len(steps) - 1))
    if at is not None:  # the target's argument rewired (the first step has nothing before it)
        api = [j for j in api if steps[j].id == at]
        if not api:
            raise ValueError(f"step {at} has no earlier output to be wired to")
    wired = [(j, n) for j in api for n, a in sorted(steps[j].args.items()) if a.kind == "step"]
    if wired:
        j, name = rng.choice(wired)
    else:
        j = rng.choice(api)
        if steps[j].args:
            name = rng.choice(sorted(steps[j].args))
        else:
            fields = sorted(catalog.get(steps[j].tool).spec.input)
            name = fields[0] if fields else "input"
    current = steps[j].args.get(name)
    cur_ref = (current.step, current.output) if current is not None else None
    choices = [
        (s.id, out) for s in steps[:j] for out in sorted(s.outputs) if (s.id, out) != cur_ref
    ]
    src_step, src_out = rng.choice(choices)
    # assigned, not mutated: the field must count as set when the file is written
    steps[j].args = {**steps[j].args, name: Arg(step=src_step, output=src_out)}
    was = current.model_dump(exclude_defaults=True) if current is not None else None
    return FlawedWorkflow(
        type="logical_discontinuity",
        change=f"step {steps[j].id!r} takes {name!r} from {src_step}.{src_out}, which does not fit",
        detail={"step": steps[j].id, "arg": name, "was": was, "now": f"{src_step}.{src_out}"},
        steps=steps,
    )


def semantic_drift(
    task: Task, rng: random.Random, catalog: Catalog, at: str | None = None
) -> FlawedWorkflow:
    refs = sorted({f"{s}.{o}" for s, o in task.workflow.steps[-1].refs()})
    return _drift(task, [rng.choice(refs)], refs)


def _drift(task: Task, keep: list[str], refs: list[str]) -> FlawedWorkflow:
    """The output step turned into a loose reflection that uses only `keep` of `refs`."""
    steps = _copy(task.workflow.steps)
    out = steps[-1]
    dropped = [r for r in refs if r not in keep]
    inspired = " and ".join(f"{{{k}}}" for k in keep)
    drifted: dict[str, Arg] = {}
    for name, a in out.args.items():
        if a.kind != "template":
            drifted[name] = a
        elif name in ("text", "body"):
            drifted[name] = Arg(
                template=f"Some general thoughts on the day, loosely inspired by {inspired}."
            )
        else:
            drifted[name] = Arg(value="Thoughts of the day")
    out.args = drifted
    out.purpose = "Write a loose, general reflection instead of the requested result"
    return FlawedWorkflow(
        type="semantic_drift",
        change="the output step drifts from the goal: a general reflection that uses only "
        f"{', '.join(keep)} and drops {', '.join(dropped)}",
        detail={"kept": keep[0] if len(keep) == 1 else keep, "dropped": dropped},
        steps=steps,
    )


GENERATORS = {
    "sequential_inversion": sequential_inversion,
    "tool_misuse": tool_misuse,
    "parameter_error": parameter_error,
    "missing_step": missing_step,
    "redundant_operation": redundant_operation,
    "logical_discontinuity": logical_discontinuity,
    "semantic_drift": semantic_drift,
}
assert tuple(GENERATORS) == FLAW_TYPES


def generate(task: Task, catalog: Catalog, seed: int = GENERATOR_SEED) -> dict[str, FlawedWorkflow]:
    out: dict[str, FlawedWorkflow] = {}
    for flaw, gen in GENERATORS.items():
        rng = random.Random(f"{seed}:{task.instance_id}:{flaw}")
        fw = gen(task, rng, catalog)
        fw.seed = seed
        out[flaw] = fw
    return out


# -- graded perturbations ---------------------------------------------------------------

GRADED_TYPES: tuple[str, ...] = ("missing_steps", "compressed_steps", "reworded_steps")
ALL_FLAW_TYPES: tuple[str, ...] = FLAW_TYPES + GRADED_TYPES
SEVERITIES: tuple[int, ...] = (10, 30, 50)  # WorkflowPerturb's levels


@dataclass(frozen=True)
class FlawSpec:
    """A flaw type at a severity (percent of the API steps), or the stored variant."""

    type: str
    severity: int | None = None

    @property
    def name(self) -> str:
        return self.type if self.severity is None else f"{self.type}@{self.severity}"


def parse_flaw(text: str) -> FlawSpec:
    """`<type>` or `<type>@<severity>` (severity 1-100); graded-only types need one."""
    kind, at, sev = text.partition("@")
    if kind not in ALL_FLAW_TYPES:
        raise RealprobeError(
            f"unknown flaw type {kind!r}; choose one of {', '.join(ALL_FLAW_TYPES)}",
            param="prompt",
        )
    if not at:
        if kind in GRADED_TYPES:
            raise RealprobeError(
                f"{kind} needs a severity, e.g. flawed:{kind}@30", param="prompt"
            )
        return FlawSpec(kind)
    # ASCII digits only ('²' passes isdigit, not int), and few enough to convert quickly
    if not (sev.isascii() and sev.isdigit() and len(sev) <= 3) or not 1 <= int(sev) <= 100:
        raise RealprobeError(
            f"the severity after @ is a percentage from 1 to 100 (got {sev[:20]!r})",
            param="prompt",
        )
    return FlawSpec(kind, int(sev))


def _round(x: float) -> int:
    """Half up (Python's round() rounds 2.5 to 2)."""
    return math.floor(x + 0.5)


def affected(n_steps: int, severity: int) -> int:
    """How many of `n_steps` steps a severity touches: WorkflowPerturb's round(p x |V|),
    exactly, wherever the count allows it. The small-|V| rule: at least one step at any
    severity, and along the standard levels (10, 30, 50) strictly more steps at each level
    than at the one below, while steps are left; a severity between the levels touches at
    least as many as the level below it. So 4 steps give 1 / 2 / 3 (exact: 0 / 1 / 2),
    10 steps 1 / 3 / 5."""
    if n_steps < 1:
        return 0
    k_prev = 0  # steps at the highest standard level below or at `severity`
    for level in SEVERITIES:
        if level > severity:
            break
        k_prev = min(n_steps, max(1, _round(n_steps * level / 100), k_prev + 1))
        if level == severity:
            return k_prev
    return min(n_steps, max(1, _round(n_steps * severity / 100), k_prev))


def _order(items: list[str], seed: int, task: str, flaw: str) -> list[str]:
    """One seeded permutation per (seed, task, flaw type), whatever the severity: a level
    takes its prefix, so the 30% set holds the 10% set and the 50% set the 30% one."""
    order = list(items)
    random.Random(f"{seed}:{task}:{flaw}:order").shuffle(order)
    return order


def _with_steps(task: Task, steps: list[Step]) -> Task:
    """The task with another step list (not re-validated: a flawed list breaks the rules)."""
    return task.model_copy(update={"workflow": Workflow.model_construct(steps=steps)})


def _touched(fw: FlawedWorkflow) -> list[str]:
    """The original steps a one-step flaw touched (a redundant copy counts as its source;
    an inversion touches both steps, so a second one cannot undo the first)."""
    d = fw.detail
    who = [d.get("step") or d.get("moved") or d.get("dropped") or fw.change, d.get("before")]
    return [re.sub(r"(_again)+$", "", str(w)) for w in who if w]


Generator = Callable[..., FlawedWorkflow]


def _repeat(
    task: Task, gen: Generator, catalog: Catalog, targets: list[str], seed: int, flaw: str
) -> Any:
    """Apply a one-step flaw at each of `targets` in turn (each step's own draw, seeded by
    the step, so a step is perturbed the same way at every severity that reaches it). A
    target the flaw cannot take (no earlier output to rewire from, nothing to invert with,
    or already moved by an inversion) is passed over: the realised share says so."""
    current = task
    touched: list[str] = []
    moved: set[str] = set()
    changes: list[str] = []
    output = task.workflow.steps[-1].id
    extra = {"avoid": frozenset(t for s in task.workflow.steps for t in s.tools())} if (
        gen is tool_misuse) else {}
    for at in targets:
        if output in moved:
            break  # the output step was moved before a step it reads: nothing else to invert
        if at in moved:
            continue
        rng = random.Random(f"{seed}:{task.instance_id}:{flaw}:{at}")
        if gen is sequential_inversion:
            extra = {"avoid": frozenset(moved)}
        try:
            fw = gen(current, rng, catalog, at=at, **extra)
        except (IndexError, ValueError, KeyError, StopIteration):
            continue  # this step cannot take the flaw
        moved.update(_touched(fw))
        touched.append(at)
        changes.append(fw.change)
        current = _with_steps(task, fw.steps)
    return current.workflow.steps, touched, changes


def _indices(steps: list[Step], targets: list[str]) -> list[int]:
    return sorted(i for i, s in enumerate(steps[:-1]) if s.id in targets)


def missing_steps(
    task: Task, rng: random.Random, targets: list[str]
) -> tuple[list[Step], list[str]]:
    steps = _copy(task.workflow.steps)
    gone = set(_indices(steps, targets))
    return [s for i, s in enumerate(steps) if i not in gone], [steps[i].id for i in sorted(gone)]


def compressed_steps(
    task: Task, rng: random.Random, targets: list[str]
) -> tuple[list[Step], list[str]]:
    """Fold the target API steps into their neighbour's purpose; their tools are no longer
    named."""
    steps = _copy(task.workflow.steps)
    folded = _indices(steps, targets)
    keep = [i for i in range(len(steps)) if i not in folded]
    for i in folded:
        into = max((k for k in keep if k < i), default=min(k for k in keep if k > i))
        what = steps[i].purpose[:1].lower() + steps[i].purpose[1:]
        steps[into].purpose = f"{steps[into].purpose}, and also {what}"
    return [steps[i] for i in keep], [steps[i].id for i in folded]


def reworded_steps(
    task: Task, rng: random.Random, targets: list[str]
) -> tuple[list[Step], list[str]]:
    """Reword the target API steps' purposes (synonyms); tools and arguments stay."""
    from realprobe.tasks.paraphrase import swap_synonyms

    steps = _copy(task.workflow.steps)
    chosen = _indices(steps, targets)
    base = rng.getrandbits(32)  # each step reworded the same way at every severity
    for i in chosen:
        step_rng = random.Random(f"{base}:{steps[i].id}")
        new = swap_synonyms(steps[i].purpose, step_rng)
        if new == steps[i].purpose:
            new = "As the next step, " + new[:1].lower() + new[1:]
        steps[i].purpose = new
    return steps, [steps[i].id for i in chosen]


_GRADED_ONLY = {
    "missing_steps": (missing_steps, "left out"),
    "compressed_steps": (compressed_steps, "folded into a neighbouring step"),
    "reworded_steps": (reworded_steps, "reworded"),
}


def graded(task: Task, spec: FlawSpec, catalog: Catalog, seed: int) -> FlawedWorkflow:
    """The flaw at its severity on `task`, from `random.Random(f"{seed}:{task}:{name}")`."""
    assert spec.severity is not None
    tid = task.instance_id
    rng = random.Random(f"{seed}:{tid}:{spec.type}")  # not the severity's: levels nest
    api_ids = [s.id for s in task.workflow.steps[:-1]]
    n_api = len(api_ids)
    order = _order(api_ids, seed, tid, spec.type)
    targets = order[:affected(n_api, spec.severity)]
    if spec.type in _GRADED_ONLY:
        make, verb = _GRADED_ONLY[spec.type]
        steps, touched = make(task, rng, targets)
        change = f"{len(touched)} of {n_api} steps {verb}: {', '.join(touched)}"
    elif spec.type == "semantic_drift":
        refs = sorted({f"{s}.{o}" for s, o in task.workflow.steps[-1].refs()})
        drop = min(len(refs) - 1, affected(len(refs), spec.severity))
        gone = _order(refs, seed, tid, spec.type)[:drop]
        fw = _drift(task, [r for r in refs if r not in gone], refs)
        steps, touched, change = fw.steps, fw.detail["dropped"], fw.change
        share = len(touched) / len(refs)
    else:
        steps, touched, changes = _repeat(
            task, GENERATORS[spec.type], catalog, targets, seed, spec.type
        )
        change = "; ".join(changes)
    if spec.type != "semantic_drift":
        share = len(set(touched)) / n_api
    return FlawedWorkflow(
        type=spec.type, seed=seed, change=change, steps=steps,
        # `share`: the share of steps the flaw really touched (round(p x |V|) by the
        # small-|V| rule of `affected`; fewer when some target cannot take this flaw)
        detail={"severity": spec.severity, "affected": touched, "api_steps": n_api,
                "share": round(share, 4)},
    )


def with_variant(task: Task, prompt: str, catalog: Catalog, seed: int = GENERATOR_SEED) -> Task:
    """The task holding the workflow `prompt` shows: graded variants and other seeds are
    built here; the stored seed-0 variants are used as they are in the file."""
    if not prompt.startswith("flawed:"):
        return task
    spec = parse_flaw(prompt.split(":", 1)[1])
    if spec.severity is None and seed == GENERATOR_SEED:
        return task  # the stored variant (a task file without it is told to regenerate)
    if spec.severity is None:
        rng = random.Random(f"{seed}:{task.instance_id}:{spec.type}")
        fw = GENERATORS[spec.type](task, rng, catalog)
        fw.seed = seed
    else:
        fw = graded(task, spec, catalog, seed)
    return task.model_copy(update={"flawed": {**task.flawed, spec.name: fw}})


def task_json(task: Task) -> str:
    """The file text: only fields that were set, so defaults stay implicit."""
    return (
        json.dumps(task.model_dump(mode="json", exclude_unset=True), indent=2, ensure_ascii=False)
        + "\n"
    )


def regenerate(folder: Path, catalog: Catalog, *, check: bool = False) -> list[Path]:
    """Rewrite each task file's `flawed` section; with check=True only list stale files."""
    stale = []
    for path in task_files(folder):
        task = load_task(path)
        text = task_json(task.model_copy(update={"flawed": generate(task, catalog)}))
        if text != path.read_text(encoding="utf-8"):
            stale.append(path)
            if not check:
                write_output(path, text)
    return stale


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    rest = [a for a in args if a != "--check"]
    folder = Path(rest[0]) if rest else default_tasks_dir()
    stale = regenerate(folder, default_catalog(), check=check)
    verb = "stale" if check else "rewritten"
    for p in stale:
        print(f"{verb}: {p}")
    print(f"{len(stale)} file(s) {verb}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
