"""Calibrate under a deadline that bites: does the burst chain round-trip?

Truth: success 0.70, P(fail|fail) 0.70 (so P(fail|ok) 0.129, rho 0.571), ln latency ~
N(5.0, 0.5), failures 30% TIMEOUT (hangs) / 30% SERVER_ERROR / 20% NETWORK_ERROR / 20%
INVALID_RESPONSE. Probed with a 200 ms deadline, which cuts the latency at its 73rd
percentile: slow calls become TIMEOUTs, independently of the chain.

One experiment = 4 tools x N calls drawn from the seeded fault model with the deadline applied
(realprobe.probes.synthetic), then `stats` -> `calibrate`. Scored per tool:
- the calibrated (generative) chain against the truth;
- the round trip: the calibrated profile probed again at the same deadline, its observed
  chain against the first observed chain;
- what the old calibration did (observed rho kept, adjusted failure rate);
- the export views at the deadline against the observed per-attempt success.
A second scenario has TIMEOUT as the only failure code (the chain is then read from the
correlation alone), and a few experiments go through the real simulate transport and the
probe runner to show the shortcut changes nothing.

    python bench/calibrate_burst_roundtrip.py [--experiments 40] [--calls 3000] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.progress import Progress

from realprobe.adapters.catalog import default_catalog
from realprobe.adapters.spec import Politeness
from realprobe.clients import Mode, TransportOptions, make_client
from realprobe.errors import ErrorCode
from realprobe.http.client import ClientConfig
from realprobe.probes.calibrate import calibrate, export
from realprobe.probes.loading import load_probes
from realprobe.probes.politeness import PolitenessConfig
from realprobe.probes.runner import run_probes
from realprobe.probes.stats import StatsReport, compute_stats
from realprobe.probes.synthetic import fault_model_arrays
from realprobe.simulator.profile import Burst, LatencyModel, Lognormal, Profile, ToolProfile
from realprobe.store import Store, open_db

RESULTS = Path(__file__).parent / "results"
SUCCESS, P_FF, MU, SIGMA, DEADLINE = 0.70, 0.70, 5.0, 0.5, 0.2
P_FO = (1 - SUCCESS) * (1 - P_FF) / SUCCESS
MIXED = {ErrorCode.TIMEOUT: 0.3, ErrorCode.SERVER_ERROR: 0.3, ErrorCode.NETWORK_ERROR: 0.2,
         ErrorCode.INVALID_RESPONSE: 0.2}
TOOLS = ["a", "b", "c", "d"]


def truth(errors: dict[ErrorCode, float]) -> Profile:
    return Profile(name="roundtrip-truth", default=ToolProfile(
        success_rate=SUCCESS, errors=dict(errors),
        latency_ms=LatencyModel(lognormal=Lognormal(mu=MU, sigma=SIGMA)),
        burst=Burst(p_fail_after_fail=P_FF, p_fail_after_ok=P_FO)))


def old_chain(rep: StatsReport, prof: Profile) -> dict[str, tuple[float, float]]:
    """The previous calibration: observed rho kept, stationary rate from the adjusted success."""
    out = {}
    for t in rep.tools:
        ff, fo = t.burst.p_fail_after_fail.p, t.burst.p_fail_after_ok.p
        assert ff is not None and fo is not None
        fail = 1 - prof.tools[t.tool].success_rate
        old_fo = min(1.0, max(0.0, fail * (1 - (ff - fo))))
        out[t.tool] = (min(1.0, old_fo + ff - fo), old_fo)
    return out


def summarise(errs: list[float]) -> dict[str, float]:
    a = np.array(errs)
    return {"mean_error": round(float(a.mean()), 4),
            "mean_abs_error": round(float(np.abs(a).mean()), 4),
            "rmse": round(float(np.sqrt((a * a).mean())), 4),
            "share_within_0.03": round(float((np.abs(a) <= 0.03).mean()), 4)}


def scenario(name: str, errors: dict[ErrorCode, float], experiments: int, calls: int,
             progress: Progress) -> dict:
    prof0 = truth(errors)
    keys = ("generative_ff", "generative_fo", "old_ff", "old_fo", "roundtrip_ff",
            "roundtrip_fo", "view_success")
    errs: dict[str, list[float]] = {k: [] for k in keys}
    obs_rho, gen_rho, rt_rho, slow = [], [], [], []
    task = progress.add_task(name, total=experiments)
    for e in range(experiments):
        first = compute_stats(fault_model_arrays(prof0, TOOLS, calls, seed=f"{name}{e}",
                                                 deadline_s=DEADLINE))
        prof = calibrate(first)
        old = old_chain(first, prof)
        again = compute_stats(fault_model_arrays(prof, TOOLS, calls, seed=f"{name}{e}-rt",
                                                 deadline_s=DEADLINE))
        view = export(prof, "reliabilitybench")["measured"]["tools"]
        for t, t2 in zip(first.tools, again.tools, strict=True):
            b = prof.tools[t.tool].burst
            assert b is not None
            errs["generative_ff"].append(b.p_fail_after_fail - P_FF)
            errs["generative_fo"].append(b.p_fail_after_ok - P_FO)
            errs["old_ff"].append(old[t.tool][0] - P_FF)
            errs["old_fo"].append(old[t.tool][1] - P_FO)
            errs["roundtrip_ff"].append(t2.burst.p_fail_after_fail.p - t.burst.p_fail_after_fail.p)  # type: ignore[operator]
            errs["roundtrip_fo"].append(t2.burst.p_fail_after_ok.p - t.burst.p_fail_after_ok.p)  # type: ignore[operator]
            errs["view_success"].append((1 - view[t.tool]["failure_rate"]) - t.success.rate)
            obs_rho.append(t.burst.rho)
            gen_rho.append(b.p_fail_after_fail - b.p_fail_after_ok)
            rt_rho.append(t2.burst.rho)
            slow.append(t.latency.lognormal.p_exceed_timeout)  # type: ignore[union-attr]
        progress.advance(task)
    return {
        "experiments": experiments, "tools_per_experiment": len(TOOLS), "calls_per_tool": calls,
        "errors": {c.value: w for c, w in errors.items()},
        "mean": {"observed_rho": round(float(np.mean(obs_rho)), 4),
                 "calibrated_rho": round(float(np.mean(gen_rho)), 4),
                 "roundtrip_observed_rho": round(float(np.mean(rt_rho)), 4),
                 "slow_share_S": round(float(np.mean(slow)), 4)},
        "calibrated_vs_truth": {k.removeprefix("generative_"): summarise(errs[k])
                                for k in ("generative_ff", "generative_fo")},
        "old_calibration_vs_truth": {k.removeprefix("old_"): summarise(errs[k])
                                     for k in ("old_ff", "old_fo")},
        "roundtrip_observed_vs_first_observed": {
            k.removeprefix("roundtrip_"): summarise(errs[k])
            for k in ("roundtrip_ff", "roundtrip_fo")},
        "view_success_at_deadline_vs_observed": summarise(errs["view_success"]),
    }


async def _probe(profile: Profile, seed: int, calls: int, db: Path, tools: list[str]) -> None:
    catalog = default_catalog()
    opts = TransportOptions(mode=Mode.SIMULATE, profile=profile, seed=seed)
    client = make_client(catalog, opts, config=ClientConfig(deadline_s=DEADLINE))
    polite = PolitenessConfig(
        override=Politeness(max_in_flight=1, min_interval_s=0.0, jitter_s=0.0,
                            daily_budget=10**9),
        honour_retry_after=False, budgets=False)
    try:
        with Store(db) as store:
            await run_probes(catalog, ",".join(tools), calls, client, store,
                             timeout_s=DEADLINE, mode="simulate", target="simulate",
                             politeness=polite)
    finally:
        await client.aclose()


def through_transport(experiments: int, calls: int, progress: Progress) -> dict:
    """The same round trip through the simulate transport and the probe runner."""
    catalog = default_catalog()
    seen: set[str] = set()
    tools: list[str] = []
    for t in catalog:
        host = t.api.base_url.split("/")[2]
        if host not in seen and t.spec.response == "json":
            seen.add(host)
            tools.append(t.name)
    tools = tools[:3]
    gen_ff, gen_fo, rt_ff, rt_fo = [], [], [], []
    task = progress.add_task("transport", total=experiments)
    with tempfile.TemporaryDirectory() as tmp:
        for e in range(experiments):
            a, b = Path(tmp) / f"a{e}.db", Path(tmp) / f"b{e}.db"
            asyncio.run(_probe(truth(MIXED), 1000 + e, calls, a, tools))
            first = compute_stats(load_probes(open_db(a)))
            prof = calibrate(first)
            asyncio.run(_probe(prof, 2000 + e, calls, b, tools))
            again = compute_stats(load_probes(open_db(b)))
            for t, t2 in zip(first.tools, again.tools, strict=True):
                burst = prof.tools[t.tool].burst
                assert burst is not None
                gen_ff.append(burst.p_fail_after_fail - P_FF)
                gen_fo.append(burst.p_fail_after_ok - P_FO)
                rt_ff.append(t2.burst.p_fail_after_fail.p - t.burst.p_fail_after_fail.p)  # type: ignore[operator]
                rt_fo.append(t2.burst.p_fail_after_ok.p - t.burst.p_fail_after_ok.p)  # type: ignore[operator]
            progress.advance(task)
    return {"experiments": experiments, "tools_per_experiment": len(tools),
            "calls_per_tool": calls,
            "calibrated_vs_truth": {"ff": summarise(gen_ff), "fo": summarise(gen_fo)},
            "roundtrip_observed_vs_first_observed": {"ff": summarise(rt_ff),
                                                     "fo": summarise(rt_fo)}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--experiments", type=int, default=40)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--transport-experiments", type=int, default=3)
    ap.add_argument("--save", action="store_true", help="write bench/results/ (else print)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    with Progress() as progress:
        out: dict[str, object] = {
            "truth": {"success": SUCCESS, "p_fail_after_fail": P_FF,
                      "p_fail_after_ok": round(P_FO, 4), "rho": round(P_FF - P_FO, 4),
                      "mu": MU, "sigma": SIGMA, "deadline_s": DEADLINE,
                      "slow_share_S": round(0.5 * math.erfc((math.log(200) - MU) / SIGMA
                                                            / math.sqrt(2)), 4)},
            "mixed_codes": scenario("mixed", MIXED, args.experiments, args.calls, progress),
            "timeouts_only": scenario("timeouts", {ErrorCode.TIMEOUT: 1.0}, args.experiments,
                                      args.calls, progress),
            "through_transport": through_transport(args.transport_experiments, args.calls,
                                                   progress),
        }
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out, indent=2))
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "calibrate_burst_roundtrip.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
