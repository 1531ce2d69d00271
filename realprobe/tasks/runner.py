"""Running tasks: one transport per task run (so one cassette per run), the agent under the
task's limits, the score, and the rows for `task_runs` / `task_steps`.

Simulate and replay runs use a virtual clock: backoff waits and deadlines are exact and
nothing sleeps for real. The reference agent's jitter comes from a per-run seeded RNG, so a
replayed run takes the same path as the recorded one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import random
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from realprobe.adapters import Catalog
from realprobe.adapters.deadline import DeadlineGuard
from realprobe.clients import Mode, TransportOptions, make_client
from realprobe.clock import Clock, RealClock, VirtualClock
from realprobe.data import data_dir
from realprobe.errors import RealprobeError
from realprobe.hosts import HostGates
from realprobe.http.client import ClientConfig, HttpClient
from realprobe.http.transports import live_transport
from realprobe.store import default_vantage
from realprobe.tasks.agents import Agent, AgentContext, LlmSettings, make_agent
from realprobe.tasks.agents.limits import LimiterRegistry, LlmLimits
from realprobe.tasks.faults import bind_task
from realprobe.tasks.model import Task
from realprobe.tasks.prompts import BASE_VARIANTS
from realprobe.tasks.scoring import Score, score_run
from realprobe.tasks.state import RunState, Terminated, ToolBox

CASSETTE_SUFFIX = ".json"


def shipped_cassettes() -> Path:
    return data_dir("cassettes") / "tasks"


@dataclass
class RunConfig:
    agent: str = "reference"
    prompts: list[str] = field(default_factory=lambda: ["optimal"])
    mode: Mode = Mode.SIMULATE
    sandbox: str | None = None
    profile: str | None = None
    cassette: Path | None = None
    repeat: int = 1
    seed: int = 0
    llm: LlmSettings | None = None
    max_turns: int | None = None
    timeout_s: float | None = None
    call_timeout_s: float | None = None
    #: simulate / sandbox: a fault plan (built-in name or file) and a fault-rate dial
    fault_plan: str | None = None
    fault_rate: float | None = None
    vantage: str | None = None  # where the runs happen (default: the host name)
    #: runs side by side on one event loop (results do not depend on it: seeds are per run)
    concurrency: int = 1
    #: limits on the LLM endpoint, shared by every run of the batch
    llm_limits: LlmLimits | None = None
    #: seeds the flawed workflows (0: the variants stored in the task files)
    flaw_seed: int = 0
    #: how far the task's text is paraphrased (0, 1, 2: the surface's epsilon)
    paraphrase: int = 0
    #: an agent object to run instead of `make_agent(agent)` (`realprobe.evaluate`)
    custom_agent: Agent | None = None

    def __post_init__(self) -> None:
        # `mode="simulate"` as a user types it means Mode.SIMULATE; a typo is an error
        self.mode = Mode.parse(self.mode)


@dataclass
class Shared:
    """What concurrent runs of one batch share: per-host politeness and LLM limits. The
    gates may be the caller's, shared with a probe run or an MCP server in this process."""

    gates: HostGates = field(default_factory=lambda: HostGates(RealClock()))
    limiters: LimiterRegistry = field(default_factory=LimiterRegistry)
    #: one pooled connection set per LLM endpoint (simulate mode sends the model's requests
    #: out for real): runs reuse kept-alive connections instead of opening one each
    llm_pools: dict[str, httpx.AsyncBaseTransport] = field(default_factory=dict)

    def llm_pool(self, base_url: str) -> httpx.AsyncBaseTransport:
        url = httpx.URL(base_url)
        origin = f"{url.scheme}://{url.host}:{url.port}"
        if origin not in self.llm_pools:
            self.llm_pools[origin] = live_transport()
        return self.llm_pools[origin]

    async def aclose(self) -> None:
        """Close the LLM connection pools (the batch's runs are over)."""
        pools, self.llm_pools = list(self.llm_pools.values()), {}
        for pool in pools:
            await pool.aclose()

    @classmethod
    def for_config(cls, cfg: RunConfig, gates: HostGates | None = None) -> Shared:
        clock: Clock = VirtualClock(0.0) if cfg.mode is Mode.REPLAY else RealClock()
        return cls(gates=gates or HostGates(RealClock()), limiters=LimiterRegistry(clock))


@dataclass
class RunOutcome:
    row: dict[str, Any]
    steps: list[dict[str, Any]]
    score: Score
    state: RunState


