"""`realprobe probe` and `realprobe schedule`: polite probe rounds into the SQLite store."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from realprobe.commands.common import (
    CassetteOpt,
    CatalogOpt,
    JsonOpt,
    ModeOpt,
    SandboxOpt,
    SeedOpt,
    SimulateOpt,
    console,
    err_console,
    load_catalog,
    print_json,
    transport_options,
)
from realprobe.errors import RealprobeError
from realprobe.replay.mode import Mode

if TYPE_CHECKING:
    from rich.table import Table

    from realprobe.adapters import ToolResult
    from realprobe.adapters.catalog import Catalog
    from realprobe.adapters.tool import Tool
    from realprobe.probes.politeness import PolitenessConfig
    from realprobe.probes.runner import RunSummary
    from realprobe.probes.scheduler import ProbeSchedule
    from realprobe.replay.client import HttpClient
    from realprobe.replay.modes import TransportOptions
    from realprobe.store import Store



class PolitenessChoice(StrEnum):
    CATALOG = "catalog"
    OFF = "off"


ToolsOpt = Annotated[
    str | None,
    typer.Option("--tools", help="Comma-separated tool names (see `realprobe catalog`)."),
]
AllOpt = Annotated[bool, typer.Option("--all", help="Probe every tool of the catalogue.")]
RoundsOpt = Annotated[int, typer.Option("--rounds", help="Calls per tool (examples are cycled).")]
ProbeTimeoutOpt = Annotated[
    float, typer.Option("--timeout", help="Total deadline per call, in seconds.")
]
DbOpt = Annotated[
    Path | None,
    typer.Option("--db", help="SQLite file (default: $REALPROBE_DB or ~/.local/share/realprobe)."),
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
        "--sandbox, --simulate or --mode replay).",
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


@dataclass
class ProbeSetup:
    catalog: Catalog
    tools: list[Tool]
    opts: TransportOptions
    politeness: PolitenessConfig
    mode: str
    target: str
    db: Path
    timeout: float
    vantage: str
    lock_timeout: float = 30.0
    force: bool = False

    def store(self) -> Store:
        """The database; a foreign SQLite file is refused unless --force."""
        from realprobe.store import ForeignDatabase, Store

        try:
            return Store(self.db, busy_timeout_s=self.lock_timeout, force=self.force)
        except ForeignDatabase as exc:
            raise RealprobeError(f"{exc}; pass --force to use it anyway") from None


def register(app: typer.Typer) -> None:
    app.command("probe")(probe_cmd)
    app.command("schedule")(schedule_cmd)


def setup(
    *,
    tools: str | None,
    all_tools: bool,
    rounds: int,
    timeout: float,
    db: Path | None,
    vantage: str | None,
    sandbox: str | None,
    simulate: str | None,
    mode: Mode,
    cassette: Path | None,
    seed: int,
    politeness: PolitenessChoice | None,
    concurrency: int,
    catalog: list[Path] | None,
) -> ProbeSetup:
    """Validate every option before anything is sent or written."""
    from realprobe.probes.politeness import PolitenessConfig
    from realprobe.probes.runner import default_vantage
    from realprobe.store import default_db_path

    if rounds < 1:
        raise RealprobeError(f"--rounds must be at least 1 (got {rounds})")
    if concurrency < 1:
        raise RealprobeError(f"--concurrency must be at least 1 (got {concurrency})")
    if not timeout > 0:
        raise RealprobeError(f"--timeout must be positive (got {timeout:g})")
    if tools and all_tools:
        raise RealprobeError("pass either --tools a,b or --all, not both")
    if not tools and not all_tools:
        raise RealprobeError("pick what to probe: --tools a,b or --all")
    cat = load_catalog(catalog)
    chosen = cat.select(None if all_tools else tools)
    if not chosen:
        raise RealprobeError(f"--tools {tools!r} names no tool")
    opts = transport_options(mode, sandbox, simulate, cassette, seed)
    where = opts.target
    if politeness is None:
        politeness = PolitenessChoice.OFF if opts.mode is Mode.REPLAY else PolitenessChoice.CATALOG
    if politeness is PolitenessChoice.OFF:
        if where.reaches_network:
            raise RealprobeError(
                "--politeness off is only for --sandbox, --simulate or --mode replay; "
                "public APIs always get the catalogue's limits"
            )
        config = PolitenessConfig.off()
    else:
        config = PolitenessConfig()
    return ProbeSetup(
        catalog=cat, tools=chosen, opts=opts, politeness=config, mode=opts.mode.value,
        target=where.label,
        db=db or default_db_path(), timeout=timeout, vantage=vantage or default_vantage(),
    )


def client_for(s: ProbeSetup) -> HttpClient:
    from realprobe.replay.client import ClientConfig
    from realprobe.replay.modes import make_client

    t = s.timeout
    config = ClientConfig(
        deadline_s=t, read_timeout_s=min(10.0, t), connect_timeout_s=min(5.0, t)
    )
    return make_client(s.catalog, s.opts, config=config)


@contextmanager
def stop_on_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> Iterator[None]:
    """SIGINT/SIGTERM call `stop` (end after the calls in flight) instead of killing us."""
    sigs = (signal.SIGINT, signal.SIGTERM)
    installed = []
    for sig in sigs:
        try:
            loop.add_signal_handler(sig, stop)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            pass
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


class LiveCounts:
    """A rich progress bar with live ok/error counts (on stderr, so --json stays clean)."""

    def __init__(self, total: int, label: str, enabled: bool = True) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.ok = 0
        self.err = 0
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[green]{task.fields[ok]} ok[/green] [red]{task.fields[err]} err[/red]"),
            TimeElapsedColumn(),
            console=err_console,
            disable=not enabled,
            transient=False,
        )
        self.task = self.progress.add_task(label, total=total, ok=0, err=0)

    def __call__(self, row: dict[str, Any], result: ToolResult) -> None:
        if result.ok:
            self.ok += 1
        else:
            self.err += 1
        self.progress.update(self.task, advance=1, ok=self.ok, err=self.err)

    def __enter__(self) -> LiveCounts:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def summary_table(summary: RunSummary, width: int | None = None) -> Table:
    """Per tool: n, ok, success share, errors by code, skipped, median latency of successes.

    The api column is left out on narrow terminals so tool names stay readable.
    """
    from rich.table import Table

    with_api = (width or console.width) >= 110
    table = Table(
        title=f"run {summary.run_id}: {summary.status} · {summary.target} · "
        f"vantage {summary.vantage}"
    )
    table.add_column("tool", no_wrap=True)
    if with_api:
        table.add_column("api", no_wrap=True)
    for col in ("n", "ok", "success"):
        table.add_column(col, justify="right")
    table.add_column("errors")
    for col in ("skipped", "p50 ms"):
        table.add_column(col, justify="right")
    for t in summary.tools:
        errors = "\n".join(f"{code} {n}" for code, n in t.errors.items()) or "-"
        success = f"{t.ok / t.n:.0%}" if t.n else "-"
        p50 = f"{t.median_latency_ms:.0f}" if t.median_latency_ms is not None else "-"
        cells = [t.tool, *([t.api] if with_api else []), str(t.n), str(t.ok), success, errors,
                 str(t.skipped), p50]
        table.add_row(*cells)
    return table


def _clock_label(mode: str) -> str:
    """Simulated and replayed runs keep time on a virtual clock: one call after another."""
    if mode == "simulate":
        return " of simulated time"
    if mode == "replay":
        return " of replayed call time (recorded latencies, summed)"
    return ""


def print_summary(summary: RunSummary, db: Path) -> None:
    console.print(summary_table(summary))
    console.print(
        f"{summary.n_calls} calls, {summary.n_ok} ok, {summary.n_error} errors, "
        f"{summary.n_skipped} skipped in {summary.duration_s:.1f}s"
        f"{_clock_label(summary.mode)} -> {db}"
    )
    for note in summary.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


async def _probe(
    s: ProbeSetup, rounds: int, concurrency: int, seed: int, progress: bool
) -> RunSummary:
    from realprobe.probes.runner import run_probes

    store = s.store()
    client = client_for(s)
    stop = asyncio.Event()
    main = asyncio.current_task()

    def on_signal() -> None:
        if not stop.is_set():
            err_console.print(
                "stopping after the calls in flight (their rows are kept); "
                "press Ctrl-C again to abandon them..."
            )
            stop.set()
        elif main is not None:
            main.cancel()

    try:
        with (
            stop_on_signals(asyncio.get_running_loop(), on_signal),
            LiveCounts(len(s.tools) * rounds, "probing", enabled=progress) as live,
        ):
            return await run_probes(
                s.catalog, s.tools, rounds, client, store,
                timeout_s=s.timeout, vantage=s.vantage,
                politeness=s.politeness, concurrency=concurrency, seed=seed, stop=stop,
                on_call=live,
            )
    except asyncio.CancelledError:
        raise RealprobeError(
            "interrupted twice: the calls in flight were abandoned; every finished call is "
            f"stored in {s.db}"
        ) from None
    finally:
        await client.aclose()
        store.close()


def probe_cmd(
    tools: ToolsOpt = None,
    all_tools: AllOpt = False,
    rounds: RoundsOpt = 1,
    timeout: ProbeTimeoutOpt = 10.0,
    db: DbOpt = None,
    vantage: VantageOpt = None,
    sandbox: SandboxOpt = None,
    simulate: SimulateOpt = None,
    mode: ModeOpt = Mode.LIVE,
    cassette: CassetteOpt = None,
    seed: SeedOpt = 0,
    politeness: PolitenessOpt = None,
    concurrency: ConcurrencyOpt = 32,
    lock_timeout: LockTimeoutOpt = 30.0,
    force: ForceOpt = False,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Call each chosen tool N times, politely, and store one row per call.

    Different hosts are probed concurrently; each host gets one call in flight, a minimum
    interval with jitter, Retry-After honoured and a daily budget (catalogue `politeness`).
    Ctrl-C stops after the calls in flight; every finished call is already stored.
    """
    from realprobe.store import RUN_INTERRUPTED, RUN_LOCAL_NETWORK_FAILURE

    s = setup(
        tools=tools, all_tools=all_tools, rounds=rounds, timeout=timeout, db=db,
        vantage=vantage, sandbox=sandbox, simulate=simulate, mode=mode, cassette=cassette,
        seed=seed, politeness=politeness, concurrency=concurrency, catalog=catalog,
    )
    s.lock_timeout = lock_timeout
    s.force = force
    summary = asyncio.run(_probe(s, rounds, concurrency, seed, progress=True))
    if as_json:
        print_json(summary.model_dump(mode="json"))
    else:
        print_summary(summary, s.db)
    if summary.status == RUN_LOCAL_NETWORK_FAILURE:
        where = f"the sandbox at {s.opts.sandbox}" if s.opts.sandbox else "any API"
        raise RealprobeError(
            f"nothing was reachable: no call got through to {where}; run {summary.run_id} is "
            "marked local_network_failure and excluded from statistics (check the network "
            "or the --sandbox URL)"
        )
    if summary.status == RUN_INTERRUPTED:
        raise typer.Exit(130)


