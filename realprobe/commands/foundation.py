"""First verbs: catalog, call, sandbox, call-all, demo. Thin: `realprobe.api` does the work."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from realprobe.commands.common import (
    AllowedHostOpt,
    AuthTokenEnvOpt,
    CassetteOpt,
    CatalogOpt,
    ExplainOpt,
    FaultPlanOpt,
    FaultRateOpt,
    JsonOpt,
    ModeOpt,
    PolitenessChoice,
    ProfileOpt,
    RecordModeOpt,
    SandboxOpt,
    SeedOpt,
    TimeoutOpt,
    console,
    err_console,
    load_catalog,
    parse_kv,
    print_json,
    printed_json,
    server_guards,
    wrapped_prose,
)
from realprobe.commands.completion import complete_tool
from realprobe.commands.tables import short_path
from realprobe.errors import BadArgument, RealprobeError
from realprobe.http.mode import Mode

if TYPE_CHECKING:
    from realprobe.adapters.catalog import Catalog
    from realprobe.result import ToolResult


def register(app: typer.Typer) -> None:
    app.command("call")(call_cmd)
    app.command("sandbox")(sandbox_cmd)
    app.command("call-all")(call_all_cmd)
    app.command("demo")(demo_cmd)


def call_cmd(
    tool: Annotated[str, typer.Argument(help="Tool name (see `realprobe catalog`).",
                                        autocompletion=complete_tool)],
    arg: Annotated[
        list[str] | None, typer.Option("--arg", "-a", help="Argument key=value. Repeatable.")
    ] = None,
    timeout: TimeoutOpt = None,
    sandbox: SandboxOpt = None,
    profile: ProfileOpt = None,
    mode: ModeOpt = Mode.LIVE,
    cassette: CassetteOpt = None,
    record_mode: RecordModeOpt = None,
    seed: SeedOpt = 0,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Call one tool and print its result, or its error code and message.

    With no --arg, the tool's first example arguments are used.
    """
    cat = load_catalog(catalog)
    cat.get(tool)  # an unknown name fails before the arguments are parsed
    args = parse_kv(arg) if arg else None
    from realprobe.api import call, options

    opts = options(mode=mode, sandbox=sandbox, profile=profile, cassette=cassette, seed=seed,
                   record_mode=record_mode)

    result = call(tool, args, target=opts, timeout=timeout, catalog=cat)
    if as_json:
        print_json(result.model_dump(mode="json"))
    elif result.ok:
        console.print(f"[green]ok[/green] {tool} in {result.latency_ms:.0f} ms")
        print_json(result.data)
    else:
        assert result.error is not None
        err = result.error
        retry = "retryable" if err.retryable else "not retryable"
        if err.retry_after_s is not None:
            retry += f", retry after {err.retry_after_s:g}s"
        status = f" HTTP {err.http_status}" if err.http_status else ""
        console.print(f"[red]{err.code.value}[/red]{status} ({retry}) {tool}: {err.message}")
        if result.redirects:
            console.print("redirects: " + " -> ".join(result.redirects))
    if not result.ok:
        raise typer.Exit(1)


DB_WITHOUT_UPSTREAM = ("db holds the daily budget of calls to an upstream; without --upstream "
                       "the sandbox calls no API, so there is none to count")


