"""First verbs: catalog, call, sandbox, demo."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from realprobe.adapters import ToolResult, call_tool
from realprobe.adapters.catalog import Catalog
from realprobe.commands.common import (
    CassetteOpt,
    CatalogOpt,
    JsonOpt,
    ModeOpt,
    SandboxOpt,
    SeedOpt,
    SimulateOpt,
    TimeoutOpt,
    console,
    err_console,
    load_catalog,
    parse_kv,
    print_json,
    print_json_large,
    transport_options,
)
from realprobe.errors import RealprobeError
from realprobe.replay.client import ClientConfig
from realprobe.replay.modes import Mode, TransportOptions, make_client
from realprobe.replay.simulate import routes_from_catalog
from realprobe.sandbox.server import Sandbox, running
from realprobe.simulator.profile import load_profile


def register(app: typer.Typer) -> None:
    from realprobe.commands import catalog as catalog_commands

    catalog_commands.register(app, catalog_cmd)
    app.command("call")(call_cmd)
    app.command("sandbox")(sandbox_cmd)
    app.command("call-all")(call_all_cmd)
    app.command("demo")(demo_cmd)


def catalog_cmd(
    catalog: CatalogOpt = None,
    fmt: Annotated[
        str, typer.Option("--format", help="full (default), mcp or openai tool definitions.")
    ] = "full",
    as_json: JsonOpt = False,
) -> None:
    """List the tool definitions: names, titles, APIs, and their JSON Schemas with --json."""
    cat = load_catalog(catalog)
    if fmt not in ("full", "mcp", "openai"):
        raise RealprobeError(f"--format {fmt!r}: choose full, mcp or openai")
    if as_json:
        if fmt == "mcp":
            print_json_large({"tools": [t.mcp_definition() for t in cat]})
        elif fmt == "openai":
            print_json_large([t.openai_definition() for t in cat])
        else:
            print_json_large([t.catalog_entry() for t in cat])
        return
    table = Table(title=f"{len(cat)} tools over {len(cat.apis)} APIs")
    for col in ("tool", "title", "api", "category", "https", "args"):
        table.add_column(col)
    for t in cat:
        table.add_row(
            t.name,
            t.spec.title,
            t.api_id,
            t.api.category,
            "yes" if t.api.https else "no",
            ", ".join(t.spec.input) or "-",
        )
    console.print(table)


async def _call_once(
    cat: Catalog,
    opts: TransportOptions,
    tool_name: str,
    args: dict[str, object],
    timeout: float | None,
) -> ToolResult:
    tool = cat.get(tool_name)
    config = ClientConfig(deadline_s=timeout) if timeout else None
    client = make_client(cat, opts, config=config)
    try:
        return await call_tool(tool, args, client, timeout_s=timeout)
    finally:
        await client.aclose()


def call_cmd(
    tool: Annotated[str, typer.Argument(help="Tool name (see `realprobe catalog`).")],
    arg: Annotated[
        list[str] | None, typer.Option("--arg", "-a", help="Argument key=value. Repeatable.")
    ] = None,
    timeout: TimeoutOpt = None,
    sandbox: SandboxOpt = None,
    simulate: SimulateOpt = None,
    mode: ModeOpt = Mode.LIVE,
    cassette: CassetteOpt = None,
    seed: SeedOpt = 0,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Call one tool and print its result, or its error code and message.

    With no --arg, the tool's first example arguments are used.
    """
    cat = load_catalog(catalog)
    t = cat.get(tool)
    args = parse_kv(arg) if arg else dict(t.examples[0])
    opts = transport_options(mode, sandbox, simulate, cassette, seed)
    result = asyncio.run(_call_once(cat, opts, tool, args, timeout))
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


def _sandbox(
    cat: Catalog, profile: str, seed: int, latency_scale: float, host: str, port: int
) -> Sandbox:
    return Sandbox(
        routes_from_catalog(cat),
        load_profile(profile),
        seed=seed,
        latency_scale=latency_scale,
        host=host,
        port=port,
    )


