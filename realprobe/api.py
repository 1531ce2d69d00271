"""The Python API behind `import realprobe`: one function per thing a user does, each the
library side of one `realprobe` command (the commands parse options, call these and print).

Every check lives here, so scripts get the same errors the command line does; messages name
parameters, not command-line flags. Heavy rooms (numpy, scipy, matplotlib, mcp) are imported
inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from realprobe.errors import RealprobeError
from realprobe.replay.mode import Mode

if TYPE_CHECKING:
    from realprobe.adapters.catalog import Catalog
    from realprobe.adapters.result import ToolResult
    from realprobe.adapters.tool import Tool
    from realprobe.hosts import HostGates
    from realprobe.probes.drift import DriftReport
    from realprobe.probes.politeness import PolitenessConfig
    from realprobe.probes.runner import RunSummary
    from realprobe.probes.scheduler import ScheduleResult
    from realprobe.probes.stats import StatsReport
    from realprobe.replay.modes import TransportOptions
    from realprobe.report.build import ReportData
    from realprobe.sandbox.server import Sandbox
    from realprobe.simulator.profile import Profile
    from realprobe.tasks.batch import TaskBatch, TaskBatchResult

Window = tuple[float | None, float | None]
TimeSpec = str | float | None

# -- targets and tools ------------------------------------------------------------------------


def options(
    *,
    mode: Mode | str = Mode.LIVE,
    sandbox: str | None = None,
    simulate: str | Path | Profile | None = None,
    cassette: str | Path | None = None,
    seed: int = 0,
) -> TransportOptions:
    """Where calls go: live (default), a `sandbox` URL, a `simulate` profile (name, file or
    Profile) on a virtual clock, or a `cassette` to record to (`mode="record"`) or replay
    from (`mode="replay"`)."""
    from realprobe.replay.modes import TransportOptions

    try:
        mode = Mode(mode)
    except ValueError:
        choices = ", ".join(m.value for m in Mode)
        raise RealprobeError(f"mode {mode!r}: choose one of {choices}") from None
    if sandbox is not None and not sandbox.startswith(("http://", "https://")):
        raise RealprobeError(f"sandbox {sandbox!r}: expected a URL like http://127.0.0.1:8765")
    if simulate is not None and sandbox is not None:
        raise RealprobeError("sandbox and simulate exclude each other: pick one")
    if mode in (Mode.RECORD, Mode.REPLAY) and cassette is None:
        raise RealprobeError(f"mode {mode.value!r} needs a cassette")
    if cassette is not None and mode not in (Mode.RECORD, Mode.REPLAY):
        raise RealprobeError("a cassette needs mode 'record' or 'replay'")
    return TransportOptions(
        mode=mode, sandbox=sandbox, profile=simulate, seed=seed, cassette=cassette
    ).normalised()


def load_catalog(extra: Sequence[str | Path] = ()) -> Catalog:
    """The built-in catalogue merged with extra TOML/YAML/JSON files."""
    from realprobe.adapters.catalog import Catalog

    return Catalog.load([Path(p) for p in extra])


def call(
    tool: str,
    args: dict[str, Any] | None = None,
    *,
    target: TransportOptions | None = None,
    timeout: float | None = None,
    catalog: Catalog | None = None,
) -> ToolResult:
    """Call one tool by name and return its result (never raises for API failures). With no
    `args`, the tool's first example arguments are used."""
    cat = catalog or load_catalog()
    t = cat.get(tool)
    if timeout is not None and timeout <= 0:
        raise RealprobeError(f"timeout must be positive (got {timeout:g})")
    return asyncio.run(_call_many(cat, [(t.name, dict(args or t.examples[0]))], target, timeout))[0]


def call_all(
    *,
    target: TransportOptions | None = None,
    timeout: float = 10.0,
    catalog: Catalog | None = None,
) -> list[ToolResult]:
    """Call every tool of the catalogue once with its first example, all APIs at once."""
    cat = catalog or load_catalog()
    if timeout <= 0:
        raise RealprobeError(f"timeout must be positive (got {timeout:g})")
    calls = [(t.name, dict(t.examples[0])) for t in cat]
    return asyncio.run(_call_many(cat, calls, target, timeout, read_timeout=True))


