"""ReportData as a self-contained HTML page, Markdown, or JSON."""

from __future__ import annotations

import json
from html import escape

from realprobe.probes.stats import ToolStats
from realprobe.report.build import ReportData


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


def _row(t: ToolStats) -> list[str]:
    b = t.burst
    return [
        t.tool,
        str(t.success.n),
        _pct(t.success.rate),
        _ci(t.success.burst_adjusted95),
        _pct(b.p_fail_after_fail.p),
        _pct(b.p_fail_after_ok.p),
        _ms(t.latency.p50),
        _ms(t.latency.p90),
        _ms(t.latency.p99),
        _fit(t),
        "-" if t.latency.ks_pvalue is None else f"{t.latency.ks_pvalue:.2f}",
        _mix(t),
        ", ".join(_flags(t)) or "-",
    ]


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:1200px;color:#222;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85rem;width:100%}
th,td{border-bottom:1px solid #eee;padding:.3rem .45rem;text-align:left;vertical-align:top}
th{background:#f6f6f6;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.meta{color:#666;font-size:.85rem}.plot{max-width:100%;height:auto}
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
            f"{prov.rows} summarised; {prov.excluded_rows} excluded as local network failures",
        ),
    ]
    if prov.other_kinds:
        others = ", ".join(
            f"{k} ({n} rows; --target {k})" for k, n in sorted(prov.other_kinds.items())
        )
        rows.append(("not included", others))
    return rows


