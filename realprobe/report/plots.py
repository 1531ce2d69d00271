"""The report's plots as inline SVG, written directly: one panel per plot, one row per tool.

The four charts are simple marks (dots with whiskers, boxes on a log axis, stacked bars, a
grid of coloured cells), so they are drawn as SVG paths here rather than with a plotting
library: with matplotlib, importing it and laying out four figures cost about 2.5 s, more than
the whole rest of a 100,000-row report. Every mark carries a `<title>` with its numbers (a
tooltip in a browser). Element ids get a per-plot prefix, so several plots can share one HTML
document without clashing ids; the same data gives the same SVG.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

import numpy as np

from realprobe.report.build import ReportData

FONT_PX = 11
#: the legends' and colour bar's smaller labels
SMALL_FONT_PX = 10
#: average advance of a character of an 11 px sans-serif label (for margins; generous)
CHAR_PX = 6.4
ROW_PX = 20
WIDTH_PX = 680
#: the smallest a label may be drawn: a plot is never scaled below MIN_FONT_PX / SMALL_FONT_PX
#: of its width (a narrow screen scrolls it sideways in its box instead)
MIN_FONT_PX = 9

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
#: ColorBrewer RdYlGn (11 classes), low (red) to high (green): success rate 0 to 1
RDYLGN = (
    "#a50026", "#d73027", "#f46d43", "#fdae61", "#fee08b", "#ffffbf",
    "#d9ef8b", "#a6d96a", "#66bd63", "#1a9850", "#006837",
)
NO_CALLS = "#dddddd"


def _f(v: float) -> str:
    """A coordinate: one decimal is below a screen pixel."""
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


def colour_for_rate(rate: float) -> str:
    """The RdYlGn colour of a success rate in [0, 1] (linear between the 11 stops)."""
    x = min(max(rate, 0.0), 1.0) * (len(RDYLGN) - 1)
    i = min(int(x), len(RDYLGN) - 2)
    t = x - i
    a, b = _rgb(RDYLGN[i]), _rgb(RDYLGN[i + 1])
    return "#" + "".join(f"{round(p + (q - p) * t):02x}" for p, q in zip(a, b, strict=True))


def nice_ticks(lo: float, hi: float, target: int = 6) -> list[float]:
    """Round tick values (steps of 1, 2, 2.5 or 5 times a power of ten) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / target
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * mag >= raw * (1 - 1e-9))
    first = math.ceil(lo / step - 1e-9)
    last = math.floor(hi / step + 1e-9)
    return [round(k * step, 12) for k in range(first, last + 1)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten within [lo, hi]; with 1, 2 and 5 times them when the range is short."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mults = (1.0,) if b - a > 3 else (1.0, 2.0, 5.0)
    out = [m * 10.0**k for k in range(a, b + 1) for m in mults]
    return [v for v in out if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]


class Panel:
    """One plot area with tool labels down the left, an x axis along the bottom, and room on
    the right (legend, colour bar). Rows are numbered from the top."""

    def __init__(
        self,
        labels: Sequence[str],
        *,
        right: float = 16.0,
        top: float = 8.0,
        bottom: float = 40.0,
        rows: int | None = None,
        min_left: float = 0.0,
    ) -> None:
        self.labels = list(labels)
        self.left = max(min_left, 14.0 + CHAR_PX * max((len(s) for s in self.labels), default=4))
        self.top = top
        self.rows = len(self.labels) if rows is None else rows
        self.plot_h = max(3, self.rows) * ROW_PX
        self.width = max(float(WIDTH_PX), self.left + right + 320.0)
        self.plot_w = self.width - self.left - right
        self.height = top + self.plot_h + bottom
        self.lo, self.hi, self.log = 0.0, 1.0, False
        self.parts: list[str] = []

    # -- scales ---------------------------------------------------------------------------

    def x_range(self, lo: float, hi: float, *, log: bool = False) -> None:
        self.lo, self.hi, self.log = lo, hi, log

    def x(self, v: float) -> float:
        """The pixel of value v, clipped to the plot area."""
        if self.log:
            v = max(v, self.lo)
            frac = (math.log(v) - math.log(self.lo)) / (math.log(self.hi) - math.log(self.lo))
        else:
            frac = (v - self.lo) / (self.hi - self.lo)
        return self.left + min(max(frac, 0.0), 1.0) * self.plot_w

    def y(self, row: int) -> float:
        """The pixel of the centre of row `row` (0: top)."""
        return self.top + (row + 0.5) * self.plot_h / max(self.rows, 1)

    # -- marks ----------------------------------------------------------------------------

    def path(self, d: str, *, title: str | None = None, **attrs: str) -> None:
        extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
        if title is None:
            self.parts.append(f'<path d="{d}"{extra}/>')
        else:
            self.parts.append(f'<path d="{d}"{extra}><title>{escape(title)}</title></path>')

    def text(self, x: float, y: float, s: str, *, anchor: str = "middle", **attrs: str) -> None:
        extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
        self.parts.append(
            f'<text x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}"{extra}>{escape(s)}</text>'
        )

    def axes(self, ticks: Sequence[float], label: str, fmt: str = "{:g}", *,
             grid: bool = True) -> None:
        """Left and bottom spines, x ticks with labels (and vertical grid lines), the x axis
        label, and the tool names at their rows."""
        bottom = self.top + self.plot_h
        xs = [self.x(t) for t in ticks]
        if grid and xs:
            self.path("".join(f"M{_f(x)} {_f(self.top)}V{_f(bottom)}" for x in xs),
                      stroke="#000", stroke_opacity="0.12", stroke_width="0.8")
        if xs:
            self.path("".join(f"M{_f(x)} {_f(bottom)}v4" for x in xs), stroke="#000",
                      stroke_width="0.8")
        self.path(f"M{_f(self.left)} {_f(self.top)}V{_f(bottom)}H{_f(self.left + self.plot_w)}",
                  stroke="#000", stroke_width="0.8", fill="none")
        for x, t in zip(xs, ticks, strict=True):
            self.text(x, bottom + 15, fmt.format(t))
        self.text(self.left + self.plot_w / 2, bottom + 32, label)
        for i, name in enumerate(self.labels):
            self.text(self.left - 6, self.y(i) + 4, name, anchor="end")

    def svg(self, title: str, prefix: str, defs: str = "") -> str:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" '
            f'class="plot" id="{prefix}-svg" width="{_f(self.width)}" '
            f'height="{_f(self.height)}" viewBox="0 0 {_f(self.width)} {_f(self.height)}" '
            f'style="min-width:{math.ceil(self.width * MIN_FONT_PX / SMALL_FONT_PX)}px" '
            f'font-family="sans-serif" font-size="{FONT_PX}">'
        )
        body = "\n".join(self.parts)
        return f"{head}{f'<defs>{defs}</defs>' if defs else ''}\n{body}\n</svg>"


