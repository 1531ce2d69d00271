"""Where the runs of a batch or a sweep execute: this event loop, or a Ray cluster.

A job is one run: (configuration, task, prompt, repeat). Both executors hand each finished
run to `on_done` in the driver process, which is the only writer of the database, and both
skip the resume keys they are given, so `--resume` works the same on either.

- `local` (default): `concurrency` runs side by side on one event loop. Runs share the
  per-host politeness gates and the LLM endpoints' limits.
- `ray` (optional, `pip install 'realprobe[ray]'`): one Ray task per run, on a local Ray
  (started on demand) or the cluster at `address`. Each worker process has its own
  politeness gates, so live targets are refused on Ray: run those with the local executor.
  LLM limits apply per worker process (divide an endpoint's budget by the workers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from realprobe.adapters.catalog import Catalog
from realprobe.errors import RealprobeError
from realprobe.tasks.model import Task
from realprobe.tasks.runner import (
    RunConfig,
    RunOutcome,
    Shared,
    check_cassettes,
    first_error,
    resume_key,
    run_one,
    target_label,
)

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Job:
    cfg: RunConfig
    task: Task
    prompt: str
    repeat: int
    n_runs: int  # runs of its configuration (decides one cassette file or a folder)

    @property
    def key(self) -> str:
        return resume_key(self.task.instance_id, self.cfg, self.prompt, self.repeat)


@dataclass
class Finished:
    """A run as the driver stores it (Ray sends back rows, not Python objects)."""

    row: dict[str, Any]
    steps: list[dict[str, Any]]
    outcome: RunOutcome | None = None  # local runs keep the whole outcome


def jobs_for(tasks: Sequence[Task], cfg: RunConfig) -> list[Job]:
    n = len(tasks) * len(cfg.prompts) * cfg.repeat
    return [Job(cfg, t, p, r, n) for t in tasks for p in cfg.prompts for r in range(cfg.repeat)]


async def run_local(
    jobs: Sequence[Job],
    catalog: Catalog,
    *,
    concurrency: int,
    on_done: Callable[[Finished], None],
    batch: str,
) -> None:
    """Every job, `concurrency` at a time, sharing politeness and LLM limits."""
    if concurrency < 1:
        raise RealprobeError(f"concurrency must be at least 1 (got {concurrency})")
    slots = asyncio.Semaphore(concurrency)
    shared_by_mode: dict[bool, Shared] = {}

    def shared_for(cfg: RunConfig) -> Shared:
        # one gate set for every run; LLM waits on a virtual clock only when replaying
        replay = target_label(cfg).startswith("replay:")
        if replay not in shared_by_mode:
            shared_by_mode[replay] = Shared.for_config(cfg)
        return shared_by_mode[replay]

    async def one(job: Job) -> None:
        async with slots:
            res = await run_one(
                job.task, job.cfg, job.prompt, job.repeat, catalog, batch=batch,
                n_runs=job.n_runs, shared=shared_for(job.cfg),
            )
        on_done(Finished(res.row, res.steps, res))

    with first_error():
        async with asyncio.TaskGroup() as group:
            for job in jobs:
                group.create_task(one(job))


# -- Ray ---------------------------------------------------------------------------------

_WORKER_CATALOGS: dict[tuple[str, ...], Catalog] = {}


def _ray_job(payload: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Runs in a Ray worker: rebuild the task and catalogue, run, return the rows."""
    extra = tuple(payload["catalog"])
    catalog = _WORKER_CATALOGS.get(extra)
    if catalog is None:
        catalog = _WORKER_CATALOGS[extra] = Catalog.load(list(extra))
    task: Task = payload["task"]
    res = asyncio.run(run_one(
        task, payload["cfg"], payload["prompt"], payload["repeat"], catalog,
        batch=payload["batch"], n_runs=payload["n_runs"],
    ))
    return res.row, res.steps


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise RealprobeError(
            "executor ray needs Ray: pip install 'realprobe[ray]' (or pip install ray)",
            param="executor",
        ) from exc
    return ray


def run_ray(
    jobs: Sequence[Job],
    *,
    catalog_paths: Sequence[str],
    on_done: Callable[[Finished], None],
    batch: str,
    address: str | None = None,
    num_cpus: int | None = None,
) -> None:
    """Every job as a Ray task; rows come back to this process, which writes them."""
    live = sorted({target_label(j.cfg) for j in jobs if target_label(j.cfg) == "live"})
    if live:
        raise RealprobeError(
            "live targets cannot run on Ray: workers would not share one politeness gate per "
            "API host; use executor=local for live runs",
            param="executor",
        )
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        kwargs: dict[str, Any] = {
            "include_dashboard": False, "log_to_driver": False, "configure_logging": False,
        }
        if address:
            kwargs["address"] = address
        elif num_cpus:
            kwargs["num_cpus"] = num_cpus
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RealprobeError(f"cannot start or reach Ray ({exc})") from exc
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_job)
        pending = {
            remote.remote({
                "cfg": job.cfg, "task": job.task, "prompt": job.prompt,
                "repeat": job.repeat, "batch": batch, "n_runs": job.n_runs,
                "catalog": list(catalog_paths),
            }): job
            for job in jobs
        }
        waiting = list(pending)
        while waiting:
            done, waiting = ray.wait(waiting, num_returns=1)
            for ref in done:
                row, steps = ray.get(ref)
                on_done(Finished(row, steps))
    finally:
        if started_here:
            ray.shutdown()


def execute(
    jobs: Sequence[Job],
    catalog: Catalog,
    *,
    executor: str = "local",
    concurrency: int = 1,
    on_done: Callable[[Finished], None],
    batch: str,
    catalog_paths: Sequence[str] = (),
    address: str | None = None,
) -> None:
    """Run `jobs` on the chosen executor (cassettes checked first)."""
    if executor not in EXECUTORS:
        raise RealprobeError(f"executor {executor!r}: choose local or ray")
    for cfg in {id(j.cfg): j.cfg for j in jobs}.values():
        tasks = [j.task for j in jobs if j.cfg is cfg]
        check_cassettes(list({t.instance_id: t for t in tasks}.values()), cfg)
    if executor == "ray":
        run_ray(jobs, catalog_paths=catalog_paths, on_done=on_done, batch=batch,
                address=address, num_cpus=concurrency if concurrency > 1 else None)
        return
    asyncio.run(run_local(jobs, catalog, concurrency=concurrency, on_done=on_done, batch=batch))
