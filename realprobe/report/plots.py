"""The report's plots as inline SVG strings (matplotlib figures drawn straight to SVG, without
pyplot or a GUI backend; no files, no network). Each plot is one axes, so a report over many
tools stays fast: the latency plot is one box row per tool, not one small ECDF per tool."""

from __future__ import annotations

import io
import math
import re
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from realprobe.report.build import ReportData

STYLE: Any = {
    "svg.fonttype": "none",  # text stays text: smaller, selectable
    "svg.hashsalt": "realprobe",  # stable ids: the same data gives the same file
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}

CODE_COLOURS = {
    "TIMEOUT": "#d62728",
    "NETWORK_ERROR": "#9467bd",
    "RATE_LIMIT_ERROR": "#ff7f0e",
    "SERVER_ERROR": "#8c564b",
    "INVALID_INPUT": "#e377c2",
    "NOT_FOUND": "#7f7f7f",
    "AUTH_ERROR": "#bcbd22",
    "INVALID_RESPONSE": "#17becf",
    "OPERATION_FAILED": "#1f77b4",
}


def to_svg(fig: Figure, title: str, prefix: str) -> str:
    """The figure as an inline <svg>; its element ids get `prefix` so several plots can share
    one HTML document without clashing ids (matplotlib names them patch_1, axes_1, ...)."""
    buf = io.StringIO()
    with matplotlib.rc_context(STYLE):
        fig.savefig(buf, format="svg")  # margins are set by _figure: no second "tight" draw
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r'\bid="', f'id="{prefix}-', text)
    text = text.replace("url(#", f"url(#{prefix}-").replace('href="#', f'href="#{prefix}-')
    return text.replace("<svg ", f'<svg role="img" aria-label="{title}" class="plot" ', 1)


def _height(n: int) -> float:
    return max(1.8, 0.28 * n + 0.9)


def _figure(
    width: float, height: float, labels: list[str], *, right: float = 0.2, bottom: float = 0.5
) -> tuple[Figure, Any]:
    """One axes with margins (inches) sized for the y tick `labels`, so the SVG needs no
    bbox_inches="tight" (which draws every figure twice)."""
    left = 0.25 + 0.065 * max((len(s) for s in labels), default=4)
    width = max(width, left + right + 3.0)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(width, height))
        fig.subplots_adjust(
            left=left / width, right=1 - right / width, bottom=bottom / height,
            top=1 - 0.15 / height,
        )
        return fig, fig.add_subplot()


def _plain_log_ticks(axis: Any) -> None:
    """Log-scale ticks written as 100, 1000 rather than mathtext 10^2 (mathtext is slow)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def success_plot(data: ReportData) -> str:
    tools = data.stats.tools
    names = [t.tool for t in tools]
    rate = np.array([t.success.rate for t in tools])
    lo = np.array([t.success.burst_adjusted95[0] for t in tools])
    hi = np.array([t.success.burst_adjusted95[1] for t in tools])
    fig, ax = _figure(7, _height(len(names)), names)
    y = np.arange(len(names))[::-1]
    ax.errorbar(
        rate,
        y,
        xerr=[np.maximum(rate - lo, 0.0), np.maximum(hi - rate, 0.0)],
        fmt="o",
        color="#1f77b4",
        ecolor="#555",
        capsize=3,
        markersize=4,
    )
    ax.set_yticks(y, names)
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("success rate per attempt (whiskers: 95% interval, burst-adjusted)")
    ax.grid(axis="x", alpha=0.3)
    return to_svg(fig, "success rate per tool with 95% intervals", "success")


def latency_plot(data: ReportData) -> str:
    """Per tool, the successes' latency as a box (p25-p75, median line, whiskers p5-p95) on a
    log axis, and a diamond at the median of the censored lognormal fit (exp(mu))."""
    q = data.latency_quantiles
    names = [t.tool for t in data.stats.tools if t.tool in q]
    fits = {t.tool: t.latency.lognormal for t in data.stats.tools}
    fig, ax = _figure(7, _height(len(names)), names)
    y = np.arange(len(names))[::-1]
    if names:
        qs = np.array([np.quantile(np.asarray(q[n], dtype=float), [0.05, 0.25, 0.5, 0.75, 0.95])
                       for n in names])
        ax.hlines(y, qs[:, 0], qs[:, 4], color="#555", lw=1)  # whiskers p5-p95
        ax.barh(y, qs[:, 3] - qs[:, 1], left=qs[:, 1], height=0.6, color="#cfe2f3",
                edgecolor="#1f77b4", lw=0.8)  # box p25-p75
        ax.plot(qs[:, 2], y, "|", color="#1f77b4", markersize=9, mew=2, label="median")
        fit_x = [math.exp(f.mu) if (f := fits.get(n)) is not None else np.nan for n in names]
        ax.plot(fit_x, y, "D", color="#d62728", markersize=4, label="lognormal fit, median")
        ax.set_xscale("log")
        _plain_log_ticks(ax.xaxis)
        ax.legend(fontsize=7, loc="lower right", frameon=False)
    ax.set_yticks(y, names)
    ax.set_xlabel("latency of successes, ms (log): box p25-p75, whiskers p5-p95")
    ax.grid(axis="x", alpha=0.3, which="both")
    return to_svg(fig, "latency per tool", "latency")


def error_mix_plot(data: ReportData) -> str:
    tools = data.stats.tools
    names = [t.tool for t in tools]
    codes = sorted({c for t in tools for c in t.errors.counts})
    fig, ax = _figure(7, _height(len(names)), names, right=1.6)
    y = np.arange(len(names))[::-1]
    left = np.zeros(len(names))
    for code in codes:
        share = np.array([t.errors.share_of_attempts.get(code, 0.0) for t in tools])
        ax.barh(y, share, left=left, color=CODE_COLOURS.get(code, "#999"), label=code, height=0.7)
        left += share
    ax.set_yticks(y, names)
    ax.set_xlabel("share of attempts that failed, by error code")
    if codes:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_xlim(0, max(0.05, float(left.max()) * 1.05) if len(left) else 1)
    return to_svg(fig, "error mix per tool", "errors")


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def over_time_plot(data: ReportData) -> str:
    ts = data.over_time
    names = sorted(ts.tools)
    grid = (
        np.array([[np.nan if v is None else v for v in ts.tools[n]] for n in names])
        if names
        else np.zeros((0, 0))
    )
    fig, ax = _figure(7, _height(len(names)) + 0.6, names, right=1.0, bottom=1.1)
    if grid.size:
        im = ax.imshow(
            np.ma.masked_invalid(grid),
            aspect="auto",
            cmap="RdYlGn",
            vmin=0,
            vmax=1,
            interpolation="nearest",
        )
        fig.colorbar(im, ax=ax, fraction=0.03, label="success rate")
        ax.set_yticks(np.arange(len(names)), names)
        n = len(ts.starts)
        step = max(1, n // 6)
        ax.set_xticks(
            np.arange(0, n, step),
            [ts.starts[i][:16].replace("T", " ") for i in range(0, n, step)],
            rotation=30,
            ha="right",
        )
    ax.set_xlabel(f"period start (UTC), one cell = {_duration(ts.period_s)}")
    return to_svg(fig, "success rate over time", "over_time")