def prompt_key(agent: str, prompt: str) -> str:
    """The reference agent makes the same calls under baseline, cot and optimal (under the
    first two the text orders its independent steps): one key."""
    if agent == "reference" and prompt in BASE_VARIANTS:
        return "optimal"
    return prompt


def run_key(task: str, agent: str, prompt: str, seed: int, repeat: int) -> str:
    return f"{task}__{agent}__{prompt_key(agent, prompt).replace(':', '-')}__s{seed}__r{repeat}"


def target_label(cfg: RunConfig) -> str:
    """The target part of a resume key: where calls go (recording is not a target), with
    the fault plan and fault rate when set."""
    faults = (f"+plan:{cfg.fault_plan}" if cfg.fault_plan is not None else "") + (
        f"@{cfg.fault_rate:g}" if cfg.fault_rate is not None else ""
    )
    if cfg.mode is Mode.SIMULATE or (cfg.profile and not cfg.sandbox) or faults:
        return f"simulate:{cfg.profile or 'published'}{faults}"
    if cfg.sandbox:
        return f"sandbox:{cfg.sandbox}"
    if cfg.mode is Mode.REPLAY:
        return f"replay:{cfg.cassette or 'shipped'}"
    return "live"


def resume_key(task: str, cfg: RunConfig, prompt: str, repeat: int) -> str:
    """(task, agent, model, prompt, target, seed, repeat): one stored run per key."""
    model = cfg.llm.model if cfg.llm is not None else "-"
    if cfg.custom_agent is not None:
        model = cfg.custom_agent.model
    key = "|".join(
        (task, cfg.agent, model, prompt_key(cfg.agent, prompt), target_label(cfg),
         str(cfg.seed), str(repeat))
    )
    # a flaw seed and a paraphrase level are part of the key when set (not at 0)
    flaw = f"|flaw_seed={cfg.flaw_seed}" if cfg.flaw_seed and prompt.startswith("flawed:") else ""
    return key + flaw + (f"|paraphrase={cfg.paraphrase}" if cfg.paraphrase else "")


def run_seed(task: str, agent: str, prompt: str, seed: int, repeat: int) -> int:
    return zlib.crc32(run_key(task, agent, prompt, seed, repeat).encode()) & 0x7FFFFFFF


def draw_key(run_seed: int) -> str:
    """What a run numbers its calls to a sandbox by (`X-Realprobe-Draw`): the outcomes it
    meets are the sandbox's seed's and this key's, as a simulator seeded
    `caller_seed(sandbox seed, key)` would play them (what the progress bar's model does)."""
    return f"run-{run_seed}"


def cassette_path(cfg: RunConfig, key: str, n_runs: int) -> Path | None:
    """Where this run's cassette is: `--cassette FILE` for one run, `--cassette DIR/` for
    several (one file per run), the shipped folder for replay without `--cassette`."""
    if cfg.mode not in (Mode.RECORD, Mode.REPLAY):
        return None
    base = cfg.cassette
    if base is None:
        if cfg.mode is Mode.RECORD:
            raise RealprobeError(
                "mode record needs cassette=PATH (a file, or a folder)", param=("mode", "cassette")
            )
        base = shipped_cassettes()
    if base.is_dir() or base.suffix == "":
        path = base / (key + CASSETTE_SUFFIX)
        if cfg.mode is Mode.REPLAY and not path.exists():
            raise RealprobeError(
                f"nothing recorded for run {key} in {base}; record it first with "
                f"mode=record and cassette={base}",
                param=("mode", "cassette"),
            )
        return path
    if n_runs > 1:
        raise RealprobeError(
            f"cassette {base} is one file but this is {n_runs} runs; pass a folder instead",
            param="cassette",
        )
    return base


class LlmPassthrough(httpx.AsyncBaseTransport):
    """Simulate mode serves only catalogue APIs; the LLM endpoint's requests go out for real,
    over the batch's pool for the endpoint (which the batch closes, not the run)."""

    def __init__(
        self, llm_base: str, sim: httpx.AsyncBaseTransport, live: httpx.AsyncBaseTransport
    ) -> None:
        url = httpx.URL(llm_base)
        self.origin = (url.scheme, url.host, url.port)
        self.sim = sim
        self.live = live

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        u = request.url
        if (u.scheme, u.host, u.port) == self.origin:
            return await self.live.handle_async_request(request)
        return await self.sim.handle_async_request(request)