def sandbox_cmd(
    host: Annotated[
        str, typer.Option(help="Address to listen on (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 8765,
    profile: Annotated[
        str, typer.Option(help="Fault profile: a file, or calm|published|harsh.")
    ] = "calm",
    seed: SeedOpt = 0,
    latency_scale: Annotated[
        float, typer.Option(help="Multiply profile latencies (0 answers at once).")
    ] = 1.0,
    catalog: CatalogOpt = None,
) -> None:
    """Serve every catalogue API on loopback from real fixture bodies, with injected faults."""
    cat = load_catalog(catalog)
    sb = _sandbox(cat, profile, seed, latency_scale, host, port)

    async def serve() -> None:
        try:
            await sb.start()
        except OSError as exc:
            raise RealprobeError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
        console.print(
            f"realprobe sandbox on [bold]{sb.url}[/bold]  profile={profile} seed={seed}  "
            f"{len(cat)} tools; e.g. {sb.url}/{next(iter(cat)).api_id}/...  (Ctrl-C stops)"
        )
        console.print(f"try: realprobe call {next(iter(cat)).name} --sandbox {sb.url}")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await sb.stop()
        console.print(f"sandbox stopped after {sb.stats.requests} requests")

    asyncio.run(serve())


def demo_cmd(
    out: Annotated[
        Path, typer.Option("--out", help="Folder for the demo's database, profile and report.")
    ] = Path("realprobe-demo"),
    profile: Annotated[str, typer.Option(help="Sandbox fault profile.")] = "published",
    rounds: Annotated[int, typer.Option(help="Probe rounds against the sandbox.")] = 5,
    seed: SeedOpt = 0,
    timeout: Annotated[float, typer.Option(help="Deadline per call in seconds.")] = 2.0,
) -> None:
    """The main job, offline: probe every tool through the loopback sandbox, turn the rows into
    statistics, a calibrated profile and a report, then replay the shipped real-world task
    cassettes with the reference agent and score them."""
    from realprobe.cli import app  # the demo drives the same verbs a user types

    if rounds < 1:
        raise RealprobeError("--rounds must be at least 1")
    out.mkdir(exist_ok=True)  # its folder must exist: nothing made silently
    db = out / "demo.db"
    for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        stale.unlink(missing_ok=True)
    cat = load_catalog(None)
    sb = _sandbox(cat, profile, seed, 1.0, "127.0.0.1", 0)

    def step(title: str, *args: str) -> None:
        console.rule(f"[bold]{title}")
        console.print(f"[dim]$ realprobe {' '.join(args)}[/dim]")
        command = typer.main.get_command(app)
        code = command.main(args=list(args), prog_name="realprobe", standalone_mode=False)
        if code not in (None, 0):
            raise RealprobeError(f"demo step failed: realprobe {' '.join(args)} (exit {code})")

    with running(sb) as url:
        console.print(
            f"sandbox on {url}: {len(cat)} tools over {len(cat.apis)} APIs, "
            f"profile {profile!r}, seed {seed}"
        )
        step("1/5  every tool once through the sandbox", "call-all", "--sandbox", url,
             "--timeout", str(timeout))
        step(f"2/5  probe every tool {rounds}x (politely per emulated API)", "probe", "--all",
             "--rounds", str(rounds), "--sandbox", url, "--timeout", str(timeout),
             "--politeness", "off", "--db", str(db), "--seed", str(seed))
    step("3/5  statistics", "stats", "--db", str(db))
    step("4/5  calibrated profile and report", "calibrate", "--db", str(db),
         "-o", str(out / "profile.json"))
    step("", "report", "--db", str(db), "-o", str(out / "report.html"))
    step("5/5  real-world tasks replayed from the shipped cassettes", "run", "--all",
         "--agent", "reference", "--mode", "replay", "--db", str(db))
    console.rule()
    console.print(
        f"done: database {db}, profile {out / 'profile.json'}, report {out / 'report.html'} "
        "(open it in a browser)"
    )


def call_all_cmd(
    sandbox: SandboxOpt = None,
    simulate: SimulateOpt = None,
    mode: ModeOpt = Mode.LIVE,
    cassette: CassetteOpt = None,
    seed: SeedOpt = 0,
    timeout: Annotated[float, typer.Option(help="Deadline per call in seconds.")] = 10.0,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Call every tool once (its first example), all APIs at once, and print a table."""
    cat = load_catalog(catalog)
    opts = transport_options(mode, sandbox, simulate, cassette, seed)
    results = asyncio.run(_call_all(cat, opts, timeout))
    where = opts.target.describe()
    if as_json:
        print_json([r.model_dump(mode="json") for r in results])
    else:
        _call_all_table(cat, results, where)
    from realprobe.probes.runner import is_connect_failure

    if results and all(is_connect_failure(r) for r in results):
        first = results[0].error
        cause = first.message if first is not None else "no answer"
        raise RealprobeError(
            f"nothing was reachable: all {len(results)} calls to {where} failed while "
            f"connecting ({cause}); check the network or the --sandbox URL"
        )


def _call_all_table(cat: Catalog, results: list[ToolResult], where: str) -> None:
    table = Table(title=f"Every tool once ({where})")
    for col in ("tool", "api", "result", "ms", "what came back"):
        table.add_column(col, overflow="fold")
    for t, r in zip(cat, results, strict=True):
        res = "[green]ok[/green]" if r.ok else f"[red]{r.code.value if r.code else '?'}[/red]"
        table.add_row(t.name, t.api_id, res, f"{r.latency_ms:.0f}", r.summary()[:70])
    console.print(table)
    console.print(f"{sum(r.ok for r in results)}/{len(results)} ok")


async def _call_all(cat: Catalog, opts: TransportOptions, timeout: float) -> list[ToolResult]:
    client = make_client(cat, opts, config=ClientConfig(deadline_s=timeout, read_timeout_s=timeout))
    try:
        return list(
            await asyncio.gather(
                *(call_tool(t, dict(t.examples[0]), client, timeout_s=timeout) for t in cat)
            )
        )
    finally:
        await client.aclose()


__all__ = ["err_console", "register"]
