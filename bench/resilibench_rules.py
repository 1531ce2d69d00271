"""ResiliBench's failure rules as its paper (App. B.3) and its code (WorkflowBench
`interactive_executor.py` `_calculate_success_rate`) define them, measured on the simulator.

1. The A-then-B scenario: tool A fails three times in a row, then its alternative B is
   called. Both rules read the task's history, so B's success chance is b * 0.9^3 (paper:
   every earlier failure of the task; code: the last three calls, the history holding
   three). With b = 0.8 both give 0.583; the `burst` rule, per tool, gives B its own b.
   Measured by conditioning on seeds whose first three calls of A failed.
2. The dependency factors: B reads an output of A; A failed once (paper: x0.7) or was never
   called (x0.5).
3. `scaled(lam)`: the failure share over long runs of calls (cycling through 4 tools) per
   rule, or the one-line refusal.

Usage: python bench/resilibench_rules.py [--seeds N] [--save]
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchlib import bench_args, emit, load_average

from realprobe.errors import ErrorCode
from realprobe.simulator.faults import FaultModel
from realprobe.simulator.profile import Profile, ProfileError, ToolProfile, builtin_profile

RULES = ("burst", "resilibench-paper", "resilibench-code")


def profile(rule: str, base: float = 0.8) -> Profile:
    mix = {ErrorCode.TIMEOUT: 0.5, ErrorCode.SERVER_ERROR: 0.5}
    tp = ToolProfile(success_rate=base, errors=mix)
    return Profile(name=f"b{base}", default=tp, rule=rule)  # type: ignore[arg-type]


def a_then_b(rule: str, seeds: int) -> dict[str, Any]:
    prof, met, ok = profile(rule), 0, 0
    for seed in range(seeds):
        model = FaultModel(prof, seed=seed)
        if all(not model.draw("A").ok for _ in range(3)):
            met += 1
            ok += model.draw("B").ok
    return {"runs_where_A_failed_3x": met, "P(B ok)": round(ok / met, 3) if met else None}


def dependency(rule: str, seeds: int) -> dict[str, Any]:
    """P(B ok) on B's first call when B reads A: A never called, or A called once and failed."""
    out: dict[str, Any] = {}
    prof = profile(rule)
    for case in ("A uncalled", "A failed once"):
        n = ok = 0
        for seed in range(seeds):
            model = FaultModel(prof, seed=seed)
            model.bind([["A"], ["B"]], {"B": [["A"]]})
            if case == "A failed once" and model.draw("A").ok:
                continue
            n += 1
            ok += model.draw("B").ok
        out[case] = round(ok / n, 3)
    return out


def share(rule: str, lam: float, calls: int) -> float | str:
    try:
        prof = profile(rule).scaled(lam)
    except ProfileError as exc:
        return f"refused: {exc}"
    fails = 0
    for seed in range(calls // 200):
        model = FaultModel(prof, seed=seed)
        fails += sum(not model.draw(f"t{i % 4}").ok for i in range(200))
    return round(fails / (calls // 200 * 200), 4)


def main() -> None:
    args = bench_args(__doc__, seeds=200_000, calls=200_000)
    load, t0 = load_average(), time.perf_counter()
    out: dict[str, Any] = {
        "base_success_rate": 0.8,
        "expected_P(B ok)": {"burst": 0.8, "paper": round(0.8 * 0.9**3, 4),
                             "code": round(0.8 * 0.9**3, 4)},
        "a_then_b": {r: a_then_b(r, args.seeds) for r in RULES},
        "dependency_first_call_of_B": {r: dependency(r, args.seeds // 10) for r in RULES},
        "scaled_share": {
            r: {str(lam): share(r, lam, args.calls) for lam in (0.075, 0.175, 0.275)}
            for r in RULES
        },
        "published_scaled_share": {
            str(lam): share_of(builtin_profile("published").scaled(lam), args.calls)
            for lam in (0.075, 0.275)
        },
    }
    out["seconds"] = round(time.perf_counter() - t0, 1)
    emit(out, args.save, Path(__file__).parent / "results" / "resilibench_rules.json", load)


def share_of(prof: Profile, calls: int) -> float:
    fails = 0
    for seed in range(calls // 200):
        model = FaultModel(prof, seed=seed)
        fails += sum(not model.draw(f"t{i % 4}").ok for i in range(200))
    return round(fails / (calls // 200 * 200), 4)


if __name__ == "__main__":
    main()