def with_overrides(task: Task, cfg: RunConfig) -> Task:
    """The task with the limits the config sets in place of its own."""
    given = {"max_turns": cfg.max_turns, "timeout_s": cfg.timeout_s,
             "call_timeout_s": cfg.call_timeout_s}
    upd = {k: v for k, v in given.items() if v is not None}
    if not upd:
        return task
    return task.model_copy(update={"constraints": task.constraints.model_copy(update=upd)})


async def run_one(
    task: Task,
    cfg: RunConfig,
    prompt: str,
    repeat: int,
    catalog: Catalog,
    *,
    batch: str = "",
    n_runs: int = 1,
    shared: Shared | None = None,
    fault_seed: int | None = None,
) -> RunOutcome:
    """One task run in four steps: prepare (seed, cassette, client, tools, agent), run the
    agent under the task's deadline, score what it did, and build the rows to store.
    `fault_seed`: the simulator's seed instead of the run's own, and today's date (a model
    of a sandbox run)."""
    own = shared is None
    shared = shared or Shared.for_config(cfg)
    run = prepare_run(task, cfg, prompt, repeat, catalog, n_runs=n_runs, shared=shared,
                      fault_seed=fault_seed)
    try:
        timing = await run_agent(run)
    finally:
        if own:
            await shared.aclose()
    score = score_run(run.task, run.state)
    return rows_to_store(run, score, timing, batch=batch)


@dataclass
class PreparedRun:
    """Everything one run needs before the agent starts."""

    task: Task
    cfg: RunConfig
    prompt: str
    repeat: int
    seed: int
    cassette: Path | None
    agent: Agent
    clock: Clock
    client: HttpClient
    state: RunState
    box: ToolBox
    ctx: AgentContext


@dataclass(frozen=True)
class RunTiming:
    started_at: str  # ISO time, seconds
    wall_s: float


def prepare_run(
    task: Task,
    cfg: RunConfig,
    prompt: str,
    repeat: int,
    catalog: Catalog,
    *,
    n_runs: int,
    shared: Shared,
    fault_seed: int | None = None,
) -> PreparedRun:
    """The run's task (with the config's limits), seed, cassette, client, tools and agent
    (`fault_seed`: see `run_one`)."""
    task = run_variant(with_overrides(task, cfg), cfg, prompt, catalog)
    key = run_key(task.instance_id, cfg.agent, prompt, cfg.seed, repeat)
    seed = run_seed(task.instance_id, cfg.agent, prompt, cfg.seed, repeat)
    cassette = cassette_path(cfg, key, n_runs)
    agent = cfg.custom_agent or make_agent(cfg.agent, cfg.llm)
    # a model of a sandbox run draws on today's date, as the sandbox does (a profile's day
    # effect); any other simulated run on a date of its own, so it repeats any day
    wall0 = 0.0 if fault_seed is None else None
    clock: Clock = (VirtualClock(wall0) if cfg.mode in (Mode.SIMULATE, Mode.REPLAY)
                    else RealClock())
    client = run_client(task, cfg, catalog, seed=seed if fault_seed is None else fault_seed,
                        cassette=cassette, clock=clock)
    bind_task(client, task)
    state = RunState()
    # the real internet (live, or recording it) gets each API's politeness interval
    polite = client.target.reaches_network
    box = ToolBox(catalog, client, task, state, polite=polite, gates=shared.gates,
                  draw_key=draw_key(seed))
    ctx = AgentContext(
        task=task,
        prompt=prompt,
        catalog=catalog,
        box=box,
        state=state,
        rng=random.Random(seed),
        llm=cfg.llm,
        llm_transport=llm_transport_for(cfg, client.transport, shared),
        # the batch-wide limiter of the run's LLM endpoint, if the run uses an LLM
        llm_limiter=None if cfg.llm is None
        else shared.limiters.for_endpoint(cfg.llm.base_url, cfg.llm.model, cfg.llm_limits),
    )
    return PreparedRun(
        task=task, cfg=cfg, prompt=prompt, repeat=repeat, seed=seed, cassette=cassette,
        agent=agent, clock=clock, client=client, state=state, box=box, ctx=ctx,
    )


def run_variant(task: Task, cfg: RunConfig, prompt: str, catalog: Catalog) -> Task:
    """The task as this run shows it: its flawed variant (graded, or another flaw seed)
    and its paraphrased text; what scoring reads is unchanged."""
    from realprobe.tasks.flaws import with_variant
    from realprobe.tasks.paraphrase import paraphrased

    return paraphrased(with_variant(task, prompt, catalog, cfg.flaw_seed), cfg.paraphrase)


