"""`realprobe history import SOURCE`: what an uptime monitor already recorded, into the
imported kind; and the printing of `stats --kinds imported` (statistics in time)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from realprobe.commands.common import DbOpt, JsonOpt, console, err_console, printed_json
from realprobe.commands.tables import pct

if TYPE_CHECKING:
    from realprobe.history import HistoryImport
    from realprobe.probes.availability import ImportedStats, MonitorAvailability

history_app = typer.Typer(
    help="Import what uptime monitors already recorded (Upptime, Uptime Kuma, Gatus, "
         "blackbox via Prometheus, Statuspage incidents).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(history_app, name="history")


@history_app.command("import")
def import_cmd(
    history_source: Annotated[str, typer.Argument(
        metavar="SOURCE", help="upptime:PATH (a status repository's clone), kuma:FILE, gatus:FILE, "
             "prometheus:FILE|URL (loopback only) or statuspage:FILE|URL.")],
    db: DbOpt = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Read and summarise, write nothing.")] = False,
    since: Annotated[str | None, typer.Option(
        "--since", help="Only records from here: ISO date/datetime (UTC) or an age: 90d.")
    ] = None,
    until: Annotated[str | None, typer.Option(
        "--until", help="Only records before this (same forms as --since).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Import a monitor's history: recorded checks as rows of the imported kind, checks
    implied between records and unwatched time as intervals. It never pools with realprobe's
    own probes (see it with `realprobe stats --kinds imported`); importing again adds
    nothing."""
    from realprobe import api_history

    # (not named `source`: that name is a profile file's everywhere else on the command line)
    rep = api_history.import_history(history_source, db, dry_run=dry_run, since=since,
                                     until=until)
    if not printed_json(as_json, rep):
        print_import(rep)


@history_app.command("calibrate")
def calibrate_cmd(
    db: DbOpt = None,
    since: Annotated[str | None, typer.Option(
        "--since", help="Start: ISO date/datetime (UTC) or an age: 90d.")] = None,
    until: Annotated[str | None, typer.Option(
        "--until", help="End (exclusive), same forms as --since.")] = None,
    monitors: Annotated[str | None, typer.Option(
        "--monitors", help="Comma-separated monitor names (default: every imported one).")
    ] = None,
    spacing: Annotated[str | None, typer.Option(
        "--spacing", help="Seconds between the simulated calls: 1m, 10m, 90s (default: the "
                          "cadence each monitor really had).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Profile name.")] = None,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Write the profile here instead of stdout (replaces an "
                               "existing file; refuses a link).")] = None,
) -> None:
    """A simulator profile from imported histories, at a stated call spacing: success per
    call is the availability, and failure runs last as long as the outages did (the same as
    `realprobe calibrate --kinds imported`, with the spacing yours to choose)."""
    import sys

    from realprobe import api_history

    profile = api_history.calibrate_imported(db, since=since, until=until, monitors=monitors,
                                             spacing=spacing, name=name, output=output)
    for tool, src in profile.source["imported"].items():
        err_console.print(f"{tool}: {src['monitor']} at a call spacing of "
                          f"{_dur(src['spacing_s'])} ({src['spacing_how']})",
                          markup=False, highlight=False)
    if output is None:
        sys.stdout.write(profile.model_dump_json(indent=2, exclude_none=True) + "\n")
    else:
        err_console.print(f"wrote a profile of {len(profile.tools)} imported monitors to "
                          f"{output}", markup=False, highlight=False)


def _dur(seconds: float | None) -> str:
    from realprobe.history.records import duration_words

    return "-" if seconds is None else duration_words(seconds)


def print_import(rep: HistoryImport) -> None:
    from realprobe.commands.tables import Column, fit_table

    console.print(rep.headline(), markup=False, highlight=False)
    table = fit_table([
        Column("monitor", "name", key=True), Column("checks", "num"),
        Column("implied", "num", drop=2), Column("censored", "num", drop=1),
        Column("first", "name", drop=3), Column("last", "name", drop=3),
        Column("cadence", "num", drop=2), Column("notes", "text", drop=4),
    ], title=f"Imported from {rep.source}")
    for m in rep.monitors:
        table.add_row(m.monitor, f"{m.checks:,}" if not m.incidents else f"{m.incidents} inc.",
                      f"{m.implied_checks:,}", _dur(m.censored_s) if m.censored_s else "-",
                      (m.first or "-")[:16], (m.last or "-")[:16], _dur(m.cadence_s),
                      "; ".join(m.notes) or "-")
    console.print(table)
    if rep.skipped:
        err_console.print("skipped: " + ", ".join(f"{n} {k}" for k, n in rep.skipped.items()),
                          markup=False, highlight=False)


