"""Drift under bursts: false positives when nothing changed, and power for 0.9 -> 0.8.

One experiment = one database of 8 tools, each probed N = 200 times in a baseline and N = 200
times in a current window, drawn from the seeded fault model (realprobe.probes.synthetic:
the simulator's outcome stream and latency, no HTTP). Stationary failure rates 0.05 ... 0.30,
lognormal latency, four error codes. Bursty: P(fail|fail) = 0.5; independent: no chain.
`drift` runs with its defaults (Holm across tools, alpha 0.05, 5-point gate on success).

For comparison the same p-values are recomputed the old way, a plain two-proportion test
(design effect 1), and pushed through the same Holm correction and gate.

    python bench/drift_false_positives.py [--dbs 400] [--save]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from rich.progress import Progress

from realprobe.errors import ErrorCode
from realprobe.probes.drift import adjust, drift, two_proportion
from realprobe.probes.synthetic import fault_model_arrays
from realprobe.simulator.profile import Burst, LatencyModel, Lognormal, Profile, ToolProfile

RESULTS = Path(__file__).parent / "results"
TOOLS = [f"tool{i}" for i in range(8)]
RATES = [0.05, 0.08, 0.10, 0.12, 0.15, 0.20, 0.25, 0.30]
ERRORS = {ErrorCode.TIMEOUT: 0.3, ErrorCode.SERVER_ERROR: 0.3, ErrorCode.NETWORK_ERROR: 0.2,
          ErrorCode.INVALID_RESPONSE: 0.2}
P_FF = 0.5
N = 200
WEEK = 7 * 86400.0


def tool(fail: float, bursty: bool) -> ToolProfile:
    burst = None
    if bursty:
        burst = Burst(p_fail_after_fail=P_FF, p_fail_after_ok=fail * (1 - P_FF) / (1 - fail))
    return ToolProfile(success_rate=1 - fail, errors=dict(ERRORS), burst=burst,
                       latency_ms=LatencyModel(lognormal=Lognormal(mu=5.0, sigma=0.5)))


def profile(rates: list[float], bursty: bool) -> Profile:
    return Profile(tools={t: tool(r, bursty) for t, r in zip(TOOLS, rates, strict=True)})


def old_flags(rep_tools: list, base_rates: list[float]) -> list[bool]:
    """The plain two-proportion test with the same Holm correction and 5-point gate."""
    ps, changes = [], []
    for t in rep_tools:
        s = t.success
        k1, k2 = round(s.baseline * t.n_baseline), round(s.current * t.n_current)
        ps.append(two_proportion(k1, t.n_baseline, k2, t.n_current))
        changes.append(s.change)
    adj = adjust(ps, "holm")
    return [a < 0.05 and abs(c) >= 0.05 for a, c in zip(adj, changes, strict=True)]


def scenario(name: str, dbs: int, bursty: bool, progress: Progress,
             current_rates: list[float] | None = None) -> dict:
    base_prof = profile(RATES, bursty)
    cur_prof = profile(current_rates or RATES, bursty)
    changed = [i for i, (a, b) in enumerate(zip(RATES, current_rates or RATES, strict=True))
               if a != b]
    counts = {"success_flag": 0, "success_flag_old": 0, "any_flag": 0, "raw_p05": 0,
              "raw_p05_old": 0}
    db_any = db_success = db_success_old = 0
    per_rate_flags = np.zeros(len(TOOLS))
    task = progress.add_task(name, total=dbs)
    for d in range(dbs):
        a = fault_model_arrays(base_prof, TOOLS, N, seed=f"{name}-b{d}", step_s=60.0)
        b = fault_model_arrays(cur_prof, TOOLS, N, seed=f"{name}-c{d}", step_s=60.0,
                               t0=1_790_000_000.0 + WEEK)
        rep = drift(a, b)
        old = old_flags(rep.tools, RATES)
        any_s = any_s_old = any_f = False
        for i, t in enumerate(rep.tools):
            if changed and i not in changed:
                continue
            s = t.success
            assert s is not None
            flag = t.verdict != "stable"
            counts["success_flag"] += s.flagged
            counts["success_flag_old"] += old[i]
            counts["any_flag"] += flag
            counts["raw_p05"] += s.pvalue < 0.05
            k1, k2 = round(s.baseline * N), round(s.current * N)
            counts["raw_p05_old"] += two_proportion(k1, N, k2, N) < 0.05
            per_rate_flags[i] += s.flagged
            any_s |= s.flagged
            any_s_old |= old[i]
            any_f |= flag
        db_any += any_f
        db_success += any_s
        db_success_old += any_s_old
        progress.advance(task)
    tools_scored = dbs * (len(changed) if changed else len(TOOLS))
    out = {
        "databases": dbs,
        "tools_per_database": len(TOOLS),
        "calls_per_window": N,
        "p_fail_after_fail": P_FF if bursty else None,
        "scored": "every tool" if not changed else "the tool that changed (0.10 -> 0.20)",
        "baseline_failure_rates": RATES,
        "current_failure_rates": current_rates or RATES,
        "per_tool": {
            "success_flagged": round(counts["success_flag"] / tools_scored, 4),
            "success_flagged_plain_test": round(counts["success_flag_old"] / tools_scored, 4),
            "any_flag (verdict not stable)": round(counts["any_flag"] / tools_scored, 4),
            "success_p_below_0.05_unadjusted": round(counts["raw_p05"] / tools_scored, 4),
            "success_p_below_0.05_unadjusted_plain_test": round(
                counts["raw_p05_old"] / tools_scored, 4),
        },
    }
    if not changed:
        out["per_database"] = {
            "any_success_flag": round(db_success / dbs, 4),
            "any_success_flag_plain_test": round(db_success_old / dbs, 4),
            "any_flag": round(db_any / dbs, 4),
        }
        out["success_flagged_by_failure_rate"] = {
            str(r): round(float(v) / dbs, 4) for r, v in zip(RATES, per_rate_flags, strict=True)
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dbs", type=int, default=400)
    ap.add_argument("--save", action="store_true", help="write bench/results/ (else print)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    # power: one tool of the eight (failure 0.10) goes to 0.20; the others stay
    power_rates = list(RATES)
    power_rates[2] = 0.20
    with Progress() as progress:
        out: dict[str, object] = {
            "no_change_bursty": scenario("bursty", args.dbs, True, progress),
            "no_change_independent": scenario("independent", args.dbs, False, progress),
            "power_0.9_to_0.8_bursty": scenario("power-bursty", args.dbs, True, progress,
                                                power_rates),
            "power_0.9_to_0.8_independent": scenario("power-indep", args.dbs, False, progress,
                                                     power_rates),
        }
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out, indent=2))
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "drift_false_positives.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
