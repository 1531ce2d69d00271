"""Time `realprobe report` on 100,000 stored probe rows over 30 tools (goal: under 2 s).

Builds the database once ($TMPDIR/realprobe-bench/report_100k.db, with the generator of
bench/stats_1m_rows.py: bursty failures, lognormal latencies, 10 s deadlines), then times the
whole `realprobe report -o FILE` command in a fresh process (best of 5, wall and CPU) and, in
process, the steps: load, statistics, drift, time series, phase and vantage tables, plots,
HTML. realprobe's bytecode is compiled first, as an installed package has it (with
PYTHONDONTWRITEBYTECODE set, every run would otherwise compile the package's source again).
The load average is recorded: on 2 shared cores other work shows up directly in these numbers.

    python bench/report_100k.py [--rows 100000] [--tools 30] [--runs 5] [--save]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stats_1m_rows import build, count_rows

RESULTS = Path(__file__).resolve().parent / "results" / "report_100k.json"
PACKAGE = Path(__file__).resolve().parent.parent / "realprobe"


def steps(db: Path) -> dict[str, float]:
    from realprobe.probes.loading import load_probes
    from realprobe.probes.provenance import kinds_present, pick_kinds
    from realprobe.probes.stats import compute_stats
    from realprobe.report import plots
    from realprobe.report.build import (
        drift_between_halves,
        latency_quantiles,
        side_tables,
        success_over_time,
    )
    from realprobe.report.render import render_html

    out: dict[str, float] = {}
    kinds = pick_kinds(kinds_present(db), None)
    t = time.perf_counter()
    arr = load_probes(db, kinds=kinds)
    out["load_s"] = time.perf_counter() - t
    t = time.perf_counter()
    compute_stats(arr)
    out["stats_s"] = time.perf_counter() - t
    t = time.perf_counter()
    drift_between_halves(arr)
    out["drift_s"] = time.perf_counter() - t
    t = time.perf_counter()
    success_over_time(arr)
    latency_quantiles(arr)
    out["series_s"] = time.perf_counter() - t
    t = time.perf_counter()
    side_tables(db, None, None, None, kinds, None)
    out["phases_and_vantages_s"] = time.perf_counter() - t
    from realprobe.report.build import build_report

    data = build_report(db, kinds=kinds)
    t = time.perf_counter()
    figs = {
        "success": plots.success_plot(data),
        "latency": plots.latency_plot(data),
        "errors": plots.error_mix_plot(data),
        "over_time": plots.over_time_plot(data),
    }
    out["plots_s"] = time.perf_counter() - t
    t = time.perf_counter()
    render_html(data, figs)
    out["html_s"] = time.perf_counter() - t
    return {k: round(v, 3) for k, v in out.items()}


def import_time() -> float:
    """Seconds a fresh process takes to import the command line and the report's modules."""
    code = (
        "import time; t = time.perf_counter(); import realprobe.cli, realprobe.store, "
        "realprobe.report, realprobe.commands.analysis; print(time.perf_counter() - t)"
    )
    runs = []
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True)
        runs.append(float(proc.stdout.strip()))
    return round(min(runs), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--tools", type=int, default=30)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--save", action="store_true", help=f"write {RESULTS.name}")
    args = ap.parse_args()
    db = Path(tempfile.gettempdir()) / "realprobe-bench" / f"report_{args.rows}.db"
    db.parent.mkdir(exist_ok=True)
    if count_rows(db) != args.rows // args.tools * args.tools:
        t = time.perf_counter()
        build(db, args.rows, args.tools)
        print(f"built {db} in {time.perf_counter() - t:.1f} s")
    html = db.with_suffix(".html")
    compileall.compile_dir(str(PACKAGE), quiet=1)
    load_before = os.getloadavg()[0]
    runs, cpu = [], []
    for _ in range(args.runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "realprobe.cli", "report", "--db", str(db), "-o", str(html)],
            capture_output=True, text=True, check=False,
        )
        runs.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        if proc.returncode != 0:
            raise SystemExit(f"report failed: {proc.stderr.strip()}")
    out = {
        "rows": count_rows(db),
        "tools": args.tools,
        "cli_total_s": round(min(runs), 3),
        "cli_runs_s": [round(v, 3) for v in runs],
        "cli_cpu_s": round(min(cpu), 3),
        "imports_s": import_time(),
        "in_process_steps": steps(db),
        "html_bytes": html.stat().st_size,
        "goal_s": 2.0,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "load_average_1m_before": round(load_before, 2),
        "python": sys.version.split()[0],
    }
    print(json.dumps(out, indent=2))
    if args.save:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