def sandbox_cmd(
    host: Annotated[
        str, typer.Option(help="Address to listen on (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 8765,
    profile: Annotated[
        str, typer.Option(help="Fault profile: a file, or calm|published|harsh.")
    ] = "calm",
    seed: SeedOpt = 0,
    fault_plan: FaultPlanOpt = None,
    fault_rate: FaultRateOpt = None,
    latency_scale: Annotated[
        float, typer.Option(help="Multiply profile latencies (0 answers at once).")
    ] = 1.0,
    catalog: CatalogOpt = None,
    from_cassettes: Annotated[
        list[Path] | None,
        typer.Option(
            "--from-cassettes",
            help="Serve the recorded response that matches each request (cassette files or "
            "folders; repeat the option); fixtures only when nothing matches.",
        ),
    ] = None,
    upstream: Annotated[
        str | None,
        typer.Option(
            help="Proxy mode: forward /<api-id>/<path> to `live` (each API's real base URL) "
            "or to a URL ({api} in it becomes the API id), faults on top.",
        ),
    ] = None,
    politeness: Annotated[
        PolitenessChoice | None,
        typer.Option(
            "--politeness",
            help="Upstream calls: catalog (the catalogue's limits and daily budgets; the "
            "default for --upstream live) or off.",
        ),
    ] = None,
    toxic: Annotated[
        list[str] | None,
        typer.Option(
            "--toxic",
            help="A toxic from the start, [scope:]type[:k=v,...], e.g. "
            "latency:latency_ms=200,jitter_ms=50 (repeat the option).",
        ),
    ] = None,
    admin: Annotated[
        bool, typer.Option("--admin/--no-admin", help="Serve the /_admin runtime API.")
    ] = True,
    db: Annotated[
        Path | None,
        typer.Option(
            "--db",
            help="SQLite file whose daily-budget ledger upstream calls count against (default: "
            "$REALPROBE_DB or the data dir, shared with live probe runs).",
        ),
    ] = None,
    more_cassettes: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="PATH",
            help="More cassettes for --from-cassettes (`--from-cassettes a.json b.json`).",
            show_default=False,
        ),
    ] = None,
    allowed_host: AllowedHostOpt = None,
    auth_token_env: AuthTokenEnvOpt = None,
) -> None:
    """Serve every catalogue API on loopback from real fixture bodies (or recordings, or a
    proxied upstream), with injected faults and toxics; /_admin changes them at runtime."""
    import asyncio
    import signal

    from realprobe.api import make_sandbox
    from realprobe.store import open_db
    from realprobe.tasks.settings import EvalSettings

    cat = load_catalog(catalog)
    allowed, token = server_guards("sandbox", host, allowed_host, auth_token_env)
    if more_cassettes and not from_cassettes:
        raise RealprobeError(
            f"unexpected argument {str(more_cassettes[0])!r}: cassette paths follow "
            "--from-cassettes"
        )
    if db is not None and upstream is None:  # a setting this door cannot honour: refused
        raise BadArgument("db", DB_WITHOUT_UPSTREAM)
    settings = EvalSettings(profile=profile, seed=seed, fault_plan=fault_plan,
                            fault_rate=fault_rate)
    sb = make_sandbox(
        settings=settings, latency_scale=latency_scale, host=host, port=port, catalog=cat,
        from_cassettes=[*(from_cassettes or []), *(more_cassettes or [])],
        upstream=upstream, politeness=politeness, toxics=list(toxic or []), admin=admin,
        db=open_db(db) if upstream is not None else None,
        allowed_hosts=allowed,
        auth_token=token,
    )

    async def serve() -> None:
        try:
            await sb.start()
        except OSError as exc:
            raise RealprobeError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
        console.print(
            f"realprobe sandbox on [bold]{sb.url}[/bold]  profile={profile} seed={seed}  "
            f"{len(cat)} tools; e.g. {sb.url}/{next(iter(cat)).api_id}/...  (Ctrl-C stops)"
        )
        source = "fixtures"
        if sb.responder.bodies.recordings is not None:
            source = f"{sb.responder.bodies.recordings.count} recorded responses, then fixtures"
        if sb.upstream is not None:
            source = f"upstream {sb.upstream.shown}"
        console.print(f"bodies: {source}; runtime API: {sb.url}/_admin, journal: {sb.url}/_journal")
        console.print(f"try: realprobe call {next(iter(cat)).name} --sandbox {sb.url}")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal(sig: int) -> None:
            got.append(sig)
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig)
        await stop.wait()
        await sb.stop()
        console.print(f"sandbox stopped after {sb.stats.requests} requests")

    got: list[int] = []
    asyncio.run(serve())
    if signal.SIGINT in got:  # Ctrl-C: 130 like every verb; SIGTERM is a clean stop
        raise typer.Exit(130)


def demo_cmd(
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Folder for the demo's database, profile and report."),
    ] = Path("realprobe-demo"),
    profile: Annotated[str, typer.Option(help="Sandbox fault profile.")] = "published",
    rounds: Annotated[int, typer.Option(help="Probe rounds against the sandbox.")] = 5,
    seed: SeedOpt = 0,
    timeout: Annotated[float, typer.Option(help="Deadline per call in seconds.")] = 2.0,
    explain: ExplainOpt = False,
) -> None:
    """The main job, offline: sandbox, probes, statistics, profile, report and replayed tasks.

    Probes every tool through the loopback sandbox, turns the rows into statistics, a
    calibrated profile and a report, then replays the shipped real-world task cassettes with
    the reference agent and scores them. Each step prints its answer in a few lines;
    --explain prints every step's full table and every note.
    """
    from realprobe.demo import run_demo

    with wrapped_prose():
        res = run_demo(
            output, profile=profile, rounds=rounds, seed=seed, timeout=timeout,
            on_step=lambda name, value: _show_step(name, value, output, rounds, profile, seed,
                                                   explain),
        )
        console.rule()
        console.print(f"done: open {short_path(str(res.report))} in a browser; "
                      "`demo --explain` prints every table and note", highlight=False)


#: a failing code with more tools than this is counted, not named, in the demo's first step
NAMED = 3


def _by_outcome(results: list[ToolResult], names: list[str]) -> str:
    """`16/32 ok · TIMEOUT 13 · NETWORK_ERROR 1: c`: each failing code with its count, and
    its tools when they are few (--explain prints the whole table)."""
    failed: dict[str, list[str]] = {}
    for name, r in zip(names, results, strict=True):
        if not r.ok:
            failed.setdefault(r.code.value if r.code else "?", []).append(name)
    parts = [f"{sum(r.ok for r in results)}/{len(results)} ok"]
    parts += [f"{code} {len(ts)}" + (f": {', '.join(ts)}" if len(ts) <= NAMED else "")
              for code, ts in sorted(failed.items(), key=lambda kv: -len(kv[1]))]
    counted = any(len(ts) > NAMED for ts in failed.values())
    return " · ".join(parts) + (" (--explain names every tool)" if counted else "")