def run_client(
    task: Task, cfg: RunConfig, catalog: Catalog, *, seed: int, cassette: Path | None,
    clock: Clock,
) -> HttpClient:
    """The run's tool client: the config's target, with the task's per-call limit."""
    opts = TransportOptions(
        mode=cfg.mode, sandbox=cfg.sandbox, profile=cfg.profile, seed=seed, cassette=cassette,
        fault_plan=cfg.fault_plan, fault_rate=cfg.fault_rate,
    )
    limit = task.constraints.call_timeout_s
    return make_client(
        catalog,
        opts,
        clock=clock,
        config=ClientConfig(
            deadline_s=limit, read_timeout_s=limit, connect_timeout_s=min(5.0, limit)
        ),
    )


def llm_transport_for(
    cfg: RunConfig, tools: httpx.AsyncBaseTransport, shared: Shared
) -> httpx.AsyncBaseTransport:
    """The LLM's transport: the tools' one, except in simulate mode where the LLM is real."""
    if cfg.mode is Mode.SIMULATE and cfg.llm is not None:
        return LlmPassthrough(cfg.llm.base_url, tools, shared.llm_pool(cfg.llm.base_url))
    return tools


async def run_agent(run: PreparedRun) -> RunTiming:
    """The agent under the task's overall deadline; how it ended goes to the run state.
    The tools' transport closes either way (record mode writes the cassette then)."""
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    try:
        with DeadlineGuard(run.task.constraints.timeout_s, virtual=run.clock.virtual) as guard:
            await run.agent.run(run.ctx)
        if guard.expired:
            run.state.termination = "deadline"
    except Terminated as exc:
        run.state.termination = exc.reason
    finally:
        await run.client.aclose()  # record mode writes the cassette here
    return RunTiming(started_at, time.perf_counter() - t0)


#: how long leftover tasks of a user's agent get to stop once its coroutine returned
AGENT_GRACE_S = 1.0


async def in_own_thread(main: Callable[[], Awaitable[Any]], limit_s: float) -> tuple[str, Any]:
    """Run a user's agent coroutine on an event loop of its own, in a daemon thread, so
    nothing it does (block its loop with `time.sleep`, swallow cancellation, spawn tasks that
    never end, raise SystemExit) can hold or break the batch. Returns ("done", value),
    ("raised", exception) or ("deadline", None) after `limit_s` real seconds; at the
    deadline its task is cancelled and left to its thread."""
    done: concurrent.futures.Future[tuple[str, Any]] = concurrent.futures.Future()
    held: dict[str, Any] = {}

    async def guarded() -> tuple[str, Any]:
        held["task"] = asyncio.current_task()
        try:
            return "done", await main()
        except BaseException as exc:  # SystemExit, KeyboardInterrupt, its own CancelledError
            return "raised", exc

    def host() -> None:
        loop = held["loop"] = asyncio.new_event_loop()
        try:
            result = loop.run_until_complete(guarded())
        except BaseException as exc:
            result = ("raised", exc)
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            done.set_result(result)
        leftovers = asyncio.all_tasks(loop)
        for t in leftovers:
            t.cancel()
        with contextlib.suppress(BaseException):
            if leftovers:
                loop.run_until_complete(asyncio.wait(leftovers, timeout=AGENT_GRACE_S))
            loop.close()

    threading.Thread(target=host, daemon=True, name="realprobe-user-agent").start()
    waiting = asyncio.wrap_future(done)
    try:
        finished, _ = await asyncio.wait({waiting}, timeout=limit_s)
        return waiting.result() if finished else ("deadline", None)
    finally:
        waiting.cancel()  # a late result is dropped in its thread, not sent to this loop
        loop, task = held.get("loop"), held.get("task")
        if not done.done() and loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                loop.call_soon_threadsafe(task.cancel)


def rows_to_store(run: PreparedRun, score: Score, timing: RunTiming, *, batch: str) -> RunOutcome:
    """The `task_runs` row and `task_steps` rows; a run that failed on infrastructure is
    marked an error (it says nothing about the agent)."""
    run_id = uuid.uuid4().hex
    steps = [s.as_row(run_id) for s in run.state.all_steps]
    row = run_row(run, score, timing, run_id=run_id, batch=batch)
    outcome = RunOutcome(row, steps, score, run.state)
    cause = infrastructure_failure(outcome)
    row["infra_error"] = cause
    if cause is not None:
        row["outcome"] = "error"  # says nothing about the agent: out of the scores
    return outcome


