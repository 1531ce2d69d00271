"""`realprobe probe` and `realprobe schedule`: polite probe rounds into the SQLite store."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from realprobe.commands.common import (
    CassetteOpt,
    CatalogOpt,
    DbOpt,
    JsonOpt,
    ModeOpt,
    PolitenessChoice,
    ProfileOpt,
    RecordModeOpt,
    SandboxOpt,
    SeedOpt,
    as_flags,
    console,
    err_console,
    exit_if_ctrl_c,
    load_catalog,
    printed_json,
)
from realprobe.errors import RealprobeError
from realprobe.http.mode import Mode

if TYPE_CHECKING:
    from realprobe.adapters import Tool, ToolResult
    from realprobe.clients import TransportOptions
    from realprobe.commands.progress import Eta, Item, Lane
    from realprobe.commands.tables import FitTable
    from realprobe.probes.runner import RunSummary
    from realprobe.store import Database


ToolsOpt = Annotated[
    str | None,
    typer.Option("--tools", help="Comma-separated tool names (see `realprobe catalog`), or "
                 "all for every tool of the catalogue."),
]
AllOpt = Annotated[bool, typer.Option("--all", hidden=True)]  # the old `--tools all`
RoundsOpt = Annotated[int, typer.Option("--rounds", help="Calls per tool (examples are cycled).")]
ProbeTimeoutOpt = Annotated[
    float, typer.Option("--timeout", help="Total deadline per call, in seconds.")
]
VantageOpt = Annotated[
    str | None, typer.Option("--vantage", help="Where the probes run from (default: hostname).")
]
PolitenessOpt = Annotated[
    PolitenessChoice | None,
    typer.Option(
        "--politeness",
        help="catalog: per-API limits from the catalogue (the default, except for --mode "
        "replay, which reads a cassette and waits for nobody). off: no waits (only with "
        "--sandbox, --profile or --mode replay).",
    ),
]
ConcurrencyOpt = Annotated[
    int, typer.Option("--concurrency", help="Calls in flight at most, over all hosts.")
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force", help="Use a --db file that holds another program's tables (adds realprobe's)."
    ),
]
LockTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--lock-timeout", help="Seconds to wait for a database locked by another process."
    ),
]

McpServerOpt = Annotated[
    str | None,
    typer.Option("--mcp-server", help='Probe an MCP server\'s tools instead: its command, '
                 'e.g. "mcp-server-time" (needs --mcp-calls).'),
]
McpUrlOpt = Annotated[
    str | None, typer.Option("--mcp-url", help="... or a streamable-HTTP MCP server URL.")
]
McpCallsOpt = Annotated[
    Path | None,
    typer.Option("--mcp-calls", help="JSON or TOML: tool name -> arguments, or a list of "
                 "argument sets cycled over the rounds."),
]
McpIntervalOpt = Annotated[
    float | None,
    typer.Option("--mcp-interval", help="Seconds between calls to the MCP server "
                 "(default 0 on stdio, 1 over HTTP)."),
]


def register(app: typer.Typer) -> None:
    app.command("probe")(probe_cmd)
    app.command("schedule")(schedule_cmd)


def _chosen(tools: str | None, all_tools: bool) -> str | None:
    """--tools a,b or --tools all (--all) -> the library's `tools`."""
    if tools and all_tools:
        raise RealprobeError("pass either --tools a,b or --tools all, not both")
    if not tools and not all_tools:
        raise RealprobeError("pick what to probe: --tools a,b or --tools all")
    return None if all_tools or tools == "all" else tools


