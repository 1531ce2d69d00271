"""`realprobe stats | calibrate | drift | report`: read the probes table.

Each picks its rows by target kind (`--kinds`) and vantage (`--vantage`) and says which rows
it summarised; opening the file also marks runs left `running` by a killed process.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import typer

from realprobe.commands.common import (
    DbOpt,
    ExplainOpt,
    JsonOpt,
    console,
    err_console,
    one_shot,
    print_json,
    printed_json,
)
from realprobe.commands.tables import pct

if TYPE_CHECKING:
    from realprobe.commands.tables import Notes
    from realprobe.probes.drift import Drift
    from realprobe.probes.provenance import Provenance
    from realprobe.probes.results import VantageStats
    from realprobe.probes.stats import StatsReport

# numpy/scipy are imported inside the commands, so `realprobe --help` stays fast

SinceOpt = Annotated[
    str | None,
    typer.Option("--since", help="Start: ISO date/datetime (UTC), 20261101, or an age: 7d, 1h30m."),
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
KindsOpt = Annotated[
    str | None,
    typer.Option(
        "--kinds",
        help="Which rows: live, sandbox, simulate, replay or all (default: live when the "
        "window holds live rows, else the one kind present); imported: monitor histories "
        "brought in by `history import`, alone.",
    ),
]
VantageOpt = Annotated[
    str | None,
    typer.Option("--vantage", help="Only rows probed from these vantages (comma-separated)."),
]


def register(app: typer.Typer) -> None:
    app.command("stats")(stats_cmd)
    app.command("calibrate")(calibrate_cmd)
    app.command("drift")(drift_cmd)
    app.command("report")(report_cmd)


def _banner(prov: Provenance | None) -> None:
    _warn(prov.banner() if prov is not None else None)


def _warn(text: str | None) -> None:
    """A sentence no reader can miss: the numbers are not (only) from the real APIs."""
    if text:
        err_console.print(f"[bold reverse yellow] {text} [/bold reverse yellow]")


def _num(v: float | None) -> str:
    """A share in percent without the sign (the column header or a neighbour carries it)."""
    return "-" if v is None else f"{100 * v:.1f}"


def stats_cmd(
    since: SinceOpt = None,
    until: UntilOpt = None,
    tools: ToolsOpt = None,
    db: DbOpt = None,
    period: PeriodOpt = "1d",
    kinds: KindsOpt = None,
    vantage: VantageOpt = None,
    by: Annotated[
        str,
        typer.Option("--by", help="tool (default), or vantage: each tool side by side per "
                     "vantage point (the same API seen from different networks)."),
    ] = "tool",
    threshold: Annotated[
        float | None, typer.Option("--threshold", help="Success rate the verdict measures each "
                                   "tool against (0-1; default 0.95).")
    ] = None,
    explain: ExplainOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Per tool: success rate with a 95% interval, error mix, latency fit, bursts, variability.

    Success is per attempt; latency percentiles come with a censored lognormal fit; the burst
    chain and variability flags come last; then where the time goes (DNS, connect, TLS, first
    byte, transfer) for calls that recorded their phases."""
    one_shot()
    from realprobe import api
    from realprobe.probes.results import VantageStats
    from realprobe.probes.stats import StatsReport

    rep = api.stats(db, since=since, until=until, tools=tools, period=period, kinds=kinds,
                    vantage=vantage, by=cast("Literal['tool', 'vantage']", by))
    if isinstance(rep, StatsReport):
        _banner(rep.provenance)
    if printed_json(as_json, rep):
        return
    if isinstance(rep, VantageStats):
        print_by_vantage(rep, threshold)
    elif not isinstance(rep, StatsReport):  # imported histories, in time
        from realprobe.commands.history import print_imported_stats

        print_imported_stats(rep)
    else:
        print_stats(rep, explain=explain, threshold=threshold)
        if rep.phases:
            print_phases(rep.phases, explain=explain)


