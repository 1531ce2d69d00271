"""Stored task runs summarised like the paper's Table 5: full / partial / failure per agent,
model and prompt type, then per flaw type, then pass^k and recovery."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from realprobe.tasks.metrics import levels, pass_k, recovery, recovery_by_kind


def _group(rows: Iterable[Mapping[str, Any]], key: Any) -> dict[Any, list[Mapping[str, Any]]]:
    out: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        out[key(r)].append(r)
    return dict(sorted(out.items(), key=lambda kv: tuple(str(x) for x in kv[0])))


def prompt_type(r: Mapping[str, Any]) -> str:
    return "flawed" if str(r["prompt"]).startswith("flawed:") else str(r["prompt"])


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Table 5 (by agent, model, prompt type), per flaw type, and reliability."""
    by_prompt = [
        {"agent": a, "model": m, "prompt": p, **levels(rs)}
        for (a, m, p), rs in _group(
            rows, lambda r: (r["agent"], r["model"], prompt_type(r))
        ).items()
    ]
    flawed = [r for r in rows if r["flaw"]]
    by_flaw = [
        {"agent": a, "model": m, "flaw": f, **levels(rs)}
        for (a, m, f), rs in _group(flawed, lambda r: (r["agent"], r["model"], r["flaw"])).items()
    ]
    reliability = []
    for (a, m, p, mode, prof, kind, plan, rate), rs in _group(
        rows,
        lambda r: (r["agent"], r["model"], r["prompt"], r["mode"], r["profile"] or "",
                   r.get("target_kind") or "live", r.get("fault_plan") or "",
                   r.get("fault_rate")),
    ).items():
        reliability.append(
            {
                "agent": a, "model": m, "prompt": p, "mode": mode, "profile": prof,
                "target_kind": kind,  # live | sandbox | simulate | replay: never pooled
                "fault_plan": plan or None, "fault_rate": rate,
                "runs": len(rs), **pass_k(rs), **recovery(rs),
                # ToolMaze's recovery rate per fault kind (faults the agent caused excluded)
                "recovery_by_kind": recovery_by_kind(rs),
            }
        )
    return {"runs": len(rows), "by_prompt": by_prompt, "by_flaw": by_flaw,
            "reliability": reliability}


__all__ = ["prompt_type", "summarise"]
