"""False drift under real outages: bursts whose failures share one code, nothing changing.

One experiment = one database of 8 tools (stationary failure rates 0.05 ... 0.30, three
codes), 200 calls per tool in a baseline week and 200 in a current week (one call every 50
minutes, so a day holds ~29 calls), drawn from the seeded fault model with a burst chain
(P(fail|fail) 0.5 or 0.8) and code persistence c (a failure after a failure repeats its code
with probability c). Counted:

- error-mix flags of `drift` (chi-square over the design effect of codes repeated within a
  run, Holm, Cramer's V >= 0.1), against the plain chi-square on the same counts (the old
  way), same correction and gate;
- the day-variability flag of `stats` over the baseline week (chi-square divided by the
  chain's design effect), against the plain chi-square (design effect 1, the old way);
- power: the current week's mix really changes (SERVER_ERROR 0.4 -> 0.1, NETWORK_ERROR
  0.3 -> 0.6): tools flagged by either error-mix test.

    python bench/outage_drift.py [--dbs 100] [--save]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from realprobe.errors import ErrorCode
from realprobe.probes.classic_tests import chi2_contingency
from realprobe.probes.drift import adjust, drift
from realprobe.probes.loading import CODES
from realprobe.probes.stats import compute_stats, variability
from realprobe.probes.synthetic import fault_model_arrays
from realprobe.simulator.profile import Burst, LatencyModel, Lognormal, Profile, ToolProfile

RESULTS = Path(__file__).parent / "results"
TOOLS = [f"tool{i}" for i in range(8)]
RATES = [0.05, 0.08, 0.10, 0.12, 0.15, 0.20, 0.25, 0.30]
ERRORS = {ErrorCode.SERVER_ERROR: 0.4, ErrorCode.NETWORK_ERROR: 0.3,
          ErrorCode.RATE_LIMIT_ERROR: 0.3}  # fmt: skip
N = 200
STEP_S = 3000.0
WEEK = 7 * 86400.0
T0 = 1_789_948_800.0


#: the current week's mix in the power rows: a real change of the error mix
CHANGED = {ErrorCode.SERVER_ERROR: 0.1, ErrorCode.NETWORK_ERROR: 0.6,
           ErrorCode.RATE_LIMIT_ERROR: 0.3}  # fmt: skip


def profile(p_ff: float, persistence: float, errors: dict | None = None) -> Profile:  # type: ignore[type-arg]
    tools = {}
    for name, f in zip(TOOLS, RATES, strict=True):
        tools[name] = ToolProfile(
            success_rate=1 - f, errors=dict(errors or ERRORS), code_persistence=persistence,
            burst=Burst(p_fail_after_fail=p_ff, p_fail_after_ok=f * (1 - p_ff) / (1 - f)),
            latency_ms=LatencyModel(lognormal=Lognormal(mu=5.0, sigma=0.5)),
        )  # fmt: skip
    return Profile(tools=tools)


def old_mix_flags(a, b) -> int:  # type: ignore[no-untyped-def]
    """The plain chi-square on the code x window table (calls independent), Holm, V >= 0.1."""
    ps, vs = [], []
    for i in range(len(TOOLS)):
        ca = np.bincount(a.slice(i).code[a.slice(i).code >= 0], minlength=len(CODES))
        cb = np.bincount(b.slice(i).code[b.slice(i).code >= 0], minlength=len(CODES))
        keep = (ca + cb) > 0
        if keep.sum() < 2 or ca.sum() < 5 or cb.sum() < 5:
            continue
        table = np.vstack([ca[keep], cb[keep]])
        chi2, p = chi2_contingency(table)
        ps.append(p)
        vs.append(math.sqrt(chi2 / (table.sum() * (min(table.shape) - 1))))
    adj = adjust(ps, "holm")
    return sum(1 for p, v in zip(adj, vs, strict=True) if p < 0.05 and v >= 0.1)


def one(p_ff: float, c: float, seed: int) -> dict[str, int]:
    prof = profile(p_ff, c)
    a = fault_model_arrays(prof, TOOLS, N, seed=seed, t0=T0, step_s=STEP_S)
    b = fault_model_arrays(prof, TOOLS, N, seed=10_000 + seed, t0=T0 + WEEK, step_s=STEP_S)
    rep = drift(a, b)
    new_mix = sum(bool(t.error_mix and t.error_mix.flagged) for t in rep.tools)
    changed = fault_model_arrays(profile(p_ff, c, CHANGED), TOOLS, N, seed=20_000 + seed,
                                 t0=T0 + WEEK, step_s=STEP_S)  # fmt: skip
    power = drift(a, changed)
    power_new = sum(bool(t.error_mix and t.error_mix.flagged) for t in power.tools)
    stats = compute_stats(a)
    new_var = sum(bool(t.variability.variable_success) for t in stats.tools)
    old_var = 0
    for i in range(len(TOOLS)):
        s = a.slice(i)
        old_var += bool(variability(s.ts, s.code, s.latency_ms).variable_success)
    return {"mix_new": new_mix, "mix_old": old_mix_flags(a, b), "var_new": new_var,
            "var_old": old_var, "power_new": power_new,
            "power_old": old_mix_flags(a, changed)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dbs", type=int, default=100)
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    out = {}
    print("| P(f|f) | code persistence | error-mix flags: plain (old) | / design effect "
          "| day-variability flags: plain chi2 (old) | / design effect "
          "| mix changed, flagged: plain | / design effect |")
    print("|---|---|---|---|---|---|---|---|")
    for p_ff in (0.5, 0.8):
        for c in (0.0, 0.9, 1.0):
            tot: dict[str, int] = {}
            for seed in range(args.dbs):
                for k, v in one(p_ff, c, seed).items():
                    tot[k] = tot.get(k, 0) + v
            rate = {k: v / (args.dbs * len(TOOLS)) for k, v in tot.items()}
            out[f"{p_ff}:{c}"] = rate
            print(f"| {p_ff} | {c} | {100 * rate['mix_old']:.1f}% | {100 * rate['mix_new']:.1f}% "
                  f"| {100 * rate['var_old']:.1f}% | {100 * rate['var_new']:.1f}% "
                  f"| {100 * rate['power_old']:.1f}% | {100 * rate['power_new']:.1f}% |",
                  flush=True)
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "outage_drift.json").write_text(
            json.dumps({"dbs": args.dbs, "tools_flagged": out}, indent=2) + "\n"
        )


if __name__ == "__main__":
    main()
