"""What a newcomer's first hour measures: how many lines `realprobe demo` and `realprobe stats`
print at 80 columns, the report's page and plot widths at 800 and 390 px in headless Chromium
(and its smallest plot label as drawn, px), and whether the
seed-0 demo repeats its numbers beside busy loops (the ETAs: bench/eta.py).

    python bench/first_hour.py [--save]     # writes bench/results/first_hour.json
    python bench/first_hour.py --seeds [--save]  # the seed-0 demo only, into the same file
    python bench/first_hour.py --lines [--save]  # the line counts and report width only, too

Lines are counted twice: as printed (what `wc -l` says) and as an 80-column terminal shows
them (a line wider than 80 takes several rows); `wider_than_80` counts the lines printed wider
than 80 columns into the pipe (the demo wraps its prose: 0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import emit, load_average

ROOT = Path(__file__).resolve().parent.parent


def _lines(text: str) -> dict[str, int]:
    from rich.cells import cell_len

    rows = text.splitlines()
    return {"printed": len(rows), "at_80_columns": sum(max(1, -(-cell_len(r) // 80))
                                                        for r in rows),
            "wider_than_80": sum(cell_len(r) > 80 for r in rows)}


def _cli(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "realprobe.cli", *args], capture_output=True,
                         text=True, env=env, timeout=1200)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout + res.stderr


def _demo_counts(out: Path) -> dict[str, Any]:
    import re

    text = _cli("demo", "--output", str(out))
    once = re.search(r"(\d+)/(\d+) ok", text)
    probe = re.search(r"(\d+) calls, (\d+) ok", text)
    assert once is not None and probe is not None
    return {"call_all_ok": int(once.group(1)), "probe_ok": int(probe.group(2)),
            "probe_calls": int(probe.group(1))}


def seed_repeats(tmp: Path, runs: int = 2) -> dict[str, Any]:
    """The seed-0 demo `runs` times as the machine is, then `runs` times beside four busy
    loops (`yes`, killed after by their pids)."""
    before = load_average()
    quiet = [_demo_counts(tmp / f"quiet{i}") for i in range(runs)]
    busy = []
    for i in range(runs):
        loops = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(4)]
        try:
            busy.append({**_demo_counts(tmp / f"busy{i}"), "load_average_1m": load_average()})
        finally:
            for p in loops:
                p.kill()
                p.wait()
    counts = [{k: v for k, v in r.items() if k != "load_average_1m"} for r in quiet + busy]
    return {"as_is": quiet, "beside_4_busy_loops": busy,
            "same": all(c == counts[0] for c in counts),
            "load_average_1m": [before, load_average()]}


def report_width(report: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    out: dict[str, Any] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                    args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            for width in (800, 390):
                page = browser.new_page(viewport={"width": width, "height": 900})
                page.goto(report.as_uri(), wait_until="load")
                out[f"{width}px"] = page.evaluate(
                    "() => ({page_scroll_width: document.documentElement.scrollWidth,"
                    " plot_widths: [...document.querySelectorAll('svg.plot')]"
                    "   .map(s => Math.round(s.getBoundingClientRect().width)),"
                    " min_label_px: Math.min(...[...document.querySelectorAll('svg.plot text')]"
                    "   .map(t => parseFloat(getComputedStyle(t).fontSize)"
                    "     * t.ownerSVGElement.getBoundingClientRect().width"
                    "     / t.ownerSVGElement.viewBox.baseVal.width)),"
                    " content_width: document.querySelector('#tools').parentElement"
                    "   .clientWidth})")
        finally:
            browser.close()
    return out


def lines_and_width(tmp: Path) -> dict[str, Any]:
    """The demo's lines (and with --explain), the report's width in Chromium, and the lines of
    `stats` over a 20-round demo (32 tools)."""
    out: dict[str, Any] = {}
    demo = tmp / "demo"
    out["demo_lines"] = _lines(_cli("demo", "--output", str(demo)))
    out["demo_explain_lines"] = _lines(_cli("demo", "--output", str(demo), "--explain"))
    out["report"] = report_width(demo / "report.html")
    db20 = tmp / "d20"
    _cli("demo", "--output", str(db20), "--rounds", "20")
    out["stats_32_tools_20_rounds_lines"] = _lines(_cli("stats", "--db", str(db20 / "demo.db")))
    return out


def main() -> None:
    """`--seeds` or `--lines`: only that part, its keys replaced in the saved results (the
    other numbers kept as they were measured)."""
    save = "--save" in sys.argv
    load = load_average()
    out: dict[str, Any] = {}
    results = ROOT / "bench" / "results" / "first_hour.json"
    if "--seeds" in sys.argv or "--lines" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            if "--seeds" in sys.argv:
                out["seed_0_demo"] = seed_repeats(Path(tmp))
            else:
                out.update(lines_and_width(Path(tmp)))
                out["lines_load_average_1m"] = [load, load_average()]
        kept = json.loads(results.read_text()) if results.exists() else {}
        emit({**kept, **out}, save, results)
        return
    with tempfile.TemporaryDirectory() as tmp:
        out["seed_0_demo"] = seed_repeats(Path(tmp))
        out.update(lines_and_width(Path(tmp)))
    emit(out, save, results, load)


if __name__ == "__main__":
    main()