async def _call_many(
    cat: Catalog,
    calls: list[tuple[str, dict[str, Any]]],
    target: TransportOptions | None,
    timeout: float | None,
    read_timeout: bool = False,
) -> list[ToolResult]:
    from realprobe.adapters import call_tool
    from realprobe.replay.client import ClientConfig
    from realprobe.replay.modes import make_client

    config = None
    if timeout:
        config = ClientConfig(deadline_s=timeout)
        if read_timeout:
            config = ClientConfig(deadline_s=timeout, read_timeout_s=timeout)
    client = make_client(cat, target, config=config)
    try:
        return list(
            await asyncio.gather(
                *(call_tool(cat.get(name), a, client, timeout_s=timeout) for name, a in calls)
            )
        )
    finally:
        await client.aclose()


# -- the sandbox ------------------------------------------------------------------------------


def make_sandbox(
    profile: str | Path | Profile = "calm",
    *,
    seed: int = 0,
    latency_scale: float = 1.0,
    host: str = "127.0.0.1",
    port: int = 0,
    catalog: Catalog | None = None,
    **extra: Any,
) -> Sandbox:
    """A loopback sandbox serving every catalogue API under a fault profile (not started:
    `await sb.start()`, or use `sandbox_running`). `extra` goes to the sandbox setup:
    `cassettes` (serve recordings), `upstream` (proxy mode: "live" or a URL), `polite`,
    `toxics`, `admin`, `db` (the budget ledger for a live upstream)."""
    from realprobe.sandbox.setup import sandbox_for
    from realprobe.simulator.profile import Profile, load_profile

    if latency_scale < 0:
        raise RealprobeError(f"latency_scale must be >= 0 (got {latency_scale:g})")
    prof = profile if isinstance(profile, Profile) else load_profile(str(profile))
    return sandbox_for(
        catalog or load_catalog(),
        prof,
        seed=seed,
        latency_scale=latency_scale,
        host=host,
        port=port,
        **extra,
    )


@contextmanager
def sandbox_running(
    profile: str | Path | Profile = "calm",
    *,
    seed: int = 0,
    latency_scale: float = 1.0,
    catalog: Catalog | None = None,
) -> Iterator[str]:
    """Run a sandbox on 127.0.0.1 (a free port) in a background thread; yields its URL."""
    from realprobe.sandbox.server import running

    sb = make_sandbox(profile, seed=seed, latency_scale=latency_scale, catalog=catalog)
    with running(sb) as url:
        yield url


# -- probing ----------------------------------------------------------------------------------


def probe(
    tools: Sequence[str] | str | None = None,
    *,
    rounds: int = 1,
    target: TransportOptions | None = None,
    db: str | Path | None = None,
    timeout: float = 10.0,
    vantage: str | None = None,
    polite: bool | None = None,
    concurrency: int = 32,
    seed: int = 0,
    catalog: Catalog | None = None,
    gates: HostGates | None = None,
    on_call: Callable[[dict[str, Any], ToolResult], None] | None = None,
    stop_on_signals: bool = False,
    notify: Callable[[str], None] | None = None,
    lock_timeout: float = 30.0,
    force: bool = False,
) -> RunSummary:
    """Probe `tools` (names, "a,b", or None for every tool) `rounds` times through `target`,
    storing one row per call in `db`.

    Politeness (per-host spacing, Retry-After, daily budgets) is always on against the real
    APIs; `polite=False` is for the sandbox, the simulator and replay (None: off for replay,
    which waits for nobody, else on). `gates` shares the per-host limiters with an MCP server
    or task runs in the same process. `on_call(row, result)` sees every stored call.
    `stop_on_signals`: SIGINT/SIGTERM end the run after the calls in flight (a second one
    abandons them); `notify` gets a line to show when that happens. `force` uses a SQLite
    file that holds another program's tables.
    """
    from realprobe.probes.runner import run_probes
    from realprobe.probes.session import graceful_stop, probe_session
    from realprobe.replay.modes import TransportOptions
    from realprobe.store import default_db_path

    _check_run(rounds, concurrency, timeout)
    cat = catalog or load_catalog()
    chosen = _probe_tools(cat, tools)
    opts = (target or TransportOptions()).normalised()
    config = _politeness(opts, polite)
    path = Path(db) if db is not None else default_db_path()

    async def go() -> RunSummary:
        stop = asyncio.Event()
        async with probe_session(
            cat, opts, path, timeout, lock_timeout_s=lock_timeout, force=force
        ) as (store, client):
            with graceful_stop(stop, notify) if stop_on_signals else contextlib.nullcontext():
                return await run_probes(
                    cat, chosen, rounds, client, store, timeout_s=timeout, vantage=vantage,
                    politeness=config, concurrency=concurrency, seed=seed, gates=gates,
                    stop=stop, on_call=on_call,
                )

    try:
        return asyncio.run(go())
    except asyncio.CancelledError:
        raise RealprobeError(
            "interrupted twice: the calls in flight were abandoned; every finished call is "
            f"stored in {path}"
        ) from None