def _dot(x: float, y: float, r: float) -> str:
    return f"M{_f(x - r)} {_f(y)}a{r:g} {r:g} 0 1 0 {2 * r:g} 0a{r:g} {r:g} 0 1 0 {-2 * r:g} 0Z"


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def success_plot(data: ReportData) -> str:
    """Per tool, the success rate per attempt (dot) and its burst-adjusted 95% interval."""
    tools = data.stats.tools
    p = Panel([t.tool for t in tools])
    p.x_range(-0.02, 1.02)
    p.axes([0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
           "success rate per attempt (whiskers: 95% interval, burst-adjusted)")
    for i, t in enumerate(tools):
        y = p.y(i)
        lo, hi = t.success.burst_adjusted95
        a, b = p.x(min(lo, t.success.rate)), p.x(max(hi, t.success.rate))
        tip = (f"{t.tool}: {_pct(t.success.rate)} of {t.success.n} attempts, "
               f"95% interval {_pct(lo)} to {_pct(hi)}")
        p.path(f"M{_f(a)} {_f(y)}H{_f(b)}M{_f(a)} {_f(y - 3)}v6M{_f(b)} {_f(y - 3)}v6",
               stroke="#555", stroke_width="1", fill="none", title=tip)
        p.path(_dot(p.x(t.success.rate), y, 2.5), fill="#1f77b4", title=tip)
    return p.svg("success rate per tool with 95% intervals", "success")


def latency_plot(data: ReportData) -> str:
    """Per tool, the successes' latency as a box (p25-p75, median line, whiskers p5-p95) on a
    log axis, and a diamond at the median of the censored lognormal fit (exp(mu))."""
    q = data.latency_quantiles
    names = [t.tool for t in data.stats.tools if t.tool in q]
    fits = {t.tool: t.latency.lognormal for t in data.stats.tools}
    p = Panel(names, top=22.0)
    qs = (
        np.array([np.quantile(np.asarray(q[n], dtype=float), [0.05, 0.25, 0.5, 0.75, 0.95])
                  for n in names])
        if names
        else np.zeros((0, 5))
    )
    fit_x = [math.exp(f.mu) if (f := fits.get(n)) is not None else math.nan for n in names]
    seen = [v for v in [*qs.ravel(), *fit_x] if math.isfinite(v) and v > 0]
    lo, hi = (min(seen), max(seen)) if seen else (1.0, 1000.0)
    lo, hi = lo / 1.4, max(hi * 1.4, lo * 10)
    p.x_range(lo, hi, log=True)
    p.axes(log_ticks(lo, hi), "latency of successes, ms (log): box p25-p75, whiskers p5-p95")
    for i, name in enumerate(names):
        y = p.y(i)
        p5, p25, p50, p75, p95 = (p.x(float(v)) for v in qs[i])
        tip = (f"{name}: median {qs[i, 2]:.4g} ms; p25-p75 {qs[i, 1]:.4g}-{qs[i, 3]:.4g} ms; "
               f"p5-p95 {qs[i, 0]:.4g}-{qs[i, 4]:.4g} ms")
        p.path(f"M{_f(p5)} {_f(y)}H{_f(p95)}", stroke="#555", stroke_width="1")
        p.path(f"M{_f(p25)} {_f(y - 6)}H{_f(p75)}V{_f(y + 6)}H{_f(p25)}Z", fill="#cfe2f3",
               stroke="#1f77b4", stroke_width="0.8", title=tip)
        p.path(f"M{_f(p50)} {_f(y - 7)}V{_f(y + 7)}", stroke="#1f77b4", stroke_width="2")
        if math.isfinite(fit_x[i]):
            fx, r = p.x(fit_x[i]), 4.0
            f = fits[name]
            assert f is not None
            p.path(f"M{_f(fx)} {_f(y - r)}L{_f(fx + r)} {_f(y)}L{_f(fx)} {_f(y + r)}"
                   f"L{_f(fx - r)} {_f(y)}Z", fill="#d62728",
                   title=f"{name}: lognormal fit, median exp(mu) = {fit_x[i]:.4g} ms "
                         f"(mu {f.mu:.3f}, sigma {f.sigma:.3f})")
    # legend, above the panel on the right
    lx, ly = p.left + p.plot_w - 250, 12.0
    p.path(f"M{_f(lx)} {_f(ly - 6)}V{_f(ly + 6)}", stroke="#1f77b4", stroke_width="2")
    p.text(lx + 8, ly + 4, "median", anchor="start")
    dx = lx + 70
    p.path(f"M{_f(dx)} {_f(ly - 4)}L{_f(dx + 4)} {_f(ly)}L{_f(dx)} {_f(ly + 4)}"
           f"L{_f(dx - 4)} {_f(ly)}Z", fill="#d62728")
    p.text(dx + 8, ly + 4, "lognormal fit, median", anchor="start")
    return p.svg("latency per tool", "latency")


def error_mix_plot(data: ReportData) -> str:
    """Per tool, stacked bars: the share of attempts that failed with each error code."""
    tools = data.stats.tools
    codes = sorted({c for t in tools for c in t.errors.counts})
    legend_w = 36.0 + 7.2 * max((len(c) for c in codes), default=0)  # capitals run wide
    p = Panel([t.tool for t in tools], right=max(16.0, legend_w))
    totals = [sum(t.errors.share_of_attempts.values()) for t in tools]
    top = max(0.05, max(totals, default=0.0) * 1.05)
    p.x_range(0.0, top)
    p.axes(nice_ticks(0.0, top, 5), "share of attempts that failed, by error code")
    for i, t in enumerate(tools):
        y, left = p.y(i), 0.0
        for code in codes:
            share = t.errors.share_of_attempts.get(code, 0.0)
            if share <= 0:
                continue
            a, b = p.x(left), p.x(left + share)
            p.path(f"M{_f(a)} {_f(y - 7)}H{_f(b)}V{_f(y + 7)}H{_f(a)}Z",
                   fill=CODE_COLOURS.get(code, "#999999"),
                   title=f"{t.tool}: {code} {t.errors.counts.get(code, 0)} "
                         f"({_pct(share)} of attempts)")
            left += share
    lx = p.left + p.plot_w + 12
    p.height = max(p.height, p.top + 16 * len(codes) + 8)  # a long legend beside few tools
    for j, code in enumerate(codes):
        y = p.top + 8 + 16 * j
        p.path(f"M{_f(lx)} {_f(y - 5)}h12v10h-12Z", fill=CODE_COLOURS.get(code, "#999999"))
        p.text(lx + 17, y + 4, code, anchor="start", font_size=str(SMALL_FONT_PX))
    return p.svg("error mix per tool", "errors")


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def over_time_plot(data: ReportData) -> str:
    """Per tool and period, a cell coloured by the success rate (RdYlGn, grey: no calls),
    with a colour bar."""
    ts = data.over_time
    names = sorted(ts.tools)
    p = Panel(names, right=70.0, bottom=100.0, min_left=100.0)
    n = len(ts.starts)
    bottom = p.top + p.plot_h
    p.x_range(0.0, float(max(n, 1)))
    cell_w = p.plot_w / max(n, 1)
    for i, name in enumerate(names):
        y0 = p.top + i * p.plot_h / max(p.rows, 1)
        h = p.plot_h / max(p.rows, 1)
        rates, counts = ts.tools[name], ts.counts.get(name, [])
        for j, v in enumerate(rates):
            x0 = p.left + j * cell_w
            start = ts.starts[j][:16].replace("T", " ") if j < n else ""
            calls = counts[j] if j < len(counts) else 0
            p.path(
                f"M{_f(x0)} {_f(y0)}h{_f(cell_w)}v{_f(h)}h{_f(-cell_w)}Z",
                fill=NO_CALLS if v is None else colour_for_rate(v),
                title=f"{name}, {start}: "
                + ("no calls" if v is None else f"{_pct(v)} of {calls} calls"),
            )
    step = max(1, n // 6)
    ticks = list(range(0, n, step))
    if ticks:
        p.path("".join(f"M{_f(p.left + (j + 0.5) * cell_w)} {_f(bottom)}v4" for j in ticks),
               stroke="#000", stroke_width="0.8")
    for j in ticks:
        x, y = p.left + (j + 0.5) * cell_w, bottom + 14
        p.text(x, y, ts.starts[j][:16].replace("T", " "), anchor="end",
               transform=f"rotate(-30 {_f(x)} {_f(y)})")
    p.path(f"M{_f(p.left)} {_f(p.top)}V{_f(bottom)}H{_f(p.left + p.plot_w)}", stroke="#000",
           stroke_width="0.8", fill="none")
    p.text(p.left + p.plot_w / 2, bottom + 92,
           f"period start (UTC), one cell = {_duration(ts.period_s)}")
    for i, name in enumerate(p.labels):
        p.text(p.left - 6, p.y(i) + 4, name, anchor="end")
    # colour bar: the RdYlGn ramp from 0 (bottom) to 1 (top)
    bx, bw, bh = p.left + p.plot_w + 12, 10.0, min(p.plot_h, 160.0)
    stops = "".join(
        f'<stop offset="{k / (len(RDYLGN) - 1):.3f}" stop-color="{c}"/>'
        for k, c in enumerate(RDYLGN)
    )
    defs = (f'<linearGradient id="over_time-ramp" x1="0" y1="1" x2="0" y2="0">{stops}'
            "</linearGradient>")
    p.path(f"M{_f(bx)} {_f(p.top)}h{bw:g}v{_f(bh)}h{-bw:g}Z", fill="url(#over_time-ramp)",
           stroke="#555", stroke_width="0.5")
    for v in (0.0, 0.5, 1.0):
        yv = p.top + bh * (1 - v)
        p.path(f"M{_f(bx + bw)} {_f(yv)}h3", stroke="#000", stroke_width="0.8")
        p.text(bx + bw + 5, yv + 4, f"{v:g}", anchor="start", font_size=str(SMALL_FONT_PX))
    p.text(bx + bw + 5, p.top + bh + 16, "success", anchor="start", font_size=str(SMALL_FONT_PX))
    return p.svg("success rate over time", "over_time", defs)
