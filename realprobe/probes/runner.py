"""Probe rounds: call each chosen tool N times, one committed row per call.

`run_probes` is the Python API (the CLI, the scheduler and the closed-loop test use it); a
`ProbeRun` holds its steps. Different hosts are probed concurrently, each host through
polite workers that wait for its limiter (`realprobe.hosts`), and every call's row is
committed the moment the call ends.

The prober's own outages are not the API's: when no call in a run reached any server (calls
failed while connecting - refused, DNS, connect timeout - or timed out with nothing
received, and at least one certainly failed at connect), the run is marked
`local_network_failure` and its rows get `excluded = 1`. Once every host has been tried
and nothing was reached, the run stops early instead of hammering a dead network. A run
where every call times out with nothing received and none fails at connect (a hanging
server) is the API's failure and stays counted.

Labels come from the client: its `Target` says where the calls go (live, sandbox, simulate,
replay), and that goes on the run and on every row. Daily budgets count live calls only.
Rows are stamped with the real moment of the call; a simulated run on a virtual clock keeps
its timeline in `virtual_s` (seconds since the run began), so nothing lands in the future.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import statistics
import time
import uuid
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec

from pydantic import BaseModel, Field

from realprobe.adapters import ToolResult, call_tool
from realprobe.adapters.catalog import Catalog
from realprobe.adapters.deadline import GRACE_S, DeadlineGuard
from realprobe.adapters.spec import Politeness
from realprobe.adapters.tool import Tool
from realprobe.errors import ErrorCode, RealprobeError
from realprobe.hosts import HostGates, HostLimiter, host_key, merge
from realprobe.http.client import HttpClient
from realprobe.http.transports import DRAW
from realprobe.probes.implicit import ImplicitWatch
from realprobe.probes.politeness import Budget, PolitenessConfig
from realprobe.store import (
    RUN_DONE,
    RUN_FAILED,
    RUN_INTERRUPTED,
    RUN_LOCAL_NETWORK_FAILURE,
    RUN_RUNNING,
    Store,
    default_vantage,
    probe_row,
)
from realprobe.store import (
    iso_utc as iso,
)
from realprobe.target import SOURCES, Target
from realprobe.version import __version__

P = ParamSpec("P")


class ToolSummary(BaseModel):
    tool: str
    api: str
    n: int = 0
    ok: int = 0
    errors: dict[str, int] = Field(default_factory=dict)
    skipped: int = 0
    median_latency_ms: float | None = None  # of successful calls


class RunSummary(BaseModel):
    """One probe run. `target_kind` says where the calls went (live, sandbox, simulate,
    replay); `mode` is only how they were made (a sandbox is reached by live HTTP)."""

    run_id: str
    status: str
    target_kind: str = "live"  # live | sandbox | simulate | replay
    mode: str
    target: str
    vantage: str
    started_at: str
    ended_at: str
    duration_s: float
    rounds: int
    n_calls: int
    n_ok: int
    n_error: int
    n_skipped: int
    excluded: bool
    tools: list[ToolSummary]
    notes: list[str] = Field(default_factory=list)
    source: str = "probe"


@dataclass(slots=True)
class ProbeCall:
    tool: Tool
    round: int
    args: dict[str, Any]


@dataclass
class _Host:
    key: str
    limiter: HostLimiter
    queue: deque[ProbeCall]
    workers: int
    attempted: bool = False
    given_up: str | None = None  # why this host gets no more calls in this run


@dataclass
class _State:
    rows: int = 0
    ok: int = 0
    error: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, Counter[str]] = field(default_factory=dict)
    reached: bool = False  # some call got an answer from a server
    connect_failures: int = 0  # calls that certainly failed while connecting
    notes: list[str] = field(default_factory=list)

    def count(self, tool: str, result: ToolResult) -> None:
        self.rows += 1
        if result.ok:
            self.ok += 1
            self.latencies[tool].append(result.latency_ms)
        else:
            self.error += 1
            assert result.error is not None
            self.errors[tool][result.error.code.value] += 1
        reached = reached_server(result)
        if reached:
            self.reached = True
        elif reached is False:
            self.connect_failures += 1

    def tool_summary(self, tool: Tool) -> ToolSummary:
        lat, errs = self.latencies[tool.name], self.errors[tool.name]
        return ToolSummary(
            tool=tool.name,
            api=tool.api_id,
            n=len(lat) + sum(errs.values()),
            ok=len(lat),
            errors=dict(sorted(errs.items())),
            skipped=self.skipped[tool.name],
            median_latency_ms=round(statistics.median(lat), 1) if lat else None,
        )


def new_run_id(wall: float) -> str:
    stamp = dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


def probe_draw_key(seed: int | None) -> str:
    """What a probe numbers its calls to a sandbox by (`X-Realprobe-Draw`): its seed, so the
    same probe again meets the same outcomes; no seed is seed 0, as a transport's seed is."""
    return f"probe-{seed or 0}"


