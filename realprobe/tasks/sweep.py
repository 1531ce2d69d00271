"""Sweeps as data: models x agents x targets x tasks x prompts x repeats, from one TOML file.

```toml
tasks = "all"                 # or a list of instance ids
prompts = ["baseline", "cot", "optimal", "flawed:all"]   # or graded: "flawed:all@30"
agents = ["openai"]           # reference | openai | openai-text
repeats = 3
seed = 0
flaw_seed = 0                 # seeds the flawed workflows (0: the stored variants)
paraphrase = [0, 1, 2]        # paraphrase levels of the task text (the surface's epsilon)

[[models]]
name = "small"                # the label results compare by
base_url = "http://127.0.0.1:8000/v1"
model = "qwen2.5-7b-instruct"
api_key_env = "OPENAI_API_KEY"    # read when the sweep runs; the key is never stored
rpm = 120                     # optional limits on this endpoint
tpm = 200000
concurrency = 8

[[targets]]
kind = "simulate"             # live | sandbox | simulate | replay
profile = "published"

[[targets]]
kind = "sandbox"
url = "http://127.0.0.1:8765"
```

Simulate targets can be crossed with fault plans and fault rates (each plan x each rate):
`fault_plans = ["toolmaze-explicit-transient", "plans/mine.toml"]` and
`lambda = [0, 0.075, 0.175, 0.275]` (every tool fails that share of calls, `Profile.scaled`).

`expand` turns it into run configurations; the reference agent needs no model and runs
once per target. Every run is keyed by (task, agent, model, prompt, target, seed, repeat),
the key `--resume` skips when it is already stored complete.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from realprobe.adapters.catalog import Catalog
from realprobe.clients import Mode
from realprobe.errors import RealprobeError
from realprobe.hosts import HostGates
from realprobe.limits import read_document
from realprobe.simulator.plans import load_plan
from realprobe.store import Database, open_db
from realprobe.target import TargetKind
from realprobe.tasks.agents import AGENT_NAMES, LlmSettings
from realprobe.tasks.agents.limits import LlmLimits
from realprobe.tasks.batch import MAX_REPEAT
from realprobe.tasks.executors import check_executor, execute
from realprobe.tasks.metrics import compare
from realprobe.tasks.model import Task, default_tasks_dir, load_tasks
from realprobe.tasks.prompts import prompt_variants
from realprobe.tasks.runner import Job, RunOutcome, jobs_for
from realprobe.tasks.settings import EvalSettings
from realprobe.tasks.store import TaskStore


class SweepModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64)
    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(0.0, ge=0, le=2)
    timeout_s: float = Field(120.0, gt=0)
    rpm: float | None = Field(None, gt=0)
    tpm: float | None = Field(None, gt=0)
    concurrency: int | None = Field(None, ge=1)
    strict_tools: bool | None = None

    def settings(self) -> LlmSettings:
        key = os.environ.get(self.api_key_env)
        if key is None:
            raise RealprobeError(
                f"model {self.name!r}: ${self.api_key_env} is not set (the sweep reads the "
                "API key from the environment, never from the file)"
            )
        return LlmSettings(
            base_url=self.base_url, model=self.model, api_key=key, timeout_s=self.timeout_s,
            temperature=self.temperature, strict_tools=self.strict_tools,
        )

    def limits(self) -> LlmLimits:
        return LlmLimits(rpm=self.rpm, tpm=self.tpm, concurrency=self.concurrency)


class SweepTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["live", "sandbox", "simulate", "replay"]
    url: str | None = None  # sandbox
    profile: str | None = None  # simulate: file or calm|published|harsh
    cassette: str | None = None  # replay: a folder of per-run cassettes (default: shipped)

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, v: Any) -> Any:
        """Read like `options(mode=...)` and `--mode` read a kind: any case, the one message."""
        if not isinstance(v, str):
            return v
        try:
            return TargetKind.parse(v, "kind").value
        except RealprobeError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _needs(self) -> SweepTarget:
        """Checked like the command line's options, by the one check of where calls go."""
        from realprobe.tasks.settings import EvalSettings

        if self.kind == "sandbox" and not self.url:
            raise ValueError("a sandbox target needs url")
        for name, kind in (("url", "sandbox"), ("profile", "simulate"), ("cassette", "replay")):
            if getattr(self, name) is not None and self.kind != kind:
                raise ValueError(f"{name} is for {kind} targets, not {self.kind}")
        try:
            opts = EvalSettings(mode=self.mode, sandbox=self.url, profile=self.profile).target()
        except RealprobeError as exc:
            raise ValueError(str(exc)) from None
        self.profile = None if opts.profile is None else str(opts.profile)
        return self

    @property
    def label(self) -> str:
        if self.kind == "sandbox":
            return f"sandbox:{self.url}"
        if self.kind == "simulate":
            return f"simulate:{self.profile}"
        if self.kind == "replay":
            return f"replay:{self.cassette or 'shipped'}"
        return "live"

    @property
    def mode(self) -> Mode:
        return Mode.LIVE if self.kind == "sandbox" else Mode(self.kind)