def print_phases(phases: dict[str, dict[str, Any]], *, explain: bool = False) -> None:
    """Where the time goes: one line naming the slowest phase (the table with `explain`)."""
    from realprobe.commands.tables import Column, fit_table
    from realprobe.dbfacts import PHASE_COLUMNS, PHASE_LABELS

    if not explain:
        slowest = Counter(p["slowest"] for p in phases.values() if p["slowest"])
        said = ", ".join(f"{PHASE_LABELS.get(k, k)} for {v}" for k, v in slowest.most_common())
        console.print(f"[dim]slowest phase: {said or 'unknown'} of {len(phases)} tools "
                      "(--explain shows every phase)[/dim]", highlight=False)
        return

    drops = {"dns_ms": 3, "connect_ms": 4, "tls_ms": 5, "transfer_ms": 2}
    table = fit_table(
        [Column("tool", "name"), Column("n", "num"),
         *(Column(PHASE_LABELS[k], "num", drop=drops.get(k, 0)) for k in PHASE_COLUMNS),
         Column("slowest", "name", drop=1)],
        title="Where the time goes (median ms over successful calls)",
    )
    for tool, p in sorted(phases.items()):
        cells = ["-" if p[k] is None else f"{p[k]:.1f}"
                 for k in PHASE_COLUMNS]
        table.add_row(tool, str(p["n"]), *cells, str(p["slowest"] or "-").removesuffix("_ms"))
    console.print(table)
    console.print("[dim]DNS, connect and TLS over calls that opened a connection; first byte = "
                  "request sent to response headers; transfer = headers to end of body.[/dim]")


def print_by_vantage(rep: VantageStats, threshold: float | None = None) -> None:
    """The same statistics once per vantage point, tools side by side; then each vantage's
    verdict."""
    from realprobe.commands.tables import Column, escape, fit_table
    from realprobe.probes.stats import THRESHOLD, success_text, verdict

    reports, vantages, kinds = rep.vantages, list(rep.vantages), rep.target_kinds
    table = fit_table(
        [Column("tool", "name"),
         *(Column(f"{v}\nsuccess [95% CI] · p50 ms", "num", drop=i + 1)
           for i, v in enumerate(vantages))],
        title=f"Per vantage · {', '.join(kinds)} rows",
    )
    tools_all = sorted({t.tool for r in reports.values() for t in r.tools})
    for name in tools_all:
        cells = [name]
        for v in vantages:
            t = next((t for t in reports[v].tools if t.tool == name), None)
            if t is None:
                cells.append("-")
                continue
            p50 = "-" if t.latency.p50 is None else f"{t.latency.p50:.0f}"
            cells.append(f"{success_text(t)} · {p50}")
        table.add_row(*cells)
    console.print(table)
    for v in vantages:
        if reports[v].tools:
            console.print(escape(f"{v}: {verdict(reports[v], threshold or THRESHOLD)}"),
                          highlight=False)


def _stats_notes(rep: StatsReport, explain: bool) -> Notes:
    """The footnotes of `stats`, grouped: † intervals resting on borrowed or assumed burst
    structure, ~ approximate burst intervals, ‡ long-run and hang caveats, the error mix per
    tool, quiet faults."""
    from realprobe.commands.tables import Notes
    from realprobe.probes.stats import TRANSITION_FEW_N, interval_text

    notes = Notes(explain=explain)
    borrowed = {"borrowed": "† {n} tool{s}: too few failures in a row to measure bursts, so "
                            "the interval borrows the burst chain pooled over all tools",
                "assumed independent": "† {n} tool{s}: no failure seen anywhere; the interval "
                                       "assumes independent calls"}
    for t in rep.tools:
        if t.success.note:
            group = borrowed.get(t.success.burst_source, "† {n} tool{s}: a rough burst chain")
            notes.add(group, f"{t.tool}: {t.success.note}")
    for t in rep.tools:
        ff = t.burst.p_fail_after_fail
        if ff.approximate:
            notes.add(f"~ {{n}} tool{{s}}: P(f|f) rests on fewer than {TRANSITION_FEW_N} pairs "
                      "after a failure, so its interval is approximate",
                      f"{t.tool}: {ff.n} pairs, 95% CI {interval_text(ff.ci95)}")
    for t in rep.tools:
        if t.success.long_run95:
            lo, hi = t.success.long_run95
            notes.add("long-run success of {n} tool{s} (days vary; 95% CI)",
                      f"{t.tool} [{_num(lo)}, {_num(hi)}]")
        if t.success.long_run_too_few_failures:
            notes.add("‡ {n} tool{s}: too few failures for a long-run interval",
                      f"{t.tool}: {t.success.long_run_note}")
        if t.variability.success_logit_sd_note:
            notes.add("‡ {n} tool{s}: day-to-day success variation is rough",
                      f"{t.tool}: {t.variability.success_logit_sd_note}")
        fit = t.latency.lognormal
        if fit is not None and fit.hang_share_ci95 is not None and fit.hang_share_ci95[0] <= 0:
            notes.add(f"‡ {{n}} tool{{s}}: hangs cannot be told from slow calls at the "
                      f"{t.latency.timeout_s:g} s deadline",
                      f"{t.tool}: hang share of successes and TIMEOUTs 0 to "
                      f"{fit.hang_share_ci95[1]:.3g}")
    pooled = Counter[str]()
    for t in rep.tools:
        pooled.update(t.errors.counts)
    top = ", ".join(f"{c} {k}" for c, k in pooled.most_common(3))
    for line in _error_mix_lines(rep):
        notes.add(f"error mix ({top}{', ...' if len(pooled) > 3 else ''}): each code's share "
                  "with its 95% CI, {n} tool{s}", line)
    for tool, e in sorted((rep.implicit or {}).items()):
        signs = [f"{k} {e[k]} ({pct(e['rates'][k], 1)})" for k in ("drift", "empty", "stale")
                 if e[k]]  # fmt: skip
        if signs:
            notes.add("quiet faults (drifted, empty or stale bodies) in the ok calls of "
                      "{n} tool{s}", f"{tool}'s {e['ok']} ok calls: {', '.join(signs)}")
    return notes


