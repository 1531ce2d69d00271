"""Two numbers for agent evaluation, on the simulator's virtual clock (no network):

1. the reference agent's reliability surface R(k, epsilon, lambda) on the published
   profile: pass^k for k = 1..K repeats, epsilon = paraphrase levels 0/1/2, lambda = the
   published profile's failure rates times 0, 1 and 2 (this script scales the profile
   itself: failure share x lambda, the burst chain's p(fail | ok) x lambda), and the volume;
2. Chain F1 and Kendall tau of the reference agent's runs per flaw type and severity
   (10/30/50), over every task and several flaw seeds, on the calm profile (so the flaw,
   not the faults, is what moves the metrics).

    python bench/eval_numbers.py [--repeat 5] [--flaw-seeds 3] [--save]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from statistics import fmean, quantiles
from typing import Any

from realprobe.adapters import default_catalog
from realprobe.simulator.profile import Burst, Profile, ToolProfile, load_profile
from realprobe.tasks.batch import TaskBatch
from realprobe.tasks.flaws import ALL_FLAW_TYPES, SEVERITIES
from realprobe.tasks.results import surface


def scaled_tool(tool: ToolProfile, lam: float) -> ToolProfile:
    fail = min(1.0, (1.0 - tool.success_rate) * lam)
    burst = None
    if tool.burst is not None and lam > 0:
        burst = Burst(
            p_fail_after_fail=tool.burst.p_fail_after_fail,
            p_fail_after_ok=min(1.0, tool.burst.p_fail_after_ok * lam),
        )
    return tool.model_copy(update={"success_rate": 1.0 - fail, "burst": burst})


def scaled(profile: Profile, lam: float) -> Profile:
    return profile.model_copy(update={
        "name": f"{profile.name or 'profile'} x{lam:g}",
        "default": scaled_tool(profile.default, lam) if profile.default else None,
        "tools": {name: scaled_tool(t, lam) for name, t in profile.tools.items()},
    })


def run_rows(**settings: Any) -> list[dict[str, Any]]:
    batch = TaskBatch.plan([], all_tasks=True, catalog=CATALOG, **settings)
    return [r.row for r in batch.run().runs]


def reliability_surface(repeat: int, folder: Path) -> dict[str, Any]:
    base = load_profile("published")
    rows: list[dict[str, Any]] = []
    for lam in (0.0, 1.0, 2.0):
        path = folder / f"published_x{lam:g}.json"
        scaled(base, lam).dump(path)
        for eps in (0, 1, 2):
            for r in run_rows(profile=str(path), repeat=repeat, paraphrase=eps):
                rows.append({**r, "fault_rate": lam, "target": "simulate:published"})
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
    with tempfile.TemporaryDirectory() as tmp:
        surf = reliability_surface(args.repeat, Path(tmp))
    t1 = time.perf_counter()
    flaws = flaw_metrics(args.flaw_seeds)
    t2 = time.perf_counter()
    print(f"reference agent, published profile: surface volume {surf['volume']} "
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