def _check_run(rounds: int, concurrency: int, timeout: float) -> None:
    """The run's numbers, checked before anything is opened, sent or written."""
    if rounds < 1:
        raise RealprobeError(f"rounds must be at least 1 (got {rounds})")
    if concurrency < 1:
        raise RealprobeError(f"concurrency must be at least 1 (got {concurrency})")
    if not timeout > 0:
        raise RealprobeError(f"timeout must be positive (got {timeout:g})")


def _probe_tools(cat: Catalog, tools: Sequence[str] | str | None) -> list[Tool]:
    """The tools to probe (None: all); an unknown name is an error with a did-you-mean."""
    names = tools if tools is None or isinstance(tools, str) else ",".join(tools)
    chosen = cat.select(names)
    if not chosen:
        raise RealprobeError(f"tools {tools!r} names no tool")
    return chosen


def _politeness(opts: TransportOptions, polite: bool | None) -> PolitenessConfig:
    from realprobe.probes.politeness import PolitenessConfig

    if polite is None:
        polite = opts.mode is not Mode.REPLAY
    if not polite and opts.target.reaches_network:
        raise RealprobeError(
            "politeness can be turned off only for a sandbox, the simulator or replay; "
            "public APIs always get the catalogue's limits"
        )
    return PolitenessConfig() if polite else PolitenessConfig.off()


def schedule(
    tools: Sequence[str] | str | None = None,
    *,
    every: str | float | None = None,
    cron: str | None = None,
    max_runs: int | None = None,
    jitter: float = 0.0,
    rounds: int = 1,
    target: TransportOptions | None = None,
    db: str | Path | None = None,
    timeout: float = 10.0,
    vantage: str | None = None,
    polite: bool | None = None,
    concurrency: int = 32,
    seed: int = 0,
    catalog: Catalog | None = None,
    gates: HostGates | None = None,
    alerts: str | Path | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    on_alert: Callable[[str], None] | None = None,
    stop_on_signals: bool = False,
    lock_timeout: float = 30.0,
    force: bool = False,
) -> ScheduleResult:
    """Probe rounds on a schedule: `every` ("30m", or seconds; the first round at once) or
    `cron` ("0 2 * * *", local time; waits for its first fire time), until `max_runs`
    rounds (None: until stopped). Round n uses seed `seed + n`. Rounds never overlap; a
    failing round is logged (`on_event`) and the schedule goes on. `alerts`: a rules file
    checked after every round (`on_alert` gets each line to show). Probe settings as in
    `probe`."""
    from realprobe.probes.scheduler import ProbeSchedule, make_trigger
    from realprobe.probes.session import on_signals, probe_session
    from realprobe.replay.modes import TransportOptions
    from realprobe.store import default_db_path

    if max_runs is not None and max_runs < 1:
        raise RealprobeError(f"max_runs must be at least 1 (got {max_runs})")
    if jitter < 0:
        raise RealprobeError(f"jitter must be >= 0 (got {jitter:g})")
    every_text = f"{every}s" if isinstance(every, int | float) else every
    trigger, interval = make_trigger(every_text, cron, jitter_s=jitter)
    _check_run(rounds, concurrency, timeout)
    cat = catalog or load_catalog()
    chosen = _probe_tools(cat, tools)
    opts = (target or TransportOptions()).normalised()
    config = _politeness(opts, polite)
    path = Path(db) if db is not None else default_db_path()
    rules = _alert_rules(alerts)

    async def go() -> ScheduleResult:
        async with probe_session(
            cat, opts, path, timeout, lock_timeout_s=lock_timeout, force=force
        ) as (store, client):
            from realprobe.probes.runner import run_probes

            async def one_round(number: int, stop: asyncio.Event) -> RunSummary:
                summary = await run_probes(
                    cat, chosen, rounds, client, store, timeout_s=timeout, vantage=vantage,
                    politeness=config, concurrency=concurrency, seed=seed + number,
                    stop=stop, schedule_id=sched.schedule_id, gates=gates,
                )
                if rules is not None:
                    await asyncio.to_thread(_check_alerts, path, rules, on_alert)
                return summary

            sched = ProbeSchedule(
                trigger, one_round, store, interval_s=interval, max_runs=max_runs,
                on_event=on_event,
            )
            if not stop_on_signals:
                return await sched.run()
            with on_signals(lambda: sched.stop("signal")):
                return await sched.run()

    return asyncio.run(go())


