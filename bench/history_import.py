"""Imported monitor histories: import time, figures against a hand computation, closed loop.

1. A synthetic 5-year Upptime repository of about 8,000 commits (daily re-commits, status
   changes, a few silences of days), built with `git fast-import` in a temp dir: import time,
   and availability / outage count / longest outage against a hand computation from its
   `git log` (commit subjects and times alone, not the YAML the importer reads).
2. 1,000,000 Uptime Kuma heartbeats (two monitors, one a minute): import time and the same
   figures against the generated beats.
3. The closed loop: calibrate from the Upptime import, simulate at the monitor's cadence,
   re-derive availability and mean outage duration, and check them inside their intervals;
   and the intervals' coverage over 1,000 simulated 30-day histories (exponential periods,
   and lognormal outages spread twice as wide).
4. A real Upptime repository that is not in the tests (`--real PATH`, a clone; default the
   clone named by $REALPROBE_BENCH_UPPTIME): the whole observation and one calendar year
   (`--year`) per site with at least 100 records, against a hand computation from `git log`.
   The results in bench/results/ come from a clone of TORO-Server/upptime (2024-04 to 2026-07,
   about 6,200 commits to history/).

Run: python bench/history_import.py [--real PATH] [--year 2025] [--save]
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import realprobe
from bench.benchlib import emit, load_average
from tests.history_builders import kuma_db, record, upptime_repo

D, H = 86400.0, 3600.0
GAP = 2 * D
URL = "https://api.example.org/health"
#: a clone of a real Upptime repository that is not in the tests (or --real)
REAL_ENV = "REALPROBE_BENCH_UPPTIME"


def by_hand(records: list[tuple[float, str]], lo: float | None = None,
            hi: float | None = None) -> dict[str, float]:
    """Availability, outages and the longest outage from (time, state) records: each state
    holds until the next record unless they are over two days apart (censored), clipped to
    [lo, hi); an outage cut by a silence or the window's edge is not counted."""
    lo = -1e18 if lo is None else lo
    hi = 1e18 if hi is None else hi
    up = down = 0.0
    outages: list[float] = []
    start: float | None = None
    cut = True
    prev_end: float | None = None
    for (t, state), (t2, _) in pairwise(records):
        a, b = max(t, lo), min(t2, hi)
        if t2 - t > GAP or b <= a:
            if start is not None:
                start = None
            prev_end = None
            continue
        joined = prev_end is not None and prev_end == a
        if state == "down":
            down += b - a
            if start is None:
                start, cut = a, not joined
        else:
            up += b - a
            if start is not None and not cut:
                outages.append(a - start)
            start = None
        prev_end = b
    return {"availability": up / (up + down) if up + down else float("nan"),
            "outages": len(outages), "longest_s": max(outages, default=0.0)}


def log_records(repo: Path, slug: str) -> list[tuple[float, str]]:
    """(commit time, state) of every commit that wrote `history/<slug>.yml`, from its
    subject's square (🟥 down, 🟩 up, 🟨 degraded): the raw git history."""
    out = subprocess.run(["git", "-C", str(repo), "log", "--reverse", "--no-renames",
                          "--diff-filter=AM", "--format=%ct %s", "--", f"history/{slug}.yml"],
                         capture_output=True, text=True, check=True).stdout
    marks = {"🟥": "down", "🟩": "up", "🟨": "up"}
    return [(float(line.split(" ", 1)[0]), marks[line.split(" ", 2)[1][0]])
            for line in out.splitlines() if line.split(" ", 2)[1][:1] in marks]


def synthetic_upptime(root: Path, seed: int = 7) -> tuple[Path, int]:
    rng = random.Random(seed)
    start = dt.datetime(2021, 1, 1, tzinfo=dt.UTC).timestamp()
    end = start + 5 * 365 * D
    silences = [(start + d * D, start + (d + rng.uniform(3, 5)) * D)
                for d in (200, 700, 1300)]
    events: list[tuple[float, str, int]] = []
    t, state = start, "up"
    while t < end:
        t += rng.expovariate(1 / (13.3 * H))
        if any(a <= t < b for a, b in silences):
            continue
        events.append((t, "down", rng.choice([0, 0, 502, 503, 404])))
        t += rng.lognormvariate(7.6, 0.6)  # outages of about half an hour
        events.append((t, "up", 200))
    day = start + 23 * H + 600
    while day < end:
        if not any(a <= day < b for a, b in silences):
            events.append((day + rng.uniform(0, 1200), "daily", 200))
        day += D
    events.sort()
    commits, state, code = [], "up", 200
    for ts, kind, c in events:
        if kind != "daily":
            state, code = kind, c
        square = "🟥" if state == "down" else "🟩"
        body = record(URL, state, code, 300, ts, start)
        commits.append((ts, "history/api.yml", body, f"{square} Api is {state} [upptime]"))
    repo = upptime_repo(root / "synthetic", {"Api": URL}, [(t, p, b) for t, p, b, _ in commits],
                        messages=[m for *_, m in commits])
    return repo, len(commits)


