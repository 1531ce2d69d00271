"""The Python API behind `import realprobe`: one function per thing a user does, each the
library side of one `realprobe` command (the commands parse options, call these and print).

Every check lives here, so scripts get the same errors the command line does; messages name
parameters, not command-line flags. Heavy rooms (numpy, scipy, matplotlib, mcp) are imported
inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Unpack, cast, overload

from realprobe.api_rows import (
    Kinds,
    RowFilter,
    Rows,
    Window,
    check_tools,
    period_arg,
    rows,
    select_rows,
    window,
    window_arg,
)
from realprobe.errors import (
    BadArgument,
    RealprobeError,
    Unavailable,
    no_other_keywords,
    renamed_keyword,
)
from realprobe.http.mode import Mode
from realprobe.ranges import checked

if TYPE_CHECKING:
    from realprobe.adapters.catalog import Catalog
    from realprobe.adapters.tool import Tool
    from realprobe.clients import TransportOptions
    from realprobe.hosts import HostGates
    from realprobe.mcp.service import McpService
    from realprobe.probes.availability import ImportedStats
    from realprobe.probes.drift import Drift
    from realprobe.probes.politeness import PolitenessConfig
    from realprobe.probes.results import Stats, VantageStats
    from realprobe.probes.runner import RunSummary
    from realprobe.probes.scheduler import ScheduleResult
    from realprobe.probes.stats import StatsReport
    from realprobe.report.build import ReportData
    from realprobe.result import ToolResult
    from realprobe.sandbox.server import Sandbox
    from realprobe.simulator.profile import Profile
    from realprobe.store import Database
    from realprobe.tasks.batch import TaskBatch, TaskBatchResult
    from realprobe.tasks.settings import EvalSettings
    from realprobe.tasks.sweep import SweepResult


# -- targets and tools ------------------------------------------------------------------------


@checked
def options(
    *,
    mode: Mode | str = Mode.LIVE,
    sandbox: str | None = None,
    profile: str | Path | Profile | None = None,
    cassette: str | Path | None = None,
    seed: int = 0,
    record_mode: str | None = None,
    fault_plan: str | Path | None = None,
    fault_rate: float | None = None,
    **old: Any,
) -> TransportOptions:
    """Where calls go: live (default), a `sandbox` URL, a `profile` (name, file or Profile)
    simulated on a virtual clock, under a `fault_plan` or at a `fault_rate`, or a `cassette`
    to record to (`mode="record"`, or a vcrpy `record_mode`) or replay from
    (`mode="replay"`). `simulate=` is the old name of `profile=`."""
    from realprobe.clients import TransportOptions

    profile = renamed_keyword(old, "simulate", "profile", profile)
    no_other_keywords(old, "profile")
    return TransportOptions(
        mode=Mode.parse(mode), sandbox=sandbox, profile=profile, seed=seed, cassette=cassette,
        record_mode=record_mode, fault_plan=fault_plan, fault_rate=fault_rate,
    ).normalised()


@checked
def load_catalog(extra: Sequence[str | Path] = ()) -> Catalog:
    """The built-in catalogue merged with extra TOML/YAML/JSON files."""
    from realprobe.adapters.catalog import Catalog

    return Catalog.load([Path(p) for p in extra])


@checked
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
    import asyncio

    cat = catalog or load_catalog()
    t = cat.get(tool)
    return asyncio.run(_call_many(cat, [(t.name, dict(args or t.examples[0]))], target, timeout))[0]


@checked
def call_all(
    *,
    target: TransportOptions | None = None,
    timeout: float = 10.0,
    catalog: Catalog | None = None,
) -> list[ToolResult]:
    """Call every tool of the catalogue once with its first example, all APIs at once."""
    import asyncio

    cat = catalog or load_catalog()
    calls = [(t.name, dict(t.examples[0])) for t in cat]
    return asyncio.run(_call_many(cat, calls, target, timeout, read_timeout=True))


async def _call_many(
    cat: Catalog,
    calls: list[tuple[str, dict[str, Any]]],
    target: TransportOptions | None,
    timeout: float | None,
    read_timeout: bool = False,
) -> list[ToolResult]:
    import asyncio

    from realprobe.adapters import call_tool
    from realprobe.clients import make_client
    from realprobe.http.client import ClientConfig

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


@checked
def make_sandbox(
    profile: str | Path | Profile = "calm",
    *,
    seed: int = 0,
    latency_scale: float = 1.0,
    host: str = "127.0.0.1",
    port: int = 0,
    catalog: Catalog | None = None,
    settings: EvalSettings | None = None,
    from_cassettes: Sequence[str | Path] = (),
    politeness: str | bool | None = None,
    **extra: Any,
) -> Sandbox:
    """A loopback sandbox serving every catalogue API under a fault profile (not started:
    `await sb.start()`, or use `sandbox_running`), answering from the recordings in
    `from_cassettes` where they match. `politeness` ("catalog" or "off") holds calls to a
    proxied upstream. `extra` goes to the sandbox setup: `fault_plan`, `fault_rate`,
    `upstream` (proxy mode: "live" or a URL), `toxics`, `admin`, `db` (the budget ledger for
    a live upstream). `settings`: an evaluation's settings, of which a sandbox takes the
    profile, seed, fault plan and fault rate (and refuses the others)."""
    from realprobe.sandbox.setup import sandbox_for
    from realprobe.simulator.profile import Profile, load_profile
    from realprobe.tasks.settings import SANDBOX_SETTINGS

    if settings is not None:
        settings.refuse_unless("a sandbox", SANDBOX_SETTINGS)
        profile, seed = settings.profile or profile, settings.seed
        extra |= {"fault_plan": settings.fault_plan, "fault_rate": settings.fault_rate}
    from_cassettes = renamed_keyword(extra, "cassettes", "from_cassettes", from_cassettes)
    politeness = renamed_keyword(extra, "polite", "politeness", politeness)
    extra.pop("from_cassettes", None)
    extra.pop("politeness", None)
    prof = profile if isinstance(profile, Profile) else load_profile(str(profile))
    return sandbox_for(
        catalog or load_catalog(),
        prof,
        seed=seed,
        latency_scale=latency_scale,
        host=host,
        port=port,
        cassettes=from_cassettes,
        polite=polite_of(politeness),
        **extra,
    )


@contextmanager
@checked
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


@checked
def probe(
    tools: Sequence[str] | str | None = None,
    *,
    rounds: int = 1,
    target: TransportOptions | None = None,
    db: str | Path | Database | None = None,
    timeout: float = 10.0,
    vantage: str | None = None,
    politeness: str | bool | None = None,
    concurrency: int = 32,
    seed: int = 0,
    catalog: Catalog | None = None,
    gates: HostGates | None = None,
    on_call: Callable[[dict[str, Any], ToolResult], None] | None = None,
    on_start: Callable[[str], None] | None = None,
    stop_on_signals: bool = False,
    notify: Callable[[str], None] | None = None,
    lock_timeout: float = 30.0,
    force: bool = False,
    **old: Any,
) -> RunSummary:
    """Probe `tools` (names, "a,b", or None for every tool) `rounds` times through `target`,
    storing one row per call in `db`.

    Politeness (per-host spacing, Retry-After, daily budgets) is always on against the real
    APIs; `politeness="off"` is for the sandbox, the simulator and replay (None: off for
    replay, which waits for nobody, else "catalog"; `polite=` is its old name). `gates`
    shares the per-host limiters with an MCP server or task runs in the same process.
    `on_call(row, result)` sees every stored call; `on_start(tool)` every call as it starts.
    `stop_on_signals`: SIGINT/SIGTERM end the run after the calls in flight (a second one
    abandons them); `notify` gets a line to show when that happens. `force` uses a SQLite
    file that holds another program's tables.
    """
    import asyncio

    from realprobe.probes.runner import run_probes
    from realprobe.probes.session import graceful_stop, probe_session

    politeness = renamed_keyword(old, "polite", "politeness", politeness)
    no_other_keywords(old, "politeness")
    cat, chosen, opts, config, path = _ProbePlan.checked(
        tools, catalog, target, politeness, db
    )

    async def go() -> RunSummary:
        stop = asyncio.Event()
        async with probe_session(
            cat, opts, path, timeout, lock_timeout_s=lock_timeout, force=force,
            concurrency=concurrency,
        ) as (store, client):
            with graceful_stop(stop, notify) if stop_on_signals else contextlib.nullcontext():
                return await run_probes(
                    cat, chosen, rounds, client, store, timeout_s=timeout, vantage=vantage,
                    politeness=config, concurrency=concurrency, seed=seed, gates=gates,
                    stop=stop, on_call=on_call, on_start=on_start,
                )

    try:
        return asyncio.run(go())
    except asyncio.CancelledError:
        raise RealprobeError(
            "interrupted twice: the calls in flight were abandoned; every finished call is "
            f"stored in {path}"
        ) from None


class _ProbePlan(NamedTuple):
    """What a probe run or a schedule goes with, checked before anything is opened."""

    catalog: Catalog
    tools: list[Tool]
    target: TransportOptions
    politeness: PolitenessConfig
    db: Database

    @classmethod
    def checked(
        cls, tools: Sequence[str] | str | None, catalog: Catalog | None,
        target: TransportOptions | None,
        politeness: str | bool | None, db: str | Path | Database | None,
    ) -> _ProbePlan:
        from realprobe.clients import TransportOptions

        cat = catalog or load_catalog()
        chosen = _probe_tools(cat, tools)
        opts = (target or TransportOptions()).normalised()
        from realprobe.store import open_db

        return cls(cat, chosen, opts, _politeness(opts, politeness), open_db(db))


def _probe_tools(cat: Catalog, tools: Sequence[str] | str | None) -> list[Tool]:
    """The tools to probe (None: all); an unknown name is an error with a did-you-mean."""
    names = tools if tools is None or isinstance(tools, str) else ",".join(tools)
    chosen = cat.select(names)
    if not chosen:
        raise BadArgument("tools", f"tools {tools!r} names no tool")
    return chosen


def polite_of(politeness: str | bool | None) -> bool | None:
    """`politeness`: "catalog" (the catalogue's limits), "off", or None (the target's
    default) as True, False or None (a bool is taken as is)."""
    if politeness is None or isinstance(politeness, bool):
        return politeness
    if politeness not in ("catalog", "off"):
        raise BadArgument("politeness", f"politeness {politeness!r}: choose catalog or off")
    return politeness == "catalog"


def _politeness(opts: TransportOptions, politeness: str | bool | None) -> PolitenessConfig:
    from realprobe.probes.politeness import PolitenessConfig

    polite = polite_of(politeness)
    if polite is None:
        polite = opts.mode is not Mode.REPLAY
    if not polite and opts.target.reaches_network:
        raise RealprobeError(
            "politeness can be turned off only for a sandbox, the simulator or replay; "
            "public APIs always get the catalogue's limits"
        )
    return PolitenessConfig() if polite else PolitenessConfig.off()


@checked
def schedule(
    tools: Sequence[str] | str | None = None,
    *,
    every: str | float | None = None,
    cron: str | None = None,
    max_runs: int | None = None,
    jitter: float = 0.0,
    rounds: int = 1,
    target: TransportOptions | None = None,
    db: str | Path | Database | None = None,
    timeout: float = 10.0,
    vantage: str | None = None,
    politeness: str | bool | None = None,
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
    on_call: Callable[[dict[str, Any], ToolResult], None] | None = None,
    on_start: Callable[[str], None] | None = None,
    **old: Any,
) -> ScheduleResult:
    """Probe rounds on a schedule: `every` ("30m", or seconds; the first round at once) or
    `cron` ("0 2 * * *", local time; waits for its first fire time), until `max_runs`
    rounds (None: until stopped). Round n uses seed `seed + n`. Rounds never overlap; a
    failing round is logged (`on_event`) and the schedule goes on. `alerts`: a rules file
    checked after every round (`on_alert` gets each line to show); `on_call(row, result)`
    sees every stored call, `on_start(tool)` every call as it starts. Probe settings as in
    `probe`."""
    import asyncio

    from realprobe.probes.scheduler import ProbeSchedule, make_trigger
    from realprobe.probes.session import on_signals, probe_session

    politeness = renamed_keyword(old, "polite", "politeness", politeness)
    no_other_keywords(old, "politeness")
    every_text = f"{every}s" if isinstance(every, int | float) else every
    trigger, interval = make_trigger(every_text, cron, jitter_s=jitter)
    cat, chosen, opts, config, path = _ProbePlan.checked(
        tools, catalog, target, politeness, db
    )
    from realprobe.monitor.alerts import RoundChecks, load_rules

    rules = None if alerts is None else load_rules(Path(alerts))

    async def go() -> ScheduleResult:
        checks = None if rules is None else RoundChecks(path, rules, on_alert or _quiet)
        async with probe_session(
            cat, opts, path, timeout, lock_timeout_s=lock_timeout, force=force,
            concurrency=concurrency,
        ) as (store, client):
            from realprobe.probes.runner import run_probes

            async def one_round(number: int, stop: asyncio.Event) -> RunSummary:
                summary = await run_probes(
                    cat, chosen, rounds, client, store, timeout_s=timeout, vantage=vantage,
                    politeness=config, concurrency=concurrency, seed=seed + number,
                    stop=stop, schedule_id=sched.schedule_id, gates=gates, on_call=on_call,
                    on_start=on_start,
                )
                if checks is not None:
                    checks.after_round()  # in the background: webhooks never hold a round
                return summary

            sched = ProbeSchedule(
                trigger, one_round, store, interval_s=interval, max_runs=max_runs,
                on_event=on_event,
            )
            try:
                if not stop_on_signals:
                    return await sched.run()
                with on_signals(lambda: sched.stop("signal")):
                    return await sched.run()
            finally:
                if checks is not None:
                    await checks.drain()

    return asyncio.run(go())


def _quiet(line: str) -> None:
    """Where lines go when nobody asked to see them."""


# -- analysis ---------------------------------------------------------------------------------
#
# Every reader reads a selection of rows (`rows(...)`, see api_rows): the selection parameters
# (`since`, `until`, `tools`, `kinds`, `vantage`; `RowFilter`) are defined there once, and
# each function below takes them as keyword arguments.


@overload
def stats(
    db: str | Path | Database | None = ..., *, period: str | float = ..., by: Literal["tool"] = ...,
    **select: Unpack[RowFilter],
) -> Stats: ...
@overload
def stats(
    db: str | Path | Database | None = ..., *, period: str | float = ..., by: Literal["vantage"],
    **select: Unpack[RowFilter],
) -> VantageStats: ...
@overload
def stats(
    db: str | Path | Database | None = ..., *, period: str | float = ...,
    by: Literal["tool", "vantage"] = ..., **select: Unpack[RowFilter],
) -> Stats | VantageStats: ...
@checked
def stats(
    db: str | Path | Database | None = None,
    *,
    period: str | float = "1d",
    by: Literal["tool", "vantage"] = "tool",
    **select: Unpack[RowFilter],
) -> Stats | VantageStats | ImportedStats:
    """Per tool: success per attempt with intervals, error mix, latency with a censored
    lognormal fit, the burst chain, variability flags and (`.phases`) where the time goes,
    over the stored rows selected (`rows`: since, until, tools, kinds, vantage).

    `by="vantage"` computes the same once per vantage point instead (a `VantageStats`).
    `kinds="imported"`: imported monitor histories instead, never pooled with these rows
    (`imported_stats`; `tools` names monitors)."""
    if by not in ("tool", "vantage"):
        raise BadArgument("by", f"by {by!r}: choose tool or vantage")
    period_arg(period)
    from realprobe.api_history import asks_imported, imported_stats

    if asks_imported(select.get("kinds")):  # never pooled: statistics in time, labelled
        return imported_stats(db, since=select.get("since"), until=select.get("until"),
                              monitors=cast("str | None", select.get("tools")))
    return rows(db, **select).stats(period=period, by=by)


@checked
def calibrate(
    db: str | Path | Database | None = None,
    *,
    name: str | None = None,
    from_stats: StatsReport | None = None,
    **select: Unpack[RowFilter],
) -> Profile:
    """A simulator profile from the stored rows selected (`rows`), or from a StatsReport
    already computed; the sandbox and the simulate transport read it. Each tool's latency
    gets a mixture of one or two lognormals fitted to the rows."""
    from realprobe.api_history import asks_imported, calibrate_imported
    from realprobe.api_rows import _db
    from realprobe.probes.calibrate import calibrate as calibrate_report

    if from_stats is None and asks_imported(select.get("kinds")):
        return calibrate_imported(db, name=name, since=select.get("since"),
                                  until=select.get("until"),
                                  monitors=cast("str | None", select.get("tools")))
    if from_stats is not None:
        return calibrate_report(from_stats, name=name, db=_db(db))
    return rows(db, **select).calibrate(name=name)


def _check_view(view: str, deadline: float | None) -> None:
    from realprobe.probes.calibrate import VIEWS

    if view not in VIEWS:
        raise BadArgument(
            "view", f"view {view!r}: choose resilibench or reliabilitybench (or profile)"
        )
    if deadline is not None and not deadline > 0:
        raise BadArgument("deadline", "deadline must be a positive number of seconds")


@checked
def export_profile(
    profile: Profile | str | Path, view: str = "profile", *, deadline: float | None = None
) -> dict[str, Any]:
    """A profile (or a profile file, or calm|published|harsh) as JSON data: the `profile`
    itself, or the `resilibench` / `reliabilitybench` views, whose rates are what a caller
    with a `deadline` (seconds; default the probes' own) sees."""
    from realprobe.probes.calibrate import export
    from realprobe.simulator.profile import Profile, load_profile

    _check_view(view, deadline)
    prof = profile if isinstance(profile, Profile) else load_profile(str(profile))
    return export(prof, view, deadline)


@checked
def save_profile(
    profile: Profile, path: str | Path, *, replace: bool = True, private: bool = False
) -> Path:
    """Write a profile (from `calibrate`, or built by hand) as the JSON file `load_profile`,
    `make_sandbox` and `options(profile=...)` read back: atomically, never through a
    symbolic link, mode 0644 under the usual umask (`private`: 0600). Returns the path."""
    return profile.save(path, replace=replace, private=private)


class Calibration(NamedTuple):
    """What `calibrate_export` made: the profile, and its export as JSON data."""

    profile: Profile
    data: dict[str, Any]


@checked
def calibrate_export(
    db: str | Path | Database | None = None,
    *,
    view: str = "profile",
    deadline: float | None = None,
    source: str | Path | Profile | None = None,
    name: str | None = None,
    output: str | Path | None = None,
    **select: Unpack[RowFilter],
) -> Calibration:
    """`calibrate` then `export_profile` in one call (the `realprobe calibrate` command):
    the profile from the stored probes, or `source` (a profile, a file or a built-in name)
    converted instead, as `view`, written as JSON to `output` when given (an existing file
    replaced, a symbolic link refused). The view and deadline are checked before any work."""
    import json

    from realprobe.outputs import write_output
    from realprobe.simulator.profile import Profile, load_profile

    _check_view(view, deadline)
    if source is not None:
        prof = source if isinstance(source, Profile) else load_profile(str(source))
    else:
        prof = calibrate(db, name=name, **select)
    out = Calibration(prof, export_profile(prof, view, deadline=deadline))
    if output is not None:
        write_output(Path(output), json.dumps(out.data, indent=2) + "\n", replace=True)
    return out


@checked
def drift(
    db: str | Path | Database | None = None,
    *,
    baseline: str | Window,
    current: str | Window,
    tools: Sequence[str] | str | None = None,
    alpha: float = 0.05,
    correction: Literal["holm", "bh"] = "holm",
    min_success_change: float = 0.05,
    min_latency_change: float = 0.2,
    kinds: Kinds = None,
    vantage: str | Sequence[str] | None = None,
    target: str | None = None,
) -> Drift:
    """Which tools changed between two windows ("14d..7d" or (start, end) pairs): success,
    latency and error mix, corrected across tools, over rows of `kinds` from `vantage`(s)
    (the same kinds in both windows). The result's `provenance` says what each window held.
    `Rows.drift` does the same for any two selections."""
    from realprobe.api_rows import _check_drift, check_tools, selections

    _check_drift(alpha, correction, min_success_change, min_latency_change)
    base, cur = selections(db, [baseline, current], tools=tools, kinds=kinds, vantage=vantage,
                           target=target, params=("baseline", "current"))
    # an unknown tool name is a usage error (did you mean ...), not an empty window
    check_tools(base.db, base.tools, (None, None), base.kinds, base.vantages)
    return base.drift(cur, alpha=alpha, correction=correction,
                      min_success_change=min_success_change,
                      min_latency_change=min_latency_change)


@checked
def build_report(
    db: str | Path | Database | None = None,
    *,
    period: str | float = "1d",
    baseline: str | Window | None = None,
    current: str | Window | None = None,
    stats: StatsReport | None = None,
    **select: Unpack[RowFilter],
) -> ReportData:
    """What a report shows, computed once: the stats, drift (by default each tool's earlier
    half of calls against its later half) and success over time, over the rows selected
    (`rows`). Pass `stats` computed for the same selection to skip computing them again."""
    if (baseline is None) != (current is None):
        raise BadArgument(("baseline", "current"), "give both baseline and current, or neither")
    period_arg(period)
    for param, w in (("baseline", baseline), ("current", current)):
        if w is not None:
            window_arg(param, w)
    return rows(db, **select).report(period=period, baseline=baseline, current=current,
                                     stats=stats)


REPORT_FORMATS = ("html", "md", "json")


def _check_format(format: str, old: dict[str, Any]) -> str:
    """The report format (`fmt=` is its old name), checked."""
    format = renamed_keyword(old, "fmt", "format", format)
    old.pop("format", None)
    if format not in REPORT_FORMATS:
        raise BadArgument("format", f"format {format!r}: choose html, md or json")
    return format


@checked
def write_report(
    data: ReportData, output: str | Path | None = None, format: str = "html", **old: Any
) -> str:
    """Render a report as `html` (one self-contained file), `md` or `json`, with declared and
    environment secrets scrubbed; write it to `output` when given (an existing file is
    replaced, a symbolic link refused). Returns the text."""
    from realprobe.outputs import write_output
    from realprobe.report import render_html, render_json, render_markdown
    from realprobe.secrets import default_redactor

    format = _check_format(format, old)
    no_other_keywords(old)
    renderers = {"html": render_html, "md": render_markdown, "json": render_json}
    text = default_redactor().text(renderers[format](data))
    if output is not None:
        write_output(Path(output), text + ("" if format == "html" else "\n"), replace=True)
    return text


class Report(NamedTuple):
    """What `make_report` made: the data, and the rendered text (also written to `output`)."""

    data: ReportData
    text: str


@checked
def make_report(
    db: str | Path | Database | None = None,
    *,
    output: str | Path | None = None,
    format: str = "html",
    period: str | float = "1d",
    baseline: str | Window | None = None,
    current: str | Window | None = None,
    **select: Unpack[RowFilter],
) -> Report:
    """`build_report` then `write_report` in one call (the `realprobe report` command)."""
    format = _check_format(format, cast("dict[str, Any]", select))
    data = build_report(db, period=period, baseline=baseline, current=current, **select)
    return Report(data, write_report(data, output, format))


# -- tasks ------------------------------------------------------------------------------------


def plan_tasks(
    tasks: Sequence[str] | None = None, *, all: bool = False, **settings: Any
) -> TaskBatch:
    """Check a batch of real-world task runs before anything runs (see `TaskBatch.plan` for
    the settings: agent, repeat, ..., and `settings` or its fields: prompt, mode, sandbox,
    profile, cassette, seed, fault_plan, fault_rate, flaw_seed, paraphrase)."""
    from realprobe.tasks.batch import TaskBatch

    return TaskBatch.plan(list(tasks or []), all=all, **settings)


@checked
def run_tasks(
    tasks: Sequence[str] | None = None,
    *,
    all: bool = False,
    db: str | Path | Database | None = None,
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
    over a local Ray or the cluster at `address` (live runs there share one politeness state
    across the workers); this process stays the only writer of `db`. `gates` shares the
    per-host politeness gates with a probe run or an MCP server in this process (local
    executor only: Ray workers cannot share them).
    """
    return plan_tasks(tasks, all=all, **settings).run(
        db=db, on_done=on_done, resume=resume, executor=executor, address=address, gates=gates
    )


@checked
def sweep(
    file: str | Path,
    *,
    db: str | Path | Database | None = None,
    resume: bool = False,
    concurrency: int = 4,
    executor: str = "local",
    address: str | None = None,
    catalog: Sequence[str | Path] = (),
    on_planned: Callable[[int, int], None] | None = None,
    on_done: Callable[[Any], None] | None = None,
    fault_plans: Sequence[str] | None = None,
    fault_rates: Sequence[float] | None = None,
    on_plan: Callable[[list[Any]], None] | None = None,
    **old: Any,
) -> SweepResult:
    """Run a sweep file (models x agents x targets x tasks x prompts x repeats) into one
    database (default: the default database), then compare every run it holds. `resume`
    skips runs already stored complete; `on_planned(total, skipped)`, `on_plan(jobs)` (the
    runs left, in the order they start: `job.task`, `job.key`) and `on_done(run)` report
    progress. `fault_plans` / `fault_rates` (the file's `lambda`; `lambdas=` is the
    old name) replace the file's: each simulate target runs under each plan at each rate."""
    from realprobe.tasks.sweep import run_sweep_file

    fault_rates = renamed_keyword(old, "lambdas", "fault_rates", fault_rates)
    no_other_keywords(old, "fault_rates")
    return run_sweep_file(
        Path(file), db, catalog_paths=[Path(c) for c in catalog],
        resume=resume, executor=executor, concurrency=concurrency, address=address,
        on_planned=on_planned, on_done=on_done, on_plan=on_plan,
        fault_plans=list(fault_plans or []), lambdas=list(fault_rates or []),
    )


@checked
def task_results(
    db: str | Path | Database | None = None,
    *,
    agent: str | None = None,
    batch: str | None = None,
    model: str | None = None,
    prompt: str | None = None,
    profile: str | None = None,
    target: str | None = None,
    target_kind: str | None = None,
    fault_plan: str | None = None,
    prices: str | Path | None = None,
    surface: bool = False,
) -> dict[str, Any]:
    """Stored task runs as the paper's Table 5, per flaw type, and pass^k / recovery: one row
    per (agent, model, prompt, target, fault plan, paraphrase level), never pooled. The
    filters keep runs whose column equals the value; `prices` is a TOML/JSON file over the
    shipped price table; `surface` adds pass^k over k x epsilon x lambda with its volume."""
    from realprobe.store import open_db
    from realprobe.target import TargetKind
    from realprobe.tasks import results
    from realprobe.tasks.store import TaskStore

    if target_kind is not None:  # a closed set: a misspelt kind is an error, not "no runs"
        try:
            target_kind = TargetKind.parse(target_kind, "target_kind").value
        except RealprobeError as exc:
            raise BadArgument("target_kind", str(exc)) from None
    path = open_db(db, read=True)
    price_table = results.load_prices(prices)
    store = TaskStore(path.write())
    errors = store.call_errors()
    rows = [{**r, "api_errors": errors.get(r["id"], {})} for r in store.runs(batch)]
    filters = {"agent": agent, "model": model, "prompt": prompt, "profile": profile,
               "target": target, "target_kind": target_kind, "fault_plan": fault_plan}
    rows = results.select(rows, **filters)
    if not rows:
        given = any(v is not None for v in filters.values()) or batch
        if given:  # a filter that matches nothing is a bad value, not an empty database
            raise RealprobeError(f"no task runs in {path} for that filter")
        raise Unavailable(f"no task runs in {path}")
    out = results.summarise(rows, price_table)
    if surface:
        out["surface"] = results.surface(rows)
    return out


# -- MCP --------------------------------------------------------------------------------------


@checked
def mcp_service(
    *,
    tools: Sequence[str] | str | None = None,
    target: TransportOptions | None = None,
    real_time: bool = False,
    db: str | Path | Database | None = None,
    timeout: float | None = None,
    vantage: str | None = None,
    politeness: str | bool = "catalog",
    catalog: Catalog | None = None,
    task: str | None = None,
    model: str = "-",
    settings: EvalSettings | None = None,
    **fields: Any,
) -> McpService:
    """The MCP service `serve_mcp` serves (keywords as there), for use in process:
    `async with service, mcp.Client(service.server) as client: ...`."""
    from dataclasses import replace

    from realprobe.clients import TransportOptions
    from realprobe.mcp.service import McpService, ServiceOptions
    from realprobe.tasks.settings import TOOL_SETTINGS, EvalSettings

    renamed_keyword(fields, "task_prompt", "prompt")
    model = renamed_keyword(fields, "task_model", "model", model)
    politeness = renamed_keyword(fields, "polite", "politeness", politeness)
    fields.pop("model", None)
    fields.pop("politeness", None)
    settings = EvalSettings.given(settings, target, **fields)
    if task is None:
        settings.refuse_unless("serving tools without a task", TOOL_SETTINGS)
    opts = replace(target or TransportOptions(), **{k: getattr(settings, k) for k in TOOL_SETTINGS})
    opts = opts.normalised()
    if real_time:
        if opts.mode is not Mode.SIMULATE:
            raise BadArgument("real_time", "real_time applies to a simulate target only")
        opts = replace(opts, real_time=True)
    names = tools if tools is None or isinstance(tools, str) else ",".join(tools)
    return McpService(
        catalog or load_catalog(),
        ServiceOptions(
            transport=opts, tools=names, timeout_s=timeout,
            db=db, vantage=vantage,
            polite=bool(polite_of(politeness)), task=task,
            settings=EvalSettings.given(settings, outside=True), model=model,
        ),
    )


@checked
def serve_mcp(
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8766,
    on_ready: Callable[[str, str], None] | None = None,
    allowed_hosts: Sequence[str] = (),
    auth_token: str | None = None,
    max_sessions: int = 100,
    session_idle_timeout: float = 600.0,
    **service: Any,
) -> None:
    """Serve the catalogue tools (`service`: the keywords of `mcp_service`) over the Model
    Context Protocol until EOF (stdio) or a signal. `real_time` makes a simulate target wait
    its latencies for real. `on_ready` gets where the server listens (its URL, or "stdio")
    and what it serves.

    `task`: the connected agent's calls are one task run, scored when it calls `finish` or
    the session ends, and stored in `db` (default: the default database) like a built-in
    agent's run, labelled `agent = mcp, model = model`. Its `settings` (or the target and
    `prompt`, `flaw_seed`, `paraphrase` as keywords) are those of `evaluate`; without a
    task, only the target's settings apply and the others are refused.

    HTTP only: Host/Origin must be loopback or one of `allowed_hosts` ('*' turns the check
    off); with `auth_token` every request needs `Authorization: Bearer <token>`; at most
    `max_sessions` sessions are open, each closed after `session_idle_timeout` seconds
    without a request."""
    import asyncio

    from realprobe.mcp.serve import run_until_signal, serve_http, serve_stdio

    session_idle_timeout = renamed_keyword(
        service, "session_idle_s", "session_idle_timeout", session_idle_timeout
    )
    service.pop("session_idle_timeout", None)
    if transport not in ("stdio", "http"):
        raise BadArgument("transport", f"transport {transport!r}: choose stdio or http")
    server = mcp_service(**service)
    what = f"{len(server.tools)} tools, target {server.transport_options.target.describe()}"
    if server.options.task is not None:
        what += f", calls scored as runs of task {server.options.task}"

    def ready(where: str) -> None:
        if on_ready is not None:
            on_ready(where, what)

    if transport == "stdio":
        run_until_signal(lambda: serve_stdio(server, on_ready=ready))
        return
    try:
        asyncio.run(
            serve_http(
                server, host, port, on_ready=ready, allowed_hosts=tuple(allowed_hosts),
                auth_token=auth_token, max_sessions=max_sessions,
                session_idle_s=session_idle_timeout,
            )
        )
    except OSError as exc:
        raise RealprobeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    except KeyboardInterrupt:
        pass


__all__ = [
    "Rows",
    "build_report",
    "calibrate",
    "calibrate_export",
    "call",
    "call_all",
    "check_tools",
    "drift",
    "export_profile",
    "load_catalog",
    "make_report",
    "make_sandbox",
    "options",
    "plan_tasks",
    "probe",
    "rows",
    "run_tasks",
    "sandbox_running",
    "save_profile",
    "select_rows",
    "serve_mcp",
    "stats",
    "task_results",
    "window",
    "write_report",
]