def probe_plan(
    tools: list[Tool], rounds: int, target: TransportOptions, choice: PolitenessChoice | None
) -> tuple[list[Item], dict[str, Lane], int | None]:
    """What the ETA knows of a probe: its calls in the order the run starts them (host by
    host, as the run queues them); when politeness holds (not with --politeness off, nor on
    a simulated or replayed clock), each host's lane (the interval between its starts and
    its jitter, and its calls in flight); and the calls side by side at most (one on a
    simulated or replayed clock, None: --concurrency)."""
    from realprobe.commands.progress import Item, Lane
    from realprobe.hosts import host_key

    virtual = target.mode in (Mode.SIMULATE, Mode.REPLAY)
    polite = choice is not PolitenessChoice.OFF and not virtual
    by_host: dict[str, list[Item]] = {}  # each host's tools, as `plan_calls` orders a round
    lanes: dict[str, Lane] = {}
    for tool in tools:
        key, p = host_key(tool.api), tool.api.politeness
        by_host.setdefault(key, []).append(Item(tool.name, key if polite else ""))
        if polite:
            lane = lanes.setdefault(key, Lane(gap_s=0.0, slots=p.max_in_flight))
            lane.gap_s = max(lane.gap_s, p.min_interval_s)
            lane.jitter_s = max(lane.jitter_s, p.jitter_s)
            lane.slots = min(lane.slots, p.max_in_flight)
    return ([it for items in by_host.values() for _ in range(max(rounds, 1)) for it in items],
            lanes, 1 if virtual else None)


#: a tool's calls as its fault profile says: (after a failure, after a success, at first)
Model = dict[bool | None, list[float]]


def probe_model(tools: list[Tool], rounds: int, target: TransportOptions, deadline: float,
                seed: int) -> tuple[dict[str, Model], dict[str, list[float]]]:
    """What a realprobe sandbox that shows its fault profile says each tool's calls take at
    the `deadline`: by the tool's last outcome (its burst chain); and, when it also says its
    seed, each call of a probe seeded `seed`, round by round (`probe_draw_key`), up to this
    machine's speed. Nothing for a real API or a virtual clock."""
    from realprobe.probes.runner import probe_draw_key
    from realprobe.sandbox.admin import served_draws, served_profile
    from realprobe.simulator.faults import call_seconds, numbered_call_seconds

    if not target.sandbox or target.mode in (Mode.SIMULATE, Mode.REPLAY):
        return {}, {}
    profile = served_profile(target.sandbox)
    if profile is None:
        return {}, {}
    model = {t.name: {state: call_seconds(profile.for_tool(t.name), deadline, state)
                      for state in (True, False, None)} for t in tools}
    draws = served_draws(target.sandbox)
    if draws is None:
        return model, {}
    profile, key = profile.latency_scaled(draws.latency_scale), probe_draw_key(seed)
    return model, {t.name: numbered_call_seconds(profile, draws.seed, key, t.name, rounds,
                                                 deadline, time.time()) for t in tools}


@contextmanager
def cli_errors() -> Iterator[None]:
    """Library errors whose advice needs the command line's flags."""
    from realprobe.store import ForeignDatabase

    try:
        yield
    except ForeignDatabase as exc:
        raise RealprobeError(f"{exc}; pass --force to use it anyway") from None
    except RealprobeError as exc:
        if str(exc).startswith("politeness can be turned off only"):
            raise RealprobeError(
                "--politeness off is only for --sandbox, --profile or --mode replay; "
                "public APIs always get the catalogue's limits"
            ) from None
        raise


def _nothing_reached(where: TransportOptions, what: str) -> RealprobeError:
    from realprobe.errors import Unavailable

    place = f"the sandbox at {where.sandbox}" if where.sandbox else "any API"
    return Unavailable(
        f"nothing was reachable{what}: no call got through to {place}; "
        "marked local_network_failure and excluded from statistics (check the network "
        "or the --sandbox URL)"
    )


def _all_excluded(db: Database, run_id: str) -> RealprobeError | None:
    """When every row of a run was excluded from statistics because a realprobe server
    answered instead of the API (a sandbox serving another catalogue, no fixture): the error
    saying why and what to run, else None."""
    from realprobe.errors import Unavailable
    from realprobe.probes.provenance import excluded_cause

    with contextlib.closing(db.read()) as conn:
        n, kept, detail = conn.execute(
            "SELECT count(*), sum(excluded = 0), max(detail) FROM probes WHERE run_id = ?",
            [run_id]).fetchone()
    if not n or kept:
        return None
    return Unavailable(f"all {n} calls of run {run_id} were excluded from statistics: "
                       f"{excluded_cause(detail)}")