def compare(mine: dict[str, float], hand: dict[str, float]) -> dict[str, float]:
    return {
        "availability": round(mine["availability"], 6),
        "availability_by_hand": round(hand["availability"], 6),
        "availability_diff_points": round(100 * abs(mine["availability"]
                                                    - hand["availability"]), 4),
        "outages": mine["outages"], "outages_by_hand": hand["outages"],
        "outages_diff_pct": round(100 * abs(mine["outages"] - hand["outages"])
                                  / max(hand["outages"], 1), 3),
        "longest_s": round(mine["longest_s"], 1), "longest_by_hand_s": round(hand["longest_s"], 1),
        "longest_diff_pct": round(100 * abs(mine["longest_s"] - hand["longest_s"])
                                  / max(hand["longest_s"], 1), 3),
    }


def figures(db: Path, monitor: str, since: float | None = None,
            until: float | None = None) -> dict[str, float]:
    m = realprobe.imported_stats(db, since=since, until=until, monitors=monitor).monitors[0]
    return {"availability": m.availability or 0.0, "outages": m.outages.count - m.outages.censored,
            "longest_s": m.outages.longest_s or 0.0}


def upptime_part(root: Path) -> tuple[dict[str, object], Path]:
    t = time.perf_counter()
    repo, n = synthetic_upptime(root)
    built = time.perf_counter() - t
    db = root / "upptime.db"
    t = time.perf_counter()
    rep = realprobe.import_history(f"upptime:{repo}", db)
    took = time.perf_counter() - t
    t = time.perf_counter()
    again = realprobe.import_history(f"upptime:{repo}", db)
    return {"commits": n, "build_s": round(built, 2), "import_s": round(took, 2),
            "reimport_s": round(time.perf_counter() - t, 2),
            "reimport_added": again.checks_added + again.intervals_added,
            "implied_checks": rep.implied_checks, "censored_days": round(rep.censored_s / D, 2),
            **compare(figures(db, "api"), by_hand(log_records(repo, "api")))}, db


def kuma_part(root: Path, n: int) -> dict[str, object]:
    rng = random.Random(5)
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC).timestamp()
    beats: list[tuple[int, int, str | None, float, int | None]] = []
    per = n // 2
    truth: dict[int, list[tuple[float, str]]] = {1: [], 2: []}
    for mid in (1, 2):
        down_left = 0
        for i in range(per):
            ts = start + 60 * i
            if down_left == 0 and rng.random() < 1 / 2000:
                down_left = rng.randint(2, 40)
            if down_left:
                down_left -= 1
                beats.append((mid, 0, "Request failed with status code 503", ts, None))
                truth[mid].append((ts, "down"))
            else:
                beats.append((mid, 1, "200 - OK", ts, rng.randint(80, 400)))
                truth[mid].append((ts, "up"))
    t = time.perf_counter()
    path = kuma_db(root / "kuma.db", [(1, "api", URL, 60), (2, "web", URL, 60)], beats)
    built = time.perf_counter() - t
    db = root / "kuma-import.db"
    t = time.perf_counter()
    rep = realprobe.import_history(f"kuma:{path}", db)
    took = time.perf_counter() - t
    return {"heartbeats": len(beats), "build_s": round(built, 2), "import_s": round(took, 2),
            "checks_added": rep.checks_added,
            "api": compare(figures(db, "api"), by_hand(truth[1])),
            "web": compare(figures(db, "web"), by_hand(truth[2]))}