def print_stats(rep: StatsReport, *, explain: bool = False, threshold: float | None = None,
                elsewhere: str = "in --json") -> None:
    """The table, the verdict, then the notes grouped and counted (`explain`: one line per
    tool under each; `elsewhere`: where columns left out to fit can be seen)."""
    from realprobe.commands.tables import Column, escape, fit_table, short_path
    from realprobe.data import doc_path
    from realprobe.probes.stats import (
        APPROXIMATE,
        EXTRAPOLATED,
        LOWER_BOUND,
        P99_MIN_N,
        THRESHOLD,
        p99_text,
        success_text,
        verdict,
    )

    head = rep.provenance.headline() if rep.provenance else f"{rep.rows} rows"
    table = fit_table(
        [Column("tool", "name"), Column("n", "num"), Column("success [95% CI]", "num"),
         Column("P(f|f) / P(f|ok)", "num", drop=3), Column("p50 / p90 / p99 ms", "num"),
         Column("μ, σ", "num", drop=5), Column("KS p", "num", drop=4),
         Column("top error / flags", "list", drop=2)],
        title=f"{len(rep.tools)} tools · {head}", elsewhere=elsewhere,
    )
    for t in rep.tools:
        lat, fit = t.latency, t.latency.lognormal
        flags = [f for f, on in (("var. success", t.variability.variable_success),
                                 ("var. latency", t.variability.variable_latency)) if on]
        top = max(t.errors.share_of_failures.items(), key=lambda kv: kv[1], default=None)
        cells = [
            t.tool,
            str(t.success.n),
            success_text(t) + ("†" if t.success.note else ""),
            (APPROXIMATE if t.burst.p_fail_after_fail.approximate else "")
            + f"{_num(t.burst.p_fail_after_fail.p)}/{pct(t.burst.p_fail_after_ok.p, 1)}",
            "/".join(["-" if v is None else f"{v:.0f}" for v in (lat.p50, lat.p90)]
                     + [p99_text(lat)])
            + (EXTRAPOLATED if lat.extrapolated else ""),
        ]
        cells.append("-" if fit is None else f"{fit.mu:.2f}, {fit.sigma:.2f}")
        cells.append("-" if lat.ks_pvalue is None else f"{lat.ks_pvalue:.2f}")
        cells.append(", ".join(([f"{top[0]} {100 * top[1]:.0f}%"] if top else []) + flags) or "-")
        table.add_row(*cells)
    console.print(table)
    if rep.tools:
        console.print(escape(verdict(rep, threshold or THRESHOLD)), highlight=False)
    console.print(
        "[dim]success per attempt, 95% CI on the burst-adjusted n; latency over successes, "
        "TIMEOUTs censored. How to read:[/dim]"
    )
    # the page's path on a line of its own, whole (relative when under the working folder)
    console.print(f"[dim]{escape(short_path(str(doc_path('statistics.md'))))}[/dim]",
                  soft_wrap=True, highlight=False)
    if any(t.latency.extrapolated for t in rep.tools):
        console.print("[dim]* the deadline cut into the latency: percentiles from the censored "
                      "fit[/dim]")
    if any(t.latency.p99_lower_bound for t in rep.tools):
        console.print(f"[dim]{LOWER_BOUND} a lower bound: a p99 over fewer than {P99_MIN_N} "
                      "successes tends to fall short[/dim]")
    _stats_notes(rep, explain).print(console)