def call_counts(steps: list[Any]) -> dict[str, Any]:
    """A run's calls, failures, faults it did not cause (implicit ones included) and their
    kinds, retries and fallbacks."""
    return {
        "tool_calls": len(steps),
        "failures": sum(1 for s in steps if s.kind == "api" and not s.ok),
        "tool_faults": sum(1 for s in steps if s.tool_fault),
        "fault_kinds": dict(Counter(s.fault_kind for s in steps if s.tool_fault and s.fault_kind)),
        "retries": sum(1 for s in steps if s.role == "retry"),
        "fallbacks": sum(1 for s in steps if s.role == "fallback"),
    }


def run_row(
    run: PreparedRun, score: Score, timing: RunTiming, *, run_id: str, batch: str
) -> dict[str, Any]:
    task, cfg, state, prompt = run.task, run.cfg, run.state, run.prompt
    flaw = prompt.split(":", 1)[1] if prompt.startswith("flawed:") else ""
    _, at, severity = flaw.partition("@")
    return {
        "id": run_id,
        "batch": batch,
        "started_at": timing.started_at,
        "task": task.instance_id,
        "task_type": task.task_type,
        "agent": cfg.agent,
        "model": run.agent.model,
        "prompt": prompt,
        "flaw": flaw or None,
        "mode": cfg.mode.value,
        "profile": cfg.profile or cfg.sandbox,
        "seed": cfg.seed,
        "run_seed": run.seed,
        "repeat": run.repeat,
        "outcome": score.outcome,
        "score": score.score,
        "grounded": int(score.grounded),
        "strict": int(score.strict),
        "turns": state.turns,
        **call_counts(state.all_steps),  # every attempt's calls: what the run cost
        "fault_plan": str(cfg.fault_plan) if cfg.fault_plan is not None else None,
        "fault_rate": cfg.fault_rate,
        # Reflexion: attempts used, and each earlier attempt with its reflection
        "attempts": state.attempt,
        "reflections": [a.as_json() for a in state.attempts] or None,
        "topology": task.topology,
        "has_alternative": int(task.has_alternative),
        "optimal_calls": len(task.workflow.steps),
        "tokens_in": state.tokens_in,
        "tokens_out": state.tokens_out,
        "wall_s": round(timing.wall_s, 4),
        "clock_s": round(run.box.elapsed(), 4),
        "termination": state.termination,
        "reasons": score.reasons,
        "conditions": score.conditions,
        "artifact": state.artifact,
        "final_message": state.final_message[:2000],
        "cassette": str(run.cassette) if run.cassette else None,
        "target_kind": run.client.target.kind.value,
        # the fault-rate dial is part of where the calls went (results never pool rates)
        "target": run.client.target.label
        + (f" fault_rate={cfg.fault_rate:g}" if cfg.fault_rate is not None else ""),
        "source": "task",
        "vantage": cfg.vantage or default_vantage(),
        "resume_key": resume_key(task.instance_id, cfg, prompt, run.repeat),
        "flaw_seed": cfg.flaw_seed if flaw else None,
        "severity": int(severity) if at else None,
        # the share really touched: ceil(severity x steps) of a few steps is rarely exact
        "severity_share": task.flawed[flaw].detail.get("share")
        if at and flaw in task.flawed else None,
        "paraphrase": cfg.paraphrase,
        **score.trajectory.as_dict(),
    }


def infrastructure_failure(res: RunOutcome) -> str | None:
    """Why a run says nothing about the agent, if so: the LLM endpoint failed (unreachable,
    bad key, ...), or every tool call it made failed with NETWORK_ERROR (nothing reached)."""
    if res.state.error is not None:
        return res.state.error
    api = [s for s in res.state.steps if s.kind == "api"]
    if res.row.get("target_kind") in ("simulate", "replay"):
        return None  # simulated or recorded network errors are the test, not an outage
    if api and all(not s.ok and s.error_code == "NETWORK_ERROR" for s in api):
        return f"every tool call failed with NETWORK_ERROR ({api[-1].message[:200]})"
    return None