class SweepFile(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    tasks: Literal["all"] | list[str] = "all"
    prompts: list[str] = Field(default_factory=lambda: ["optimal"])
    agents: list[str] = Field(default_factory=lambda: ["reference"])
    repeats: int = Field(1, ge=1, le=MAX_REPEAT)
    seed: int = 0
    flaw_seed: int = 0
    paraphrase: list[Literal[0, 1, 2]] = Field(default=[0], min_length=1)
    models: list[SweepModel] = Field(default_factory=list)
    targets: list[SweepTarget] = Field(
        default_factory=lambda: [SweepTarget(kind="simulate", profile="published")]
    )
    #: simulate targets run once per fault plan (none: no plan) ...
    fault_plans: list[str] = Field(default_factory=list)
    #: ... and once per fault rate (none: the profile's own rates)
    lambdas: list[float] = Field(default_factory=list, alias="lambda")

    @model_validator(mode="after")
    def _check(self) -> SweepFile:
        for agent in self.agents:
            if agent not in AGENT_NAMES:
                raise ValueError(f"agent {agent!r}: choose one of {', '.join(AGENT_NAMES)}")
        if any(a != "reference" for a in self.agents) and not self.models:
            raise ValueError("LLM agents need at least one [[models]] entry")
        names = [m.name for m in self.models]
        if len(names) != len(set(names)):
            raise ValueError("model names must be unique")
        prompt_variants(",".join(self.prompts))  # raises on a bad prompt
        if any(not 0 <= lam <= 1 for lam in self.lambdas):
            raise ValueError("lambda values are shares of calls, between 0 and 1")
        simulated = any(t.kind == "simulate" for t in self.targets)
        if (self.fault_plans or self.lambdas) and not simulated:  # refused, never dropped
            raise ValueError("fault_plans and lambda apply to simulate targets; it has none")
        for plan in self.fault_plans:
            load_plan(plan)
        return self


@dataclass(frozen=True)
class SweepCell:
    """One (agent, model, target): the runs of a `RunConfig` over tasks x prompts x repeats."""

    agent: str
    model: SweepModel | None
    target: SweepTarget
    fault_plan: str | None = None
    fault_rate: float | None = None


def load_sweep(path: str | Path) -> SweepFile:
    p = Path(path)
    return _validated(read_document(p, "sweep file", "toml"), f"{p}: ")


def _validated(data: Any, where: str = "") -> SweepFile:
    """The sweep, or its first problem in one line (after `where`)."""
    try:
        return SweepFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(x) for x in first["loc"])
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise RealprobeError(f"{where}{at + ': ' if at else ''}{msg}") from exc


def cells(sweep: SweepFile) -> list[SweepCell]:
    """Every (agent, model, target), a simulate target once per fault plan x fault rate."""
    out: list[SweepCell] = []
    for target in sweep.targets:
        sim = target.kind == "simulate"
        plans: list[str | None] = [*sweep.fault_plans] if sim and sweep.fault_plans else [None]
        rates: list[float | None] = [*sweep.lambdas] if sim and sweep.lambdas else [None]
        for plan, rate in itertools.product(plans, rates):
            for agent in sweep.agents:
                models: list[SweepModel | None] = (
                    [None] if agent == "reference" else list(sweep.models)
                )
                out.extend(SweepCell(agent, m, target, plan, rate) for m in models)
    return out


# -- running a sweep ---------------------------------------------------------------------


class SweepSummary(BaseModel):
    batch: str
    planned: int
    skipped: int  # already stored complete (--resume)
    ran: int
    infra_errors: int
    db: str


