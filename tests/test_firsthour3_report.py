"""A report section with nothing to say is one line: after one short run, Drift says no tool
can be compared instead of a row per tool saying "insufficient data"; when some tools can be
compared, the others are named in one line under the table."""

from __future__ import annotations

from pathlib import Path

from probe_helpers import synthetic_rows

from realprobe import Store, build_report
from realprobe.report import render_html, render_markdown

T0 = 1_790_000_000.0
TOOLS = ("catfact_fact", "agify_age", "advice_random", "kanye_quote")


def _db(path: Path, calls: dict[str, int]) -> Path:
    with Store(path) as store:
        for i, (tool, n) in enumerate(calls.items()):
            for row in synthetic_rows(tool, n, p_fail=0.3, seed=i, t0=T0, step_s=30):
                store.insert_probe(row)
    return path


def test_one_short_run_is_one_drift_line(tmp_path: Path) -> None:
    data = build_report(_db(tmp_path / "one.db", dict.fromkeys(TOOLS, 5)))
    html = render_html(data, plots={})
    drift = html.split("<h2>Drift</h2>", 1)[1].split("<h2>", 1)[0]
    assert "id='drift-none'" in drift and "None of the 4 tools" in drift
    assert "insufficient" not in drift and "<table" not in drift
    md = render_markdown(data).split("## Drift", 1)[1]
    assert "None of the 4 tools" in md and "| tool |" not in md


def test_tools_too_short_to_compare_are_named_once(tmp_path: Path) -> None:
    data = build_report(_db(tmp_path / "mixed.db", {"catfact_fact": 400, "agify_age": 4}))
    html = render_html(data, plots={})
    drift = html.split("<h2>Drift</h2>", 1)[1].split("<h2>", 1)[0]
    assert "<td>catfact_fact</td>" in drift and "<td>agify_age</td>" not in drift
    assert "id='drift-short'" in drift and "agify_age" in drift
