"""Coverage of the error mix's 95% intervals (each code's share of failures), against the
plain multinomial interval (Wilson at the failures' count), when outages repeat one code.

One tool, N calls a minute apart from the seeded fault model, three codes (SERVER_ERROR 0.5,
NETWORK_ERROR 0.3, RATE_LIMIT_ERROR 0.2); per cell: failure rate, P(fail|fail), code
persistence. Coverage per code over the seeds with at least one failure (a code not seen:
`unseen_code_ci95`); without a failure there is no mix, and `no failure` counts those runs.

    python bench/error_mix_coverage.py [--seeds 200] [--save]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from realprobe.errors import ErrorCode
from realprobe.probes.stats import compute_stats, wilson
from realprobe.probes.synthetic import fault_model_arrays
from realprobe.simulator.profile import Burst, LatencyModel, Lognormal, Profile, ToolProfile

RESULTS = Path(__file__).parent / "results"
MIX = {ErrorCode.SERVER_ERROR: 0.5, ErrorCode.NETWORK_ERROR: 0.3, ErrorCode.RATE_LIMIT_ERROR: 0.2}
LAT = LatencyModel(lognormal=Lognormal(mu=5.0, sigma=0.5))
#: (failure rate, P(fail|fail) or None for independent calls, code persistence)
CELLS = ((0.1, None, 0.0), (0.1, 0.6, 0.7), (0.1, 0.8, 0.8), (0.03, 0.8, 0.8), (0.2, 0.9, 0.9))


def profile(fail: float, p_ff: float | None, persistence: float) -> Profile:
    burst = None
    if p_ff is not None:
        burst = Burst(p_fail_after_fail=p_ff, p_fail_after_ok=fail * (1 - p_ff) / (1 - fail))
    tp = ToolProfile(success_rate=1 - fail, errors=MIX, latency_ms=LAT, burst=burst,
                     code_persistence=persistence or None)  # fmt: skip
    return Profile(tools={"a": tp})


def cell(prof: Profile, n: int, seeds: int) -> dict[str, object]:
    ours = {c.value: 0 for c in MIX}
    plain = dict(ours)
    deff = []
    runs = 0
    for seed in range(seeds):
        mix = compute_stats(fault_model_arrays(prof, ["a"], n, seed=seed, step_s=60.0)).tools[0]
        mix_e = mix.errors
        if not mix_e.failures:
            continue
        runs += 1
        deff.append(mix_e.design_effect)
        for code, w in MIX.items():
            unseen = mix_e.unseen_code_ci95 or (1.0, 0.0)
            lo, hi = mix_e.share_of_failures_ci95.get(code.value, unseen)
            ours[code.value] += lo <= w <= hi
            p_lo, p_hi = wilson(mix_e.counts.get(code.value, 0), mix_e.failures)
            plain[code.value] += p_lo <= w <= p_hi
    return {
        "no_failure": seeds - runs,
        "design_effect": float(np.mean(deff)),
        "effective_n": {k: v / runs for k, v in ours.items()},
        "plain": {k: v / runs for k, v in plain.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    out = {}
    print("| failure rate | P(f\\|f) | code persistence | N | design effect | effective n "
          "(per code) | plain multinomial (per code) | no failure |")
    print("|---|---|---|---|---|---|---|---|")
    for fail, p_ff, c in CELLS:
        for n in (500, 3000):
            r = cell(profile(fail, p_ff, c), n, args.seeds)
            ours, plain = r["effective_n"], r["plain"]
            assert isinstance(ours, dict) and isinstance(plain, dict)
            fmt = " / ".join
            print(f"| {fail:g} | {'-' if p_ff is None else f'{p_ff:g}'} | {c:g} | {n} | "
                  f"{r['design_effect']:.2f} | {fmt(f'{100 * v:.1f}%' for v in ours.values())} "
                  f"| {fmt(f'{100 * v:.1f}%' for v in plain.values())} | {r['no_failure']} |",
                  flush=True)  # fmt: skip
            out[f"{fail:g}/{p_ff}/{c:g}/{n}"] = r
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        text = json.dumps({"seeds": args.seeds, "codes": [c.value for c in MIX],
                           "cells": out}, indent=2)  # fmt: skip
        (RESULTS / "error_mix_coverage.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
