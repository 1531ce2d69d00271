"""Round trip of every profile parameter: a known profile -> rows (the seeded fault model, the
deadline applied as the simulate transport applies it) -> stats -> calibrate -> compared
with the truth. Per parameter: mean error, mean absolute error, and how often the truth lies
inside the interval the statistics give for it (where they give one).

Scenarios (one tool, N calls one minute apart, 7 days when the day effect is on):
- `bursty`: success 0.90, P(fail|fail) 0.6, code persistence 0.7, three codes, ln N(5, 0.5),
  Retry-After on 80% of RATE_LIMIT_ERRORs (2 s: 1/4, 30 s: 3/4), far deadline;
- `daily`: success 0.85, day effect sd 0.5 on the logit, 7 days;
- `deadline`: success 0.90 with 25% hangs among failures, probed at 200 ms (S = 0.276);
  here also the export at the probes' deadline against the observed rows;
- `deadline_rare`: the same at success 0.97, where the hang count (observed TIMEOUTs minus
  S n) is small against S's own noise;
- `chain_rare_timeouts` / `chain_rare_mixed`: success 0.97 with P(fail|fail) 0.7 behind the
  200 ms deadline, failures all hangs / half hangs and half SERVER_ERROR: the burst chain
  behind a deadline for a rare-failure tool.

Retry-After is drawn by the fault model and fitted by the calibrate code
(`retry_after_model`); the HTTP leg (header rendering and parsing) is covered by
tests/test_stats_outages.py.

    python bench/profile_roundtrip.py [--seeds 30] [--n 3000] [--scenarios a,b] [--save]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from realprobe.errors import ErrorCode
from realprobe.probes.calibrate import AtDeadline, calibrate, retry_after_model
from realprobe.probes.stats import compute_stats
from realprobe.probes.synthetic import fault_model_arrays
from realprobe.simulator.faults import FaultModel
from realprobe.simulator.profile import (
    Burst,
    LatencyModel,
    Lognormal,
    Profile,
    RetryAfter,
    ToolProfile,
)

RESULTS = Path(__file__).parent / "results"
T0 = 1_789_948_800.0
WEEK = 7 * 86400.0
RL = ErrorCode.RATE_LIMIT_ERROR
MIX = {ErrorCode.SERVER_ERROR: 0.4, ErrorCode.NETWORK_ERROR: 0.3, RL: 0.3}
LAT = LatencyModel(lognormal=Lognormal(mu=5.0, sigma=0.5))
RA = RetryAfter(share=0.8, values=[(2.0, 1.0), (30.0, 3.0)])
SCENARIOS = ("bursty", "daily", "deadline", "deadline_rare", "chain_rare_timeouts",
             "chain_rare_mixed")  # fmt: skip


def truth(name: str) -> tuple[ToolProfile, float]:
    if name == "bursty":
        f, pff = 0.10, 0.6
        burst = Burst(p_fail_after_fail=pff, p_fail_after_ok=f * (1 - pff) / (1 - f))
        return ToolProfile(success_rate=0.9, errors=MIX, latency_ms=LAT, burst=burst,
                           code_persistence=0.7, retry_after={RL: RA}), 10.0  # fmt: skip
    if name == "daily":
        return ToolProfile(success_rate=0.85, errors=MIX, latency_ms=LAT,
                           daily_logit_sd=0.5), 10.0  # fmt: skip
    if name.startswith("chain_rare"):
        f, pff = 0.03, 0.7
        burst = Burst(p_fail_after_fail=pff, p_fail_after_ok=f * (1 - pff) / (1 - f))
        only = {ErrorCode.TIMEOUT: 1.0}
        mixed = {ErrorCode.SERVER_ERROR: 0.5, ErrorCode.TIMEOUT: 0.5}
        errs = only if name == "chain_rare_timeouts" else mixed
        return ToolProfile(success_rate=0.97, errors=errs, latency_ms=LAT, burst=burst), 0.2
    errors = {**MIX, ErrorCode.TIMEOUT: 0.25}
    rate = 0.97 if name == "deadline_rare" else 0.9
    return ToolProfile(success_rate=rate, errors=errors, latency_ms=LAT), 0.2


def inside(v: float, ci: tuple[float, float] | None) -> float:
    return float("nan") if ci is None else float(ci[0] <= v <= ci[1])


def one(name: str, n: int, seed: int) -> dict[str, tuple[float, float]]:
    """{parameter: (error, truth inside its interval: 1/0, NaN when none)}."""
    tp, deadline = truth(name)
    prof = Profile(tools={"a": tp})
    step = WEEK / n if name == "daily" else 60.0
    arr = fault_model_arrays(prof, ["a"], n, seed=seed, deadline_s=deadline, t0=T0, step_s=step)
    rep = compute_stats(arr)
    st, got = rep.tools[0], calibrate(rep).tools["a"]
    # the daily scenario's success_ci95 is for the probed days: its truth is the long run
    probed = got.success_ci95 if tp.daily_logit_sd is None else None
    out: dict[str, tuple[float, float]] = {
        "success_rate": (got.success_rate - tp.success_rate, inside(tp.success_rate, probed)),
        "mu": (got.latency_ms.params()[0] - 5.0, inside(5.0, st.latency.lognormal.mu_ci95)),
        "sigma": (got.latency_ms.params()[1] - 0.5,
                  inside(0.5, st.latency.lognormal.sigma_ci95)),
    }  # fmt: skip
    # a code the calibration did not see has no interval: the truth counts as outside it
    for code, w in tp.errors.items():
        ci = (got.errors_ci95 or {}).get(code, (1.0, 0.0))
        out[f"errors.{code.value}"] = (got.errors.get(code, 0.0) - w, inside(w, ci))
    if tp.burst is not None and got.burst is not None:
        # the profile's own intervals: the observed transitions' far from the deadline, the
        # chain fitted through it behind a biting one
        gb = got.burst
        out["p_fail_after_fail"] = (
            gb.p_fail_after_fail - tp.burst.p_fail_after_fail,
            inside(tp.burst.p_fail_after_fail, gb.p_fail_after_fail_ci95),
        )
        out["p_fail_after_ok"] = (
            gb.p_fail_after_ok - tp.burst.p_fail_after_ok,
            inside(tp.burst.p_fail_after_ok, gb.p_fail_after_ok_ci95),
        )
    if tp.code_persistence is not None:
        out["code_persistence"] = (
            (got.code_persistence or 0.0) - tp.code_persistence,
            inside(tp.code_persistence, got.code_persistence_ci95),
        )
    if tp.daily_logit_sd is not None:
        out["daily_logit_sd"] = (
            (got.daily_logit_sd or 0.0) - tp.daily_logit_sd,
            inside(tp.daily_logit_sd, got.daily_logit_sd_ci95),
        )
        out["long_run_success"] = (
            got.success_rate - tp.success_rate,
            inside(tp.success_rate, got.success_long_run_ci95),
        )
    if tp.retry_after:
        model = FaultModel(prof, seed)
        waits = [o.retry_after_s for o in (model.draw("a") for _ in range(n * 5)) if o.code is RL]
        fit = retry_after_model(len(waits), [w for w in waits if w is not None])
        vals = dict(fit.values)
        cis = dict(zip([v for v, _ in fit.values], fit.weights_ci95 or [], strict=True))
        out["retry_after.share"] = (fit.share - RA.share, inside(RA.share, fit.share_ci95))
        out["retry_after.w(30 s)"] = (
            vals.get(30.0, 0.0) - 0.75,
            inside(0.75, cis.get(30.0, (1.0, 0.0))),
        )
    if deadline < 1.0:
        hang = (1 - tp.success_rate) * tp.errors.get(ErrorCode.TIMEOUT, 0.0)
        out["P(hang)"] = ((got.hang_rate or 0.0) - hang, inside(hang, got.hang_rate_ci95))
        at = AtDeadline(got, deadline)
        out["export success at the deadline vs observed"] = (
            at.success - st.success.rate,
            float("nan"),
        )
        obs = st.errors.share_of_failures
        worst = max(abs(at.mix.get(ErrorCode(c), 0.0) - v) for c, v in obs.items())
        out["export mix at the deadline vs observed (largest)"] = (worst, float("nan"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help="comma-separated subset (--save needs them all)",
    )
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    names = [s for s in args.scenarios.split(",") if s]
    if unknown := sorted(set(names) - set(SCENARIOS)):
        ap.error(f"unknown scenario(s) {', '.join(unknown)}: choose from {', '.join(SCENARIOS)}")
    if args.save and set(names) != set(SCENARIOS):
        ap.error("--save writes every scenario's numbers: run them all")
    table = {}
    print("| scenario | parameter | mean error | mean abs error | truth inside interval |")
    print("|---|---|---|---|---|")
    for name in names:
        runs = [one(name, args.n, seed) for seed in range(args.seeds)]
        for key in runs[0]:
            err = np.array([r[key][0] for r in runs if key in r])
            hit = np.array([r[key][1] for r in runs if key in r])
            cover = "-" if np.all(np.isnan(hit)) else f"{100 * np.nanmean(hit):.0f}%"
            table[f"{name}:{key}"] = {"mean": float(err.mean()), "mae": float(abs(err).mean()),
                                      "inside": cover}  # fmt: skip
            print(f"| {name} | {key} | {err.mean():+.4f} | {abs(err).mean():.4f} | {cover} |",
                  flush=True)  # fmt: skip
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        out = {"seeds": args.seeds, "n": args.n, "parameters": table}
        (RESULTS / "profile_roundtrip.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
