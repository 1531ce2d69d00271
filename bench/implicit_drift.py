"""Implicit drift as probes see it: every catalogue tool called N times on the simulator
with a fault plan that drifts every fifth answer (a field of the body removed, renamed or
retyped, as `simulator/implicit.py` does it), next to the same calls without the plan.

Truth per answer: the declared output (the tool's structured data) differs from the clean
answer's. A drift the declared output never reads changes nothing the agent sees and is no
drift to find; one the adapter refuses is an INVALID_RESPONSE error, not an implicit fault.
Reported: recall (changed answers the detector marked `drift`), false positives (unchanged
answers marked, in both streams), and the tools whose drift stays invisible.

    python bench/implicit_drift.py [--calls 40] [--save]
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from benchlib import bench_args, emit, load_average

from realprobe.adapters import call_tool, default_catalog
from realprobe.clients import Mode, TransportOptions, make_client
from realprobe.probes.implicit import ImplicitWatch
from realprobe.simulator.plans import FaultPlan


async def stream(tool: Any, calls: int, plan: FaultPlan | None) -> list[Any]:
    client = make_client(CATALOG, TransportOptions(
        mode=Mode.SIMULATE, profile="calm", fault_plan=plan, seed=7))
    args = tool.examples[0] if tool.examples else {}
    try:
        return [await call_tool(tool, args, client) for _ in range(calls)]
    finally:
        await client.aclose()


async def one(tool: Any, calls: int) -> dict[str, int]:
    plan = FaultPlan(base="none", rules=[{"tool": tool.name, "every": 5, "fault": "drift"}])
    clean, drifted = await stream(tool, calls, None), await stream(tool, calls, plan)
    watch_c, watch_d = ImplicitWatch(), ImplicitWatch()
    out = dict.fromkeys(("changed", "found", "unchanged", "false_pos", "refused"), 0)
    for c, d in zip(clean, drifted, strict=True):
        sign_c = watch_c.check(tool, c, {})
        sign_d = watch_d.check(tool, d, {})
        if not d.ok:
            out["refused"] += c.ok
            continue
        marked = "drift" in (sign_d or "")
        if d.data != c.data:
            out["changed"] += 1
            out["found"] += marked
        else:
            out["unchanged"] += 1
            out["false_pos"] += marked
        out["unchanged"] += 1  # the clean stream's answers: none drifted
        out["false_pos"] += "drift" in (sign_c or "")
    return out


CATALOG = default_catalog()


def main() -> None:
    args = bench_args(__doc__, calls=40)
    load, t0 = load_average(), time.perf_counter()
    per_tool = {t.name: asyncio.run(one(t, args.calls)) for t in CATALOG}
    total = {k: sum(v[k] for v in per_tool.values()) for k in next(iter(per_tool.values()))}
    out: dict[str, Any] = {
        "tools": len(per_tool), "calls_per_tool": args.calls, "drift_every": 5,
        "total": total,
        "recall": round(total["found"] / total["changed"], 3) if total["changed"] else None,
        "false_positive_rate": round(total["false_pos"] / total["unchanged"], 4),
        "tools_with_changed_answers_missed": sorted(
            n for n, v in per_tool.items() if v["changed"] and v["found"] < v["changed"]),
    }
    out["seconds"] = round(time.perf_counter() - t0, 1)
    emit(out, args.save, Path(__file__).parent / "results" / "implicit_drift.json", load)


if __name__ == "__main__":
    main()