class LiveCounts:
    """A progress bar with live ok/error counts and an ETA (on stderr, so --json stays clean).

    The ETA knows the `plan` (`probe_plan`: the calls, host lanes, and `workers`, the calls
    side by side), the `deadline` a hang runs to and, against a sandbox, what its fault
    profile says the calls take (`probe_model`: the next call of a tool by how its last one
    went), or, when it also says its seed, what each call will take (`exact`, from
    `probe_model` too: each call is then an item of its own kind, `tool#round`); the run reports
    each start (`started`)."""

    def __init__(self, plan: list[Item], label: str, enabled: bool = True,
                 lanes: dict[str, Lane] | None = None, workers: int = 1,
                 deadline: float | None = None, model: dict[str, Model] | None = None,
                 exact: dict[str, list[float]] | None = None) -> None:
        from rich.progress import TextColumn

        from realprobe.commands.progress import progress_bar

        self.ok = 0
        self.err = 0
        self.plan, self.lanes = plan, lanes or {}
        self.workers, self.deadline, self.model = workers, deadline, model or {}
        self.exact = exact or {}
        self.starts: Counter[str] = Counter()  # per tool, with `exact`: its calls started
        self.shown = 0.0  # when the counts last went to the bar (`show`)
        self.eta = self._eta()
        self.progress = progress_bar(
            TextColumn("[green]{task.fields[ok]} ok[/green] [red]{task.fields[err]} err[/red]"),
            console=err_console, disable=not enabled,
        )
        self.task = self.progress.add_task(label, total=len(plan), ok=0, err=0, eta=self.eta)

    def _eta(self) -> Eta:
        from realprobe.commands.progress import Eta, Lane

        lanes = {k: Lane(v.gap_s, v.slots, v.jitter_s) for k, v in self.lanes.items()}
        plan, prior = self.plan, {k: m[None] for k, m in self.model.items()}
        if self.exact:
            rounds: Counter[str] = Counter()
            plan = []
            for it in self.plan:
                plan.append(replace(it, kind=f"{it.kind}#{rounds[it.kind]}"))
                rounds[it.kind] += 1
            prior = {f"{t}#{r}": [s] for t, secs in self.exact.items() for r, s in enumerate(secs)}
        return Eta(plan, workers=self.workers, lanes=lanes, deadline=self.deadline,
                   starts_reported=True, prior=prior)

    def started(self, tool: str) -> None:
        if self.exact:  # a tool's calls start round by round
            self.starts[tool] += 1
            tool = f"{tool}#{self.starts[tool] - 1}"
        self.eta.start(tool)

    def __call__(self, row: dict[str, Any], result: ToolResult) -> None:
        if result.ok:
            self.ok += 1
        else:
            self.err += 1
        latency, tool = row.get("latency_ms"), str(row.get("tool"))
        kind = f"{tool}#{row.get('round')}" if self.exact else tool
        self.eta.advance(kind, None if latency is None else latency / 1000)
        if tool in self.model and not self.exact:
            self.eta.set_prior({tool: self.model[tool][not result.ok]})
        if time.monotonic() >= self.shown + 0.25:  # the bar redraws twice a second
            self.show()

    def show(self) -> None:
        self.shown = time.monotonic()
        self.progress.update(self.task, completed=self.ok + self.err, ok=self.ok, err=self.err)

    def new_round(self, exact: dict[str, list[float]] | None = None) -> None:
        """Count from zero again (the next round of a schedule; `exact`: its calls' model)."""
        self.show()
        self.ok = self.err = 0
        self.starts.clear()
        if exact is not None:
            self.exact = exact
        self.eta = self._eta()
        self.progress.reset(self.task, total=len(self.plan), ok=0, err=0, eta=self.eta)

    def __enter__(self) -> LiveCounts:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.show()
        self.progress.stop()