def plan_runs(tasks: Sequence[Task], cfg: RunConfig) -> list[tuple[Task, str, int]]:
    """Every (task, prompt, repeat) of `cfg`, one per resume key: the reference agent behaves
    the same under baseline, cot and optimal, so those prompts are one run (the first named),
    and what `--resume` skips is exactly what would have run."""
    picked: dict[str, tuple[Task, str, int]] = {}
    for t in tasks:
        for p in cfg.prompts:
            for r in range(cfg.repeat):
                picked.setdefault(resume_key(t.instance_id, cfg, p, r), (t, p, r))
    return list(picked.values())


def check_cassettes(tasks: list[Task], cfg: RunConfig) -> None:
    """Fail before running anything when a cassette is missing; make the record folder."""
    if cfg.mode not in (Mode.RECORD, Mode.REPLAY):
        return
    runs = plan_runs(tasks, cfg)
    paths = [
        cassette_path(cfg, run_key(t.instance_id, cfg.agent, p, cfg.seed, r), len(runs))
        for t, p, r in runs
    ]
    if cfg.mode is Mode.RECORD:
        for path in filter(None, paths):
            if path.is_symlink() or path.exists():
                raise RealprobeError(
                    f"{path} already exists (an earlier recording of the same run); "
                    "recording never replaces a cassette: move it, or record into another folder"
                )
            path.parent.mkdir(parents=True, exist_ok=True)


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


def jobs_for(tasks: Sequence[Task], cfg: RunConfig) -> list[Job]:
    """Every run of `cfg` over `tasks` (`plan_runs`: one per resume key)."""
    runs = plan_runs(tasks, cfg)
    return [Job(cfg, t, p, r, len(runs)) for t, p, r in runs]


async def run_local(
    jobs: Sequence[Job],
    catalog: Catalog,
    *,
    concurrency: int,
    batch: str,
    on_done: Callable[[RunOutcome], None] | None = None,
    gates: HostGates | None = None,
) -> list[RunOutcome]:
    """Every job, `concurrency` at a time, sharing politeness (`gates`, or one set of
    gates for these jobs) and LLM limits; the outcomes in job order."""
    if concurrency < 1:
        raise RealprobeError(f"concurrency must be at least 1 (got {concurrency})")
    slots = asyncio.Semaphore(concurrency)
    shared_by_mode: dict[bool, Shared] = {}
    gates = gates if gates is not None else HostGates(RealClock())

    def shared_for(cfg: RunConfig) -> Shared:
        # one gate set for every run; LLM waits on a virtual clock only when replaying
        replay = target_label(cfg).startswith("replay:")
        if replay not in shared_by_mode:
            shared_by_mode[replay] = Shared.for_config(cfg, gates=gates)
        return shared_by_mode[replay]

    async def one(job: Job) -> RunOutcome:
        async with slots:
            res = await run_one(
                job.task, job.cfg, job.prompt, job.repeat, catalog, batch=batch,
                n_runs=job.n_runs, shared=shared_for(job.cfg),
            )
        if on_done is not None:
            on_done(res)
        return res

    try:
        with first_error():
            async with asyncio.TaskGroup() as group:
                running = [group.create_task(one(job)) for job in jobs]
    finally:
        for shared in shared_by_mode.values():
            await shared.aclose()
    return [t.result() for t in running]


@contextlib.contextmanager
def first_error() -> Iterator[None]:
    """Concurrent runs fail as one run would: the first error itself, not an
    ExceptionGroup (a missing cassette is a one-line message, not a traceback)."""
    try:
        yield
    except BaseExceptionGroup as group:
        first: BaseException = group
        while isinstance(first, BaseExceptionGroup) and first.exceptions:
            first = first.exceptions[0]
        raise first from None


async def run_batch(tasks: list[Task], cfg: RunConfig, catalog: Catalog) -> list[RunOutcome]:
    """Every (task, prompt, repeat) of `cfg`, `cfg.concurrency` at a time on this event loop
    (the local executor). Runs share only politeness and the LLM's limits; each has its own
    seed, clock and transport, so the results do not depend on the concurrency. The
    outcomes come back in plan order."""
    if cfg.repeat < 1:
        raise RealprobeError("repeat must be at least 1", param="repeat")
    check_cassettes(tasks, cfg)
    return await run_local(jobs_for(tasks, cfg), catalog, concurrency=cfg.concurrency,
                           batch=uuid.uuid4().hex[:12])


__all__ = [
    "RunConfig",
    "RunOutcome",
    "check_cassettes",
    "infrastructure_failure",
    "plan_runs",
    "resume_key",
    "run_batch",
    "run_one",
]
