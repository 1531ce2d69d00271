"""Empirical coverage of the 95% intervals over many simulated experiments.

One experiment = one tool probed N times through the simulate transport (virtual clock, seeded
fault model) by the probe runner, rows stored in SQLite, then `stats`. The truth is the
profile: success 0.70, ln(latency ms) ~ N(5.0, 0.5), failures 30% TIMEOUT / 30% SERVER_ERROR /
20% NETWORK_ERROR / 20% INVALID_RESPONSE, with and without a burst chain (P(f|f)=0.45).
Four tools per seed, each on its own independent stream: seeds x 4 experiments per scenario.
A third scenario sets a 200 ms deadline, which cuts the latency distribution at its 73rd
percentile: it scores the censored lognormal fit's intervals.

The pooled `overall` interval (four tools of one truth, stratified by tool) is scored too.

    python bench/interval_coverage.py [--seeds 150] [--calls 200] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import tempfile
import time
from pathlib import Path

from rich.progress import Progress

from realprobe.adapters.catalog import Catalog, default_catalog
from realprobe.adapters.spec import Politeness
from realprobe.clients import Mode, TransportOptions, make_client
from realprobe.errors import ErrorCode
from realprobe.http.client import ClientConfig
from realprobe.probes.loading import load_probes
from realprobe.probes.politeness import PolitenessConfig
from realprobe.probes.runner import run_probes
from realprobe.probes.stats import compute_stats
from realprobe.simulator.profile import Burst, LatencyModel, Lognormal, Profile, ToolProfile
from realprobe.store import Store

RESULTS = Path(__file__).parent / "results"
SUCCESS, MU, SIGMA, P_FF = 0.70, 5.0, 0.5, 0.45
P_FO = (1 - SUCCESS) * (1 - P_FF) / SUCCESS  # stationary failure rate 0.30
ERRORS = {ErrorCode.TIMEOUT: 0.3, ErrorCode.SERVER_ERROR: 0.3, ErrorCode.NETWORK_ERROR: 0.2,
          ErrorCode.INVALID_RESPONSE: 0.2}
POLITE_OFF = PolitenessConfig(
    override=Politeness(max_in_flight=1, min_interval_s=0.0, jitter_s=0.0, daily_budget=10**9),
    honour_retry_after=False, budgets=False,
)


def profile(burst: bool) -> Profile:
    return Profile(name="coverage-truth", default=ToolProfile(
        success_rate=SUCCESS, errors=dict(ERRORS),
        latency_ms=LatencyModel(lognormal=Lognormal(mu=MU, sigma=SIGMA)),
        burst=Burst(p_fail_after_fail=P_FF, p_fail_after_ok=P_FO) if burst else None,
    ))


def tools_on_distinct_hosts(catalog: Catalog, k: int) -> list[str]:
    seen, out = set(), []
    for t in catalog:
        host = t.api.base_url.split("/")[2]
        if host not in seen and t.spec.response == "json":
            seen.add(host)
            out.append(t.name)
    return out[:k]


async def one_seed(catalog: Catalog, tools: list[str], prof: Profile, seed: int, calls: int,
                   db: Path, deadline_s: float) -> None:
    opts = TransportOptions(mode=Mode.SIMULATE, profile=prof, seed=seed)
    client = make_client(catalog, opts, config=ClientConfig(deadline_s=deadline_s))
    try:
        with Store(db) as store:
            await run_probes(catalog, ",".join(tools), calls, client, store, timeout_s=deadline_s,
                             mode="simulate", target="simulate", politeness=POLITE_OFF)
    finally:
        await client.aclose()


def inside(ci: tuple[float, float] | None, truth: float) -> bool:
    return ci is not None and ci[0] <= truth <= ci[1]


def scenario(catalog: Catalog, name: str, burst: bool, seeds: int, calls: int,
             progress: Progress, deadline_s: float = 10.0) -> dict:
    """With a deadline that cuts into the latency distribution the observed success rate is
    no longer 0.70 (slow calls become TIMEOUTs), so only the latency intervals are scored."""
    censoring = deadline_s * 1000 < math.exp(MU + 3 * SIGMA)
    tools = tools_on_distinct_hosts(catalog, 4)
    prof = profile(burst)
    hits: dict[str, int] = {}
    widths: dict[str, float] = {}
    n = 0
    task = progress.add_task(name, total=seeds)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(seeds):
            db = Path(tmp) / f"s{seed}.db"
            asyncio.run(one_seed(catalog, tools, prof, seed, calls, db, deadline_s))
            rep = compute_stats(load_probes(db))
            if not censoring and rep.overall is not None:
                hits["overall_burst_adjusted"] = hits.get("overall_burst_adjusted", 0) + inside(
                    rep.overall.burst_adjusted95, SUCCESS)
                lo, hi = rep.overall.burst_adjusted95
                widths["overall_burst_adjusted"] = widths.get("overall_burst_adjusted", 0.0) + (
                    hi - lo)
            for t in rep.tools:
                n += 1
                fit = t.latency.lognormal
                checks = {
                    "success_wilson": t.success.wilson95,
                    "success_jeffreys": t.success.jeffreys95,
                    "success_burst_adjusted": t.success.burst_adjusted95,
                    "lognormal_mu": fit.mu_ci95 if fit else None,
                    "lognormal_sigma": fit.sigma_ci95 if fit else None,
                }
                truths = {"success_wilson": SUCCESS, "success_jeffreys": SUCCESS,
                          "success_burst_adjusted": SUCCESS, "lognormal_mu": MU,
                          "lognormal_sigma": SIGMA}
                if censoring:
                    for key in ("success_wilson", "success_jeffreys", "success_burst_adjusted"):
                        del checks[key]
                if burst and not censoring:
                    checks["p_fail_after_fail"] = t.burst.p_fail_after_fail.ci95
                    checks["p_fail_after_ok"] = t.burst.p_fail_after_ok.ci95
                    truths["p_fail_after_fail"] = P_FF
                    truths["p_fail_after_ok"] = P_FO
                for key, ci in checks.items():
                    hits[key] = hits.get(key, 0) + inside(ci, truths[key])
                    if ci is not None:
                        widths[key] = widths.get(key, 0.0) + (ci[1] - ci[0])
            db.unlink()
            progress.advance(task)
    per = {k: seeds if k.startswith("overall") else n for k in hits}
    return {
        "experiments": n,
        "calls_per_experiment": calls,
        "deadline_s": deadline_s,
        "coverage": {k: round(v / per[k], 4) for k, v in hits.items()},
        "mean_width": {k: round(v / per[k], 4) for k, v in widths.items()},
        "monte_carlo_se": round(math.sqrt(0.95 * 0.05 / n), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=150, help="seeds per scenario (x4 experiments)")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--save", action="store_true", help="write bench/results/ (else print)")
    args = ap.parse_args()
    catalog = default_catalog()
    t0 = time.perf_counter()
    with Progress() as progress:
        out: dict[str, object] = {
            "truth": {"success": SUCCESS, "mu": MU, "sigma": SIGMA, "p_fail_after_fail": P_FF,
                      "p_fail_after_ok": round(P_FO, 4)},
            "burst": scenario(catalog, "burst", True, args.seeds, args.calls, progress),
            "independent": scenario(catalog, "independent", False, args.seeds, args.calls,
                                    progress),
            # a 200 ms deadline cuts the latency distribution at its 73rd percentile
            "censored_200ms": scenario(catalog, "censored", True, args.seeds, args.calls,
                                       progress, deadline_s=0.2),
        }
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out, indent=2))
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "interval_coverage.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