def summary_table(summary: RunSummary) -> FitTable:
    """Per tool: n, ok, success share, errors by code, skipped, median latency of successes."""
    from realprobe.commands.tables import Column, fit_table

    table = fit_table(
        [Column("tool", "name"), Column("api", "name", drop=3), Column("n", "num"),
         Column("ok", "num"), Column("success", "num"), Column("errors", "name", drop=1),
         Column("skipped", "num", drop=2), Column("p50 ms", "num")],
        title=f"run {summary.run_id}: {summary.status} · {summary.target} · "
        f"vantage {summary.vantage}",
    )
    for t in summary.tools:
        errors = "\n".join(f"{code} {n}" for code, n in t.errors.items()) or "-"
        success = f"{t.ok / t.n:.0%}" if t.n else "-"
        p50 = f"{t.median_latency_ms:.0f}" if t.median_latency_ms is not None else "-"
        cells = [t.tool, t.api, str(t.n), str(t.ok), success, errors, str(t.skipped), p50]
        table.add_row(*cells)
    return table


#: simulated and replayed runs keep time on a virtual clock: one call after another
CLOCK_LABELS = {"simulate": " of simulated time",
                "replay": " of replayed call time (recorded latencies, summed)"}


def print_summary(summary: RunSummary, db: Path) -> None:
    console.print(summary_table(summary))
    console.print(
        f"{summary.n_calls} calls, {summary.n_ok} ok, {summary.n_error} errors, "
        f"{summary.n_skipped} skipped in {summary.duration_s:.1f}s"
        f"{CLOCK_LABELS.get(summary.mode, '')} -> {db}"
    )
    for note in summary.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


def probe_cmd(
    tools: ToolsOpt = None,
    all_: AllOpt = False,
    rounds: RoundsOpt = 1,
    timeout: ProbeTimeoutOpt = 10.0,
    db: DbOpt = None,
    vantage: VantageOpt = None,
    sandbox: SandboxOpt = None,
    profile: ProfileOpt = None,
    mode: ModeOpt = Mode.LIVE,
    cassette: CassetteOpt = None,
    record_mode: RecordModeOpt = None,
    seed: SeedOpt = 0,
    politeness: PolitenessOpt = None,
    concurrency: ConcurrencyOpt = 32,
    lock_timeout: LockTimeoutOpt = 30.0,
    force: ForceOpt = False,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
    mcp_server: McpServerOpt = None,
    mcp_url: McpUrlOpt = None,
    mcp_calls: McpCallsOpt = None,
    mcp_interval: McpIntervalOpt = None,
) -> None:
    """Call each chosen tool N times, politely, and store one row per call.

    Different hosts are probed concurrently; each host gets one call in flight, a minimum
    interval with jitter, Retry-After honoured and a daily budget (catalogue `politeness`).
    Ctrl-C stops after the calls in flight; every finished call is already stored.
    With --mcp-server (or --mcp-url) and --mcp-calls, the tools of any MCP server are probed
    instead, one call at a time (tool = the MCP tool, api = the server's name).
    """
    from realprobe.api import options, probe
    from realprobe.commands.progress import bar_wanted
    from realprobe.store import RUN_INTERRUPTED, RUN_LOCAL_NETWORK_FAILURE, open_db

    if mcp_server is not None or mcp_url is not None or mcp_calls is not None:
        _probe_mcp(mcp_server, mcp_url, mcp_calls, mcp_interval, rounds, timeout, db, vantage,
                   as_json)
        return
    chosen = _chosen(tools, all_)
    cat = load_catalog(catalog)
    target = options(mode=mode, sandbox=sandbox, profile=profile, cassette=cassette, seed=seed,
                     record_mode=record_mode)
    handle = open_db(db)
    with cli_errors():
        picked = cat.select(chosen)
        live = None  # no bar (nor anything worked out for one) off a terminal
        if bar_wanted(as_json):
            plan, lanes, workers = probe_plan(picked, rounds, target, politeness)
            model, exact = probe_model(picked, rounds, target, timeout, seed)
            live = LiveCounts(plan, "probing", lanes=lanes, workers=workers or concurrency,
                              deadline=timeout, model=model, exact=exact)
        with live or contextlib.nullcontext():
            summary = probe(
                chosen, rounds=rounds, target=target, db=handle, timeout=timeout,
                vantage=vantage, politeness=politeness, concurrency=concurrency,
                seed=seed, catalog=cat, on_call=live,
                on_start=None if live is None else live.started, stop_on_signals=True,
                notify=err_console.print, lock_timeout=lock_timeout, force=force,
            )
    if not printed_json(as_json, summary):
        print_summary(summary, handle.path)
    if summary.status == RUN_LOCAL_NETWORK_FAILURE:
        raise _nothing_reached(target, f" in run {summary.run_id}")
    if summary.status == RUN_INTERRUPTED:
        raise typer.Exit(130)
    excluded = _all_excluded(handle, summary.run_id)
    if excluded is not None:
        raise excluded


