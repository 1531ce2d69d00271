"""A batch of real-world task runs, checked before anything runs: tasks, prompts, agent and
LLM settings, mode and target, cassettes. `realprobe run` is a thin layer over it."""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from realprobe.adapters.catalog import Catalog
from realprobe.errors import RealprobeError
from realprobe.tasks.agents import AGENT_NAMES, LlmSettings
from realprobe.tasks.agents.limits import LlmLimits
from realprobe.tasks.metrics import levels, pass_k, recovery, recovery_by_kind
from realprobe.tasks.model import Task, default_tasks_dir, load_tasks, pick_tasks
from realprobe.tasks.outputs import OUTPUT_TOOLS
from realprobe.tasks.runner import (
    Job,
    RunConfig,
    RunOutcome,
    check_cassettes,
    jobs_for,
    plan_runs,
    prompt_key,
)
from realprobe.tasks.settings import EvalSettings

if TYPE_CHECKING:
    from realprobe.hosts import HostGates
    from realprobe.store import Database


def llm_settings(
    agent: str,
    base_url: str | None,
    model: str | None,
    api_key_env: str = "OPENAI_API_KEY",
    timeout: float = 120.0,
    on_note: Callable[[str], None] | None = None,
) -> LlmSettings | None:
    """The LLM endpoint for `openai` / `openai-text` agents; None for the reference agent."""
    if agent not in AGENT_NAMES:
        raise RealprobeError(f"agent {agent!r}: choose one of {', '.join(AGENT_NAMES)}")
    if agent == "reference":
        if base_url or model:
            raise RealprobeError("base_url and model are for the openai and openai-text agents")
        return None
    if not base_url or not model:
        raise RealprobeError(f"agent {agent} needs base_url and model")
    if not base_url.startswith(("http://", "https://")):
        raise RealprobeError(f"base_url {base_url!r}: expected a URL like http://127.0.0.1:8000/v1")
    key = os.environ.get(api_key_env)
    if not key:
        if on_note is not None:
            on_note(f"${api_key_env} is not set; sending a placeholder key")
        key = "no-key"
    return LlmSettings(base_url=base_url, model=model, api_key=key, timeout_s=timeout)


#: the most repeats of one (task, prompt) a batch or a sweep runs (pass^k needs far fewer)
MAX_REPEAT = 1000


@dataclass
class TaskBatchResult:
    #: every run, in plan order (task, prompt, repeat), whichever executor ran it
    runs: list[RunOutcome]
    summary: dict[str, Any]
    #: why every run failed on infrastructure (LLM endpoint, network), or None
    infrastructure_failure: str | None = None
    #: runs `resume` found already stored complete (not in `runs`)
    skipped: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "runs": [{**r.row, "score_detail": r.score.as_dict()} for r in self.runs],
            "summary": self.summary,
            "infrastructure_failure": self.infrastructure_failure,
            "skipped": self.skipped,
        }


