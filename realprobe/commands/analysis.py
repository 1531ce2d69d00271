"""`realprobe stats | calibrate | drift | report`: read the probes table, never write it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from realprobe.commands.common import (
    JsonOpt,
    as_flags,
    console,
    default_db_path,
    doc,
    err_console,
    print_json,
)
from realprobe.errors import RealprobeError

if TYPE_CHECKING:
    from realprobe.probes.drift import DriftReport
    from realprobe.probes.stats import StatsReport

# numpy/scipy are imported inside the commands, so `realprobe --help` stays fast

DbOpt = Annotated[
    Path | None, typer.Option("--db", help="SQLite file (default: $REALPROBE_DB or the data dir).")
]
SinceOpt = Annotated[
    str | None,
    typer.Option("--since", help="Start: ISO date/datetime (UTC) or an age: 7d, 24h, 30m."),
]
UntilOpt = Annotated[
    str | None, typer.Option("--until", help="End (exclusive), same forms as --since.")
]
PeriodOpt = Annotated[
    str,
    typer.Option("--period", help="Period for the variability flags: 1d (default), 6h, 1h, 1w."),
]
ToolsOpt = Annotated[
    str | None, typer.Option("--tools", help="Comma-separated tool names (default: all with rows).")
]


def register(app: typer.Typer) -> None:
    app.command("stats")(stats_cmd)
    app.command("calibrate")(calibrate_cmd)
    app.command("drift")(drift_cmd)
    app.command("report")(report_cmd)


def _stats(
    db: Path | None, since: str | None, until: str | None, tools: str | None, period: str = "1d"
) -> tuple[Path, StatsReport]:
    from realprobe.api import stats

    path = db if db is not None else default_db_path()
    with as_flags("since", "until", "tools", "period"):
        return path, stats(path, since=since, until=until, tools=tools, period=period)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _num(v: float | None) -> str:
    """A share in percent without the sign (the column header or a neighbour carries it)."""
    return "-" if v is None else f"{100 * v:.1f}"


def stats_cmd(
    since: SinceOpt = None,
    until: UntilOpt = None,
    tools: ToolsOpt = None,
    db: DbOpt = None,
    period: PeriodOpt = "1d",
    as_json: JsonOpt = False,
) -> None:
    """Per tool: success rate with a 95% interval, error mix, latency fit, bursts, variability.

    Success is per attempt; latency percentiles come with a censored lognormal fit; the burst
    chain and variability flags come last."""
    _, rep = _stats(db, since, until, tools, period)
    if as_json:
        print_json(rep.model_dump(mode="json"))
        return
    print_stats(rep)


def print_stats(rep: StatsReport) -> None:
    from rich.table import Table

    wide = console.width >= 120  # narrower terminals drop the fit columns (see --json)
    table = Table(
        title=f"{rep.rows} attempts, {len(rep.tools)} tools "
        f"({rep.window[0] or 'start'} → {rep.window[1] or 'now'})"
    )
    table.add_column("tool", no_wrap=True)
    cols = ["n", "success [95% CI]", "P(f|f)/P(f|ok)", "p50/p90/p99 ms"]
    cols += ["μ, σ", "KS p"] if wide else []
    for col in cols:
        table.add_column(col, justify="right", overflow="fold")
    table.add_column("top error / flags")
    for t in rep.tools:
        lat, fit = t.latency, t.latency.lognormal
        ci = t.success.burst_adjusted95
        flags = [f for f, on in (("var. success", t.variability.variable_success),
                                 ("var. latency", t.variability.variable_latency)) if on]
        top = max(t.errors.share_of_failures.items(), key=lambda kv: kv[1], default=None)
        cells = [
            t.tool,
            str(t.success.n),
            f"{_pct(t.success.rate)} [{_num(ci[0])}, {_num(ci[1])}]",
            f"{_num(t.burst.p_fail_after_fail.p)}/{_pct(t.burst.p_fail_after_ok.p)}",
            "/".join("-" if v is None else f"{v:.0f}" for v in (lat.p50, lat.p90, lat.p99)),
        ]
        if wide:
            cells.append("-" if fit is None else f"{fit.mu:.2f}, {fit.sigma:.2f}")
            cells.append("-" if lat.ks_pvalue is None else f"{lat.ks_pvalue:.2f}")
        cells.append(", ".join(([f"{top[0]} {100 * top[1]:.0f}%"] if top else []) + flags) or "-")
        table.add_row(*cells)
    console.print(table)
    console.print(
        "[dim]success = per attempt (each stored call is one trial; prober outages excluded); "
        "95% CI = Wilson on the burst-adjusted effective n; latency in ms over successes, "
        f"TIMEOUTs right-censored in the fit. How to read them: {doc('statistics.md')}[/dim]"
    )


def calibrate_cmd(
    since: SinceOpt = None,
    until: UntilOpt = None,
    tools: ToolsOpt = None,
    db: DbOpt = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write here instead of stdout.")
    ] = None,
    view: Annotated[
        str, typer.Option("--as", help="profile (default), resilibench or reliabilitybench.")
    ] = "profile",
    source: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Convert this profile (file or calm|published|harsh) instead "
            "of calibrating from the database.",
        ),
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="Profile name.")] = None,
) -> None:
    """Turn stored probes into a simulator profile, or a ResiliBench / ReliabilityBench view.

    The sandbox and --simulate read the profile."""
    from realprobe.api import calibrate, export_profile
    from realprobe.probes.calibrate import VIEWS
    from realprobe.simulator.profile import load_profile

    if view not in VIEWS:
        raise RealprobeError(f"--as {view!r}: choose resilibench or reliabilitybench (or omit it)")
    if source is not None:
        profile = load_profile(source)
    else:
        path, rep = _stats(db, since, until, tools)
        profile = calibrate(path, name=name, from_stats=rep)
    text = json.dumps(export_profile(profile, view), indent=2) + "\n"
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise RealprobeError(f"-o {output}: cannot write ({exc.strerror})") from exc
    err_console.print(f"wrote {view} for {len(profile.tools)} tools to {output}")


def drift_cmd(
    baseline: Annotated[str, typer.Option("--baseline", help="Window T1..T2, e.g. 14d..7d.")],
    current: Annotated[str, typer.Option("--current", help="Window T3..T4, e.g. 7d..now.")],
    tools: ToolsOpt = None,
    db: DbOpt = None,
    alpha: Annotated[float, typer.Option(help="Family-wise (holm) or FDR (bh) level.")] = 0.05,
    correction: Annotated[str, typer.Option(help="holm or bh (Benjamini-Hochberg).")] = "holm",
    min_success_change: Annotated[
        float, typer.Option(help="Smallest success-rate change worth a flag (absolute).")
    ] = 0.05,
    min_latency_change: Annotated[
        float, typer.Option(help="Smallest relative change of median latency worth a flag.")
    ] = 0.2,
    fail_on_worse: Annotated[
        bool, typer.Option("--fail-on-worse", help="Exit 1 if any tool got worse (for cron).")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Which tools changed between two windows: success, latency, error mix (corrected).

    Success by a two-proportion test, latency by Mann-Whitney with an effect-size gate, the
    error mix by chi-square."""
    from realprobe.api import drift

    path = db if db is not None else default_db_path()
    with as_flags("baseline", "current", "alpha", "correction", "tools"):
        rep = drift(
            path, baseline=baseline, current=current, tools=tools, alpha=alpha,
            correction=correction,  # type: ignore[arg-type]
            min_success_change=min_success_change, min_latency_change=min_latency_change,
        )
    if as_json:
        print_json(rep.model_dump(mode="json"))
    else:
        print_drift(rep)
    if fail_on_worse and any(t.verdict == "worse" for t in rep.tools):
        raise typer.Exit(1)


