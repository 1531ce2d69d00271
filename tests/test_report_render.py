"""The report: HTML (self-contained, opened in a real headless browser), Markdown and JSON.

The browser test needs Chromium and the `playwright` package (never `playwright install`):
    apt-get install -y chromium && pip install playwright
It is skipped, with that reason, when either is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from probe_helpers import synthetic_rows
from test_stats_cli import one_line_error, run_cli

from realprobe import Store, build_report
from realprobe.report import render_html, render_json, render_markdown

T0 = 1_790_000_000.0
PLOTS = ("success", "latency", "errors", "over_time")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "p.db"
    with Store(path) as store:
        for i, (name, p_fail, mu) in enumerate(
            [("catfact_fact", 0.1, 5.0), ("agify_age", 0.3, 5.5), ("advice_random", 0.0, 4.5)]
        ):
            # two days; agify gets worse on the second
            for day in range(2):
                pf = p_fail + (0.3 if name == "agify_age" and day == 1 else 0.0)
                for row in synthetic_rows(name, 150, p_fail=pf, mu=mu, seed=10 * i + day,
                                          t0=T0 + day * 86400, step_s=400):
                    store.insert_probe(row)
    return path


def test_html_is_self_contained(db: Path) -> None:
    html = render_html(build_report(db))
    assert html.startswith("<!DOCTYPE html>")
    for key in PLOTS:
        assert f"id='plot-{key}'" in html
    assert html.count("<svg") == len(PLOTS)
    # nothing is fetched: no scripts, stylesheets, images or fonts from anywhere
    assert "<script" not in html and "<link" not in html and "<img" not in html
    assert not re.search(r"(src|href)\s*=\s*['\"]?(https?:)?//", html)
    assert not re.search(r"url\((?!#)", html) and "@import" not in html  # url(#id) is local
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))  # four SVGs, no clashing element ids
    for name in ("catfact_fact", "agify_age", "advice_random"):
        assert f"<td>{name}</td>" in html
    assert "per attempt" in html


def test_drift_section_flags_the_tool_that_got_worse(db: Path) -> None:
    data = build_report(db)
    assert data.drift is not None
    verdicts = {t.tool: t.verdict for t in data.drift.tools}
    assert verdicts["agify_age"] == "worse"
    assert verdicts["catfact_fact"] == "stable"
    assert "badge worse" in render_html(data, plots={})


def test_markdown_and_json(db: Path) -> None:
    data = build_report(db)
    md = render_markdown(data)
    assert md.startswith("# realprobe reliability report")
    assert md.count("| catfact_fact |") == 2  # the tool table and the drift table
    doc = json.loads(render_json(data))
    assert {t["tool"] for t in doc["stats"]["tools"]} == {"catfact_fact", "agify_age",
                                                          "advice_random"}
    series = doc["over_time"]["tools"]["agify_age"]
    assert len(series) == len(doc["over_time"]["starts"]) >= 2


def test_report_cli(db: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "r.html"
    code, _, err = run_cli(["report", "--db", str(db), "-o", str(out)], monkeypatch, capsys)
    assert code == 0, err
    assert out.read_text().count("<svg") == len(PLOTS)
    code, text, _ = run_cli(["report", "--db", str(db), "--format", "json"], monkeypatch, capsys)
    assert code == 0 and json.loads(text)["stats"]["rows"] == 900
    for args, needle in [
        (["--format", "pdf"], "html, md or json"),
        (["--since", "2031-01-01"], "no probe rows"),
        (["--baseline", "14d..7d"], "both --baseline and --current"),
        (["--tools", "agify_aeg"], "Did you mean"),
    ]:
        code, _, err = run_cli(["report", "--db", str(db), *args], monkeypatch, capsys)
        assert needle in one_line_error(code, err), args
    empty = tmp_path / "empty.db"
    Store(empty).close()
    code, _, err = run_cli(["report", "--db", str(empty)], monkeypatch, capsys)
    assert "no probe rows" in one_line_error(code, err)


def _chromium() -> str | None:
    for cand in (os.environ.get("REALPROBE_CHROMIUM"), "/usr/bin/chromium",
                 shutil.which("chromium"), shutil.which("chromium-browser")):
        if cand and Path(cand).exists():
            return cand
    return None


CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _browser_and_report(db: Path, tmp_path: Path) -> tuple[str, Any, Path]:
    """Chromium's path, playwright's entry point and the report written to a file (the test
    is skipped without Chromium or playwright)."""
    exe = _chromium()
    if exe is None:
        pytest.skip("no Chromium found (CI: apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright not installed (CI: pip install playwright; no playwright install)")
    out = tmp_path / "report.html"
    out.write_text(render_html(build_report(db)), encoding="utf-8")
    return exe, sync_playwright, out


def test_report_renders_in_a_headless_browser(db: Path, tmp_path: Path) -> None:
    exe, sync_playwright, out = _browser_and_report(db, tmp_path)
    problems: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: problems.append(f"{m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(out.as_uri(), wait_until="load")
            assert page.title() == "realprobe report"
            assert page.locator("#tools tbody tr").count() == 3
            for key in PLOTS:
                svg = page.locator(f"#plot-{key} svg")
                assert svg.count() == 1
                box = svg.bounding_box()
                assert box is not None and box["width"] > 200 and box["height"] > 80, key
                assert svg.locator("path").count() > 5, key  # something was drawn
            assert page.locator("#drift .badge.worse").count() == 1
        finally:
            browser.close()
    assert problems == []
    assert [u for u in requests if not u.startswith("file://")] == []


@pytest.mark.parametrize("how", ["censored-fit", "censored-mixture"])
def test_extrapolated_percentiles_are_marked_and_no_none_in_prose(db: Path, how: str) -> None:
    """The report marks exactly what `stats` marks (`LatencyStats.extrapolated`): a censored
    mixture's percentiles as a censored lognormal's."""
    data = build_report(db)
    tool = data.stats.tools[0]
    tool.latency.percentiles = how  # as when the deadline cut into the latency
    assert data.drift is not None
    data.drift.baseline = (None, data.drift.baseline[1])  # an open window end
    data.drift.current = (data.drift.current[0], None)
    html = render_html(data, plots={})
    p50 = f"{tool.latency.p50:.0f}" if tool.latency.p50 >= 10 else f"{tool.latency.p50:.2f}"
    assert f"<td class=num>{p50}*</td>" in html
    assert "id='extrapolated'" in html and "censored fit" in html
    others = [t for t in data.stats.tools if t is not tool]
    assert all(f"{t.latency.p99:.0f}*" not in html for t in others if t.latency.p99)
    assert "None" not in re.sub(r"<[^>]+>", "", html)
    assert "Baseline start →" in html
    md = render_markdown(data)
    assert f"{p50}\\*" in md and "extrapolated" in md


@pytest.mark.parametrize("width", [800, 390])
def test_report_fits_the_page_at_800_px_and_on_a_phone(db: Path, tmp_path: Path,
                                                       width: int) -> None:
    """No sideways scroll of the page: wide tables scroll inside their own box with the tool
    column first (numbers and intervals on one line each), and the plots take the page's
    width. A screenshot is kept beside the report (tmp_path) for a human to look at."""
    exe, sync_playwright, out = _browser_and_report(db, tmp_path)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(out.as_uri(), wait_until="load")
            page.screenshot(path=str(tmp_path / f"report-{width}.png"), full_page=True)
            sizes = page.evaluate(
                "() => ({page: document.documentElement.scrollWidth, view: window.innerWidth,"
                " body: document.body.clientWidth,"
                " box: document.querySelector('#tools').parentElement.clientWidth,"
                " table: document.querySelector('#tools').scrollWidth,"
                " first: document.querySelector('#tools th').textContent,"
                " broken: [...document.querySelectorAll('.scroll td.num')].filter(td => {"
                "   const r = document.createRange(); r.selectNodeContents(td);"
                "   return r.getClientRects().length > 1}).map(td => td.textContent),"
                " plots: [...document.querySelectorAll('svg.plot')]"
                "   .map(s => s.getBoundingClientRect().width),"
                # each plot label's font size as drawn: its font size in the SVG's units
                # times the SVG's scale on the page
                " labels: [...document.querySelectorAll('svg.plot text')].map(t => {"
                "   const s = t.ownerSVGElement;"
                "   const scale = s.getBoundingClientRect().width / s.viewBox.baseVal.width;"
                "   return parseFloat(getComputedStyle(t).fontSize) * scale}),"
                # a box that scrolls sideways shows it (shadows at the hidden edge)
                " uncued: [...document.querySelectorAll('.scroll')]"
                "   .filter(b => b.scrollWidth > b.clientWidth + 1"
                "     && !getComputedStyle(b).backgroundImage.includes('gradient'))"
                "   .map(b => b.firstElementChild.id || b.firstElementChild.tagName)})")
        finally:
            browser.close()
    assert sizes["page"] <= sizes["view"], sizes
    assert sizes["box"] <= sizes["body"], sizes  # the table's box fits; the table scrolls in it
    assert sizes["first"] == "tool"
    assert sizes["broken"] == [], sizes  # a number or an interval is never split over lines
    assert sizes["plots"] and all(w >= sizes["box"] - 2 for w in sizes["plots"]), sizes
    assert sizes["labels"] and min(sizes["labels"]) >= 9 - 1e-6, sorted(sizes["labels"])[:5]
    assert sizes["uncued"] == [], sizes["uncued"]
    assert (tmp_path / f"report-{width}.png").stat().st_size > 10_000
