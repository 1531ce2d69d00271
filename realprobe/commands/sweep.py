"""`realprobe sweep FILE`: models x agents x targets x tasks x prompts x repeats, resumable."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from realprobe.commands.common import (
    CatalogOpt,
    DbOpt,
    JsonOpt,
    console,
    err_console,
    printed_json,
)
from realprobe.errors import Unavailable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from realprobe.adapters.catalog import Catalog
    from realprobe.simulator.profile import Profile
    from realprobe.tasks.runner import Job

ResumeOpt = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Skip every run already stored complete (same task, agent, model, prompt, "
        "target, seed and repeat); infrastructure errors are run again.",
    ),
]
ExecutorOpt = Annotated[
    str,
    typer.Option("--executor", help="local (default: one event loop) or ray (pip install ray)."),
]
AddressOpt = Annotated[
    str | None,
    typer.Option("--address", help="Ray cluster address (default: start a local Ray)."),
]
ConcurrencyOpt = Annotated[
    int, typer.Option("--concurrency", help="Runs side by side (Ray: CPUs of a local Ray).")
]


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_cmd)


def sweep_cmd(
    file: Annotated[Path, typer.Argument(help="Sweep file (TOML): models, agents, targets...")],
    db: DbOpt = None,
    resume: ResumeOpt = False,
    concurrency: ConcurrencyOpt = 4,
    executor: ExecutorOpt = "local",
    address: AddressOpt = None,
    catalog: CatalogOpt = None,
    fault_plan: Annotated[
        list[str] | None,
        typer.Option("--fault-plan", help="Run the simulate targets under this fault plan "
                     "(a file or a built-in; repeatable; replaces the file's fault_plans)."),
    ] = None,
    fault_rate: Annotated[
        list[float] | None,
        typer.Option("--fault-rate", help="Run the simulate targets at this fault rate "
                     "(repeatable; replaces the file's lambda list)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a sweep into one database, with progress and an ETA; --resume after a kill."""
    from realprobe.adapters.catalog import Catalog
    from realprobe.api import sweep
    from realprobe.commands.progress import bar_wanted

    progress = SweepProgress(disable=not bar_wanted(as_json), workers=concurrency,
                             catalog=Catalog.load(list(catalog)) if catalog else None)
    with progress.bar:
        result = sweep(
            file, db=db, catalog=catalog or (), resume=resume, executor=executor,
            concurrency=concurrency, address=address,
            on_planned=progress.planned, on_plan=progress.plan, on_done=progress.finished,
            fault_plans=fault_plan, fault_rates=fault_rate,
        )
    summary = result.summary
    if not printed_json(as_json, {"summary": summary.model_dump(), "models": result.models}):
        console.print(
            f"sweep {summary.batch}: {summary.ran} runs ({summary.skipped} skipped as "
            f"complete, {summary.infra_errors} infrastructure errors) -> {summary.db}"
        )
        print_compare(result.models)
    if summary.ran and summary.infra_errors == summary.ran:
        raise Unavailable(
            f"all {summary.ran} runs failed on infrastructure (see infra_error in the "
            "database); fix the endpoint and run again with --resume"
        )