def render_html(data: ReportData, plots: dict[str, str] | None = None) -> str:
    """One HTML file: inline CSS, inline SVG, no scripts, no external resources."""
    if plots is None:
        from realprobe.report import plots as p

        plots = {
            "success": p.success_plot(data),
            "latency": p.latency_ecdf_plot(data),
            "errors": p.error_mix_plot(data),
            "over_time": p.over_time_plot(data),
        }
    st = data.stats
    h: list[str] = []
    h.append("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>")
    h.append("<meta name='viewport' content='width=device-width, initial-scale=1'>")
    h.append("<title>realprobe report</title>")
    h.append(f"<style>{CSS}</style></head><body>")
    h.append("<h1>realprobe reliability report</h1>")
    banner = st.provenance.banner() if st.provenance else None
    if banner:
        h.append(f"<p class='banner' id='banner'>{escape(banner)}</p>")
    prov_rows = _provenance_rows(data)
    if prov_rows:
        h.append("<table id='provenance'><tbody>")
        h.extend(
            f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in prov_rows
        )
        h.append("</tbody></table>")
    w0, w1 = st.window
    h.append(
        f"<p class='meta'>Generated {escape(data.generated_at)} from "
        f"<code>{escape(data.db)}</code>;"
        f" window {escape(w0 or 'start')} → {escape(w1 or 'now')}; {st.rows} attempts over "
        f"{len(st.tools)} tools. Rates are per attempt (one stored call = one trial; the prober's"
        " own outages excluded). Intervals are 95% Wilson on the burst-adjusted effective n.</p>"
    )
    if st.overall:
        o = st.overall
        h.append(
            f"<p>All tools: <b>{_pct(o.rate)}</b> success ({o.successes}/{o.n}),"
            f" Wilson 95% {_ci(o.wilson95)}.</p>"
        )
    h.append("<h2>Per tool</h2><table id='tools'><thead><tr>")
    h.extend(f"<th>{escape(c)}</th>" for c in COLUMNS)
    h.append("</tr></thead><tbody>")
    for t in st.tools:
        cells = _row(t)
        h.append(
            "<tr>"
            + "".join(
                f"<td{' class=num' if 0 < i < 11 else ''}>{escape(c)}</td>"
                for i, c in enumerate(cells)
            )
            + "</tr>"
        )
    h.append("</tbody></table>")

    h.append("<h2>Drift</h2>")
    if data.drift is None:
        h.append(f"<p class='meta'>{escape(data.drift_note or 'no drift comparison')}</p>")
    else:
        d = data.drift
        h.append(
            f"<p class='meta'>Baseline {escape(str(d.baseline[0]))} → {escape(str(d.baseline[1]))};"
            f" current {escape(str(d.current[0]))} → {escape(str(d.current[1]))}"
            f"{' (' + escape(data.drift_note) + ')' if data.drift_note else ''}."
            f" Tests corrected across tools ({escape(d.correction)}, α={d.alpha});"
            f" success flagged when it moves ≥ {100 * d.min_success_change:.0f} points,"
            " latency when"
            f" the median moves ≥ {100 * d.min_latency_change:.0f}%.</p>"
        )
        h.append(
            "<table id='drift'><thead><tr><th>tool</th><th>verdict</th><th>n base / cur</th>"
            "<th>success base → cur</th><th>p adj</th><th>median ms base → cur</th>"
            "<th>p adj</th><th>error mix V</th><th>p adj</th></tr></thead><tbody>"
        )
        for dt in d.tools:
            cls = dt.verdict.split()[0]
            s, lat, mix = dt.success, dt.latency, dt.error_mix
            cells = [
                f"<td>{escape(dt.tool)}</td>",
                f"<td><span class='badge {cls}'>{escape(dt.verdict)}</span></td>",
                f"<td class=num>{dt.n_baseline} / {dt.n_current}</td>",
                f"<td class=num>{_pct(s.baseline)} → {_pct(s.current)}</td>" if s else "<td>-</td>",
                f"<td class=num>{s.p_adjusted:.3g}</td>"
                if s and s.p_adjusted is not None
                else "<td>-</td>",
                f"<td class=num>{_ms(lat.baseline_p50)} → {_ms(lat.current_p50)}</td>"
                if lat
                else "<td>-</td>",
                f"<td class=num>{lat.p_adjusted:.3g}</td>"
                if lat and lat.p_adjusted is not None
                else "<td>-</td>",
                f"<td class=num>{mix.cramers_v:.2f}</td>" if mix else "<td>-</td>",
                f"<td class=num>{mix.p_adjusted:.3g}</td>"
                if mix and mix.p_adjusted is not None
                else "<td>-</td>",
            ]
            h.append("<tr>" + "".join(cells) + "</tr>")
        h.append("</tbody></table>")

    captions = {
        "success": "Success rate per attempt; whiskers are the 95% interval.",
        "latency": (
            "Empirical CDF of successful calls' latency; dashed: the censored lognormal fit."
        ),
        "errors": "Failures as a share of all attempts, split by error code.",
        "over_time": "Success rate per period (grey: no calls).",
    }
    titles = {
        "success": "Success rate",
        "latency": "Latency",
        "errors": "Error mix",
        "over_time": "Success over time",
    }
    for key, svg in plots.items():
        h.append(
            f"<h2>{titles.get(key, key)}</h2><figure id='plot-{key}'>{svg}"
            f"<figcaption>{escape(captions.get(key, ''))}</figcaption></figure>"
        )
    h.append("<p class='meta'>How to read these numbers: docs/statistics.md.</p>")
    h.append("</body></html>")
    return "\n".join(h)


def render_markdown(data: ReportData) -> str:
    st = data.stats
    lines = [
        "# realprobe reliability report",
        "",
        f"Generated {data.generated_at} from `{data.db}`; window {st.window[0] or 'start'} → "
        f"{st.window[1] or 'now'}; {st.rows} attempts over {len(st.tools)} tools. Rates are per "
        "attempt; intervals are 95% Wilson on the burst-adjusted effective n.",
        "",
        "| " + " | ".join(c.replace("|", "\\|") for c in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    banner = st.provenance.banner() if st.provenance else None
    head = [f"> **{banner}**", ""] if banner else []
    head += [f"- **{k}**: {v}" for k, v in _provenance_rows(data)]
    lines[2:2] = [*head, ""] if head else []
    for t in st.tools:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in _row(t)) + " |")
    lines.append("")
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
        for d in data.drift.tools:
            s = f"{_pct(d.success.baseline)} → {_pct(d.success.current)}" if d.success else "-"
            lat = (
                f"{_ms(d.latency.baseline_p50)} → {_ms(d.latency.current_p50)}"
                if d.latency
                else "-"
            )
            lines.append(f"| {d.tool} | {d.verdict} | {s} | {lat} |")
        lines.append("")
    return "\n".join(lines)


def render_json(data: ReportData) -> str:
    return json.dumps(data.model_dump(mode="json"), indent=2)