def plan_calls(tools: Sequence[Tool], rounds: int) -> list[ProbeCall]:
    """Round-major: round r calls every tool with its example `r mod len(examples)`."""
    return [
        ProbeCall(t, r, dict(t.examples[r % len(t.examples)])) for r in range(rounds) for t in tools
    ]


def reached_server(result: ToolResult) -> bool | None:
    """True: a server answered or accepted the connection; False: failed while connecting
    (refused, unroutable, DNS, connect timeout); None: cannot tell (the deadline fired with
    nothing received and the transport did not say how far the call got - a hanging server,
    or a DNS lookup or connect that never finished). Read from the failure's typed `reached`
    field, never from its message."""
    err = result.error
    if result.ok or result.http_status is not None or err is None:
        return True
    if err.reached is not None:
        return err.reached
    return None if err.code is ErrorCode.TIMEOUT and result.bytes == 0 else True


def resolve_tools(catalog: Catalog, tools: Sequence[Tool] | str | None) -> list[Tool]:
    """The tools to probe, each once, in the order given."""
    chosen = catalog.select(tools) if tools is None or isinstance(tools, str) else list(tools)
    return list({t.name: t for t in chosen}.values())


class ProbeRun:
    """One probe run in four steps: `plan` (hosts, limiters, the run's row), `run` (the
    calls, one committed row each), `finish` (the run's status), `summary`."""

    def __init__(
        self,
        catalog: Catalog,
        tools: Sequence[Tool] | str | None,
        rounds: int,
        client: HttpClient,
        store: Store,
        *,
        timeout_s: float | None = None,
        vantage: str | None = None,
        mode: str | None = None,
        target: str | None = None,
        politeness: PolitenessConfig | None = None,
        concurrency: int = 64,
        seed: int | None = None,
        stop: asyncio.Event | None = None,
        on_call: Callable[[dict[str, Any], ToolResult], None] | None = None,
        on_start: Callable[[str], None] | None = None,
        run_id: str | None = None,
        schedule_id: str | None = None,
        source: str = "probe",
        gates: HostGates | None = None,
    ) -> None:
        """Probe `tools` (Tool list, "a,b", or None for all) `rounds` times; rows go to `store`.

        The run and its rows are labelled with `client.target` (live, sandbox, simulate or
        replay); `mode`/`target`, if given, are checked against it and a mismatch is an error.
        Daily budgets count only calls that reach the real APIs. Calls to the real APIs wait
        for the per-host limiters of `gates` when given (shared with an MCP server or task runs
        in the same process), else for the run's own. Set `stop` to end the run after the calls
        in flight; the run is then `interrupted`. Never raises for API failures; raises
        RealprobeError for bad input or a failing database.
        """
        self.where = client.target
        self.mode = check_labels(self.where, mode, target)
        if source not in SOURCES:
            raise RealprobeError(f"source {source!r}: choose one of {', '.join(SOURCES)}")
        self.tools = resolve_tools(catalog, tools)
        if rounds < 1:
            raise RealprobeError(f"rounds must be at least 1 (got {rounds})")
        if not self.tools:
            raise RealprobeError("no tools chosen: pass tool names or all")
        if concurrency < 1:
            raise RealprobeError(f"concurrency must be at least 1 (got {concurrency})")
        self.rounds, self.client, self.store = rounds, client, store
        self.config = politeness or PolitenessConfig()
        self.clock = client.clock
        self.timeout = timeout_s if timeout_s is not None else client.config.deadline_s
        self.vantage = vantage or default_vantage()
        self.concurrency, self.stop, self.on_call = concurrency, stop, on_call
        self.on_start = on_start
        self.schedule_id, self.source = schedule_id, source
        # only calls to the real APIs share limiters with the rest of the process
        shared = gates if gates is not None and self.where.reaches_network else None
        self.gates = shared or HostGates(self.clock, self.config.backoff())
        # only calls to the real APIs spend an API's daily budget
        budgets = self.where.reaches_network and (self.config.budgets in (None, True))
        self.budget = Budget(store, "live", self.clock, budgets)
        self.started_wall = time.time()
        self.t0 = self.clock.now()
        self.run_id = run_id or new_run_id(self.started_wall)
        self.rng = random.Random(seed)
        self.draw_key = probe_draw_key(seed)  # what a sandbox draws this run's outcomes by
        self.implicit = ImplicitWatch()  # signs of implicit faults in successful answers
        self.hosts: list[_Host] = []
        self.api_policy: dict[str, Politeness] = {}
        self.state = _State(
            latencies={t.name: [] for t in self.tools},
            errors={t.name: Counter() for t in self.tools},
        )
        self.status = RUN_DONE
        self.excluded = False
        self.ended_wall = self.started_wall

    # -- plan ---------------------------------------------------------------------------

    def plan(self) -> None:
        """Queue the calls per host (APIs sharing a host share its limits); start the run."""
        by_host: dict[str, list[ProbeCall]] = {}
        for call in plan_calls(self.tools, self.rounds):
            api = call.tool.api
            self.api_policy.setdefault(api.id, self.config.for_api(api))
            by_host.setdefault(host_key(api), []).append(call)
        for key, calls in by_host.items():
            policy = merge(self.api_policy[c.tool.api_id] for c in calls)
            limiter = self.gates.limiter(key, policy, random.Random(self.rng.random()))
            workers = max(1, min(policy.max_in_flight, self.concurrency, len(calls)))
            self.hosts.append(_Host(key, limiter, deque(calls), workers))
        self.store.start_run(
            {
                "id": self.run_id,
                "started_at": iso(self.started_wall),
                "started_ts": self.started_wall,
                "vantage": self.vantage,
                "mode": self.mode,
                "target": self.where.label,
                "target_kind": self.where.kind.value,
                "source": self.source,
                "tools": [t.name for t in self.tools],
                "rounds": self.rounds,
                "status": RUN_RUNNING,
                "n_calls": 0,
                "version": __version__,
                "schedule_id": self.schedule_id,
            }
        )

    # -- run ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Make the calls: one worker per in-flight slot of each host, or one call at a time
        on a virtual clock. A failure marks the run failed (interrupted when cancelled)."""
        self._halt = asyncio.Event()  # set on `stop` or when nothing is reachable
        self._exhausted: set[str] = set()
        self._sem = asyncio.Semaphore(self.concurrency)
        watcher = asyncio.ensure_future(self._watch_stop())
        try:
            async with asyncio.TaskGroup() as group:
                if self.clock.virtual:
                    group.create_task(self._serial())
                else:
                    for host in self.hosts:
                        for _ in range(host.workers):
                            group.create_task(self._worker(host))
        except BaseException as exc:
            # cancelled (a second Ctrl-C): the calls in flight were abandoned, nothing else lost
            cancelled = isinstance(exc, asyncio.CancelledError)
            self.status = RUN_INTERRUPTED if cancelled else RUN_FAILED
            why = "calls in flight abandoned" if cancelled else f"{exc}"
            self._write_finish(time.time(), f"{type(exc).__name__}: {why}")
            if isinstance(exc, BaseExceptionGroup):
                inner = exc.exceptions[0]
                if isinstance(inner, RealprobeError):
                    raise inner from None
            raise
        finally:
            watcher.cancel()

    async def _watch_stop(self) -> None:
        if self.stop is not None:
            await self.stop.wait()
            self._halt.set()

    def _halted(self) -> bool:
        return self._halt.is_set() or (self.stop is not None and self.stop.is_set())

    def _everything_unreachable(self) -> bool:
        s = self.state
        return not s.reached and s.connect_failures > 0 and all(h.attempted for h in self.hosts)

    async def _turn(self, host: _Host) -> bool:
        """Wait for the host's next start; a pause over the run's limit gives the host up."""
        if host.given_up is not None:
            return False
        if await host.limiter.wait_turn(self._halt, give_up_after=self.config.max_pause_s):
            return True
        if not self._halted():
            wait = host.limiter.ready_at() - self.clock.now()
            host.given_up = (
                f"asked to wait {wait:g}s (over the {self.config.max_pause_s:g}s limit); "
                "no more calls to this host in this run"
            )
        return False

    async def _worker(self, host: _Host) -> None:
        while host.queue and not self._halted():
            if not await self._turn(host):
                return
            if host.queue:
                await self._process(host)

    async def _serial(self) -> None:
        """Virtual clock: one call at a time, earliest-ready host first.

        The virtual clock is shared, so concurrent calls would each see the others' time
        pass as their own latency. Serialised, every latency is exact and waits are free.
        """
        while not self._halted():
            ready = [h for h in self.hosts if h.queue and h.given_up is None]
            if not ready:
                return
            host = min(ready, key=lambda h: h.limiter.ready_at())
            if await self._turn(host) and host.queue:
                await self._process(host)

    def _over_budget(self, call: ProbeCall) -> bool:
        """Skip the call when its API's daily budget is spent (noted once per API)."""
        api = call.tool.api_id
        if api not in self._exhausted:
            limit = self.api_policy[api].daily_budget
            if self.budget.take(api, limit):
                return False
            self._exhausted.add(api)
            self.state.notes.append(
                f"{api}: daily budget of {limit} calls spent; its remaining calls were skipped"
            )
        self.state.skipped[call.tool.name] += 1
        return True

    async def _process(self, host: _Host) -> None:
        """Make the next call of `host` (its turn has come), or skip it for the budget.

        The call is taken off the queue only once a concurrency slot is held and the run
        is still going, so a stop request never lets queued calls start.
        """
        async with self._sem:
            if self._halted() or not host.queue:
                return
            call = host.queue.popleft()
            if self._over_budget(call):
                return
            async with host.limiter.slots:
                if self.on_start is not None:
                    self.on_start(call.tool.name)
                start_wall, start_clock = time.time(), self.clock.now()
                result = await self._call(call)
        row = self._record(call, result, start_wall, start_clock)
        host.attempted = True
        host.limiter.note(result.code, result.error.retry_after_s if result.error else None)
        if self.on_call is not None:
            self.on_call(row, result)
        if self._everything_unreachable():
            self._halt.set()

    async def _call(self, call: ProbeCall) -> ToolResult:
        # belt and braces: the client enforces the deadline; the guard guards the guard
        token = DRAW.set(f"{self.draw_key}:{call.round}")  # this round's own outcome
        try:
            with DeadlineGuard(self.timeout, virtual=self.clock.virtual,
                               grace_s=GRACE_S + self.client.grace_s) as guard:
                return await call_tool(call.tool, call.args, self.client,
                                       timeout_s=self.timeout)
        finally:
            DRAW.reset(token)
        assert guard.expired
        return guard.timeout_result(call.tool.name)

    def _record(
        self, call: ProbeCall, result: ToolResult, start_wall: float, start_clock: float
    ) -> dict[str, Any]:
        """Commit the call's row and count it."""
        row = probe_row(
            result,
            run_id=self.run_id,
            tool=call.tool.name,
            api=call.tool.api_id,
            round_no=call.round,
            started_wall=start_wall,
            timeout_s=self.timeout,
            vantage=self.vantage,
            args=call.args,
            source=self.source,
            target=self.where,
            virtual_s=round(start_clock - self.t0, 6) if self.clock.virtual else None,
            implicit=self.implicit.check(call.tool, result, call.args),
        )
        self.store.insert_probe(row)
        self.state.count(call.tool.name, result)
        return row

    # -- finish -------------------------------------------------------------------------

    def finish(self) -> None:
        """The run's status: done, interrupted, or a local network failure (excluded)."""
        state = self.state
        left = sum(len(h.queue) for h in self.hosts)
        for host in self.hosts:
            for call in host.queue:
                state.skipped[call.tool.name] += 1
            if host.given_up:
                state.notes.append(f"{host.key}: {host.given_up}")
        if state.rows > 0 and not state.reached and state.connect_failures > 0:
            self.status = RUN_LOCAL_NETWORK_FAILURE
            self.excluded = True
            state.notes.append(
                "nothing was reachable (no call reached a server): marked as a local "
                "network failure; its rows are excluded from API statistics"
            )
        elif left and self.stop is not None and self.stop.is_set():
            self.status = RUN_INTERRUPTED
            state.notes.append(f"stopped after the calls in flight; {left} calls not made")
        self._write_finish(time.time(), "; ".join(state.notes)[:2000] or None)

    def _write_finish(self, ended_wall: float, detail: str | None) -> None:
        self.ended_wall = ended_wall
        state = self.state
        try:
            self.store.finish_run(
                self.run_id,
                {
                    "status": self.status,
                    "ended_at": iso(ended_wall),
                    "ended_ts": ended_wall,
                    "n_calls": state.rows,
                    "n_ok": state.ok,
                    "n_error": state.error,
                    "n_skipped": sum(state.skipped.values()),
                    "excluded": 1 if self.excluded else 0,
                    "detail": detail,
                },
            )
        except RealprobeError:
            if self.status not in (RUN_FAILED, RUN_INTERRUPTED):
                raise

    # -- summary ------------------------------------------------------------------------

    def summary(self) -> RunSummary:
        state = self.state
        return RunSummary(
            run_id=self.run_id,
            status=self.status,
            mode=self.mode,
            target=self.where.label,
            target_kind=self.where.kind.value,
            source=self.source,
            vantage=self.vantage,
            started_at=iso(self.started_wall),
            ended_at=iso(self.ended_wall),
            duration_s=round(self.clock.now() - self.t0, 3),
            rounds=self.rounds,
            n_calls=state.rows,
            n_ok=state.ok,
            n_error=state.error,
            n_skipped=sum(state.skipped.values()),
            excluded=self.excluded,
            tools=[state.tool_summary(t) for t in self.tools],
            notes=state.notes,
        )