def closed_loop(db: Path, draws: int) -> dict[str, object]:
    from realprobe.simulator.faults import FaultModel

    seen = realprobe.imported_stats(db, monitors="api").monitors[0]
    profile = realprobe.calibrate_imported(db, monitors="api")
    spacing = profile.source["imported"]["api"]["spacing_s"]
    model = FaultModel(profile, seed=1)
    oks = [model.draw("api").ok for _ in range(draws)]
    runs, run = [], 0
    for ok in oks:
        if not ok:
            run += 1
        elif run:
            runs.append(run * spacing)
            run = 0
    sim_a, sim_mean = sum(oks) / draws, sum(runs) / max(len(runs), 1)
    assert seen.availability_ci95 is not None and seen.outages.mean_ci95 is not None
    return {"spacing_s": spacing, "draws": draws,
            "availability": seen.availability, "availability_ci95": seen.availability_ci95,
            "simulated_availability": sim_a,
            "availability_inside": seen.availability_ci95[0] <= sim_a
            <= seen.availability_ci95[1],
            "mean_outage_s": seen.outages.mean_s, "mean_outage_ci95": seen.outages.mean_ci95,
            "simulated_mean_outage_s": sim_mean,
            "mean_outage_inside": seen.outages.mean_ci95[0] <= sim_mean
            <= seen.outages.mean_ci95[1]}


def real_part(repo: Path, root: Path, year: int) -> dict[str, object]:
    db = root / "real.db"
    t = time.perf_counter()
    rep = realprobe.import_history(f"upptime:{repo}", db)
    out: dict[str, object] = {"source": rep.source, "import_s": round(time.perf_counter() - t, 2),
                              "sites": {}}
    lo = dt.datetime(year, 1, 1, tzinfo=dt.UTC).timestamp()
    hi = dt.datetime(year + 1, 1, 1, tzinfo=dt.UTC).timestamp()
    for m in rep.monitors:
        if m.checks < 100:
            continue
        raw = log_records(repo, m.monitor)
        out["sites"][m.monitor] = {  # type: ignore[index]
            "records": m.checks,
            "whole": compare(figures(db, m.monitor), by_hand(raw)),
            str(year): compare(figures(db, m.monitor, lo, hi), by_hand(raw, lo, hi)),
            "published": (m.published or {}).get("uptime"),
        }
    return out


def interval_coverage(runs: int, days: float, seed: int = 3) -> dict[str, object]:
    """How often the 95% interval of availability (and of the mean outage) holds the truth,
    over simulated histories of alternating up and down periods: exponential periods (the
    interval's model) and lognormal outages of the same mean spread twice as wide (sigma
    1.2: a coefficient of variation of 1.9), as real outages are."""
    from realprobe.probes.availability import availability_interval, outages, up_runs

    rng = random.Random(seed)
    mean_up, mean_down = 12 * H, 1800.0
    truth = mean_up / (mean_up + mean_down)
    out: dict[str, object] = {"runs": runs, "days": days, "true_availability": truth}
    for shape in ("exponential", "lognormal"):
        hit_a = hit_m = 0
        for _ in range(runs):
            segs, t, end = [], 0.0, days * D
            while t < end:
                up = rng.expovariate(1 / mean_up)
                down = (rng.expovariate(1 / mean_down) if shape == "exponential"
                        else rng.lognormvariate(0.0, 1.2) * mean_down / math.exp(0.72))
                segs += [(t, t + up, "up"), (t + up, t + up + down, "down")]
                t += up + down
            observed = segs[-1][1]
            up_s = sum(e - a for a, e, st in segs if st == "up")
            o = outages(segs)
            ci = availability_interval(up_s, observed, o.durations_s, up_runs(segs), 300.0)
            hit_a += ci is not None and ci[0] <= truth <= ci[1]
            hit_m += o.mean_ci95 is not None and o.mean_ci95[0] <= mean_down <= o.mean_ci95[1]
        out[shape] = {"availability_coverage": hit_a / runs, "mean_outage_coverage": hit_m / runs}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    env = os.environ.get(REAL_ENV)
    ap.add_argument("--real", type=Path, default=Path(env) if env else None)
    ap.add_argument("--year", type=int, default=2025)
    ap.add_argument("--heartbeats", type=int, default=1_000_000)
    ap.add_argument("--draws", type=int, default=1_000_000)
    ap.add_argument("--coverage-runs", type=int, default=1000)
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    load = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        upptime, db = upptime_part(root)
        out: dict[str, object] = {"upptime_5y": upptime,
                                  "closed_loop": closed_loop(db, args.draws),
                                  "interval_coverage": interval_coverage(args.coverage_runs, 30),
                                  "kuma": kuma_part(root, args.heartbeats)}
        if args.real is not None:
            out["real_upptime"] = real_part(args.real, root, args.year)
    emit(out, args.save, Path(__file__).parent / "results" / "history_import.json", load)


if __name__ == "__main__":
    main()
