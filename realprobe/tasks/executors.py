"""Where the runs of a batch or a sweep execute: this event loop, or a Ray cluster.

A job is one run: (configuration, task, prompt, repeat). Both executors hand each finished
run to `on_done` in the driver process, which is the only writer of the database, and both
skip the resume keys they are given, so `--resume` works the same on either.

- `local` (default): `concurrency` runs side by side on one event loop. Runs share the
  per-host politeness gates (the caller's `HostGates` when given, so a probe run or an MCP
  server in the same process keeps to the same limits) and the LLM endpoints' limits.
- `ray` (optional, `pip install 'realprobe[ray]'`): one Ray task per run, on a local Ray
  (started on demand) or the cluster at `address`. Runs that reach the real APIs share one
  politeness state, a Ray actor holding `hosts.GateState`: every worker keeps to each
  host's in-flight limit, start interval and Retry-After pauses exactly as runs in one
  process do (start times are on the wall clock: exact on one machine, within the
  machines' clock offset on a cluster). The caller's own `HostGates` cannot be shared with
  Ray workers. LLM limits apply per worker process (divide an endpoint's budget by the
  workers). The catalogue and the tasks travel with the jobs; a simulate profile file or a
  cassette folder must exist at the same path on every worker.

Ray is imported only when the `ray` executor runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from realprobe.adapters.catalog import Catalog
from realprobe.errors import RealprobeError
from realprobe.hosts import GateState, HostGates, SharedGates
from realprobe.tasks.runner import (
    Job,
    RunConfig,
    RunOutcome,
    Shared,
    check_cassettes,
    draw_key,
    run_local,
    run_one,
    run_seed,
    target_label,
)

if TYPE_CHECKING:
    from realprobe.simulator.profile import Profile

EXECUTORS = ("local", "ray")


#: seeds of the runs that model a job's length when the target's seed is not known: far
#: from any seed a user gives
MODEL_SEED = 1 << 40


def modelled_seconds(job: Job, catalog: Catalog, profile: Profile,
                     samples: int = 32, sandbox_seed: int | str | None = None) -> list[float]:
    """How long a run of `job` takes against a sandbox serving the fault `profile`: the job
    run in the simulator on its virtual clock (the agent's retries, back-offs and deadlines on
    the profile's latencies, failures and hangs), in a few milliseconds each.

    With the sandbox's seed: the one run it will be. The sandbox draws a run's calls by the
    run's key (`FaultModel.draw_numbered`), so the simulator seeded `caller_seed(seed, key)`
    meets the very outcomes the run will meet. Without: `samples` runs seeded apart from the
    target, what such runs take."""
    import tempfile
    from dataclasses import replace

    from realprobe.http.mode import Mode
    from realprobe.outputs import write_output
    from realprobe.simulator.faults import caller_seed

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "profile.json"
        write_output(path, profile.model_dump_json(exclude_none=True), private=True)
        cfg = replace(job.cfg, mode=Mode.SIMULATE, sandbox=None, profile=str(path),
                      cassette=None, concurrency=1)
        plans: list[tuple[RunConfig, int | None]]
        if sandbox_seed is not None:
            key = draw_key(run_seed(job.task.instance_id, cfg.agent, job.prompt, cfg.seed,
                                    job.repeat))
            plans = [(cfg, caller_seed(sandbox_seed, key))]
        else:
            plans = [(replace(cfg, seed=MODEL_SEED + k), None) for k in range(samples)]

        async def runs() -> list[float]:
            shared = Shared.for_config(cfg)
            try:
                return [float((await run_one(job.task, c, job.prompt, job.repeat, catalog,
                                             shared=shared, fault_seed=seed)).row["clock_s"])
                        for c, seed in plans]
            finally:
                await shared.aclose()

        return asyncio.run(runs())


# -- Ray ---------------------------------------------------------------------------------

#: catalogues a worker process has fetched, by the id of the run that shipped them
_WORKER_CATALOGS: dict[str, Catalog] = {}


class RayGateLink:
    """The shared politeness state, reached through its Ray actor (see `hosts.GateLink`)."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.actor, method).remote(*args)  # an ObjectRef: awaitable

    def send(self, method: str, *args: Any) -> None:
        getattr(self.actor, method).remote(*args)


def gate_actor(ray: Any) -> Any:
    """A Ray actor holding one `GateState` (no CPU reserved: it only keeps time)."""
    return ray.remote(num_cpus=0, max_restarts=0)(GateState).remote()


def _ray_job(payload: dict[str, Any]) -> RunOutcome:
    """Runs in a Ray worker: fetch the catalogue once per worker and run, then send the
    outcome (rows, score, state) back to the driver, which stores it."""
    ray = import_ray()
    key: str = payload["catalog_key"]
    catalog = _WORKER_CATALOGS.get(key)
    if catalog is None:
        catalog = _WORKER_CATALOGS[key] = ray.get(payload["catalog"][0])
    return asyncio.run(_worker_run(payload, catalog))


async def _worker_run(payload: dict[str, Any], catalog: Catalog) -> RunOutcome:
    cfg: RunConfig = payload["cfg"]
    gate = payload.get("gate")
    shared = Shared.for_config(cfg, gates=SharedGates(RayGateLink(gate)) if gate else None)
    try:
        return await run_one(
            payload["task"], cfg, payload["prompt"], payload["repeat"], catalog,
            batch=payload["batch"], n_runs=payload["n_runs"], shared=shared,
        )
    finally:
        await shared.aclose()


def import_ray(*, local: bool = False) -> Any:
    """Ray, imported. `local`: for a node started here, so Ray's switch (`RAY_CLUSTER_ENV`),
    which Ray reads once when first imported, is set to 0 before that unless the user set it."""
    if local and "ray" not in sys.modules:
        os.environ.setdefault(RAY_CLUSTER_ENV, "0")  # read by the processes Ray starts too
    try:
        import ray
    except ImportError as exc:
        raise RealprobeError(
            "executor ray needs Ray: pip install 'realprobe[ray]' (or pip install ray)",
            param="executor",
        ) from exc
    return ray


#: Ray's own switch: off, a node started here takes 127.0.0.1 as its address (on Linux it
#: otherwise binds its GCS, raylet and workers to the machine's network address)
RAY_CLUSTER_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def start_local_ray(**kwargs: Any) -> Any:
    """Ray, after `ray.init` for a node started on this machine, listening on 127.0.0.1 only,
    unless the user set Ray's `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER` to ask for a reachable node.
    A Ray imported earlier without the switch is refused: its node would listen on the
    machine's network address."""
    ray = import_ray(local=True)
    if RAY_CLUSTER_ENV not in os.environ:
        raise RealprobeError(
            f"Ray was imported before realprobe could keep its node on 127.0.0.1: set "
            f"{RAY_CLUSTER_ENV}=0 before importing ray (or =1 for a node other machines reach)",
            param="executor",
        )
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False, **kwargs)
    return ray