def check_labels(where: Target, mode: str | None, target: str | None) -> str:
    """The run's mode label; `mode`/`target` given by a caller must agree with the client's
    target (a mismatch is an error, never a relabelled run)."""
    from realprobe.clients import Mode

    run_mode = (
        Mode.RECORD.value if where.recording else
        Mode.REPLAY.value if where.kind.value == "replay" else
        Mode.SIMULATE.value if where.kind.value == "simulate" else Mode.LIVE.value
    )
    if mode is not None:
        asked = Mode.parse(mode)
        if asked.value != run_mode:
            raise RealprobeError(
                f"mode {mode!r} does not match the client, which is set up for "
                f"{where.describe()} (mode {run_mode}); build the client for that mode"
            )
    if target is not None and not where.matches(target):
        raise RealprobeError(
            f"target {target!r} does not match the client, whose calls go to {where.label}"
        )
    return run_mode


def _four_steps(build: Callable[P, ProbeRun]) -> Callable[P, Awaitable[RunSummary]]:
    async def run(*args: P.args, **kwargs: P.kwargs) -> RunSummary:
        probe_run = build(*args, **kwargs)
        probe_run.plan()
        await probe_run.run()
        probe_run.finish()
        return probe_run.summary()

    return run


#: `await run_probes(catalog, tools, rounds, client, store, **options)`: a `ProbeRun` built
#: from these arguments, taken through its four steps (the arguments are `ProbeRun`'s)
run_probes = _four_steps(ProbeRun)
run_probes.__doc__ = ProbeRun.__init__.__doc__
