"""The report's plots as inline SVG strings (matplotlib, Agg backend; no files, no network)."""

from __future__ import annotations

import io
import math
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from realprobe.report.build import ReportData

plt.rcParams.update(
    {
        "svg.fonttype": "none",  # text stays text: smaller, selectable
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }
)

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
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r'\bid="', f'id="{prefix}-', text)
    text = text.replace("url(#", f"url(#{prefix}-").replace('href="#', f'href="#{prefix}-')
    return text.replace("<svg ", f'<svg role="img" aria-label="{title}" class="plot" ', 1)


def _height(n: int) -> float:
    return max(1.8, 0.28 * n + 0.9)


def success_plot(data: ReportData) -> str:
    tools = data.stats.tools
    names = [t.tool for t in tools]
    rate = np.array([t.success.rate for t in tools])
    lo = np.array([t.success.burst_adjusted95[0] for t in tools])
    hi = np.array([t.success.burst_adjusted95[1] for t in tools])
    fig, ax = plt.subplots(figsize=(7, _height(len(names))))
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


def latency_ecdf_plot(data: ReportData) -> str:
    q = data.latency_quantiles
    names = sorted(q)
    cols = min(5, max(1, len(names)))
    rows = max(1, math.ceil(len(names) / cols))
    fig, axes = plt.subplots(
        rows, cols, figsize=(2.2 * cols, 1.7 * rows), squeeze=False, sharey=True
    )
    fits = {t.tool: t.latency.lognormal for t in data.stats.tools}
    for ax, name in zip(axes.flat, names, strict=False):
        v = np.asarray(q[name])
        ax.step(v, np.linspace(0, 1, v.shape[0]), where="post", color="#1f77b4", lw=1.2)
        fit = fits.get(name)
        if fit is not None and v.shape[0] > 1 and v[0] > 0:
            from scipy import stats

            xs = np.geomspace(max(v[0], 1e-3), v[-1], 100)
            ax.plot(
                xs,
                stats.norm.cdf((np.log(xs) - fit.mu) / fit.sigma),
                color="#d62728",
                lw=0.9,
                ls="--",
            )
        if v.shape[0] and v[0] > 0:
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(name, fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.supxlabel("latency of successes, ms (log; dashed: lognormal fit)", fontsize=8)
    fig.tight_layout()
    return to_svg(fig, "latency ECDF per tool", "latency")


def error_mix_plot(data: ReportData) -> str:
    tools = data.stats.tools
    names = [t.tool for t in tools]
    codes = sorted({c for t in tools for c in t.errors.counts})
    fig, ax = plt.subplots(figsize=(7, _height(len(names))))
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
    fig, ax = plt.subplots(figsize=(7, _height(len(names))))
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
