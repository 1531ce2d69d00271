"""What a newcomer's first hour measures: how many lines `realprobe demo` and `realprobe stats`
print at 80 columns, the report's page width at 800 px in headless Chromium, and how far the
probe's and the sweep's ETAs were from the real remaining time on this machine.

    python bench/first_hour.py [--save]     # writes bench/results/first_hour.json
    python bench/first_hour.py --seeds [--save]  # the seed-0 demo only, into the same file
    python bench/first_hour.py --lines [--save]  # the line counts and report width only, too

Lines are counted twice: as printed (what `wc -l` says) and as an 80-column terminal shows
them (a line wider than 80 takes several rows). The ETA is sampled at every finished call or
run; its error is (estimate - actual) / actual from 20% of the run's time on until its last
tenth, with the real clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import emit, load_average

ROOT = Path(__file__).resolve().parent.parent


def _lines(text: str) -> dict[str, int]:
    from rich.cells import cell_len

    rows = text.splitlines()
    return {"printed": len(rows), "at_80_columns": sum(max(1, -(-cell_len(r) // 80))
                                                        for r in rows)}


def _cli(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "realprobe.cli", *args], capture_output=True,
                         text=True, env=env, timeout=1200)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout + res.stderr


def _quantiles(errors: list[float]) -> dict[str, Any]:
    e = sorted(errors)
    if not e:
        return {"samples": 0}
    return {"samples": len(e), "min": round(e[0], 3), "median": round(e[len(e) // 2], 3),
            "max": round(e[-1], 3),
            "share_within_25pct": round(sum(abs(x) <= 0.25 for x in e) / len(e), 3)}


def _eta_errors(samples: list[tuple[float, float | None]], end: float) -> list[float]:
    start = 0.0
    out = []
    for t, est in samples:
        actual = end - t
        if est is not None and t - start >= 0.2 * end and actual >= 0.1 * end:
            out.append((est - actual) / actual)
    return out


def eta_probe(rounds: int, polite: bool) -> dict[str, Any]:
    """A real probe of every tool through the published sandbox, 2 s deadline (hangs wait it
    out), with the catalogue's politeness (calls to a host spaced) or without (up to 32 calls
    side by side): the ETA the progress bar would show, sampled at each call."""
    from realprobe import api
    from realprobe.commands.common import PolitenessChoice, load_catalog, transport_options
    from realprobe.commands.probes import _politeness_lanes
    from realprobe.commands.progress import Eta
    from realprobe.http.mode import Mode

    cat = load_catalog(None)
    samples: list[tuple[float, float | None]] = []
    with tempfile.TemporaryDirectory() as tmp, api.sandbox_running("published", seed=1) as url:
        target = transport_options(Mode.LIVE, url, None, None, 1, None)
        lanes, lane_of = _politeness_lanes(
            list(cat), rounds, target, PolitenessChoice.CATALOG if polite else PolitenessChoice.OFF)
        t0 = time.monotonic()
        eta = Eta(len(cat) * rounds, lanes=lanes)

        def on_call(row: dict[str, Any], result: Any) -> None:
            eta.advance(lane_of.get(str(row.get("tool"))))
            samples.append((time.monotonic() - t0, eta.remaining()))

        api.probe(None, rounds=rounds, target=api.options(sandbox=url), db=Path(tmp) / "p.db",
                  timeout=2.0, politeness="catalog" if polite else "off", seed=1,
                  on_call=on_call)
        end = time.monotonic() - t0
    old = _old_rate(samples)
    return {"seconds": round(end, 1), "calls": len(cat) * rounds, "polite": polite,
            "error": _quantiles(_eta_errors(samples, end)),
            "old_rate_estimate_error": _quantiles(_eta_errors(old, end))}


def _old_rate(samples: list[tuple[float, float | None]]) -> list[tuple[float, float | None]]:
    """What the old estimate (time so far x left / done) said at the same moments."""
    n = len(samples)
    return [(t, t * (n - i - 1) / (i + 1)) for i, (t, _) in enumerate(samples)]


def eta_sweep(concurrency: int) -> dict[str, Any]:
    """A real sweep: the reference agent on every task, replayed through the published
    sandbox (real latencies), `concurrency` runs at a time."""
    from realprobe import api
    from realprobe.commands.progress import Eta
    from realprobe.tasks.sweep import run_sweep_file

    samples: list[tuple[float, float | None]] = []
    with tempfile.TemporaryDirectory() as tmp, api.sandbox_running("published", seed=2) as url:
        sweep = Path(tmp) / "s.toml"
        sweep.write_text(f'prompts = ["optimal", "baseline"]\nagents = ["reference"]\n'
                         f'repeats = 2\n\n[[targets]]\nkind = "sandbox"\nurl = "{url}"\n')
        eta = Eta(0, workers=concurrency)
        t0 = time.monotonic()

        def done(_: Any) -> None:
            eta.advance()
            samples.append((time.monotonic() - t0, eta.remaining()))

        run_sweep_file(sweep, Path(tmp) / "s.db", concurrency=concurrency,
                       on_planned=lambda total, skipped: eta.replan(total - skipped),
                       on_done=done)
        end = time.monotonic() - t0
    return {"seconds": round(end, 1), "runs": len(samples), "workers": concurrency,
            "error": _quantiles(_eta_errors(samples, end)),
            "old_rate_estimate_error": _quantiles(_eta_errors(_old_rate(samples), end))}


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
    out["eta_probe_polite"] = eta_probe(rounds=3, polite=True)
    out["eta_probe_side_by_side"] = eta_probe(rounds=10, polite=False)
    out["eta_sweep"] = eta_sweep(concurrency=4)
    emit(out, save, results, load)


if __name__ == "__main__":
    main()