def _alert_rules(alerts: str | Path | None) -> Any:
    if alerts is None:
        return None
    from realprobe.monitor.alerts import load_rules

    return load_rules(Path(alerts))


def _check_alerts(db: Path, rules: Any, show: Callable[[str], None] | None) -> None:
    """Evaluate alert rules after a scheduled round; a failure here never stops the schedule."""
    from realprobe.monitor.alerts import check

    say = show or (lambda line: None)
    try:
        result = check(db, rules)
    except RealprobeError as exc:
        say(f"alert check failed: {exc}")
        return
    for event in result.events:
        say(f"alert {event.status}: {event.rule} / {event.subject}: {event.message}")
    for line in result.delivery_failures:
        say(f"webhook delivery failed: {line} (will retry)")


# -- analysis ---------------------------------------------------------------------------------


def _db(db: str | Path | None) -> Path:
    from realprobe.store import default_db_path

    path = Path(db) if db is not None else default_db_path()
    if not path.exists():
        raise RealprobeError(f"no database at {path}")
    return path


def _time(value: TimeSpec) -> float | None:
    from realprobe.probes.windows import parse_time

    if value is None or isinstance(value, int | float):
        return value
    return parse_time(value)


def window(since: TimeSpec = None, until: TimeSpec = None) -> Window:
    """(start, end) in epoch seconds from ISO times, ages like "7d", or numbers."""
    a, b = _time(since), _time(until)
    if a is not None and b is not None and a >= b:
        raise RealprobeError("since must be before until")
    return a, b


def _tool_names(tools: Sequence[str] | str | None) -> list[str] | None:
    if tools is None:
        return None
    names = [t.strip() for t in (tools.split(",") if isinstance(tools, str) else tools)]
    names = [n for n in names if n]
    if not names:
        raise RealprobeError("tools: give at least one tool name")
    return names


def check_tools(db: Path, names: list[str] | None, win: Window) -> None:
    """Unknown names get the catalogue's did-you-mean; known names with no rows a window hint."""
    from realprobe.probes.loading import tool_counts

    if not names:
        return
    present = tool_counts(db, *win)
    missing = [n for n in names if n not in present]
    if not missing:
        return
    everywhere = tool_counts(db)
    cat = load_catalog()
    for name in missing:
        if name not in everywhere and name not in {t.name for t in cat}:
            cat.get(name)  # raises with "did you mean"
    raise RealprobeError(f"no probe rows for {', '.join(missing)} in this window")


def _period(period: str | float) -> float:
    from realprobe.probes.windows import parse_duration

    return float(period) if isinstance(period, int | float) else parse_duration(period)


def stats(
    db: str | Path | None = None,
    *,
    since: TimeSpec = None,
    until: TimeSpec = None,
    tools: Sequence[str] | str | None = None,
    period: str | float = "1d",
) -> StatsReport:
    """Per tool: success per attempt with intervals, error mix, latency with a censored
    lognormal fit, the burst chain and variability flags, over the stored probes."""
    from realprobe.probes.stats import stats_from_db

    path, win, names = _db(db), window(since, until), _tool_names(tools)
    period_s = _period(period)
    check_tools(path, names, win)
    return stats_from_db(path, *win, names, period_s)[1]


def calibrate(
    db: str | Path | None = None,
    *,
    since: TimeSpec = None,
    until: TimeSpec = None,
    tools: Sequence[str] | str | None = None,
    name: str | None = None,
    from_stats: StatsReport | None = None,
) -> Profile:
    """A simulator profile from the stored probes (or from a StatsReport already computed);
    the sandbox and the simulate transport read it."""
    from realprobe.probes.calibrate import calibrate as calibrate_report

    path = _db(db)
    rep = from_stats or stats(path, since=since, until=until, tools=tools)
    return calibrate_report(rep, name=name, db=str(path))


def export_profile(profile: Profile, view: str = "profile") -> dict[str, Any]:
    """The profile as JSON data: `profile`, or the `resilibench` / `reliabilitybench` views."""
    from realprobe.probes.calibrate import VIEWS, export

    if view not in VIEWS:
        raise RealprobeError(f"view {view!r}: choose one of {', '.join(VIEWS)}")
    return export(profile, view)