def reaches_apis(jobs: Sequence[Job]) -> bool:
    """Whether any job calls the real APIs (live, or recording them)."""
    return any(target_label(j.cfg) == "live" for j in jobs)


def run_ray(
    jobs: Sequence[Job],
    *,
    catalog: Catalog,
    on_done: Callable[[RunOutcome], None],
    batch: str,
    address: str | None = None,
    num_cpus: int | None = None,
) -> None:
    """Every job as a Ray task; outcomes come back to this process, which writes them. The
    catalogue goes to the object store once; each worker fetches it once. Runs that reach
    the real APIs share one politeness state (a `GateState` actor)."""
    ray = import_ray(local=not address)
    started_here = not ray.is_initialized()
    if started_here:
        try:
            if address:
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            else:
                start_local_ray(**({"num_cpus": num_cpus} if num_cpus else {}))
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RealprobeError(f"cannot start or reach Ray ({exc})") from exc
    waiting: list[Any] = []
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_job)
        shipped = [ray.put(catalog)]  # in a list: workers fetch it themselves, once each
        catalog_key = uuid.uuid4().hex
        gate = gate_actor(ray) if reaches_apis(jobs) else None
        waiting = [
            remote.remote({
                "cfg": job.cfg, "task": job.task, "prompt": job.prompt,
                "repeat": job.repeat, "batch": batch, "n_runs": job.n_runs,
                "catalog": shipped, "catalog_key": catalog_key,
                "gate": gate if target_label(job.cfg) == "live" else None,
            })
            for job in jobs
        ]
        while waiting:
            done, waiting = ray.wait(waiting, num_returns=1)
            for ref in done:
                try:
                    res: RunOutcome = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, RealprobeError):
                        raise cause from None  # a missing cassette: one line, as locally
                    raise
                on_done(res)
    finally:
        for ref in waiting:  # an error or Ctrl-C: stop what has not run yet
            with contextlib.suppress(Exception):
                ray.cancel(ref)
        if started_here:
            ray.shutdown()


def execute(
    jobs: Sequence[Job],
    catalog: Catalog,
    *,
    executor: str = "local",
    concurrency: int = 1,
    on_done: Callable[[RunOutcome], None],
    batch: str,
    address: str | None = None,
    gates: HostGates | None = None,
) -> None:
    """Run `jobs` on the chosen executor (cassettes checked first). `gates` (local only)
    are the per-host politeness gates to share; `address` (Ray only) is the cluster."""
    check_executor(executor, address)
    if executor == "ray" and gates is not None and reaches_apis(jobs):
        raise RealprobeError(
            "gates cannot be shared with Ray workers: runs on Ray share their own politeness "
            "state; pass gates with executor=local",
            param="gates",
        )
    for cfg in {id(j.cfg): j.cfg for j in jobs}.values():
        tasks = [j.task for j in jobs if j.cfg is cfg]
        check_cassettes(list({t.instance_id: t for t in tasks}.values()), cfg)
    if not jobs:
        return  # everything already stored: no Ray to start
    if executor == "ray":
        run_ray(jobs, catalog=catalog, on_done=on_done, batch=batch,
                address=address, num_cpus=concurrency if concurrency > 1 else None)
        return
    asyncio.run(run_local(jobs, catalog, concurrency=concurrency, on_done=on_done,
                          batch=batch, gates=gates))


def check_executor(executor: str, address: str | None) -> None:
    if executor not in EXECUTORS:
        raise RealprobeError(f"executor {executor!r}: choose local or ray")
    if address is not None and executor != "ray":
        raise RealprobeError("address needs executor ray (it names a Ray cluster to join)")
    if address is not None and not address.strip():
        raise RealprobeError("address is empty: give the Ray head's host:port, like 10.0.0.5:6379")
    if executor == "ray":
        import_ray(local=address is None)  # not installed: say so before anything starts
