"""The report's SVG plots: well-formed, one mark per tool (per period for the heat map), names
escaped, the colour ramp of the success rate, the axes' ticks, and no plotting library or
optimiser imported to draw them."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from probe_helpers import synthetic_rows

from realprobe import Store, build_report
from realprobe.report import plots as p
from realprobe.report import render_html

T0 = 1_790_000_000.0
SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = 'evil</text><script>alert(1)</script>&"x'


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "p.db"
    with Store(path) as store:
        for i, name in enumerate(("agify_age", "catfact_fact", HOSTILE)):
            for day in (0, 2):  # day 1 has no calls: a grey cell
                for row in synthetic_rows(name, 60, p_fail=0.1 + 0.1 * i, seed=3 * i + day,
                                          t0=T0 + day * 86400, step_s=1200):
                    store.insert_probe(row)
    return path


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # raises on anything that is not well-formed XML


def test_plots_are_well_formed_and_escape_names(db: Path) -> None:
    data = build_report(db)
    for fn in (p.success_plot, p.latency_plot, p.error_mix_plot, p.over_time_plot):
        svg = fn(data)
        root = _parse(svg)
        assert root.tag == f"{SVG}svg" and root.get("role") == "img"
        texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
        assert HOSTILE in texts, fn.__name__  # the name shown as text, not markup
        assert "<script" not in svg
        assert len(list(root.iter(f"{SVG}path"))) > 5


def test_one_mark_per_tool_with_its_numbers(db: Path) -> None:
    data = build_report(db)
    root = _parse(p.success_plot(data))
    tips = [t.text or "" for t in root.iter(f"{SVG}title")]
    for t in data.stats.tools:
        assert any(tip.startswith(f"{t.tool}: {100 * t.success.rate:.1f}% of {t.success.n}")
                   for tip in tips), t.tool
    root = _parse(p.latency_plot(data))
    fits = [t for t in (e.text or "" for e in root.iter(f"{SVG}title")) if "lognormal fit" in t]
    assert len(fits) == len(data.stats.tools)


def test_heat_map_has_a_cell_per_tool_and_period(db: Path) -> None:
    data = build_report(db)
    ts = data.over_time
    root = _parse(p.over_time_plot(data))
    cells = [e for e in root.iter(f"{SVG}path") if e.find(f"{SVG}title") is not None]
    assert len(cells) == len(ts.tools) * len(ts.starts)
    grey = [c for c in cells if c.get("fill") == p.NO_CALLS]
    assert len(grey) == sum(v is None for series in ts.tools.values() for v in series) > 0
    assert all("no calls" in (c.findtext(f"{SVG}title") or "") for c in grey)


def test_colour_ramp_matches_rdylgn() -> None:
    assert p.colour_for_rate(0.0) == "#a50026"
    assert p.colour_for_rate(0.5) == "#ffffbf"
    assert p.colour_for_rate(1.0) == "#006837"
    assert p.colour_for_rate(-1) == "#a50026" and p.colour_for_rate(2) == "#006837"
    # matplotlib 3.11.2's RdYlGn at these rates, `[round(255 * c) for c in cm(rate)[:3]]`
    # (copied here so that the test extra does not pull matplotlib for one check)
    theirs = {0.05: (189, 23, 38), 0.33: (253, 189, 109), 0.61: (211, 236, 135),
              0.87: (48, 163, 86)}
    for rate, rgb in theirs.items():
        ours = p._rgb(p.colour_for_rate(rate))
        assert max(abs(a - b) for a, b in zip(ours, rgb, strict=True)) <= 3, rate


def test_ticks() -> None:
    assert p.nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert p.nice_ticks(0.0, 0.3, 5) == [0.0, 0.1, 0.2, 0.3]
    assert p.nice_ticks(0.0, 0.05, 5) == [0.0, 0.01, 0.02, 0.03, 0.04, 0.05]
    assert p.log_ticks(20.0, 3000.0) == [20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0]
    assert p.log_ticks(0.5, 200_000.0) == [1.0, 10.0, 100.0, 1000.0, 10_000.0, 100_000.0]


def test_empty_plots_still_draw_axes(db: Path) -> None:
    data = build_report(db)
    empty = data.model_copy(update={
        "stats": data.stats.model_copy(update={"tools": []}),
        "latency_quantiles": {},
        "over_time": data.over_time.model_copy(update={"tools": {}, "counts": {}, "starts": []}),
    })
    for fn in (p.success_plot, p.latency_plot, p.error_mix_plot, p.over_time_plot):
        _parse(fn(empty))


def test_report_draws_without_matplotlib_or_the_optimiser(db: Path) -> None:
    """A fresh process builds and renders the report: nothing imports matplotlib, and
    scipy.optimize / scipy.stats wait until a fit or a tiny sample needs them."""
    code = (
        "import json, sys\n"
        "from realprobe import build_report\nfrom realprobe.report import render_html\n"
        f"html = render_html(build_report({str(db)!r}))\n"
        "print(json.dumps([html.count('<svg'), sorted(m for m in sys.modules if m in "
        "('matplotlib', 'scipy.optimize', 'scipy.stats'))]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    count, heavy = json.loads(out.stdout)
    assert count == 4 and heavy == []


def test_same_data_same_svg(db: Path) -> None:
    data = build_report(db)
    first = render_html(data)
    assert render_html(data) == first


def test_long_legend_beside_one_tool_stays_inside(db: Path) -> None:
    data = build_report(db)
    one = data.stats.tools[0]
    codes = list(p.CODE_COLOURS)
    errors = one.errors.model_copy(update={
        "counts": dict.fromkeys(codes, 1),
        "share_of_attempts": dict.fromkeys(codes, 0.01),
    })
    single = data.model_copy(update={"stats": data.stats.model_copy(
        update={"tools": [one.model_copy(update={"errors": errors})]})})
    root = _parse(p.error_mix_plot(single))
    height = float(root.get("height") or 0)
    legend_y = [float(t.get("y") or 0) for t in root.iter(f"{SVG}text")
                if (t.text or "") in codes]
    assert len(legend_y) == len(codes) and max(legend_y) < height