def drift(
    db: str | Path | None = None,
    *,
    baseline: str | Window,
    current: str | Window,
    tools: Sequence[str] | str | None = None,
    alpha: float = 0.05,
    correction: Literal["holm", "bh"] = "holm",
    min_success_change: float = 0.05,
    min_latency_change: float = 0.2,
) -> DriftReport:
    """Which tools changed between two windows ("14d..7d" or (start, end) pairs): success,
    latency and error mix, corrected across tools."""
    from realprobe.probes.drift import drift as drift_arrays
    from realprobe.probes.loading import load_probes
    from realprobe.probes.windows import iso, parse_window

    if correction not in ("holm", "bh"):
        raise RealprobeError(f"correction {correction!r}: choose holm or bh")
    if not 0 < alpha < 1:
        raise RealprobeError("alpha must be between 0 and 1")
    path, names = _db(db), _tool_names(tools)
    bw = parse_window(baseline) if isinstance(baseline, str) else baseline
    cw = parse_window(current) if isinstance(current, str) else current
    base, cur = load_probes(path, *bw, names), load_probes(path, *cw, names)
    for label, arr, w in (("baseline", base, bw), ("current", cur, cw)):
        if len(arr) == 0:
            raise RealprobeError(
                f"{label} {iso(w[0]) or 'start'}..{iso(w[1]) or 'now'}: no probe rows in {path}"
            )
    return drift_arrays(
        base, cur, baseline_window=bw, current_window=cw, alpha=alpha, correction=correction,
        min_success_change=min_success_change, min_latency_change=min_latency_change,
    )


def build_report(
    db: str | Path | None = None,
    *,
    since: TimeSpec = None,
    until: TimeSpec = None,
    tools: Sequence[str] | str | None = None,
    period: str | float = "1d",
    baseline: str | Window | None = None,
    current: str | Window | None = None,
    stats: StatsReport | None = None,
) -> ReportData:
    """What a report shows, computed once: the stats, drift (by default each tool's earlier
    half of calls against its later half) and success over time. Pass `stats` computed
    for the same window to skip computing them again."""
    from realprobe.probes.windows import parse_window
    from realprobe.report.build import build_report as build

    if (baseline is None) != (current is None):
        raise RealprobeError("give both baseline and current, or neither")
    path, win, names = _db(db), window(since, until), _tool_names(tools)
    period_s = _period(period)
    check_tools(path, names, win)
    bw = parse_window(baseline) if isinstance(baseline, str) else baseline
    cw = parse_window(current) if isinstance(current, str) else current
    return build(path, *win, names, baseline=bw, current=cw, period_s=period_s, stats=stats)


def write_report(
    data: ReportData, output: str | Path | None = None, fmt: str = "html"
) -> str:
    """Render a report as `html` (one self-contained file), `md` or `json`; write it to
    `output` when given. Returns the text."""
    from realprobe.report import render_html, render_json, render_markdown

    renderers = {"html": render_html, "md": render_markdown, "json": render_json}
    if fmt not in renderers:
        raise RealprobeError(f"format {fmt!r}: choose html, md or json")
    text = renderers[fmt](data)
    if output is not None:
        try:
            Path(output).write_text(text + ("" if fmt == "html" else "\n"), encoding="utf-8")
        except OSError as exc:
            raise RealprobeError(f"{output}: cannot write ({exc.strerror})") from exc
    return text


# -- tasks ------------------------------------------------------------------------------------


def plan_tasks(
    tasks: Sequence[str] | None = None, *, all: bool = False, **settings: Any
) -> TaskBatch:
    """Check a batch of real-world task runs before anything runs (see `TaskBatch.plan` for
    the settings: agent, prompt, mode, sandbox, simulate, cassette, repeat, seed, ...)."""
    from realprobe.tasks.batch import TaskBatch

    return TaskBatch.plan(list(tasks or []), all_tasks=all, **settings)


def run_tasks(
    tasks: Sequence[str] | None = None,
    *,
    all: bool = False,
    db: str | Path | None = None,
    on_done: Callable[[Any], None] | None = None,
    resume: bool = False,
    executor: str = "local",
    address: str | None = None,
    gates: HostGates | None = None,
    **settings: Any,
) -> TaskBatchResult:
    """Run real-world tasks under an agent, score them, and store the runs in `db`
    (None: don't store). Returns every run and the summary (levels, pass^k, recovery).

    `resume` skips runs already stored complete in `db`. `executor="ray"` spreads the runs
    over a local Ray or the cluster at `address` (not for live targets); this process stays
    the only writer of `db`. `gates` shares the per-host politeness gates with a probe run
    or an MCP server in this process (local executor only: Ray workers cannot share them).
    """
    return plan_tasks(tasks, all=all, **settings).run(
        db=db, on_done=on_done, resume=resume, executor=executor, address=address, gates=gates
    )