def plan_sweep(
    sweep: SweepFile, tasks: dict[str, Task], *, concurrency: int = 1
) -> list[Job]:
    """Every run of the sweep, in a fixed order (targets, agents, models, tasks, ...)."""
    if sweep.tasks == "all":
        chosen = list(tasks.values())
    else:
        missing = [t for t in sweep.tasks if t not in tasks]
        if missing:
            raise RealprobeError(f"unknown task(s) in the sweep: {', '.join(missing)}")
        chosen = [tasks[t] for t in sweep.tasks]
    jobs: list[Job] = []
    for cell, level in ((c, lv) for c in cells(sweep) for lv in sweep.paraphrase):
        target = cell.target
        settings = EvalSettings(
            mode=target.mode, sandbox=target.url, profile=target.profile,
            cassette=target.cassette, seed=sweep.seed, fault_plan=cell.fault_plan,
            fault_rate=cell.fault_rate, prompt=",".join(sweep.prompts),
            flaw_seed=sweep.flaw_seed, paraphrase=level,
        )
        cfg = settings.run_config(
            agent=cell.agent, repeat=sweep.repeats, concurrency=concurrency,
            llm=cell.model.settings() if cell.model is not None else None,
            llm_limits=cell.model.limits() if cell.model is not None else None,
        )
        jobs += jobs_for(chosen, cfg)
    return jobs


def run_sweep(
    sweep: SweepFile,
    db: Database,
    *,
    catalog: Catalog,
    resume: bool = False,
    executor: str = "local",
    concurrency: int = 4,
    address: str | None = None,
    on_planned: Callable[[int, int], None] | None = None,
    on_done: Callable[[RunOutcome], None] | None = None,
    gates: HostGates | None = None,
    on_plan: Callable[[list[Job]], None] | None = None,
) -> SweepSummary:
    """Expand the sweep and run what is not stored complete yet; one database, one writer.
    `on_plan(jobs)` gets the runs left to do, in the order they start.
    `gates` (local executor) are per-host politeness gates to share with other work in this
    process; Ray workers cannot share them (and Ray refuses live targets)."""
    check_executor(executor, address)
    jobs = plan_sweep(sweep, load_tasks(default_tasks_dir()), concurrency=concurrency)
    with db.write() as store:
        tstore = TaskStore(store)
        done = tstore.complete_keys() if resume else set()
        todo = [j for j in jobs if j.key not in done]
        if on_planned is not None:
            on_planned(len(jobs), len(jobs) - len(todo))
        if on_plan is not None:
            on_plan(todo)
        batch = uuid.uuid4().hex[:12]
        infra = 0

        def write(finished: RunOutcome) -> None:
            nonlocal infra
            tstore.insert_run(finished.row, finished.steps)
            infra += finished.row.get("infra_error") is not None
            if on_done is not None:
                on_done(finished)

        execute(todo, catalog, executor=executor, concurrency=concurrency, on_done=write,
                batch=batch, address=address, gates=gates)
    return SweepSummary(batch=batch, planned=len(jobs), skipped=len(jobs) - len(todo),
                        ran=len(todo), infra_errors=infra, db=str(db))


@dataclass(frozen=True)
class SweepResult:
    summary: SweepSummary
    models: list[dict[str, object]]  # every stored run compared by model, agent and target


def run_sweep_file(
    file: Path,
    db: str | Path | Database | None = None,
    *,
    catalog_paths: list[Path] | None = None,
    resume: bool = False,
    executor: str = "local",
    concurrency: int = 4,
    address: str | None = None,
    on_planned: Callable[[int, int], None] | None = None,
    on_done: Callable[[RunOutcome], None] | None = None,
    fault_plans: list[str] | None = None,
    lambdas: list[float] | None = None,
    on_plan: Callable[[list[Job]], None] | None = None,
) -> SweepResult:
    """Check the options, run the sweep FILE into `db` (default: the default database),
    then compare every run the database holds. `fault_plans` / `lambdas` replace the file's."""
    if concurrency < 1:
        raise RealprobeError(
            f"concurrency must be at least 1 (got {concurrency})", param="concurrency"
        )
    if executor not in ("local", "ray"):
        raise RealprobeError(f"executor {executor!r}: choose local or ray", param="executor")
    sweep = load_sweep(file)
    if fault_plans or lambdas:
        sweep = _validated({**sweep.model_dump(by_alias=True),
                            "fault_plans": fault_plans or sweep.fault_plans,
                            "lambda": lambdas or sweep.lambdas})
    path = open_db(db)
    catalog = Catalog.load(catalog_paths or [])
    summary = run_sweep(
        sweep, path, catalog=catalog, resume=resume, executor=executor,
        concurrency=concurrency, address=address, on_planned=on_planned, on_done=on_done,
        on_plan=on_plan,
    )
    with path.write() as store:
        rows = TaskStore(store).runs()
    return SweepResult(summary, compare(rows))

