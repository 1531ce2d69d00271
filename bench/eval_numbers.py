"""Two numbers for agent evaluation, on the simulator's virtual clock (no network):

1. the reference agent's reliability surface R(k, epsilon, lambda) on the published
   profile: pass^k for k = 1..K repeats, epsilon = paraphrase levels 0/1/2, lambda = the
   absolute share of calls that meet a fault (ReliabilityBench's levels 0, 0.075, 0.175,
   0.275, through the fault-rate dial `Profile.scaled`), with the volume, the degradation
   gradient and the critical threshold. The agent runs under the `baseline` prompt, so it
   follows the task's text (reordered at epsilon 2);
2. Chain F1 and Kendall tau of the reference agent's runs per flaw type and severity
   (10/30/50), over every task and several flaw seeds, on the calm profile (so the flaw,
   not the faults, is what moves the metrics).

    python bench/eval_numbers.py [--repeat 5] [--flaw-seeds 3] [--save]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from statistics import fmean, quantiles
from typing import Any

from realprobe.adapters import default_catalog
from realprobe.tasks.batch import TaskBatch
from realprobe.tasks.flaws import ALL_FLAW_TYPES, SEVERITIES
from realprobe.tasks.results import surface


def run_rows(**settings: Any) -> list[dict[str, Any]]:
    batch = TaskBatch.plan([], all=True, catalog=CATALOG, **settings)
    return [r.row for r in batch.run().runs]


LAMBDAS = (0.0, 0.075, 0.175, 0.275)


def reliability_surface(repeat: int) -> dict[str, Any]:
    rows = [r for lam in LAMBDAS for eps in (0, 1, 2) for r in run_rows(
        profile="published", fault_rate=lam, repeat=repeat, paraphrase=eps, prompt="baseline")]
    (surf,) = surface(rows)
    return surf


def flaw_metrics(seeds: int) -> list[dict[str, Any]]:
    out = []
    for kind in ALL_FLAW_TYPES:
        for sev in SEVERITIES:
            rows = [r for s in range(seeds) for r in run_rows(
                profile="calm", prompt=f"flawed:{kind}@{sev}", flaw_seed=s)]
            entry: dict[str, Any] = {"flaw": kind, "severity": sev, "runs": len(rows)}
            for col in ("chain_f1", "kendall_tau"):
                vals = sorted(float(r[col]) for r in rows if r[col] is not None)
                q = quantiles(vals, n=10) if len(vals) > 1 else vals * 9
                entry[col] = {"mean": round(fmean(vals), 3), "p10": round(q[0], 3),
                              "p50": round(q[4], 3), "p90": round(q[8], 3), "n": len(vals)}
            entry["full_rate"] = round(sum(r["outcome"] == "full" for r in rows) / len(rows), 3)
            out.append(entry)
    return out


CATALOG = default_catalog()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="runs per cell (k up to this)")
    parser.add_argument("--flaw-seeds", type=int, default=3)
    parser.add_argument("--save", action="store_true", help="write bench/results/")
    args = parser.parse_args()
    t0 = time.perf_counter()
    surf = reliability_surface(args.repeat)
    t1 = time.perf_counter()
    flaws = flaw_metrics(args.flaw_seeds)
    t2 = time.perf_counter()
    print(f"reference agent, published profile: surface volume {surf['volume']}, gradient "
          f"{surf['gradient']}, critical lambda {surf['critical_lambda']} "
          f"({surf['runs']} runs, {t1 - t0:.1f} s)")
    cells = {(c["epsilon"], c["lambda"], c["k"]): c["pass^k"] for c in surf["cells"]}
    for eps in surf["epsilon"]:
        for lam in surf["lambda"]:
            line = "  ".join(f"k={k}: {cells[(eps, lam, k)]:.3f}" for k in surf["k"])
            print(f"  eps={eps} lambda={lam:g}  {line}")
    print(f"\nChain F1 / Kendall tau per flaw and severity (calm, {t2 - t1:.1f} s)")
    for e in flaws:
        cf, tau = e["chain_f1"], e["kendall_tau"]
        print(f"  {e['flaw']:>22}@{e['severity']:<3} chain F1 mean {cf['mean']:.3f} "
              f"[p10 {cf['p10']:.2f} p50 {cf['p50']:.2f} p90 {cf['p90']:.2f}]  "
              f"tau mean {tau['mean']:.3f} [p10 {tau['p10']:.2f}]  full {e['full_rate']:.2f}")
    if args.save:
        dest = Path(__file__).parent / "results" / "eval_numbers.json"
        dest.parent.mkdir(exist_ok=True)
        dest.write_text(json.dumps({
            "python": platform.python_version(), "repeat": args.repeat,
            "flaw_seeds": args.flaw_seeds, "surface": surf, "flaws": flaws,
        }, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {dest}")


if __name__ == "__main__":
    main()