class SweepProgress:
    """A bar of finished runs (a sweep's, or `run`'s) with the infrastructure errors so far
    and an ETA that knows the runs left, task by task (a task under one configuration is one
    kind of run; one not seen yet costs its workflow steps x the time a step took), in the
    order they start, `workers` at a time. The reference agent's runs against a realprobe
    sandbox are each a kind of their own with a prior: the sandbox's fault profile and seed
    say how each will go (`modelled_seconds`, worked out in a thread of its own while the
    first runs run); what the bar learns from finished runs is this machine's speed. With
    no bar drawn there is no ETA either (`estimate`: one all the same, for its measures)."""

    def __init__(self, *, disable: bool, workers: int = 1, label: str = "sweep",
                 transient: bool = False, catalog: Catalog | None = None,
                 estimate: bool | None = None) -> None:
        from rich.progress import TextColumn

        from realprobe.commands.progress import Eta, progress_bar

        self.bar = progress_bar(TextColumn("{task.fields[infra]} infra errors"),
                                console=err_console, disable=disable, transient=transient)
        keep = not disable if estimate is None else estimate
        self.eta = Eta(0, workers=workers) if keep else None
        self.label, self.catalog = label, catalog
        self.task = self.bar.add_task(label, total=None, infra=0, eta=self.eta)
        self.infra = 0
        self.kind_of: dict[str, str] = {}  # resume key -> kind
        self.modelling: threading.Thread | None = None

    def planned(self, total: int, skipped: int) -> None:
        if self.eta is not None:
            self.eta.replan(total - skipped)  # how many; `plan` says which
        self.bar.update(self.task, total=total - skipped)
        if skipped:
            err_console.print(f"resume: {skipped} of {total} runs already stored complete")

    def plan(self, jobs: list[Job]) -> None:
        from realprobe.commands.progress import Item

        self.bar.update(self.task, total=len(jobs))
        if self.eta is None:
            return
        cells: dict[int, int] = {}
        modelled: dict[str, Job] = {}
        for job in jobs:
            cell = cells.setdefault(id(job.cfg), len(cells))
            kind = self.kind_of[job.key] = f"{job.task.instance_id}@{cell}"
            if modelled_target(job) is not None:  # a run the sandbox's seed decides
                kind = self.kind_of[job.key] = f"{kind}#{job.key}"
                modelled[kind] = job
        self.eta.replan([Item(self.kind_of[j.key], weight=len(j.task.workflow.steps))
                         for j in jobs])
        if modelled:
            self.modelling = threading.Thread(target=self._model, args=(modelled,),
                                              daemon=True)
            self.modelling.start()

    def _model(self, jobs: dict[str, Job]) -> None:
        """Each run's modelled seconds: the one run it will be when the sandbox says its seed,
        else what such runs take (once per task and configuration)."""
        from realprobe.adapters.catalog import Catalog
        from realprobe.sandbox.admin import served_draws, served_profile
        from realprobe.tasks.executors import modelled_seconds

        catalog = self.catalog or Catalog.load([])
        served: dict[str, tuple[Profile | None, int | str | None]] = {}
        alike: dict[str, Sequence[float]] = {}  # seed unknown: per task and configuration
        prior: dict[str, Sequence[float]] = {}
        for kind, job in jobs.items():
            url = str(modelled_target(job))
            if url not in served:
                profile, draws = served_profile(url), served_draws(url)
                if profile is not None and draws is not None:
                    profile = profile.latency_scaled(draws.latency_scale)
                served[url] = (profile, draws.seed if draws is not None else None)
            profile, seed = served[url]
            if profile is None:
                continue
            if seed is not None:
                prior[kind] = modelled_seconds(job, catalog, profile, sandbox_seed=seed)
            else:
                cell = kind.split("#", 1)[0]
                if cell not in alike:
                    alike[cell] = modelled_seconds(job, catalog, profile)
                prior[kind] = alike[cell]
        if self.eta is not None:
            self.eta.set_prior(prior)

    def finished(self, f: object) -> None:
        row = getattr(f, "row", {})
        self.infra += row.get("infra_error") is not None
        if self.eta is not None:
            self.eta.advance(self.kind_of.get(str(row.get("resume_key")), ""), row.get("wall_s"))
        self.bar.update(self.task, advance=1, infra=self.infra, description=self.label
                        if self.label == "sweep" else f"{row.get('task')} {row.get('outcome')}")


def modelled_target(job: Job) -> str | None:
    """The sandbox whose fault profile says how long `job`'s runs take: the reference agent
    (its policy is known; a model's thinking time is not) against a realprobe sandbox, with
    no fault plan or rate of the run's own. None: no model of it."""
    cfg = job.cfg
    plain = cfg.fault_plan is None and cfg.fault_rate is None and cfg.custom_agent is None
    return cfg.sandbox if cfg.agent == "reference" and plain and cfg.sandbox else None


def print_compare(table: list[dict[str, object]]) -> None:
    from realprobe.commands.tables import Column, fit_table

    out = fit_table(
        [Column("model", "name"), Column("agent", "name", drop=6),
         Column("target", "name", drop=5), Column("runs", "num"), Column("infra", "num", drop=4),
         Column("full", "num"), Column("partial", "num", drop=3), Column("pass^k", drop=2),
         Column("recovery", "num", drop=1)],
        title="Models side by side (95% intervals)",
    )

    def rate(value: object, ci: object) -> str:
        if value is None or not isinstance(ci, list):
            return "-"
        return f"{value:.0%} [{ci[0]:.0%}, {ci[1]:.0%}]"

    for r in table:
        passk = r.get("pass^k") or {}
        assert isinstance(passk, dict)
        out.add_row(
            str(r["model"]), str(r["agent"]),
            str(r["target"]) + (f" ε={r['paraphrase']}" if r.get("paraphrase") else ""),
            str(r["runs"]),
            str(r["infra_errors"]), rate(r["full_rate"], r["full_ci95"]),
            rate(r["partial_rate"], r["partial_ci95"]),
            " ".join(f"{k}:{v:.2f}" for k, v in sorted(passk.items())) or "-",
            rate(r["recovery_rate"], r["recovery_ci95"]),
        )
    console.print(out)
