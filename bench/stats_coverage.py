"""Coverage of the success intervals against a known truth, cell by cell.

Truths (three tools per experiment at success 0.97 / 0.90 / 0.70, mixed error codes):
- independent: no chain;
- bursty 0.5 / bursty 0.8: P(fail|fail) 0.5 / 0.8 with the same stationary rates, failures in a
  run repeating their code with probability 0.8 (code persistence, as real outages);
- deadline: ln latency ~ N(5.0, 0.5) probed at a 200 ms deadline (S = 0.276), 20% of failures
  hangs; the interval checked is the calibrated profile's `success_ci95` against the
  generative success (before the deadline), and (":P(hang)") its `hang_rate_ci95` against
  the generative P(a call hangs);
- daily: 7 UTC days, day effect on the logit of the failure rate with sd 0.5; the interval
  checked is `long_run95` against the long-run rate (the mean over days, which is the
  profile's success_rate by construction), and `burst_adjusted95` against the mean of the
  7 probed days' rates ("these days"), and (":day sd") `success_logit_sd_ci95` against 0.5;
- mixture: latency 0.6 ln N(4.5, 0.3) + 0.4 ln N(6.5, 0.4) probed at a 1 s deadline
  (S = 0.062); the profile's `success_ci95` against the generative success;
- mixture_hangs: the same with a fifth of failures hangs (TIMEOUT 0.25 against 1.0 of others),
  so the truth is not at the edge (no hangs) of what the TIMEOUTs allow.

Rows come from the seeded fault model (realprobe.probes.synthetic: the simulator's outcome
stream and latency, the deadline applied as the simulate transport applies it; no HTTP).
N calls per tool one minute apart (daily: spread evenly over 7 days).

    python bench/stats_coverage.py [--seeds 400] [--n 50,200,1000] [--cells a,b] [--jobs 2]
                                   [--save]

Each cell prints its coverage with the Monte Carlo standard error sqrt(c(1-c)/seeds): at 400
seeds a true 95% reads 95.0 +- 1.1, so a cell is judged against 93-97% with that noise in view.

With --save, the cells run replace their earlier results in bench/results/stats_coverage.json
(the others are kept, each with its number of experiments).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from realprobe.errors import ErrorCode
from realprobe.probes.calibrate import calibrate
from realprobe.probes.stats import compute_stats
from realprobe.probes.synthetic import fault_model_arrays
from realprobe.simulator.faults import _expit, day_centre
from realprobe.simulator.profile import (
    Burst,
    LatencyModel,
    Lognormal,
    MixtureComponent,
    Profile,
    ToolProfile,
)

RESULTS = Path(__file__).parent / "results"
RATES = {"t97": 0.97, "t90": 0.90, "t70": 0.70}
ERRORS = {ErrorCode.SERVER_ERROR: 0.4, ErrorCode.NETWORK_ERROR: 0.3,
          ErrorCode.RATE_LIMIT_ERROR: 0.3}  # fmt: skip
WEEK = 7 * 86400.0
DAY_SD = 0.5
#: the deadline cell's share of failures that are hangs (TIMEOUT 0.25 against 1.0 of others)
HANG_SHARE = 0.25 / 1.25
#: calls a minute apart (the burst chain links calls under an hour apart); the daily cell
#: spreads its N calls over the 7 days instead
STEP_S = 60.0
T0 = 1_790_000_000.0 - (1_790_000_000.0 % 86400)  # midnight UTC


def chain(success: float, p_ff: float) -> Burst:
    f = 1 - success
    return Burst(p_fail_after_fail=p_ff, p_fail_after_ok=f * (1 - p_ff) / (1 - f))


def truth(cell: str) -> tuple[Profile, float]:
    """The profile and the deadline (s) of a cell."""
    lat = LatencyModel(lognormal=Lognormal(mu=5.0, sigma=0.5))
    tools: dict[str, ToolProfile] = {}
    deadline = 10.0
    for name, s in RATES.items():
        kw: dict = {"success_rate": s, "errors": dict(ERRORS), "latency_ms": lat}
        if cell.startswith("bursty"):
            kw["burst"] = chain(s, float(cell.split("_")[1]))
            kw["code_persistence"] = 0.8
        elif cell == "deadline":
            kw["errors"] = {**ERRORS, ErrorCode.TIMEOUT: 0.25}
        elif cell == "daily":
            kw["daily_logit_sd"] = DAY_SD
        elif cell.startswith("mixture"):
            if cell == "mixture_hangs":
                kw["errors"] = {**ERRORS, ErrorCode.TIMEOUT: 0.25}
            kw["latency_ms"] = LatencyModel(mixture=[
                MixtureComponent(weight=0.6, mu=4.5, sigma=0.3),
                MixtureComponent(weight=0.4, mu=6.5, sigma=0.4),
            ])  # fmt: skip
        tools[name] = ToolProfile(**kw)
    if cell == "deadline":
        deadline = 0.2
    if cell.startswith("mixture"):
        deadline = 1.0
    return Profile(tools=tools), deadline


def days_mean(seed: int, tool: str, success: float) -> float:
    """The mean success of the 7 probed days (the day effects the fault model drew)."""
    centre = day_centre(1 - success, DAY_SD)
    days = [math.floor((T0 + d * 86400) / 86400) for d in range(7)]
    return 1 - float(np.mean([
        _expit(centre + random.Random(f"{seed}:{tool}:day:{d}").gauss(0.0, DAY_SD))
        for d in days
    ]))  # fmt: skip


def one(cell: str, n: int, seed: int) -> dict[str, bool]:
    prof, deadline = truth(cell)
    step = WEEK / n if cell == "daily" else STEP_S
    arr = fault_model_arrays(prof, list(RATES), n, seed=seed, deadline_s=deadline, t0=T0,
                             step_s=step)  # fmt: skip
    rep = compute_stats(arr)
    hits: dict[str, bool] = {}
    calibrated = calibrate(rep) if cell.startswith(("deadline", "mixture")) else None
    for ts in rep.tools:
        s = RATES[ts.tool]
        if calibrated is not None:
            tp = calibrated.tools[ts.tool]
            lo, hi = tp.success_ci95 or (0.0, 1.0)
            if cell == "deadline":
                h_lo, h_hi = tp.hang_rate_ci95 or (0.0, 1.0)
                hits[f"{ts.tool}:P(hang)"] = h_lo <= (1 - s) * HANG_SHARE <= h_hi
        elif cell == "daily":
            lo, hi = ts.success.long_run95 or (0.0, 1.0)
            d_lo, d_hi = ts.success.burst_adjusted95
            hits[f"{ts.tool}:these days"] = d_lo <= days_mean(seed, ts.tool, s) <= d_hi
            sd_lo, sd_hi = ts.variability.success_logit_sd_ci95 or (0.0, math.inf)
            hits[f"{ts.tool}:day sd"] = sd_lo <= DAY_SD <= sd_hi
        else:
            lo, hi = ts.success.burst_adjusted95
        hits[ts.tool] = lo <= s <= hi
    return hits


def _counts(job: tuple[str, int, range]) -> dict[str, int]:
    cell, n, seeds = job
    counts: dict[str, int] = {}
    for seed in seeds:
        for key, hit in one(cell, n, seed).items():
            counts[key] = counts.get(key, 0) + int(hit)
    return counts


def _cell_counts(pool: ProcessPoolExecutor, cell: str, n: int, seeds: int, jobs: int
                 ) -> dict[str, int]:  # fmt: skip
    """Hits per key over `seeds` experiments, split into `jobs` contiguous seed ranges."""
    step = -(-seeds // jobs)
    parts = [(cell, n, range(a, min(a + step, seeds))) for a in range(0, seeds, step)]
    total: dict[str, int] = {}
    for counts in pool.map(_counts, parts):
        for key, c in counts.items():
            total[key] = total.get(key, 0) + c
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=400)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--n", default="50,200,1000")
    ap.add_argument(
        "--cells", default="independent,bursty_0.5,bursty_0.8,deadline,daily,mixture,mixture_hangs"
    )
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    ns = [int(v) for v in args.n.split(",")]
    table: dict[str, dict[str, float]] = {}
    t0 = time.time()
    pool = ProcessPoolExecutor(args.jobs)
    for cell in args.cells.split(","):
        for n in ns:
            counts = _cell_counts(pool, cell, n, args.seeds, args.jobs)
            for key, c in counts.items():
                table.setdefault(f"{cell}:{key}", {})[str(n)] = c / args.seeds
            print(cell, n, {k: round(c / args.seeds, 3) for k, c in counts.items()},
                  f"{time.time() - t0:.0f}s", flush=True)  # fmt: skip
    pool.shutdown()
    se = 100 * math.sqrt(0.95 * 0.05 / args.seeds)
    print(f"\n{args.seeds} experiments per cell: Monte Carlo standard error {se:.1f} points")
    print("\n| cell | " + " | ".join(f"N = {n}" for n in ns) + " |")
    print("|---|" + "---|" * len(ns))
    for key, row in table.items():
        print(f"| {key} | " + " | ".join(f"{100 * row.get(str(n), math.nan):.1f}%" for n in ns)
              + " |")  # fmt: skip
    if args.save:
        # cells run now replace their earlier results; the others are kept
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / "stats_coverage.json"
        out = json.loads(path.read_text()) if path.exists() else {"coverage": {}}
        out.setdefault("seeds_by_cell", {})
        for key, row in table.items():
            out["coverage"][key] = row
            out["seeds_by_cell"][key] = args.seeds
        out["seeds"] = min(out["seeds_by_cell"].values())
        out["monte_carlo_se"] = round(math.sqrt(0.95 * 0.05 / out["seeds"]), 4)
        path.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
