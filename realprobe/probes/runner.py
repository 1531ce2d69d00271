"""Probe rounds: call each chosen tool N times, one committed row per call.

`run_probes` is the Python API (the CLI, the scheduler and the closed-loop test use it):
different hosts are probed concurrently, each host through its own polite workers
(politeness.py), and every call's row is committed the moment the call ends.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from realprobe import __version__
from realprobe.adapters import ToolResult, call_tool
from realprobe.adapters.catalog import Catalog
from realprobe.adapters.deadline import DeadlineGuard
from realprobe.adapters.spec import Politeness
from realprobe.adapters.tool import Tool
from realprobe.errors import ErrorCode, RealprobeError
from realprobe.hosts import host_key
from realprobe.probes.politeness import (
    Budget,
    HostLimiter,
    PolitenessConfig,
    merge,
)
from realprobe.replay.client import HttpClient
from realprobe.replay.target import SOURCES, Target
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


class ToolSummary(BaseModel):
    tool: str
    api: str
    n: int = 0
    ok: int = 0
    errors: dict[str, int] = Field(default_factory=dict)
    skipped: int = 0
    median_latency_ms: float | None = None  # of successful calls


class RunSummary(BaseModel):
    run_id: str
    status: str
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
    target_kind: str = "live"  # live | sandbox | simulate | replay
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


def new_run_id(wall: float) -> str:
    stamp = dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


def plan_calls(tools: Sequence[Tool], rounds: int) -> list[ProbeCall]:
    """Round-major: round r calls every tool with its example `r mod len(examples)`."""
    return [
        ProbeCall(t, r, dict(t.examples[r % len(t.examples)])) for r in range(rounds) for t in tools
    ]


def is_connect_failure(result: ToolResult) -> bool:
    """The call never reached a server: refused, unroutable, DNS, connect timeout."""
    if result.ok or result.http_status is not None or result.error is None:
        return False
    return result.error.reached is False


def reached_server(result: ToolResult) -> bool | None:
    """True: a server answered or accepted the connection; False: failed while connecting;
    None: cannot tell (the deadline fired with nothing received and the transport did not
    say how far the call got - a hanging server, or a DNS lookup or connect that never
    finished). Read from the failure's typed `reached` field, never from its message."""
    if result.ok or result.http_status is not None:
        return True
    if result.error is not None and result.error.reached is not None:
        return result.error.reached
    if (
        result.error is not None
        and result.error.code is ErrorCode.TIMEOUT
        and result.http_status is None
        and result.bytes == 0
    ):
        return None
    return True


def resolve_tools(catalog: Catalog, tools: Sequence[Tool] | str | None) -> list[Tool]:
    """The tools to probe, each once, in the order given."""
    chosen = catalog.select(tools) if tools is None or isinstance(tools, str) else list(tools)
    return list({t.name: t for t in chosen}.values())


