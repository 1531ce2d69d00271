"""ReportData as a self-contained HTML page, Markdown, or JSON."""

from __future__ import annotations

import json
from html import escape

from realprobe.data import doc_path
from realprobe.dbfacts import PHASE_COLUMNS
from realprobe.probes.drift import ToolDrift
from realprobe.probes.stats import (
    APPROXIMATE,
    EXTRAPOLATED,
    LOWER_BOUND,
    P99_MIN_N,
    TRANSITION_FEW_N,
    ToolStats,
    interval_text,
    verdict,
)
from realprobe.report.build import ReportData
from realprobe.version import PROJECT_URL


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _ms(v: float | None) -> str:
    return "-" if v is None else (f"{v:.0f}" if v >= 10 else f"{v:.2f}")


def _ci(ci: tuple[float, float] | None) -> str:
    return "-" if ci is None else f"{100 * ci[0]:.1f}–{100 * ci[1]:.1f}%"


def _mix(t: ToolStats) -> str:
    items = sorted(t.errors.counts.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v}" for k, v in items) or "-"


def _fit(t: ToolStats) -> str:
    f = t.latency.lognormal
    return "-" if f is None else f"μ {f.mu:.2f}, σ {f.sigma:.2f}"


def _flags(t: ToolStats) -> list[str]:
    out = []
    if t.variability.variable_success:
        out.append("variable success")
    if t.variability.variable_latency:
        out.append("variable latency")
    return out


COLUMNS = (
    "tool",
    "n",
    "success",
    "95% interval",
    "p(fail|fail)",
    "p(fail|ok)",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "lognormal",
    "KS p",
    "errors",
    "flags",
)


EXTRAPOLATED_NOTE = (
    f"{EXTRAPOLATED} extrapolated: the deadline cut into the latency, so these percentiles come "
    "from the censored fit (the successes' own are lower bounds)."
)
APPROXIMATE_NOTE = (
    f"{APPROXIMATE} approximate: p(fail|fail) from fewer than {TRANSITION_FEW_N} pairs after a "
    "failure; no interval on so few holds its 95% closely."
)
LOWER_BOUND_NOTE = (
    f"{LOWER_BOUND} a lower bound: a p99 over fewer than {P99_MIN_N} successes tends to fall "
    "short of the true one."
)


def _pctl(t: ToolStats, v: float | None) -> str:
    lower = v is not None and v == t.latency.p99 and t.latency.p99_lower_bound
    return ((LOWER_BOUND if lower else "") + _ms(v)
            + (EXTRAPOLATED if v is not None and t.latency.extrapolated else ""))


def _when(v: object, default: str) -> str:
    """A window end for prose: the open end named, never Python's None."""
    return default if v is None else str(v)


