"""Time `realprobe report` on 100,000 stored probe rows over 30 tools against `realprobe stats`
on the same rows, in the same run (goal: the report's CPU within 1.2x the statistics').

Builds the database once ($TMPDIR/realprobe-bench/report_100k.db, with the generator of
bench/stats_1m_rows.py: the simulator's rows, relabelled as live), then times the whole
`realprobe report -o FILE` and `realprobe stats --json` commands in fresh processes,
interleaved (best of 5, wall and CPU), and, in
process, the steps: load, statistics, drift, time series, phase and vantage tables, plots,
HTML. realprobe's bytecode is compiled first, as an installed package has it (with
PYTHONDONTWRITEBYTECODE set, every run would otherwise compile the package's source again).
The load average is recorded: on 2 shared cores other work shows up directly in these numbers.

    python bench/report_100k.py [--rows 100000] [--tools 30] [--runs 5] [--save]
"""

from __future__ import annotations

import argparse
import compileall
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import emit, load_average
from stats_1m_rows import build, count_rows, fresh

RESULTS = Path(__file__).resolve().parent / "results" / "report_100k.json"
PACKAGE = Path(__file__).resolve().parent.parent / "realprobe"


def steps(db: Path) -> dict[str, float]:
    from realprobe import open_db
    from realprobe.probes.loading import PHASE_EXTRA, load_probes
    from realprobe.probes.provenance import kinds_present, pick_kinds, survey
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
    kinds = pick_kinds(kinds_present(survey(open_db(db))), None)
    t = time.perf_counter()
    arr = load_probes(open_db(db), kinds=kinds, extra=PHASE_EXTRA)  # as the report reads them
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
    side_tables(open_db(db), None, None, None, kinds, None, arr)
    out["phases_and_vantages_s"] = time.perf_counter() - t
    from realprobe.report.build import build_report

    data = build_report(open_db(db), kinds=kinds)
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
    db = Path(tempfile.gettempdir()) / "realprobe-bench" / f"report_{args.rows}_sim.db"
    db.parent.mkdir(exist_ok=True)
    if count_rows(db) != args.rows // args.tools * args.tools:
        t = time.perf_counter()
        build(db, args.rows, args.tools)
        print(f"built {db} in {time.perf_counter() - t:.1f} s")
    html = db.with_suffix(".html")
    compileall.compile_dir(str(PACKAGE), quiet=1)
    before = load_average()
    report_cmd = [sys.executable, "-m", "realprobe.cli", "report", "--db", str(db),
                  "-o", str(html)]
    stats_cmd = [sys.executable, "-m", "realprobe.cli", "stats", "--db", str(db), "--json"]
    report, stats = [], []
    for _ in range(args.runs):  # interleaved: load drift hits both alike
        report.append(fresh(report_cmd))
        stats.append(fresh(stats_cmd))
    r_cpu, s_cpu = min(c for _, c in report), min(c for _, c in stats)
    out = {
        "rows": count_rows(db),
        "tools": args.tools,
        "cli_total_s": round(min(w for w, _ in report), 3),
        "cli_cpu_s": round(r_cpu, 3),
        "stats_cli_total_s": round(min(w for w, _ in stats), 3),
        "stats_cli_cpu_s": round(s_cpu, 3),
        "ratio_cpu_report_to_stats": round(r_cpu / s_cpu, 2),
        "imports_s": import_time(),
        "in_process_steps": steps(db),
        "html_bytes": html.stat().st_size,
        "goal_ratio": 1.2,
        "python": sys.version.split()[0],
    }
    emit(out, args.save, RESULTS, before)

if __name__ == "__main__":
    main()