def _probe_mcp(server: str | None, url: str | None, calls: Path | None,
               interval: float | None, rounds: int, timeout: float, db: Path | None,
               vantage: str | None, as_json: bool) -> None:
    from realprobe.api_mcp import probe_mcp
    from realprobe.commands.progress import bar_wanted
    from realprobe.store import open_db

    if calls is None:
        raise RealprobeError("--mcp-calls FILE is needed: tool name -> arguments")
    handle = open_db(db)
    with as_flags("mcp_server", "mcp_url", "mcp_calls", "mcp_interval", "rounds", "timeout"):
        live = LiveCounts([], "probing") if bar_wanted(as_json) else None
        if live is not None:
            live.progress.update(live.task, total=None)
        with live or contextlib.nullcontext():
            summary = probe_mcp(calls, mcp_server=server, mcp_url=url, rounds=rounds, db=handle,
                                timeout=timeout, vantage=vantage, mcp_interval=interval,
                                on_call=live)
    if not printed_json(as_json, summary):
        print_summary(summary, handle.path)


def _schedule_mcp(a: dict[str, Any]) -> None:
    """`schedule --mcp-server CMD --mcp-calls FILE` (`a`: the command's arguments)."""
    from realprobe.api_mcp import schedule_mcp
    from realprobe.store import open_db

    if a["mcp_calls"] is None:
        raise RealprobeError("--mcp-calls FILE is needed: tool name -> arguments")
    handle = open_db(a["db"])
    with as_flags("mcp_server", "mcp_url", "mcp_calls", "mcp_interval", "every", "cron"):
        result = schedule_mcp(
            a["mcp_calls"], mcp_server=a["mcp_server"], mcp_url=a["mcp_url"], every=a["every"],
            cron=a["cron"], max_runs=a["max_runs"], jitter=a["jitter"], rounds=a["rounds"],
            db=handle, timeout=a["timeout"], vantage=a["vantage"],
            mcp_interval=a["mcp_interval"], on_event=_show_event)
    console.print(f"schedule {result.schedule_id}: {result.runs} rounds "
                  f"({result.rounds_ok} ok, {result.rounds_failed} failed) -> {handle}")


def _show_event(event: dict[str, Any]) -> None:
    colour = {"round_failed": "red", "missed": "yellow", "skipped_overlap": "yellow"}.get(
        event["kind"], "cyan"
    )
    err_console.print(f"{event['at']} [{colour}]{event['kind']}[/{colour}] {event['detail']}")