def _row(t: ToolStats) -> list[str]:
    b = t.burst
    return [
        t.tool,
        str(t.success.n),
        _pct(t.success.rate),
        interval_text(t.success.quoted95),
        (APPROXIMATE if b.p_fail_after_fail.approximate else "") + _pct(b.p_fail_after_fail.p),
        _pct(b.p_fail_after_ok.p),
        _pctl(t, t.latency.p50),
        _pctl(t, t.latency.p90),
        _pctl(t, t.latency.p99),
        _fit(t),
        "-" if t.latency.ks_pvalue is None else f"{t.latency.ks_pvalue:.2f}",
        _mix(t),
        ", ".join(_flags(t)) or "-",
    ]


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:1200px;color:#222;padding:0 1rem;overflow-wrap:anywhere}
.scroll{overflow-x:auto;max-width:100%;background:linear-gradient(to right,#fff 30%,#fff0),
linear-gradient(to left,#fff 30%,#fff0) 100% 0,
radial-gradient(farthest-side at 0 50%,#0003,#0000),
radial-gradient(farthest-side at 100% 50%,#0003,#0000) 100% 0;background-repeat:no-repeat;
background-size:40px 100%,40px 100%,14px 100%,14px 100%;
background-attachment:local,local,scroll,scroll}
.scroll td,.scroll th{overflow-wrap:normal}
.scroll td.num{white-space:nowrap}
.scroll td:first-child,.scroll th:first-child{position:sticky;left:0;background:#fff;z-index:1}
.scroll th:first-child{background:#f6f6f6;z-index:2}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85rem;width:100%}
th,td{border-bottom:1px solid #eee;padding:.3rem .45rem;text-align:left;vertical-align:top}
th{background:#f6f6f6;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.meta{color:#666;font-size:.85rem}.plot{width:100%;height:auto;display:block}
.badge{display:inline-block;padding:0 .4rem;border-radius:.6rem;font-size:.8rem}
.worse{background:#fdd;color:#900}.better{background:#dfd;color:#060}
.changed{background:#ffe9c6;color:#840}.stable{background:#eee;color:#444}
.insufficient{background:#fff;color:#999;border:1px solid #ddd}
figure{margin:1rem 0}figcaption{color:#555;font-size:.85rem}
.banner{background:#b00020;color:#fff;font-weight:bold;font-size:1.15rem;padding:.8rem 1rem;
border-radius:4px}
"""


def _provenance_rows(data: ReportData) -> list[tuple[str, str]]:
    """(what, value) lines of the report's provenance block."""
    prov = data.stats.provenance
    if prov is None:
        return []
    kinds = ", ".join(f"{k} ({n} rows)" for k, n in prov.rows_by_kind.items()) or "none"
    rows = [
        ("target kind", kinds),
        ("target", ", ".join(prov.targets) or "-"),
        ("vantage", ", ".join(prov.vantages) or "-"),
        ("source", ", ".join(f"{k} ({n})" for k, n in prov.sources.items()) or "-"),
        (
            "window",
            f"{prov.window[0] or 'start'} → {prov.window[1] or 'now'} "
            f"(calls from {prov.first or '-'} to {prov.last or '-'})",
        ),
        (
            "rows",
            f"{prov.rows} summarised; {prov.excluded_rows} excluded (not the API's doing)",
        ),
    ]
    if prov.other_kinds:
        others = ", ".join(
            f"{k} ({n} rows; --kinds {k})" for k, n in sorted(prov.other_kinds.items())
        )
        rows.append(("not included", others))
    return rows


CAPTIONS = {
    "success": "Success rate per attempt; whiskers are the 95% interval.",
    "latency": (
        "Latency of successful calls per tool (log scale): box p25-p75 with the median,"
        " whiskers p5-p95; diamond: the median of the censored lognormal fit."
    ),
    "errors": "Failures as a share of all attempts, split by error code.",
    "over_time": "Success rate per period (grey: no calls).",
}
TITLES = {
    "success": "Success rate",
    "latency": "Latency",
    "errors": "Error mix",
    "over_time": "Success over time",
}


def render_html(data: ReportData, plots: dict[str, str] | None = None) -> str:
    """One HTML file: inline CSS, inline SVG, no scripts, no external resources."""
    if plots is None:
        plots = all_plots(data)
    parts = [
        _html_head(),
        _html_provenance(data),
        _html_summary(data),
        _html_tools_table(data.stats.tools),
        _html_phases(data),
        _html_implicit(data),
        _html_vantages(data),
        _html_drift(data),
        *(_html_plot(key, svg) for key, svg in plots.items()),
        "<p class='meta'>How to read these numbers: statistics.md in realprobe's documentation"
        f" (installed with the package as <code>{escape(str(doc_path('statistics.md')))}</code>;"
        f" also at {escape(PROJECT_URL)}/blob/main/docs/statistics.md).</p>",
        "</body></html>",
    ]
    # a wide table scrolls inside its own box (its first column, the tool, stays in view):
    # the page itself never scrolls sideways, at 800 px or on a phone
    return ("\n".join(parts).replace("<table ", "<div class='scroll'><table ")
            .replace("</table>", "</table></div>"))


def all_plots(data: ReportData) -> dict[str, str]:
    """The four plots as inline SVG."""
    from realprobe.report import plots as p

    return {
        "success": p.success_plot(data),
        "latency": p.latency_plot(data),
        "errors": p.error_mix_plot(data),
        "over_time": p.over_time_plot(data),
    }


def _html_head() -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>\n"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>\n"
        "<title>realprobe report</title>\n"
        f"<style>{CSS}</style></head><body>\n"
        "<h1>realprobe reliability report</h1>"
    )


def _html_provenance(data: ReportData) -> str:
    """The banner (when no row comes from the real APIs) and where the rows came from."""
    st = data.stats
    out = []
    banner = st.provenance.banner() if st.provenance else None
    if banner:
        out.append(f"<p class='banner' id='banner'>{escape(banner)}</p>")
    prov_rows = _provenance_rows(data)
    if prov_rows:
        out.append("<table id='provenance'><tbody>")
        out.extend(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in prov_rows)
        out.append("</tbody></table>")
    return "\n".join(out)


def _html_summary(data: ReportData) -> str:
    st = data.stats
    w0, w1 = st.window
    out = (
        f"<p class='meta'>Generated {escape(data.generated_at)} from "
        f"<code>{escape(data.db)}</code>;"
        f" window {escape(w0 or 'start')} → {escape(w1 or 'now')}; {st.rows} attempts over "
        f"{len(st.tools)} tools. Rates are per attempt (one stored call = one trial; the prober's"
        " own outages excluded). Intervals are 95% Wilson on the burst-adjusted effective n.</p>"
    )
    if st.overall:
        o = st.overall
        out += (
            f"\n<p>All tools: <b>{_pct(o.rate)}</b> success ({o.successes}/{o.n}),"
            f" 95% interval {interval_text(o.quoted95)}.</p>"
        )
    if st.tools:
        out += f"\n<p id='verdict'>{escape(verdict(st))}</p>"
    return out


def _html_tools_table(tools: list[ToolStats]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
    rows = [
        "<tr>"
        + "".join(
            f"<td{' class=num' if 0 < i < 11 else ''}>{escape(c)}</td>"
            for i, c in enumerate(_row(t))
        )
        + "</tr>"
        for t in tools
    ]
    note = (f"\n<p class='meta' id='extrapolated'>{escape(EXTRAPOLATED_NOTE)}</p>"
            if any(t.latency.extrapolated for t in tools) else "")
    if any(t.latency.p99_lower_bound for t in tools):
        note += f"\n<p class='meta' id='lower-bound'>{escape(LOWER_BOUND_NOTE)}</p>"
    if any(t.burst.p_fail_after_fail.approximate for t in tools):
        note += f"\n<p class='meta' id='approximate'>{escape(APPROXIMATE_NOTE)}</p>"
    return (
        f"<h2>Per tool</h2><table id='tools'><thead><tr>\n{head}\n</tr></thead><tbody>\n"
        + "\n".join(rows)
        + "\n</tbody></table>"
        + note
    )


def _adj(v: float | None) -> str:
    return "<td>-</td>" if v is None else f"<td class=num>{v:.3g}</td>"


def _html_drift_row(dt: ToolDrift) -> str:
    s, lat, mix = dt.success, dt.latency, dt.error_mix
    cells = [
        f"<td>{escape(dt.tool)}</td>",
        f"<td><span class='badge {dt.verdict.split()[0]}'>{escape(dt.verdict)}</span></td>",
        f"<td class=num>{dt.n_baseline} / {dt.n_current}</td>",
        f"<td class=num>{_pct(s.baseline)} → {_pct(s.current)}</td>" if s else "<td>-</td>",
        _adj(s.p_adjusted if s else None),
        f"<td class=num>{_ms(lat.baseline_p50)} → {_ms(lat.current_p50)}</td>"
        if lat
        else "<td>-</td>",
        _adj(lat.p_adjusted if lat else None),
        f"<td class=num>{mix.cramers_v:.2f}</td>" if mix else "<td>-</td>",
        _adj(mix.p_adjusted if mix else None),
    ]
    return "<tr>" + "".join(cells) + "</tr>"


def _html_drift(data: ReportData) -> str:
    if data.drift is None:
        note = escape(data.drift_note or "no drift comparison")
        return f"<h2>Drift</h2>\n<p class='meta'>{note}</p>"
    d = data.drift
    intro = (
        f"<p class='meta'>Baseline {escape(_when(d.baseline[0], 'start'))} → "
        f"{escape(_when(d.baseline[1], 'now'))};"
        f" current {escape(_when(d.current[0], 'start'))} → {escape(_when(d.current[1], 'now'))}"
        f"{' (' + escape(data.drift_note) + ')' if data.drift_note else ''}."
        f" Tests corrected across tools ({escape(d.correction)}, α={d.alpha});"
        f" success flagged when it moves ≥ {100 * d.min_success_change:.0f} points,"
        " latency when"
        f" the median moves ≥ {100 * d.min_latency_change:.0f}%.</p>"
    )
    head = (
        "<table id='drift'><thead><tr><th>tool</th><th>verdict</th><th>n base / cur</th>"
        "<th>success base → cur</th><th>p adj</th><th>median ms base → cur</th>"
        "<th>p adj</th><th>error mix V</th><th>p adj</th></tr></thead><tbody>"
    )
    told = [dt for dt in d.tools if not dt.verdict.startswith("insufficient")]
    if not told:  # nothing to say: one line, not a row per tool saying so
        return (f"<h2>Drift</h2>\n<p class='meta' id='drift-none'>None of the "
                f"{len(d.tools)} tools has enough calls in both windows to compare "
                f"({_calls_each(d.tools)}); probe more rounds, or over more days.</p>")
    short = [dt.tool for dt in d.tools if dt not in told]
    rows = "\n".join(_html_drift_row(dt) for dt in told)
    rest = (f"\n<p class='meta' id='drift-short'>Too few calls in one window to compare: "
            f"{escape(', '.join(short))}.</p>" if short else "")
    return f"<h2>Drift</h2>\n{intro}\n{head}\n{rows}\n</tbody></table>{rest}"


def _calls_each(tools: list[ToolDrift]) -> str:
    """`2-3 / 3 calls` (baseline / current, over the tools)."""
    def span(ns: list[int]) -> str:
        return f"{min(ns)}" if min(ns) == max(ns) else f"{min(ns)}-{max(ns)}"

    return (f"{span([t.n_baseline for t in tools])} / {span([t.n_current for t in tools])} "
            "calls each, baseline / current")


def _html_phases(data: ReportData) -> str:
    if not data.phases:
        return ""
    rows = []
    for tool, p in sorted(data.phases.items()):
        cells = "".join(
            f"<td>{_ms(p[k])}</td>"
            for k in PHASE_COLUMNS
        )
        slowest = escape(str(p["slowest"] or "-").removesuffix("_ms"))
        rows.append(f"<tr><td>{escape(tool)}</td><td>{p['n']}</td>{cells}<td>{slowest}</td></tr>")
    return (
        "<h2>Where the time goes</h2>\n<p class='meta'>Median milliseconds over successful "
        "calls that recorded their phases; DNS, connect and TLS over calls that opened a "
        "connection.</p>\n<table id='phases'><thead><tr><th>tool</th><th>n</th><th>DNS</th>"
        "<th>connect</th><th>TLS</th><th>first byte</th><th>transfer</th><th>slowest</th>"
        "</tr></thead><tbody>\n" + "\n".join(rows) + "\n</tbody></table>"
    )


def _html_implicit(data: ReportData) -> str:
    """Successful calls that showed signs of an implicit fault, per tool (where any did)."""
    found = {t: e for t, e in (data.stats.implicit or {}).items()
             if any(e[k] for k in ("drift", "empty", "stale"))}  # fmt: skip
    if not found:
        return ""
    rows = "\n".join(
        f"<tr><td>{escape(tool)}</td><td>{e['ok']}</td>"
        + "".join(f"<td>{e[k]} ({_pct(e['rates'][k])})</td>" for k in ("drift", "empty", "stale"))
        + "</tr>"
        for tool, e in sorted(found.items())
    )
    return (
        "<h2>Quiet faults</h2>\n<p class='meta'>Successful calls whose answer showed signs of an "
        "implicit fault: drift (off the declared output, or a field it used to fill is gone), "
        "empty (nothing in it), stale (the same answer where it used to vary, or dates far "
        "behind its newest). The calls count as successes above.</p>\n<table id='implicit'>"
        "<thead><tr><th>tool</th><th>ok calls</th><th>drift</th><th>empty</th><th>stale</th>"
        "</tr></thead><tbody>\n" + rows + "\n</tbody></table>"
    )


def _html_vantages(data: ReportData) -> str:
    if not data.by_vantage:
        return ""
    vantages = sorted({v for per in data.by_vantage.values() for v in per})
    head = "".join(f"<th>{escape(v)}</th>" for v in vantages)
    rows = []
    for tool, per in sorted(data.by_vantage.items()):
        cells = []
        for v in vantages:
            c = per.get(v)
            cells.append("<td>-</td>" if c is None else
                         f"<td>{_pct(c['rate'])} {_ci(tuple(c['ci95']))} · "
                         f"{_ms(c['p50_ms'])} ms (n {c['n']})</td>")
        rows.append(f"<tr><td>{escape(tool)}</td>{''.join(cells)}</tr>")
    return (
        "<h2>Vantage points side by side</h2>\n<p class='meta'>The same tool seen from each "
        "network: success with its 95% Wilson interval, median latency of successes.</p>\n"
        f"<table id='vantages'><thead><tr><th>tool</th>{head}</tr></thead><tbody>\n"
        + "\n".join(rows) + "\n</tbody></table>"
    )


def _html_plot(key: str, svg: str) -> str:
    """A plot in a box that scrolls sideways when the page is narrower than the plot can be
    drawn with legible labels (the same shadow cue as a wide table)."""
    return (
        f"<h2>{TITLES.get(key, key)}</h2><figure id='plot-{key}'>"
        f"<div class='scroll'>{svg}</div>"
        f"<figcaption>{escape(CAPTIONS.get(key, ''))}</figcaption></figure>"
    )


def render_markdown(data: ReportData) -> str:
    st = data.stats
    lines = [
        "# realprobe reliability report",
        "",
        f"Generated {data.generated_at} from `{data.db}`; window {st.window[0] or 'start'} → "
        f"{st.window[1] or 'now'}; {st.rows} attempts over {len(st.tools)} tools. Rates are per "
        "attempt; intervals are 95% Wilson on the burst-adjusted effective n.",
        "",
        *([verdict(st), ""] if st.tools else []),
        "| " + " | ".join(c.replace("|", "\\|") for c in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    banner = st.provenance.banner() if st.provenance else None
    head = [f"> **{banner}**", ""] if banner else []
    head += [f"- **{k}**: {v}" for k, v in _provenance_rows(data)]
    lines[2:2] = [*head, ""] if head else []
    for t in st.tools:
        cells = (c.replace("|", "\\|").replace("*", "\\*") for c in _row(t))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if any(t.latency.extrapolated for t in st.tools):
        lines += [EXTRAPOLATED_NOTE.replace("*", "\\*", 1), ""]
    if any(t.latency.p99_lower_bound for t in st.tools):
        lines += [LOWER_BOUND_NOTE, ""]
    if data.drift is not None:
        lines += [
            "## Drift",
            "",
            f"Correction: {data.drift.correction}, α={data.drift.alpha}."
            + (f" ({data.drift_note})" if data.drift_note else ""),
            "",
            "| tool | verdict | success base → cur | median ms base → cur |",
            "|---|---|---|---|",
        ]
        told = [d for d in data.drift.tools if not d.verdict.startswith("insufficient")]
        if not told:  # nothing to say: one line
            lines[-2:] = [f"None of the {len(data.drift.tools)} tools has enough calls in both "
                          f"windows to compare ({_calls_each(data.drift.tools)})."]
        short = [d.tool for d in data.drift.tools if d not in told]
        for d in told:
            s = f"{_pct(d.success.baseline)} → {_pct(d.success.current)}" if d.success else "-"
            lat = (
                f"{_ms(d.latency.baseline_p50)} → {_ms(d.latency.current_p50)}"
                if d.latency
                else "-"
            )
            lines.append(f"| {d.tool} | {d.verdict} | {s} | {lat} |")
        if told and short:
            lines += ["", f"Too few calls in one window to compare: {', '.join(short)}."]
        lines.append("")
    return "\n".join(lines)


def render_json(data: ReportData) -> str:
    return json.dumps(data.model_dump(mode="json"), indent=2)