def _ci(ci: tuple[float, float] | None) -> str:
    return "-" if ci is None else f"[{100 * ci[0]:.2f}, {100 * ci[1]:.2f}]"


def _published(m: MonitorAvailability) -> str:
    if not m.published:
        return "-"
    value = m.published.get("uptime")
    return f"{value} ({m.monitor_kind})" if value else "-"


def _day_lines(rep: ImportedStats, most: int = 3) -> list[str]:
    """Per monitor with downtime: its worst UTC days, and beside them the minutes the monitor
    published for those days (Upptime's dailyMinutesDown), labelled as theirs."""
    lines = []
    for m in rep.monitors:
        days = m.downtime_by_day_min
        if not days:
            continue
        theirs = (m.published or {}).get("dailyMinutesDown") or {}
        worst = sorted(days.items(), key=lambda kv: -kv[1])[:most]
        shown = ", ".join(
            f"{d} {v:.0f}m" + (f" (theirs {theirs[d]}m)" if d in theirs else "")
            for d, v in worst)
        lines.append(f"{m.monitor}: down on {len(days)} UTC day{'s' * (len(days) != 1)}; "
                     f"worst {shown}")
    return lines


def print_imported_stats(rep: ImportedStats) -> None:
    """The table of `stats --kinds imported`: availability in time per monitor, outages,
    error mix, cadence, and the monitor's own published figure beside ours."""
    from realprobe.commands.tables import Column, fit_table

    err_console.print(f"[bold reverse yellow] {rep.label} [/bold reverse yellow]")
    table = fit_table([
        Column("monitor", "name", key=True), Column("availability", "num"),
        Column("95% interval", "num", drop=1), Column("outages", "num"),
        Column("mean", "num", drop=2), Column("median", "num", drop=3),
        Column("longest", "num", drop=2), Column("observed", "num", drop=3),
        Column("censored", "num", drop=3), Column("cadence", "num", drop=4),
        Column("errors while down", "list", drop=5),
        Column("published (theirs)", "name", drop=1),
    ], title="Imported histories: availability in time (share of observed time up)",
        caption=f"interval: {rep.interval_method}. Published figures are the monitor's own "
                "(Upptime's come from GitHub issues closed by hand): a cross-check, not truth.")
    for m in rep.monitors:
        if m.monitor_kind == "statuspage":
            table.add_row(m.monitor, "-", "-", f"{len(m.incidents)} declared", "-", "-", "-",
                          "-", "-", "-", "-", "-")
            continue
        o = m.outages
        count = f"{o.count}" + (f" ({o.censored} censored)" if o.censored else "")
        table.add_row(m.monitor, pct(m.availability, 2), _ci(m.availability_ci95), count,
                      _dur(o.mean_s), _dur(o.median_s), _dur(o.longest_s), _dur(m.observed_s),
                      _dur(m.censored_s) if m.censored_s else "-", _dur(m.cadence_s),
                      ", ".join(f"{c} {100 * s:.0f}%" for c, s in m.errors.items()) or "-",
                      _published(m))
    console.print(table)
    for line in _day_lines(rep):
        console.print(line, markup=False, highlight=False)
    measured = [m for m in rep.monitors if m.latency_ms is not None]
    for m in measured:
        lat = m.latency_ms
        assert lat is not None
        console.print(f"{m.monitor}: latency p50 {lat.p50:.0f} ms, p90 {lat.p90:.0f} ms, "
                      f"p99 {lat.p99:.0f} ms over {lat.n:,} checks ({m.latency_note})",
                      markup=False, highlight=False)
    kinds = sorted({m.monitor_kind for m in rep.monitors if m.latency_ms is None
                    and m.monitor_kind == "upptime"})
    if kinds:
        console.print("latency: not fitted for Upptime (one response time a day, not per "
                      "check)", markup=False, highlight=False)
    hows: dict[str, list[str]] = {}
    for m in rep.monitors:
        if m.cadence_how:
            hows.setdefault(f"cadence {_dur(m.cadence_s)}: {m.cadence_how}", []).append(m.monitor)
    for how, names in hows.items():
        who = ", ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else "")
        console.print(f"{who}: {how}", markup=False, highlight=False)