async def run_probes(
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
    run_id: str | None = None,
    schedule_id: str | None = None,
    source: str = "probe",
) -> RunSummary:
    """Probe `tools` (Tool list, "a,b", or None for all) `rounds` times; rows go to `store`.

    The run and its rows are labelled with `client.target` (live, sandbox, simulate or
    replay); `mode`/`target`, if given, are checked against it and a mismatch is an error.
    Daily budgets count only calls that reach the real APIs. Set `stop` to end the run after
    the calls in flight; the run is then `interrupted`. Never raises for API failures;
    raises RealprobeError for bad input or a failing database.
    """
    where = client.target
    run_mode = check_labels(where, mode, target)
    if source not in SOURCES:
        raise RealprobeError(f"source {source!r}: choose one of {', '.join(SOURCES)}")
    chosen = resolve_tools(catalog, tools)
    if rounds < 1:
        raise RealprobeError(f"rounds must be at least 1 (got {rounds})")
    if not chosen:
        raise RealprobeError("no tools chosen: pass tool names or all")
    if concurrency < 1:
        raise RealprobeError(f"concurrency must be at least 1 (got {concurrency})")
    config = politeness or PolitenessConfig()
    clock = client.clock
    timeout = timeout_s if timeout_s is not None else client.config.deadline_s
    vantage = vantage or default_vantage()
    # only calls to the real APIs spend an API's daily budget
    budgets_on = where.reaches_network and (config.budgets is None or config.budgets)
    budget = Budget(store, "live", clock, budgets_on)
    started_wall = time.time()
    t0 = clock.now()
    run_id = run_id or new_run_id(started_wall)
    rng = random.Random(seed)

    # hosts, their limiters and queues (APIs sharing a host share its limits)
    calls = plan_calls(chosen, rounds)
    by_host: dict[str, list[ProbeCall]] = {}
    api_policy: dict[str, Politeness] = {}
    for call in calls:
        api = call.tool.api
        api_policy.setdefault(api.id, config.for_api(api))
        by_host.setdefault(host_key(api), []).append(call)
    hosts: list[_Host] = []
    for key, host_calls in by_host.items():
        policy = merge(api_policy[c.tool.api_id] for c in host_calls)
        limiter = HostLimiter(key, policy, clock, config, random.Random(rng.random()))
        workers = max(1, min(policy.max_in_flight, concurrency, len(host_calls)))
        hosts.append(_Host(key, limiter, deque(host_calls), workers))

    store.start_run(
        {
            "id": run_id,
            "started_at": iso(started_wall),
            "started_ts": started_wall,
            "vantage": vantage,
            "mode": run_mode,
            "target": where.label,
            "target_kind": where.kind.value,
            "source": source,
            "tools": [t.name for t in chosen],
            "rounds": rounds,
            "status": RUN_RUNNING,
            "n_calls": 0,
            "version": __version__,
            "schedule_id": schedule_id,
        }
    )

    state = _State(
        latencies={t.name: [] for t in chosen},
        errors={t.name: Counter() for t in chosen},
    )
    halt = asyncio.Event()  # set on `stop` or when nothing is reachable
    exhausted: set[str] = set()
    sem = asyncio.Semaphore(concurrency)

    async def watch_stop() -> None:
        if stop is not None:
            await stop.wait()
            halt.set()

    def halted() -> bool:
        return halt.is_set() or (stop is not None and stop.is_set())

    def everything_unreachable() -> bool:
        return not state.reached and state.connect_failures > 0 and all(h.attempted for h in hosts)

    async def one_call(call: ProbeCall) -> ToolResult:
        # belt and braces: the client enforces the deadline; the guard guards the guard
        with DeadlineGuard(timeout, virtual=clock.virtual) as guard:
            return await call_tool(call.tool, call.args, client, timeout_s=timeout)
        assert guard.expired
        return guard.timeout_result(call.tool.name)

    def record(
        call: ProbeCall, result: ToolResult, start_wall: float, start_clock: float
    ) -> dict[str, Any]:
        err = result.error
        row = probe_row(
            result,
            run_id=run_id,
            tool=call.tool.name,
            api=call.tool.api_id,
            round_no=call.round,
            started_wall=start_wall,
            timeout_s=timeout,
            vantage=vantage,
            args=call.args,
            source=source,
            target=where,
            virtual_s=round(start_clock - t0, 6) if clock.virtual else None,
        )
        store.insert_probe(row)
        state.rows += 1
        if result.ok:
            state.ok += 1
            state.latencies[call.tool.name].append(result.latency_ms)
        else:
            state.error += 1
            assert err is not None
            state.errors[call.tool.name][err.code.value] += 1
        reached = reached_server(result)
        if reached:
            state.reached = True
        elif reached is False:
            state.connect_failures += 1
        return row

    async def process(host: _Host) -> None:
        """Make the next call of `host` (its turn has come), or skip it for the budget.

        The call is taken off the queue only once a concurrency slot is held and the run
        is still going, so a stop request never lets queued calls start.
        """
        async with sem:
            if halted() or not host.queue:
                return
            call = host.queue.popleft()
            api = call.tool.api_id
            if api in exhausted:
                state.skipped[call.tool.name] += 1
                return
            if not budget.take(api, api_policy[api].daily_budget):
                exhausted.add(api)
                state.skipped[call.tool.name] += 1
                state.notes.append(
                    f"{api}: daily budget of {api_policy[api].daily_budget} calls spent; "
                    "its remaining calls were skipped"
                )
                return
            start_wall, start_clock = time.time(), clock.now()
            result = await one_call(call)
        row = record(call, result, start_wall, start_clock)
        host.attempted = True
        host.limiter.note(result.code, result.error.retry_after_s if result.error else None)
        if on_call is not None:
            on_call(row, result)
        if everything_unreachable():
            halt.set()

    async def worker(host: _Host) -> None:
        while host.queue and not halted():
            if not await host.limiter.wait_turn(halt):
                return
            if host.queue:
                await process(host)

    async def serial() -> None:
        """Virtual clock: one call at a time, earliest-ready host first.

        The virtual clock is shared, so concurrent calls would each see the others' time
        pass as their own latency. Serialised, every latency is exact and waits are free.
        """
        while not halted():
            live = [h for h in hosts if h.queue and h.limiter.given_up is None]
            if not live:
                return
            host = min(live, key=lambda h: h.limiter.ready_at())
            if await host.limiter.wait_turn(halt) and host.queue:
                await process(host)

    status = RUN_DONE
    watcher = asyncio.ensure_future(watch_stop())
    try:
        async with asyncio.TaskGroup() as group:
            if clock.virtual:
                group.create_task(serial())
            else:
                for host in hosts:
                    for _ in range(host.workers):
                        group.create_task(worker(host))
    except BaseException as exc:
        # cancelled (a second Ctrl-C): the calls in flight were abandoned, nothing else lost
        status = RUN_INTERRUPTED if isinstance(exc, asyncio.CancelledError) else RUN_FAILED
        why = "calls in flight abandoned" if status == RUN_INTERRUPTED else f"{exc}"
        _finish(store, run_id, status, state, time.time(), f"{type(exc).__name__}: {why}")
        if isinstance(exc, BaseExceptionGroup):
            inner = exc.exceptions[0]
            if isinstance(inner, RealprobeError):
                raise inner from None
        raise
    finally:
        watcher.cancel()

    left = sum(len(h.queue) for h in hosts)
    for host in hosts:
        for call in host.queue:
            state.skipped[call.tool.name] += 1
        if host.limiter.given_up:
            state.notes.append(f"{host.key}: {host.limiter.given_up}")
    excluded = False
    if state.rows > 0 and not state.reached and state.connect_failures > 0:
        status = RUN_LOCAL_NETWORK_FAILURE
        excluded = True
        state.notes.append(
            "nothing was reachable (no call reached a server): marked as a local "
            "network failure; its rows are excluded from API statistics"
        )
    elif left and stop is not None and stop.is_set():
        status = RUN_INTERRUPTED
        state.notes.append(f"stopped after the calls in flight; {left} calls not made")
    ended_wall = time.time()
    detail = "; ".join(state.notes)[:2000] or None
    _finish(store, run_id, status, state, ended_wall, detail, excluded=excluded)

    summaries = []
    for t in chosen:
        lat = state.latencies[t.name]
        errs = state.errors[t.name]
        summaries.append(
            ToolSummary(
                tool=t.name,
                api=t.api_id,
                n=len(lat) + sum(errs.values()),
                ok=len(lat),
                errors=dict(sorted(errs.items())),
                skipped=state.skipped[t.name],
                median_latency_ms=round(statistics.median(lat), 1) if lat else None,
            )
        )
    return RunSummary(
        run_id=run_id,
        status=status,
        mode=run_mode,
        target=where.label,
        target_kind=where.kind.value,
        source=source,
        vantage=vantage,
        started_at=iso(started_wall),
        ended_at=iso(ended_wall),
        duration_s=round(clock.now() - t0, 3),
        rounds=rounds,
        n_calls=state.rows,
        n_ok=state.ok,
        n_error=state.error,
        n_skipped=sum(state.skipped.values()),
        excluded=excluded,
        tools=summaries,
        notes=state.notes,
    )


def check_labels(where: Target, mode: str | None, target: str | None) -> str:
    """The run's mode label; `mode`/`target` given by a caller must agree with the client's
    target (a mismatch is an error, never a relabelled run)."""
    from realprobe.replay.modes import Mode

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


def _finish(
    store: Store,
    run_id: str,
    status: str,
    state: _State,
    ended_wall: float,
    detail: str | None,
    *,
    excluded: bool = False,
) -> None:
    try:
        store.finish_run(
            run_id,
            {
                "status": status,
                "ended_at": iso(ended_wall),
                "ended_ts": ended_wall,
                "n_calls": state.rows,
                "n_ok": state.ok,
                "n_error": state.error,
                "n_skipped": sum(state.skipped.values()),
                "excluded": 1 if excluded else 0,
                "detail": detail,
            },
        )
    except RealprobeError:
        if status not in (RUN_FAILED, RUN_INTERRUPTED):
            raise