def _error_mix_lines(rep: StatsReport) -> list[str]:
    """Each tool's error mix: every code's share of failures with its 95% interval, at the
    effective number of failures (an outage that repeats one code counts for less)."""
    lines = []
    for t in rep.tools:
        e = t.errors
        if not e.failures:
            continue
        shares = sorted(e.share_of_failures.items(), key=lambda kv: -kv[1])
        parts = [f"{c} {pct(w, 1)} [{_num(e.share_of_failures_ci95[c][0])}, "
                 f"{_num(e.share_of_failures_ci95[c][1])}]" for c, w in shares]  # fmt: skip
        if e.unseen_code_ci95 is not None:
            parts.append(f"any other code [0, {_num(e.unseen_code_ci95[1])}]")
        lines.append(f"{t.tool}: {' · '.join(parts)} (n_eff {e.n_effective:.1f} of "
                     f"{e.failures} failures, design effect {e.design_effect:.2f})")  # fmt: skip
    return lines


def calibrate_cmd(
    since: SinceOpt = None,
    until: UntilOpt = None,
    tools: ToolsOpt = None,
    db: DbOpt = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="Write here instead of stdout (replaces an existing file; refuses a link).",
        ),
    ] = None,
    view: Annotated[
        str, typer.Option("--view", help="profile (default), resilibench or reliabilitybench.")
    ] = "profile",
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="Convert this profile (file or calm|published|harsh) instead "
            "of calibrating from the database.",
        ),
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="Profile name.")] = None,
    deadline: Annotated[
        float | None,
        typer.Option(
            "--deadline",
            help="Views: the rates a caller with this timeout (s) sees "
            "(default: the probes' own deadline).",
        ),
    ] = None,
    kinds: KindsOpt = None,
    vantage: VantageOpt = None,
    explain: ExplainOpt = False,
) -> None:
    """Turn stored probes into a simulator profile, or a ResiliBench / ReliabilityBench view.

    The sandbox and --profile read the profile. Its notes (what could not be estimated, per
    tool) are counted by kind on stderr; --explain lists every tool's, the profile keeps them."""
    one_shot()
    from realprobe import api

    profile, data = api.calibrate_export(
        db, view=view, deadline=deadline, source=source, since=since, until=until, tools=tools,
        name=name, kinds=kinds, vantage=vantage, output=output,
    )
    if source is None:
        _warn(profile.source.get("warning"))
        _profile_notes(profile, explain).print(err_console)
    if output is None:
        print_json(data)
        return
    err_console.print(f"wrote {view} for {len(profile.tools)} tools to {output}")