def schedule_cmd(
    every: Annotated[
        str | None, typer.Option("--every", help="Interval: 30m, 1h, 90s, 1h30m, 2d.")
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
    all_tools: AllOpt = False,
    rounds: RoundsOpt = 1,
    timeout: ProbeTimeoutOpt = 10.0,
    db: DbOpt = None,
    vantage: VantageOpt = None,
    sandbox: SandboxOpt = None,
    simulate: SimulateOpt = None,
    mode: ModeOpt = Mode.LIVE,
    cassette: CassetteOpt = None,
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
) -> None:
    """Run probe rounds on a schedule (--every 30m runs its first round at once; --cron waits
    for its first fire time).

    Rounds never overlap (a fire time during a round is skipped and logged); a failing round
    is logged and the schedule goes on; SIGINT/SIGTERM stop it after the calls in flight.
    """
    from realprobe.probes.runner import run_probes
    from realprobe.probes.scheduler import ProbeSchedule, make_trigger

    if max_runs is not None and max_runs < 1:
        raise RealprobeError(f"--max-runs must be at least 1 (got {max_runs})")
    if jitter < 0:
        raise RealprobeError(f"--jitter must be >= 0 (got {jitter:g})")
    trigger, interval = make_trigger(every, cron, jitter_s=jitter)
    s = setup(
        tools=tools, all_tools=all_tools, rounds=rounds, timeout=timeout, db=db,
        vantage=vantage, sandbox=sandbox, simulate=simulate, mode=mode, cassette=cassette,
        seed=seed, politeness=politeness, concurrency=concurrency, catalog=catalog,
    )
    s.lock_timeout = lock_timeout
    s.force = force
    alert_rules = None
    if alerts is not None:
        from realprobe.monitor.alerts import load_rules

        alert_rules = load_rules(alerts)

    def show(event: dict[str, Any]) -> None:
        colour = {"round_failed": "red", "missed": "yellow", "skipped_overlap": "yellow"}.get(
            event["kind"], "cyan"
        )
        err_console.print(
            f"{event['at']} [{colour}]{event['kind']}[/{colour}] {event['detail']}"
        )

    async def main() -> Any:
        store = s.store()
        client = client_for(s)
        try:
            sched: ProbeSchedule

            async def one_round(number: int, stop: asyncio.Event) -> RunSummary:
                summary = await run_probes(
                    s.catalog, s.tools, rounds, client, store,
                    timeout_s=s.timeout, vantage=s.vantage,
                    politeness=s.politeness, concurrency=concurrency, seed=seed + number,
                    stop=stop, schedule_id=sched.schedule_id,
                )
                if alert_rules is not None:
                    await asyncio.to_thread(check_alerts_after_round, s.db, alert_rules)
                return summary

            sched = ProbeSchedule(
                trigger, one_round, store, interval_s=interval, max_runs=max_runs, on_event=show
            )
            with stop_on_signals(asyncio.get_running_loop(), lambda: sched.stop("signal")):
                return await sched.run()
        finally:
            await client.aclose()
            store.close()

    result = asyncio.run(main())
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        console.print(
            f"schedule {result.schedule_id}: {result.runs} rounds "
            f"({result.rounds_ok} ok, {result.rounds_failed} failed), stopped by "
            f"{result.stopped_by} -> {s.db}"
        )
    if result.runs and result.rounds_unreachable == result.runs:
        where = f"the sandbox at {s.opts.sandbox}" if s.opts.sandbox else "any API"
        raise RealprobeError(
            f"nothing was reachable in any of the {result.runs} rounds: no call got through "
            f"to {where}; the runs are marked local_network_failure and excluded from "
            "statistics (check the network or the --sandbox URL)"
        )
    if result.runs and result.rounds_failed == result.runs:
        raise RealprobeError(
            f"every one of the {result.runs} rounds failed; see the round_failed events above"
        )


def check_alerts_after_round(db: Path, rules: Any) -> None:
    """Evaluate alert rules after a scheduled round; a failure here never stops the schedule."""
    from realprobe.monitor.alerts import check

    try:
        result = check(db, rules)
    except RealprobeError as exc:
        err_console.print(f"[yellow]alert check failed[/yellow]: {exc}")
        return
    for event in result.events:
        err_console.print(f"alert {event.status}: {event.rule} / {event.subject}: {event.message}")
    for line in result.delivery_failures:
        err_console.print(f"[yellow]webhook delivery failed[/yellow]: {line} (will retry)")