def schedule_cmd(
    every: Annotated[
        str | None, typer.Option("--every", help="Interval: 90s, 30m, 1h30m, 2d, 1w.")
    ] = None,
    cron: Annotated[
        str | None, typer.Option("--cron", help='Crontab expression in local time: "0 2 * * *".')
    ] = None,
    max_runs: Annotated[
        int | None,
        typer.Option("--max-runs", help="Stop after N rounds (default: run until stopped)."),
    ] = None,
    jitter: Annotated[
        float,
        typer.Option("--jitter", help="Random delay up to S seconds added to each fire time."),
    ] = 0.0,
    tools: ToolsOpt = None,
    all_: AllOpt = False,
    rounds: RoundsOpt = 1,
    timeout: ProbeTimeoutOpt = 10.0,
    db: DbOpt = None,
    vantage: VantageOpt = None,
    sandbox: SandboxOpt = None,
    profile: ProfileOpt = None,
    mode: ModeOpt = Mode.LIVE,
    cassette: CassetteOpt = None,
    record_mode: RecordModeOpt = None,
    seed: SeedOpt = 0,
    politeness: PolitenessOpt = None,
    concurrency: ConcurrencyOpt = 32,
    lock_timeout: LockTimeoutOpt = 30.0,
    force: ForceOpt = False,
    catalog: CatalogOpt = None,
    alerts: Annotated[
        Path | None,
        typer.Option("--alerts", help="Alert rules file, checked after every round."),
    ] = None,
    as_json: JsonOpt = False,
    mcp_server: McpServerOpt = None,
    mcp_url: McpUrlOpt = None,
    mcp_calls: McpCallsOpt = None,
    mcp_interval: McpIntervalOpt = None,
) -> None:
    """Run probe rounds on a schedule (--every 30m runs its first round at once; --cron waits
    for its first fire time).

    Rounds never overlap (a fire time during a round is skipped and logged); a failing round
    is logged and the schedule goes on; SIGINT/SIGTERM stop it after the calls in flight.
    """
    from realprobe.api import options, schedule
    from realprobe.commands.progress import bar_wanted
    from realprobe.store import open_db

    if mcp_server is not None or mcp_url is not None or mcp_calls is not None:
        return _schedule_mcp(locals())
    chosen = _chosen(tools, all_)
    target = options(mode=mode, sandbox=sandbox, profile=profile, cassette=cassette, seed=seed,
                     record_mode=record_mode)
    handle = open_db(db)
    cat = load_catalog(catalog)
    with cli_errors():
        picked = cat.select(chosen)
        # round k is probed with the seed `seed` + k (`schedule`): its calls' own model
        ended = Counter[str]()
        live = None  # no bar (nor anything worked out for one) off a terminal
        if bar_wanted(as_json):
            plan, lanes, workers = probe_plan(picked, rounds, target, politeness)
            model, exact = probe_model(picked, rounds, target, timeout, seed + 1)
            live = LiveCounts(plan, "round", lanes=lanes, workers=workers or concurrency,
                              deadline=timeout, model=model, exact=exact)

        def event(e: dict[str, Any]) -> None:
            _show_event(e)
            if live is not None and e["kind"].startswith("round_"):
                ended["rounds"] += 1
                live.new_round(probe_model(picked, rounds, target, timeout,
                                           seed + ended["rounds"] + 1)[1] if live.exact else None)

        with live or contextlib.nullcontext():
            result = schedule(
                chosen, every=every, cron=cron, max_runs=max_runs, jitter=jitter,
                rounds=rounds, target=target, db=handle, timeout=timeout, vantage=vantage,
                politeness=politeness, concurrency=concurrency, seed=seed, catalog=cat,
                alerts=alerts, on_event=event, on_alert=err_console.print,
                stop_on_signals=True, lock_timeout=lock_timeout, force=force, on_call=live,
                on_start=None if live is None else live.started,
            )
    if not printed_json(as_json, result):
        console.print(
            f"schedule {result.schedule_id}: {result.runs} rounds "
            f"({result.rounds_ok} ok, {result.rounds_failed} failed), stopped by "
            f"{result.stopped_by} -> {handle}"
        )
    exit_if_ctrl_c(result.stopped_by == "signal")
    if result.runs and result.rounds_unreachable == result.runs:
        raise _nothing_reached(target, f" in any of the {result.runs} rounds")
    if result.runs and result.rounds_failed == result.runs:
        from realprobe.errors import Unavailable

        raise Unavailable(
            f"every one of the {result.runs} rounds failed; see the round_failed events above"
        )
