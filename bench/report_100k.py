"""Time `realprobe report` on 100,000 stored probe rows over 30 tools (goal: under 2 s).

Builds the database once ($TMPDIR/realprobe-bench/report_100k.db, with the generator of
bench/stats_1m_rows.py: bursty failures, lognormal latencies, 10 s deadlines), then times the
whole `realprobe report -o FILE` command in a fresh process (best of 3) and, in process, the
steps: statistics, drift, plots, HTML. The load average is recorded: on 2 shared cores other
work shows up directly in these numbers.

    python bench/report_100k.py [--rows 100000] [--tools 30] [--save]
"""

from __future__ import annotations

import argparse
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


def steps(db: Path) -> dict[str, float]:
    from realprobe.probes.loading import load_probes
    from realprobe.probes.stats import compute_stats
    from realprobe.report import plots
    from realprobe.report.build import build_report
    from realprobe.report.render import render_html

    out: dict[str, float] = {}
    t = time.perf_counter()
    rep = compute_stats(load_probes(db))
    out["stats_s"] = time.perf_counter() - t
    t = time.perf_counter()
    data = build_report(db, stats=rep)
    out["drift_and_series_s"] = time.perf_counter() - t
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--tools", type=int, default=30)
    ap.add_argument("--save", action="store_true", help=f"write {RESULTS.name}")
    args = ap.parse_args()
    db = Path(tempfile.gettempdir()) / "realprobe-bench" / f"report_{args.rows}.db"
    db.parent.mkdir(exist_ok=True)
    if count_rows(db) != args.rows // args.tools * args.tools:
        t = time.perf_counter()
        build(db, args.rows, args.tools)
        print(f"built {db} in {time.perf_counter() - t:.1f} s")
    html = db.with_suffix(".html")
    runs, cpu = [], []
    for _ in range(3):
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
        "in_process_steps": steps(db),
        "html_bytes": html.stat().st_size,
        "goal_s": 2.0,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": sys.version.split()[0],
    }
    print(json.dumps(out, indent=2))
    if args.save:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