def _rows(runs: Iterable[RunOutcome | Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r.row if isinstance(r, RunOutcome) else r for r in runs]


def summary_of(runs: Iterable[RunOutcome | Mapping[str, Any]]) -> dict[str, Any]:
    """Levels, pass^k / pass@k, recovery and infrastructure errors, from the `task_runs`
    rows alone (outcomes or rows), so stored runs summarise like the runs just made."""
    rows = _rows(runs)
    return {
        "levels": levels(rows), **pass_k(rows), "recovery": recovery(rows),
        "recovery_by_kind": recovery_by_kind(rows),
        "infra_errors": sum(1 for r in rows if r.get("infra_error") is not None),
    }


def infrastructure_failure_of(runs: Iterable[RunOutcome | Mapping[str, Any]]) -> str | None:
    """The cause, once, when every run failed on infrastructure (each row's `infra_error`);
    else None."""
    causes = [r.get("infra_error") for r in _rows(runs)]
    if not causes or any(c is None for c in causes):
        return None
    counts = Counter(str(c) for c in causes)
    top = counts.most_common(1)[0][0]
    more = f" (and {len(counts) - 1} other causes)" if len(counts) > 1 else ""
    return f"all {len(causes)} runs failed on infrastructure, not on the agent: {top}{more}"


def check_variants(tasks: list[Task], cfg: RunConfig, catalog: Catalog, known: Any) -> None:
    """Every workflow a run will show exists and names known tools (before anything runs)."""
    from realprobe.tasks.runner import run_variant

    for task in tasks:
        task.check_tools(known)
        for p in cfg.prompts:
            shown = run_variant(task, cfg, p, catalog)
            shown.steps_for(p)
            shown.check_tools(known)


@dataclass
class TaskBatch:
    """Every (task, prompt, repeat) to run, and how."""

    tasks: list[Task]
    config: RunConfig
    catalog: Catalog
    finished: list[RunOutcome] = field(default_factory=list)
    skipped: int = 0  # runs --resume found stored complete

    @property
    def total(self) -> int:
        return len(plan_runs(self.tasks, self.config)) - self.skipped

    @classmethod
    def plan(
        cls,
        names: list[str],
        *,
        all: bool = False,
        agent: str = "reference",
        settings: EvalSettings | None = None,
        repeat: int = 1,
        base_url: str | None = None,
        model: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        llm_timeout: float = 120.0,
        max_turns: int | None = None,
        timeout: float | None = None,
        call_timeout: float | None = None,
        tasks_dir: str | Path | None = None,
        catalog: Catalog | None = None,
        on_note: Callable[[str], None] | None = None,
        concurrency: int = 1,
        llm_rpm: float | None = None,
        llm_tpm: float | None = None,
        llm_concurrency: int | None = None,
        **fields: Any,
    ) -> TaskBatch:
        """Check everything before anything runs; errors name the parameter at fault.
        `settings` (or its fields as keywords: mode, sandbox, profile, cassette, seed,
        fault_plan, fault_rate, prompt, flaw_seed, paraphrase) say where calls go and what
        the agent is shown."""
        if repeat < 1:
            raise RealprobeError("repeat must be at least 1")
        if repeat > MAX_REPEAT:  # every run is planned up front: 10**12 filled the memory
            raise RealprobeError(f"repeat must be at most {MAX_REPEAT:,}")
        if max_turns is not None and max_turns < 1:
            raise RealprobeError("max_turns must be at least 1")
        for label, value in (("timeout", timeout), ("call_timeout", call_timeout)):
            if value is not None and value <= 0:
                raise RealprobeError(f"{label} must be positive")
        if concurrency < 1:
            raise RealprobeError("concurrency must be at least 1")
        try:
            limits = LlmLimits(rpm=llm_rpm, tpm=llm_tpm, concurrency=llm_concurrency).check()
        except ValueError as exc:
            raise RealprobeError(str(exc)) from exc
        settings = EvalSettings.given(settings, **fields)
        llm = llm_settings(agent, base_url, model, api_key_env, llm_timeout, on_note)
        cat = catalog or Catalog.load([])
        folder = Path(tasks_dir) if tasks_dir is not None else default_tasks_dir()
        chosen = pick_tasks(load_tasks(folder), names, all)
        known = {*cat.tools, *OUTPUT_TOOLS}
        cfg = settings.run_config(
            default_prompt="optimal" if agent == "reference" else "baseline", agent=agent,
            repeat=repeat, llm=llm, max_turns=max_turns, timeout_s=timeout,
            call_timeout_s=call_timeout, concurrency=concurrency, llm_limits=limits,
        )
        check_variants(chosen, cfg, cat, known)
        check_cassettes(chosen, cfg)
        one = [p for p in cfg.prompts if prompt_key(agent, p) != p or p == "optimal"]
        if on_note is not None and len(one) > 1:
            on_note(f"the reference agent makes the same calls under {', '.join(one)}: one run "
                    f"stands for them all, stored as {one[0]}")
        return cls(chosen, cfg, cat)

    def run(
        self,
        *,
        db: str | Path | Database | None = None,
        on_done: Callable[[RunOutcome], None] | None = None,
        resume: bool = False,
        executor: str = "local",
        address: str | None = None,
        gates: HostGates | None = None,
        on_plan: Callable[[list[Job]], None] | None = None,
    ) -> TaskBatchResult:
        """Run the batch; each finished run is stored in `db` (if given) before `on_done`;
        `on_plan(jobs)` first gets the runs to do, in the order they start.
        With `resume`, runs already stored complete in `db` (same task, agent, model, prompt,
        target, seed and repeat) are skipped; infrastructure errors run again.

        `executor`: "local" runs `concurrency` runs side by side on this event loop; "ray"
        runs one Ray task per run on a local Ray (`concurrency` CPUs when above 1) or the
        cluster at `address`, and this process stays the only writer of `db`. Ray refuses
        live targets (its workers cannot share one politeness gate per API host).
        `gates` (local executor): the per-host politeness gates to share with a probe run or
        an MCP server in this process; Ray workers cannot share them."""
        from realprobe.tasks.executors import check_executor, execute

        check_executor(executor, address)
        planned = jobs_for(self.tasks, self.config)
        store = None
        skip: set[str] = set()
        if db is not None:
            from realprobe.store import open_db
            from realprobe.tasks.store import TaskStore

            store = TaskStore(open_db(db).write())
            if resume:
                skip = store.complete_keys()
        elif resume:
            raise RealprobeError("resume needs a database (db)")
        jobs = [j for j in planned if j.key not in skip]
        self.skipped = len(planned) - len(jobs)
        check_cassettes(self.tasks, self.config)
        if on_plan is not None:
            on_plan(jobs)
        order = {(j.task.instance_id, j.prompt, j.repeat): i for i, j in enumerate(jobs)}
        done: list[RunOutcome | None] = [None] * len(jobs)

        def keep(res: RunOutcome) -> None:  # Ray workers send the whole outcome back too
            done[order[(res.row["task"], res.row["prompt"], res.row["repeat"])]] = res
            self.finished.append(res)
            if store is not None:
                store.insert_run(res.row, res.steps)
            if on_done is not None:
                on_done(res)

        execute(
            jobs, self.catalog, executor=executor, concurrency=self.config.concurrency,
            on_done=keep, batch=uuid.uuid4().hex[:12], address=address, gates=gates,
        )
        runs = [r for r in done if r is not None]
        return TaskBatchResult(
            runs, summary_of(runs), infrastructure_failure_of(runs), skipped=self.skipped
        )


__all__ = [
    "TaskBatch",
    "TaskBatchResult",
    "infrastructure_failure_of",
    "llm_settings",
    "summary_of",
]
