"""The live status view: the last 24 h per tool, up / degraded / down, with the interval.

Verdicts use the interval, not the point estimate:
- `down`: calls in the last hour and none succeeded,
- `degraded`: the upper bound of the 24 h success interval is under `DEGRADED_BELOW`
  (we are confident the API is worse than that), or the last hour lost more than a fifth,
- `up`: otherwise; `no data` without calls in 24 h.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass

from realprobe.monitor.aggregate import Aggregator
from realprobe.probes.stats import interval_text

DEGRADED_BELOW = 0.95
DAY_S = 86400.0
HOUR_S = 3600.0


@dataclass
class ToolStatus:
    tool: str
    api: str
    target_kind: str
    vantage: str
    state: str  # up | degraded | down | no data
    n: int
    ok: int
    ratio: float | None
    lower: float | None
    upper: float | None
    hours: list[tuple[int, int]]  # (n, ok) per hour, oldest first
    last_ok_ts: float | None


def statuses(agg: Aggregator, now: float | None = None) -> list[ToolStatus]:
    agg.refresh()
    now = time.time() if now is None else now
    out = []
    quoted = agg.quoted(now - DAY_S)  # the interval `realprobe stats` quotes
    for key, s in sorted(agg.snapshot().items()):
        n, k = s.window(now - DAY_S)
        hn, hk = s.window(now - HOUR_S)
        hours = []
        for h in range(24, 0, -1):
            lo_m, hi_m = int((now - h * HOUR_S) // 60), int((now - (h - 1) * HOUR_S) // 60)
            cells = [c for m, c in s.minutes.items() if lo_m <= m < hi_m]
            hours.append((sum(c[0] for c in cells), sum(c[1] for c in cells)))
        tool, api, kind, vantage = key
        lower = upper = ratio = None
        if n:
            ratio = k / n
            lower, upper = quoted.get((tool, kind, vantage), (None, None))
        out.append(ToolStatus(tool, api, kind, vantage, _state(n, upper, hn, hk), n, k, ratio,
                              lower, upper, hours, s.last_ok_ts))
    return out


def _state(n: int, upper: float | None, hn: int, hk: int) -> str:
    if n == 0:
        return "no data"
    if hn > 0 and hk == 0:
        return "down"
    if (upper is not None and upper < DEGRADED_BELOW) or (hn > 0 and hk / hn < 0.8):
        return "degraded"
    return "up"


_COLOURS = {"up": "#1a7f37", "degraded": "#bf8700", "down": "#cf222e", "no data": "#6e7781"}


def render_status(rows: list[ToolStatus], *, title: str, refresh_s: int = 30) -> str:
    """A self-contained page that reloads itself every `refresh_s` seconds."""
    body = []
    for r in rows:
        cells = "".join(_hour_cell(n, k) for n, k in r.hours)
        interval = "-" if r.ratio is None else f"{r.ratio:.1%}"
        if r.ratio is not None and r.lower is not None and r.upper is not None:
            interval += f" {interval_text((r.lower, r.upper))}"
        body.append(
            "<tr>"
            f"<td>{html.escape(r.tool)}</td><td>{html.escape(r.api)}</td>"
            f"<td>{html.escape(r.target_kind)}</td><td>{html.escape(r.vantage)}</td>"
            f'<td><b style="color:{_COLOURS[r.state]}">{r.state}</b></td>'
            f"<td>{interval}</td><td>{r.ok}/{r.n}</td>"
            f'<td class="bar">{cells}</td></tr>'
        )
    from realprobe.probes.provenance import kinds_banner

    said = kinds_banner(sorted({r.target_kind for r in rows})) if rows else None
    banner = f'<p class="warn">{html.escape(said)}</p>' if said else ""
    summary = {s: sum(r.state == s for r in rows) for s in _COLOURS}
    counts = " · ".join(f"{v} {k}" for k, v in summary.items() if v)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{refresh_s}">
<title>{html.escape(title)}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 2em; color: #1f2328; }}
table {{ border-collapse: collapse; }}
td, th {{ padding: 4px 10px; border-bottom: 1px solid #d0d7de; text-align: left; }}
.bar span {{ display: inline-block; width: 8px; height: 18px; margin-right: 1px; }}
.warn {{ background: #fff8c5; border: 1px solid #bf8700; padding: 8px; font-weight: bold; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
{banner}
<p>Last 24 hours per tool, refreshed every {refresh_s} s from the probe database.
{counts}. Degraded: the 95% interval's upper bound is under {DEGRADED_BELOW:.0%}, or the
last hour lost more than a fifth; down: nothing succeeded in the last hour.</p>
<table><thead><tr><th>tool</th><th>api</th><th>target</th><th>vantage</th><th>state</th>
<th>success 24 h [95% CI]</th><th>ok/n</th><th>hourly (oldest left)</th></tr></thead>
<tbody>{"".join(body)}</tbody></table>
</body></html>
"""


def _hour_cell(n: int, k: int) -> str:
    if n == 0:
        colour, tip = "#eaeef2", "no calls"
    else:
        ratio = k / n
        colour = "#1a7f37" if ratio >= 0.95 else "#bf8700" if ratio >= 0.5 else "#cf222e"
        tip = f"{k}/{n} ok"
    return f'<span style="background:{colour}" title="{tip}"></span>'
