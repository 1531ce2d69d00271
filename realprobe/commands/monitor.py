"""`realprobe exporter | alert check | merge`: operating probes in production."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from realprobe.commands.common import (
    AllowedHostOpt,
    AuthTokenEnvOpt,
    CatalogOpt,
    DbOpt,
    JsonOpt,
    ProfileOpt,
    SandboxOpt,
    SeedOpt,
    as_flags,
    console,
    err_console,
    exit_if_ctrl_c,
    load_catalog,
    printed_json,
    server_guards,
)
from realprobe.commands.help import QuickHelpGroup

if TYPE_CHECKING:
    from realprobe.monitor.exporter import ExporterServer


alert_app = typer.Typer(
    help="Alert rules over the probe database.",
    no_args_is_help=True,
    cls=QuickHelpGroup,
    rich_markup_mode=None,
)


def register(app: typer.Typer) -> None:
    app.command("exporter")(exporter_cmd)
    app.add_typer(alert_app, name="alert")
    alert_app.command("check")(alert_check_cmd)
    app.command("merge")(merge_cmd)


def exporter_cmd(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port (9469 by default).")] = 9469,
    db: DbOpt = None,
    window: Annotated[
        str, typer.Option("--window", help="Window of the success-ratio gauges: 1h, 24h.")
    ] = "1h",
    sandbox: SandboxOpt = None,
    profile: ProfileOpt = None,
    seed: SeedOpt = 0,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Deadline of a /probe call, in seconds.")
    ] = 10.0,
    vantage: Annotated[
        str | None, typer.Option("--vantage", help="Vantage of /probe rows (default: hostname).")
    ] = None,
    probe: Annotated[
        bool, typer.Option("--probe/--no-probe", help="Serve /probe?tool=NAME (--no-probe: "
                           "/metrics only, no on-demand calls).")
    ] = True,
    catalog: CatalogOpt = None,
    reserve_for_schedule: Annotated[
        float,
        typer.Option("--reserve-for-schedule",
                     help="Share of each API's daily budget /probe leaves to scheduled probes."),
    ] = 0.5,
    allowed_host: AllowedHostOpt = None,
    auth_token_env: AuthTokenEnvOpt = None,
) -> None:
    """Serve Prometheus metrics from the probe database (and /probe, /status).

    /metrics: counters by outcome and code, latency histograms, success ratio with its
    interval, TLS expiry, budgets. /probe?tool=NAME: one polite call in blackbox_exporter's
    conventions (live by default; --sandbox or --profile as for `probe`). /status: the last
    24 h per tool.
    """
    from realprobe.api import options
    from realprobe.api_monitor import serve_exporter
    from realprobe.store import open_db

    allowed, token = server_guards("exporter", host, allowed_host, auth_token_env)
    target = options(sandbox=sandbox, profile=profile, seed=seed)
    handle = open_db(db)

    def ready(server: ExporterServer) -> None:
        err_console.print(
            f"realprobe exporter on {server.url} (/metrics, /status"
            + (", /probe?tool=NAME" if probe else "") + f"), database {handle}"
        )

    with as_flags("port", "timeout", "reserve_for_schedule", "window"):
        serve_exporter(
            host=host, port=port, db=handle, window=window, target=target,
            probe=probe, timeout=timeout, vantage=vantage,
            reserve_for_schedule=reserve_for_schedule, catalog=load_catalog(catalog),
            allowed_hosts=allowed, auth_token=token, on_ready=ready,
        )  # until SIGINT/SIGTERM; the /probe run is marked finished
    exit_if_ctrl_c()


def alert_check_cmd(
    rules: Annotated[Path, typer.Argument(help="Rules file (TOML, YAML or JSON).")],
    db: DbOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Evaluate and print; send and store nothing.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Evaluate alert rules; notify webhooks of alerts that started firing or resolved.

    Each alert fires once and resolves once (state in the database); exit 1 while any
    alert is firing, 0 otherwise.
    """
    from realprobe.api_monitor import check_alerts

    result = check_alerts(rules, db, dry_run=dry_run)
    if not printed_json(as_json, result):
        for f in result.findings:
            console.print(f"[red]firing[/red]  {f.rule}: {f.message}")
        for e in result.events:
            verb = "would send" if dry_run else "sent"
            console.print(f"{verb} {e.status}: {e.rule} / {e.subject}")
        for note in result.notes:
            console.print(note, highlight=False)
        if not result.findings:
            console.print("no alert firing")
    for line in result.delivery_failures:
        err_console.print(f"[yellow]webhook delivery failed[/yellow]: {line} (will retry)")
    if result.findings:
        raise typer.Exit(1)


def merge_cmd(
    sources: Annotated[list[Path], typer.Argument(help="Probe databases to merge.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Merged database.")],
    as_json: JsonOpt = False,
) -> None:
    """Merge probe databases from several vantage points into one (idempotent)."""
    from realprobe.api_monitor import merge_databases
    from realprobe.monitor.merge import MergedSource

    def progress(s: MergedSource) -> None:
        if not as_json:
            console.print(
                f"{s.path}: {s.rows_added:,} of {s.rows_seen:,} rows added, "
                f"{s.runs_added} runs ({s.runs_renamed} renamed) in {s.seconds:.1f}s"
            )
        for reason, n in sorted(s.rows_refused.items()):
            err_console.print(
                f"{s.path}: refused {n:,} rows ({reason}); kept in the probes_quarantine "
                "table of the output", highlight=False,
            )
        for reason, n in sorted(s.runs_refused.items()):
            err_console.print(f"{s.path}: refused {n:,} runs ({reason})", highlight=False)

    report = merge_databases(sources, output, on_source=progress)
    if not printed_json(as_json, report):
        console.print(f"{report.output}: {report.rows_total:,} rows")