def _profile_notes(profile: Any, explain: bool) -> Notes:
    """A profile's per-tool notes grouped by what they say: the words before a note's first
    colon, without its own numbers in brackets ("hangs cannot be told from slow calls at the
    2 s deadline: 11 TIMEOUTs ..." is one of a group)."""
    import re

    from realprobe.commands.tables import Notes

    notes = Notes(explain=explain)
    for tool, tp in sorted(profile.tools.items()):
        for note in tp.notes:
            head, _, rest = note.partition(": ")
            head = re.sub(r" \([^()]*\d[^()]*\)", "", head)
            notes.add(f"{{n}} tool{{s}}: {head}", f"{tool}: {rest or head}")
    return notes


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
    kinds: KindsOpt = None,
    vantage: VantageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Which tools changed between two windows: success, latency, error mix (corrected).

    Success by a two-proportion test, latency by Mann-Whitney with an effect-size gate, the
    error mix by chi-square, corrected across tools."""
    one_shot()
    from realprobe import api

    rep = api.drift(
        db, baseline=baseline, current=current, tools=tools, alpha=alpha,
        correction=correction,  # type: ignore[arg-type]
        min_success_change=min_success_change, min_latency_change=min_latency_change,
        kinds=kinds, vantage=vantage,
    )
    _banner(rep.provenance["current"])
    if not printed_json(as_json, rep):
        print_drift(rep)
    if fail_on_worse and any(t.verdict == "worse" for t in rep.tools):
        raise typer.Exit(1)


def print_drift(rep: Drift) -> None:
    from realprobe.commands.tables import Column, fit_table

    base, cur = rep.provenance["baseline"], rep.provenance["current"]
    table = fit_table(
        [Column("tool", "name"), Column("verdict", "name"),
         Column("success (p adj)", "num"), Column("median ms (p adj)", "num"),
         Column("mix V (p adj)", "num", drop=1)],
        title=f"drift: {rep.baseline[0]}..{rep.baseline[1]} → {rep.current[0]}..{rep.current[1]}"
        f" ({rep.correction}, α={rep.alpha}) · {base.rows} → {cur.rows} rows · "
        f"{cur.headline().split(' · ')[0]}"
        + (f" · vantage {', '.join(cur.vantages)}" if cur.vantages else "")
    )
    colour = {"worse": "red", "better": "green", "changed": "yellow"}

    def padj(v: float | None) -> str:
        return "" if v is None else f" ({v:.2g})"

    for t in rep.tools:
        s, lat, mix = t.success, t.latency, t.error_mix
        c = colour.get(t.verdict, "dim")
        table.add_row(
            t.tool,
            f"[{c}]{t.verdict}[/{c}]",
            f"{pct(s.baseline, 1)}→{pct(s.current, 1)}{padj(s.p_adjusted)}" if s else "-",
            f"{lat.baseline_p50:.0f}→{lat.current_p50:.0f}{padj(lat.p_adjusted)}" if lat else "-",
            f"{mix.cramers_v:.2f}{padj(mix.p_adjusted)}" if mix else "-",
        )
    console.print(table)
    console.print(drift_verdict(rep), highlight=False)


def drift_verdict(rep: Drift) -> str:
    """One paragraph: how many tools got worse, better, changed, stayed, could not be told."""
    by: dict[str, list[str]] = {}
    for t in rep.tools:
        by.setdefault(t.verdict, []).append(t.tool)
    if not rep.tools:
        return "Verdict: no tool has rows in both windows."
    parts = [f"{len(by[v])} {v} ({', '.join(by[v][:3])}{', ...' if len(by[v]) > 3 else ''})"
             for v in ("worse", "better", "changed") if v in by]
    if "stable" in by:
        parts.append(f"{len(by['stable'])} stable")
    few = by.get("insufficient data", [])
    if few:
        from realprobe.probes.drift import MIN_N

        parts.append(f"{len(few)} with fewer than {MIN_N} calls in a window, too few to test "
                     "(widen --baseline or --current, or probe more)")
    return f"Verdict over {len(rep.tools)} tools: " + "; ".join(parts) + "."


def report_cmd(
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="File to write (default report.html for html; stdout for md/json); an "
            "existing file is replaced, a symbolic link is refused.",
        ),
    ] = None,
    format_: Annotated[str, typer.Option("--format", help="html, md or json.")] = "html",
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
    kinds: KindsOpt = None,
    vantage: VantageOpt = None,
) -> None:
    """A self-contained HTML, Markdown or JSON report of the stored probes.

    No network is needed to view it: per-tool table, success with
    interval whiskers, latency ECDFs, error mix, success over time, drift flags."""
    one_shot()
    from realprobe import api

    if output is None and format_ == "html":
        output = Path("report.html")
    with err_console.status("building report"):
        data, text = api.make_report(
            db, output=output, format=format_, since=since, until=until, tools=tools, period=period,
            baseline=baseline, current=current, kinds=kinds, vantage=vantage,
        )
    if output is None:
        sys.stdout.write(text + "\n")
        return
    _banner(data.stats.provenance)
    if data.stats.tools:
        from realprobe.commands.tables import escape
        from realprobe.probes.stats import verdict

        err_console.print(escape(verdict(data.stats)), highlight=False)
    err_console.print(f"wrote {format_} report ({len(data.stats.tools)} tools) to {output}")