def task_results(
    db: str | Path | None = None, *, agent: str | None = None, batch: str | None = None
) -> dict[str, Any]:
    """Stored task runs as the paper's Table 5, per flaw type, and pass^k / recovery."""
    from realprobe.store import Store
    from realprobe.tasks.results import summarise
    from realprobe.tasks.store import TaskStore

    path = _db(db)
    rows = TaskStore(Store(path)).runs(batch)
    if agent:
        rows = [r for r in rows if r["agent"] == agent]
    if not rows:
        raise RealprobeError(
            f"no task runs in {path}" + (" for that filter" if agent or batch else "")
        )
    return summarise(rows)


# -- MCP --------------------------------------------------------------------------------------


def serve_mcp(
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8766,
    tools: Sequence[str] | str | None = None,
    target: TransportOptions | None = None,
    real_time: bool = False,
    db: str | Path | None = None,
    timeout: float | None = None,
    vantage: str | None = None,
    polite: bool = True,
    catalog: Catalog | None = None,
    on_ready: Callable[[str, str], None] | None = None,
    allowed_hosts: Sequence[str] = (),
    auth_token: str | None = None,
    max_sessions: int = 100,
    session_idle_s: float = 600.0,
) -> None:
    """Serve the catalogue tools over the Model Context Protocol until EOF (stdio) or a
    signal. `real_time` makes a simulate target wait its latencies for real. `on_ready`
    gets where the server listens (its URL, or "stdio") and what it serves.

    HTTP only: Host/Origin must be loopback or one of `allowed_hosts` ('*' turns the check
    off); with `auth_token` every request needs `Authorization: Bearer <token>`; at most
    `max_sessions` sessions are open, each closed after `session_idle_s` without a request."""
    from dataclasses import replace

    from realprobe.mcp.serve import run_until_signal, serve_http, serve_stdio
    from realprobe.mcp.service import McpService, ServiceOptions, describe_target
    from realprobe.replay.modes import TransportOptions

    if transport not in ("stdio", "http"):
        raise RealprobeError(f"transport {transport!r}: choose stdio or http")
    if timeout is not None and timeout <= 0:
        raise RealprobeError(f"timeout {timeout:g}: must be a positive number of seconds")
    if not 0 <= port <= 65535:
        raise RealprobeError(f"port {port}: must be between 0 and 65535")
    if max_sessions < 1:
        raise RealprobeError(f"max_sessions {max_sessions}: must be at least 1")
    if not session_idle_s > 0 or session_idle_s == float("inf"):
        raise RealprobeError(f"session_idle_s {session_idle_s:g}: must be a positive number")
    opts = (target or TransportOptions()).normalised()
    if real_time:
        if opts.mode is not Mode.SIMULATE:
            raise RealprobeError("real_time applies to a simulate target only")
        opts = replace(opts, real_time=True)
    names = tools if tools is None or isinstance(tools, str) else ",".join(tools)
    service = McpService(
        catalog or load_catalog(),
        ServiceOptions(
            transport=opts, tools=names, timeout_s=timeout,
            db=str(db) if db is not None else None, vantage=vantage, polite=polite,
        ),
    )
    what = f"{len(service.tools)} tools, target {describe_target(service.transport_options)}"

    def ready(where: str) -> None:
        if on_ready is not None:
            on_ready(where, what)

    if transport == "stdio":
        run_until_signal(lambda: serve_stdio(service, on_ready=ready))
        return
    try:
        asyncio.run(
            serve_http(
                service, host, port, on_ready=ready, allowed_hosts=tuple(allowed_hosts),
                auth_token=auth_token, max_sessions=max_sessions, session_idle_s=session_idle_s,
            )
        )
    except OSError as exc:
        raise RealprobeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    except KeyboardInterrupt:
        pass


__all__ = [
    "build_report",
    "calibrate",
    "call",
    "call_all",
    "check_tools",
    "drift",
    "export_profile",
    "load_catalog",
    "make_sandbox",
    "options",
    "plan_tasks",
    "probe",
    "run_tasks",
    "sandbox_running",
    "serve_mcp",
    "stats",
    "task_results",
    "window",
    "write_report",
]