def _show_step(name: str, value: Any, out: Path, rounds: int, profile: str, seed: int,
               explain: bool = False) -> None:
    """Print one demo step: its answer in a few lines (`explain`: as its own command does)."""
    if name == "sandbox":
        console.print(f"sandbox on {value}: profile {profile!r}, seed {seed}")
    elif name == "call-all":
        console.rule("[bold]1/5  every tool once through the sandbox")
        if explain:
            _print_call_all(load_catalog(None), value, "sandbox")
        else:
            console.print(_by_outcome(value, [t.name for t in load_catalog(None)]),
                          highlight=False)
    elif name == "probe":
        from realprobe.commands.probes import summary_table

        console.rule(f"[bold]2/5  probe every tool {rounds}x (no politeness waits: the sandbox "
                     "is ours)")
        if explain:
            console.print(summary_table(value))
        else:
            codes = Counter[str]()
            for t in value.tools:
                codes.update(t.errors)
            mix = ", ".join(f"{c} {k}" for c, k in codes.most_common())
            console.print(f"run {value.run_id}: {value.n_calls} calls, {value.n_ok} ok, "
                          f"{value.n_error} failed ({mix or 'none'}) in {value.duration_s:.0f}s",
                          highlight=False)
    elif name == "stats":
        from realprobe.commands.analysis import print_stats

        console.rule("[bold]3/5  statistics")
        print_stats(value, explain=explain, elsewhere=f"in {out / 'report.html'}")
    elif name == "calibrate":
        console.rule("[bold]4/5  calibrated profile and report")
        console.print(f"wrote the calibrated profile {short_path(str(value))}", highlight=False)
    elif name == "report":
        console.print(f"wrote the HTML report {short_path(str(value))}", highlight=False)
    elif name == "tasks":
        from realprobe.commands.tasks import _print_runs, _print_summary

        console.rule("[bold]5/5  real-world tasks replayed from the shipped cassettes")
        if explain:
            _print_runs(value.runs, elsewhere=f"in {out / 'demo.db'}, table task_runs")
        else:
            console.print(_tasks_by_outcome(value.runs), highlight=False)
        _print_summary(value.summary, out / "demo.db")


def _tasks_by_outcome(runs: list[Any]) -> str:
    """`42 task runs: full 35 · partial 5 (a, b, ...) · failure 2 (...)`, the demo's answer
    for its tasks step: the runs that fell short by name (--explain prints the table)."""
    by: dict[str, list[str]] = {}
    for r in runs:
        by.setdefault(str(r.row["outcome"]), []).append(str(r.row["task"]))
    parts = [f"{level} {len(by[level])}" + (f" ({', '.join(sorted(by[level]))})"
                                             if level != "full" else "")
             for level in ("full", "partial", "failure", "error") if level in by]
    return f"{len(runs)} task runs: " + " · ".join(parts)


def call_all_cmd(
    sandbox: SandboxOpt = None,
    profile: ProfileOpt = None,
    mode: ModeOpt = Mode.LIVE,
    cassette: CassetteOpt = None,
    seed: SeedOpt = 0,
    timeout: Annotated[float, typer.Option(help="Deadline per call in seconds.")] = 10.0,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Call every tool once (its first example), all APIs at once, and print a table."""
    from realprobe.api import call_all, options

    cat = load_catalog(catalog)
    opts = options(mode=mode, sandbox=sandbox, profile=profile, cassette=cassette, seed=seed)
    results = call_all(target=opts, timeout=timeout, catalog=cat)
    where = opts.target.describe()
    if not printed_json(as_json, [r.model_dump(mode="json") for r in results]):
        _print_call_all(cat, results, where)
    from realprobe.probes.runner import reached_server

    if results and all(reached_server(r) is False for r in results):
        first = results[0].error
        cause = first.message if first is not None else "no answer"
        from realprobe.errors import Unavailable

        raise Unavailable(
            f"nothing was reachable: all {len(results)} calls to {where} failed while "
            f"connecting ({cause}); check the network or the --sandbox URL"
        )


def _print_call_all(cat: Catalog, results: list[ToolResult], where: str) -> None:
    from realprobe.commands.tables import Column, fit_table

    table = fit_table(
        [Column("tool", "name"), Column("api", "name", drop=3), Column("result", "name"),
         Column("ms", "num", drop=2), Column("what came back", drop=1)],
        title=f"Every tool once ({where})",
    )
    for t, r in zip(cat, results, strict=True):
        res = "[green]ok[/green]" if r.ok else f"[red]{r.code.value if r.code else '?'}[/red]"
        table.add_row(t.name, t.api_id, res, f"{r.latency_ms:.0f}", r.summary()[:70])
    console.print(table)
    console.print(f"{sum(r.ok for r in results)}/{len(results)} ok")


__all__ = ["err_console", "register"]
