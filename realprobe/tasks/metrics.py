"""Aggregates over runs: pass@k and pass^k (tau-bench), recovery rate and recovery cost;
and the trajectory metrics of one run against the optimal workflow.

pass^k = mean over tasks of C(c, k) / C(n, k): the chance that k i.i.d. runs of a task all
succeed. pass@k = mean over tasks of 1 - C(n - c, k) / C(n, k): at least one of k succeeds.
n is the number of runs per task (the minimum over tasks when they differ, as tau2 does);
`error` runs (the LLM endpoint failed, not the agent) are left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import combinations
from math import comb
from typing import Any

from realprobe.limits import input_cap, load_json_text


def _per_task(rows: Iterable[Mapping[str, Any]], success: str) -> list[list[bool]]:
    """Success flags per (task, prompt, agent, model), in run order."""
    flags: dict[Any, list[bool]] = defaultdict(list)
    for r in rows:
        if r["outcome"] == "error":
            continue
        ok = r["outcome"] == "full" if success == "full" else bool(r["strict"])
        flags[(r["task"], r.get("prompt"), r.get("agent"), r.get("model"))].append(ok)
    return list(flags.values())


def pass_k(rows: Iterable[Mapping[str, Any]], success: str = "full") -> dict[str, dict[int, float]]:
    """{"pass^k": {k: value}, "pass@k": {k: value}} for k = 1..n. When tasks have different
    numbers of runs, n is the smallest and each task contributes its first n runs."""
    per = _per_task(rows, success)
    if not per:
        return {"pass^k": {}, "pass@k": {}}
    n = min(len(f) for f in per)
    counts = [sum(f[:n]) for f in per]
    hat: dict[int, float] = {}
    at: dict[int, float] = {}
    for k in range(1, n + 1):
        hat[k] = sum(comb(c, k) / comb(n, k) for c in counts) / len(counts)
        at[k] = sum(1 - comb(n - c, k) / comb(n, k) for c in counts) / len(counts)
    return {"pass^k": hat, "pass@k": at}


def tool_faults(r: Mapping[str, Any]) -> int:
    """Faults the run met that the agent did not cause (injected, or a real API's own);
    rows stored before faults were labelled count every failed call."""
    labelled = r.get("tool_faults")
    return int(labelled if labelled is not None else (r.get("failures") or 0))


def fault_kinds(r: Mapping[str, Any]) -> dict[str, int]:
    kinds = r.get("fault_kinds")
    if isinstance(kinds, str):
        kinds = load_json_text(kinds or "{}", "fault kinds", max_bytes=input_cap())
    return dict(kinds or {})


def recovery(rows: Iterable[Mapping[str, Any]], kind: str | None = None) -> dict[str, Any]:
    """Among runs that met at least one tool fault (of `kind`, when given): the share that
    still reached full success, and the extra calls (beyond a fault-free run's) per fault.
    Faults the agent caused with its own input never count."""
    rows = list(rows)
    if kind is None:
        met = {id(r): tool_faults(r) for r in rows}
    else:
        met = {id(r): fault_kinds(r).get(kind, 0) for r in rows}
    hit = [r for r in rows if r["outcome"] != "error" and met[id(r)] > 0]
    if not hit:
        return {"runs_with_failures": 0, "recovery_rate": None, "recovery_cost": None}
    recovered = sum(1 for r in hit if r["outcome"] == "full")
    extra = sum(max(0, (r["tool_calls"] or 0) - (r["optimal_calls"] or 0)) for r in hit)
    failures = sum(met[id(r)] for r in hit)
    return {
        "runs_with_failures": len(hit),
        "recovery_rate": recovered / len(hit),
        "recovery_cost": extra / failures,
    }


FAULT_KINDS = (
    "explicit-transient", "explicit-permanent", "implicit-transient", "implicit-permanent"
)


def recovery_by_kind(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Recovery per fault kind (ToolMaze's perturbation recovery rate per setting)."""
    rows = list(rows)
    return {k: recovery(rows, k) for k in FAULT_KINDS}


def levels(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    rows = list(rows)
    n = len(rows)
    counts = {
        k: sum(1 for r in rows if r["outcome"] == k)
        for k in ("full", "partial", "failure", "error")
    }
    scored = [r for r in rows if r["outcome"] != "error"]
    m = len(scored) or 1
    return {
        "runs": n,
        **counts,
        "full_rate": counts["full"] / m,
        "partial_rate": counts["partial"] / m,
        "failure_rate": counts["failure"] / m,
        "grounded_rate": sum(1 for r in scored if r["grounded"]) / m,
        "strict_rate": sum(1 for r in scored if r["strict"]) / m,
        "mean_score": sum(r["score"] for r in scored) / m,
    }


def compare(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Models side by side: one entry per (model, agent, target, paraphrase level), with 95%
    Wilson intervals on the full, partial and recovery rates, pass^k for every k the repeats
    allow, and the runs left out as infrastructure errors."""
    from realprobe.probes.stats import wilson

    groups: dict[tuple[str, str, str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        plan = r.get("fault_plan")  # the fault rate is in the target label itself
        target = str(r.get("target") or "-") + (f" fault_plan={plan}" if plan else "")
        key = (str(r.get("model") or "-"), str(r.get("agent")), target,
               int(r.get("paraphrase") or 0))
        groups[key].append(r)
    out = []
    for (model, agent, target, level), rs in sorted(groups.items()):
        scored = [r for r in rs if r["outcome"] != "error"]
        n = len(scored)
        full = sum(1 for r in scored if r["outcome"] == "full")
        partial = sum(1 for r in scored if r["outcome"] == "partial")
        rec = recovery(rs)
        hit = rec["runs_with_failures"]
        recovered = round((rec["recovery_rate"] or 0.0) * hit)
        out.append({
            "model": model,
            "agent": agent,
            "target": target,
            "paraphrase": level,
            "runs": len(rs),
            "infra_errors": len(rs) - n,
            "full_rate": full / n if n else None,
            "full_ci95": list(wilson(full, n)) if n else None,
            "partial_rate": partial / n if n else None,
            "partial_ci95": list(wilson(partial, n)) if n else None,
            "pass^k": pass_k(scored)["pass^k"],
            "recovery_rate": rec["recovery_rate"],
            "recovery_ci95": list(wilson(recovered, hit)) if hit else None,
            "runs_with_failures": hit,
        })
    return out


# -- trajectory metrics (one run against the optimal workflow) ----------------------------


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def f1(precision: float, recall: float) -> float:
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def chain_f1(executed: Sequence[str], optimal: Sequence[str]) -> float:
    """F1 of the executed step sequence against the optimal one, matched as a chain:
    L = LCS(executed, optimal), P = L / |executed|, R = L / |optimal|."""
    if not executed or not optimal:
        return 0.0
    n = _lcs(executed, optimal)
    return f1(n / len(executed), n / len(optimal))


def kendall_tau(executed: Sequence[str], optimal: Sequence[str]) -> float | None:
    """Kendall's tau-a between the order in which the optimal steps were first executed and
    their optimal order, over the steps both hold: (concordant - discordant) / C(m, 2).
    None with fewer than two such steps (no pair to order)."""
    rank = {s: i for i, s in enumerate(optimal)}
    seen: list[int] = []
    for s in executed:
        if s in rank and rank[s] not in seen:
            seen.append(rank[s])
    m = len(seen)
    if m < 2:
        return None
    score = sum(
        (1 if seen[j] > seen[i] else -1) for i in range(m) for j in range(i + 1, m)
    )
    return score / comb(m, 2)


def graph_f1(
    executed: Collection[tuple[str, str]], optimal: Collection[tuple[str, str]]
) -> float | None:
    """F1 of the data-flow edges a run used against the workflow's dependency edges:
    P = |E_run ∩ E_opt| / |E_run|, R = |E_run ∩ E_opt| / |E_opt|. None when the workflow
    has no edges."""
    gold = set(optimal)
    if not gold:
        return None
    got = set(executed)
    hit = len(got & gold)
    if not got:
        return 0.0
    return f1(hit / len(got), hit / len(gold))


def mcis_node_f1(
    executed: Collection[str],
    executed_edges: Collection[tuple[str, str]],
    optimal: Collection[str],
    optimal_edges: Collection[tuple[str, str]],
) -> float:
    """WorkflowPerturb's Graph F1 (App. B.2): node F1 of the maximum common induced subgraph
    of the run's graph and the workflow's, nodes matched by workflow step: S is the largest
    set of steps in both whose edges among S are the same in both graphs;
    P = |S| / |V_run|, R = |S| / |V_opt|. Stricter than edge overlap (`graph_f1`): a step
    reached without the data flow that should lead to it breaks the subgraph."""
    run, gold = set(executed), set(optimal)
    common = sorted(run & gold)
    got, want = set(executed_edges), set(optimal_edges)

    def agrees(nodes: set[str]) -> bool:
        return ({e for e in got if e[0] in nodes and e[1] in nodes}
                == {e for e in want if e[0] in nodes and e[1] in nodes})

    best: set[str] = set()
    if len(common) <= 16:  # exact: the largest agreeing subset (workflows have a few steps)
        for size in range(len(common), 0, -1):
            best = next((set(c) for c in combinations(common, size) if agrees(set(c))), set())
            if best:
                break
    else:  # greedy: drop the step in most disagreeing edges until the rest agree
        best = set(common)
        while best and not agrees(best):
            bad = (got ^ want)
            best.discard(max(sorted(best), key=lambda n: sum(n in e for e in bad
                                                              if e[0] in best and e[1] in best)))
    if not run or not gold:
        return 0.0
    return f1(len(best) / len(run), len(best) / len(gold))