def print_drift(rep: DriftReport) -> None:
    from rich.table import Table

    table = Table(
        title=f"drift: {rep.baseline[0]}..{rep.baseline[1]} → "
        f"{rep.current[0]}..{rep.current[1]} ({rep.correction}, α={rep.alpha})"
    )
    table.add_column("tool", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    for col in ("success (p adj)", "median ms (p adj)", "mix V (p adj)"):
        table.add_column(col, justify="right", overflow="fold")
    colour = {"worse": "red", "better": "green", "changed": "yellow"}

    def padj(v: float | None) -> str:
        return "" if v is None else f" ({v:.2g})"

    for t in rep.tools:
        s, lat, mix = t.success, t.latency, t.error_mix
        c = colour.get(t.verdict, "dim")
        table.add_row(
            t.tool,
            f"[{c}]{t.verdict}[/{c}]",
            f"{_pct(s.baseline)}→{_pct(s.current)}{padj(s.p_adjusted)}" if s else "-",
            f"{lat.baseline_p50:.0f}→{lat.current_p50:.0f}{padj(lat.p_adjusted)}"
            if lat else "-",
            f"{mix.cramers_v:.2f}{padj(mix.p_adjusted)}" if mix else "-",
        )
    console.print(table)


def report_cmd(
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="File to write (default report.html for html; stdout for md/json).",
        ),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="html, md or json.")] = "html",
    since: SinceOpt = None,
    until: UntilOpt = None,
    tools: ToolsOpt = None,
    db: DbOpt = None,
    period: PeriodOpt = "1d",
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="Drift baseline window (default: each tool's "
                                        "earlier half of calls)."),
    ] = None,
    current: Annotated[
        str | None,
        typer.Option("--current", help="Drift current window (default: each tool's later half)."),
    ] = None,
) -> None:
    """A self-contained HTML, Markdown or JSON report of the stored probes.

    No network is needed to view it: per-tool table, success with interval whiskers, latency
    ECDFs, error mix, success over time, drift flags."""
    from realprobe.api import build_report, write_report

    if fmt not in ("html", "md", "json"):
        raise RealprobeError(f"--format {fmt!r}: choose html, md or json")
    path = db if db is not None else default_db_path()
    with as_flags("since", "until", "tools", "period", "baseline", "current"), \
            err_console.status("building report"):
        data = build_report(path, since=since, until=until, tools=tools, period=period,
                            baseline=baseline, current=current)
        text = write_report(data, fmt=fmt)
    if output is None and fmt == "html":
        output = Path("report.html")
    if output is None:
        sys.stdout.write(text + "\n")
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise RealprobeError(f"-o {output}: cannot write ({exc.strerror})") from exc
    err_console.print(f"wrote {fmt} report ({len(data.stats.tools)} tools) to {output}")
