"""Stored task runs summarised like the paper's Table 5, without pooling what differs.

Every table has one row per (agent, model, prompt, target, fault plan, paraphrase level):
runs under the calm and the harsh profile, on the sandbox and in simulation, or with and
without a fault plan are never one number. Per row: full / partial / failure, the trajectory
metrics' means, token usage and cost (`PRICES`, overridable), and the error mix of the
calls the agent made. Then per flaw type (and severity), pass^k and recovery, and on demand
the reliability surface pass^k over k x epsilon x lambda (`surface`).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from statistics import fmean
from typing import Any

from realprobe.errors import ErrorCode, RealprobeError
from realprobe.limits import read_document
from realprobe.tasks.metrics import levels, pass_k, recovery, recovery_by_kind
from realprobe.tasks.power import power_note

#: USD per million tokens (input, output), list prices of the providers' public price pages
#: (2025); a model not listed has no cost. Override or extend with a TOML/JSON file
#: `{"<model>": {"input": 0.15, "output": 0.60}}` (`results --prices FILE`).
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3-mini": (1.10, 4.40),
    "reference": (0.0, 0.0),
}

#: what a row is never pooled across
GROUP = ("agent", "model", "prompt", "target", "fault_plan", "paraphrase")
FILTERS = ("agent", "model", "prompt", "profile", "target", "target_kind", "fault_plan", "batch")


def load_prices(path: str | Path | None) -> dict[str, tuple[float, float]]:
    """The shipped price table, with a file's entries over it."""
    prices = dict(PRICES)
    if path is None:
        return prices
    p = Path(path)
    raw = read_document(p, "price file", "json" if p.suffix == ".json" else "toml")
    try:
        for model, entry in raw.items():
            pair = (float(entry["input"]), float(entry["output"]))
            if not all(math.isfinite(v) and v >= 0 for v in pair):
                raise ValueError(f"{model}: a price must be a finite number >= 0")
            prices[str(model)] = pair
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RealprobeError(
            f"{p}: expected entries like {{\"gpt-4o-mini\": {{\"input\": 0.15, "
            f"\"output\": 0.6}}}} (USD per million tokens): {exc}", param="prices"
        ) from exc
    return prices


def cost(row: Mapping[str, Any], prices: Mapping[str, tuple[float, float]]) -> float | None:
    """USD of one run's tokens, or None when the model has no price."""
    price = prices.get(str(row.get("model")))
    if price is None:
        return None
    return ((row.get("tokens_in") or 0) * price[0] + (row.get("tokens_out") or 0) * price[1]) / 1e6


def fault_rate(row: Mapping[str, Any]) -> float | None:
    """lambda: the run's stored fault rate (the fault-rate dial: the absolute share of calls
    that meet a fault), else a `fault_rate=X` in its target label; None when the run was
    stored without one (its faults are the profile's, at no stated share)."""
    value = row.get("fault_rate")
    if value is not None:
        return float(value)
    m = re.search(r"fault[_-]rate[=:]([0-9.]+)", str(row.get("target") or ""))
    return float(m.group(1)) if m else None


def target_of(row: Mapping[str, Any]) -> str:
    """The run's target as results group it: its label, with a replay's per-run cassette
    file replaced by the folder the batch replayed from."""
    label = str(row.get("target") or row.get("profile") or "-")
    cassette = row.get("cassette")
    if row.get("target_kind") == "replay" and cassette and label == f"replay:{cassette}":
        return f"replay:{Path(cassette).parent}"
    return label


def base_target(row: Mapping[str, Any]) -> str:
    """The target without its fault rate (the surface's lambda is an axis): the label's
    `fault_rate=X` or its dial suffix `@X`."""
    label = re.sub(r"[,;|@ ]?fault[_-]rate[=:][0-9.]+", "", target_of(row))
    return re.sub(r"@[0-9.]+$", "", label) if row.get("fault_rate") is not None else label


def _key(r: Mapping[str, Any], prompt: Callable[[Mapping[str, Any]], str]) -> tuple[str, ...]:
    return (
        str(r.get("agent")), str(r.get("model") or "-"), prompt(r), target_of(r),
        str(r.get("fault_plan") or "-"),
        str(r.get("paraphrase") or 0),
    )


def _group(rows: Iterable[Mapping[str, Any]], key: Any) -> dict[Any, list[Mapping[str, Any]]]:
    out: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        out[key(r)].append(r)
    return dict(sorted(out.items(), key=lambda kv: tuple(str(x) for x in kv[0])))


def prompt_type(r: Mapping[str, Any]) -> str:
    return "flawed" if str(r["prompt"]).startswith("flawed:") else str(r["prompt"])


def _mean(rows: list[Mapping[str, Any]], col: str) -> float | None:
    values = [float(r[col]) for r in rows if r.get(col) is not None]
    return round(fmean(values), 4) if values else None


def error_mix(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The failed calls the agent made, by error code (`api_errors` per row), and the calls."""
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        for code, n in (r.get("api_errors") or {}).items():
            counts[code] += n
    calls = sum(r.get("tool_calls") or 0 for r in rows)
    failed = sum(counts.values())
    paper: dict[str, int] = defaultdict(int)  # the same calls in ResiliBench's six codes
    for code, n in counts.items():
        paper[ErrorCode(code).resilibench if code in ErrorCode.__members__ else code] += n
    return {
        "calls": calls,
        "failed": failed,
        "errors": dict(sorted(counts.items(), key=lambda kv: -kv[1])),
        "resilibench": dict(sorted(paper.items(), key=lambda kv: -kv[1])),
    }


def usage(
    rows: list[Mapping[str, Any]], prices: Mapping[str, tuple[float, float]]
) -> dict[str, Any]:
    """Tokens, and their cost when every run's model has a price."""
    costs = [cost(r, prices) for r in rows]
    priced = bool(costs) and all(c is not None for c in costs)
    total = sum(c or 0.0 for c in costs)
    return {
        "tokens_in": sum(r.get("tokens_in") or 0 for r in rows),
        "tokens_out": sum(r.get("tokens_out") or 0 for r in rows),
        "cost_usd": round(total, 6) if priced else None,
        "cost_per_run_usd": round(total / len(costs), 6) if priced else None,
    }


def row_summary(
    rows: list[Mapping[str, Any]], prices: Mapping[str, tuple[float, float]]
) -> dict[str, Any]:
    """Levels, trajectory means, usage and cost, and the error mix of one group."""
    return {
        **levels(rows),
        "tasks": len({r.get("task") for r in rows}),
        # the means of the attempts a run used (Reflexion tries again after reflecting;
        # every other agent 1) and of the trajectory metrics
        **{col: _mean(rows, col) for col in (
            "attempts", "chain_f1", "kendall_tau", "graph_f1", "graph_node_f1")},
        **usage(rows, prices),
        "error_mix": error_mix(rows),
    }


def _named(key: tuple[str, ...], prompt_col: str = "prompt") -> dict[str, Any]:
    names = [prompt_col if g == "prompt" else g for g in GROUP]
    out: dict[str, Any] = dict(zip(names, key, strict=True))
    out["paraphrase"] = int(out["paraphrase"])
    return out


def summarise(
    rows: list[dict[str, Any]], prices: Mapping[str, tuple[float, float]] | None = None
) -> dict[str, Any]:
    """Table 5 (by agent, model, prompt type, target, fault plan, paraphrase level), per flaw
    type, and reliability; nothing is pooled across those."""
    prices = PRICES if prices is None else prices
    by_prompt = [
        {**_named(k), **row_summary(rs, prices)}
        for k, rs in _group(rows, lambda r: _key(r, prompt_type)).items()
    ]
    flawed = [r for r in rows if r.get("flaw")]
    by_flaw = [
        {**_named(k, "flaw"), **row_summary(rs, prices)}
        for k, rs in _group(flawed, lambda r: _key(r, lambda x: str(x["flaw"]))).items()
    ]
    reliability = [
        {**_named(k), "mode": rs[0].get("mode"), "profile": rs[0].get("profile") or "",
         "target_kind": rs[0].get("target_kind") or "live",
         "runs": len(rs), **pass_k(rs), **recovery(rs),
         # ToolMaze's recovery rate per fault kind (faults the agent caused never count)
         "recovery_by_kind": recovery_by_kind(rs)}
        for k, rs in _group(rows, lambda r: _key(r, lambda x: str(x["prompt"]))).items()
    ]
    by_complexity = [
        {**_named(k[:-1]), "topology": k[-1], **levels(rs),
         "chain_f1": _mean(rs, "chain_f1"), **recovery(rs),
         "recovery_by_kind": recovery_by_kind(rs)}
        for k, rs in _group([r for r in rows if r.get("topology")],
                            lambda r: (*_key(r, prompt_type), str(r["topology"]))).items()
    ]
    return {"runs": len(rows), "by_prompt": by_prompt, "by_flaw": by_flaw,
            "reliability": reliability, "by_complexity": sorted(
                by_complexity, key=lambda r: tuple(str(r[g]) for g in (*GROUP, "topology"))),
            # per row of Table 5: the runs (and repeats of its tasks) that tell its
            # full-success rate from one 10 points away at 95% confidence and 80% power
            "power": [{**{g: r[g] for g in GROUP},
                       **power_note(float(r["full_rate"]), int(r.get("tasks") or 0))}
                      for r in by_prompt]}


def select(rows: list[dict[str, Any]], **filters: str | None) -> list[dict[str, Any]]:
    """Rows whose columns equal every filter given (`profile`, `target`, `agent`, ...)."""
    unknown = sorted(set(filters) - set(FILTERS))
    if unknown:
        raise RealprobeError(f"no filter {unknown[0]!r}: choose from {', '.join(FILTERS)}")
    wanted = {k: v for k, v in filters.items() if v is not None}

    def value(r: Mapping[str, Any], k: str) -> str:
        return target_of(r) if k == "target" else str(r.get(k))

    return [r for r in rows if all(value(r, k) == v for k, v in wanted.items())]


# -- the reliability surface -------------------------------------------------------------


def _weights(xs: list[float]) -> list[float]:
    """Trapezoid weights over `xs` scaled to [0, 1] (one point weighs 1)."""
    if len(xs) == 1:
        return [1.0]
    span = xs[-1] - xs[0]
    w = []
    for i in range(len(xs)):
        left = xs[i] - xs[i - 1] if i > 0 else 0.0
        right = xs[i + 1] - xs[i] if i < len(xs) - 1 else 0.0
        w.append((left + right) / 2 / span)
    return w


def volume(grid: Mapping[tuple[int, int, float | None], float]) -> float | None:
    """The volume under R(k, epsilon, lambda) with each axis scaled to [0, 1] (iterated
    trapezoid rule): 1.0 for an agent that never fails anywhere on the grid. None when the
    grid has holes."""
    ks = sorted({k for k, _, _ in grid})
    es = sorted({e for _, e, _ in grid})
    ls = sorted({lam for _, _, lam in grid}, key=lambda x: -1.0 if x is None else x)
    if len(grid) != len(ks) * len(es) * len(ls):
        return None
    wk, we, wl = (_weights([float(x or 0.0) for x in axis]) for axis in (ks, es, ls))
    return sum(
        wk[i] * we[j] * wl[m] * grid[(k, e, lam)]
        for i, k in enumerate(ks) for j, e in enumerate(es) for m, lam in enumerate(ls)
    )


#: the critical threshold: the fault share at which pass^1 falls below this
CRITICAL_PASS = 0.5


def degradation(grid: Mapping[tuple[int, int, float | None], float]) -> dict[str, Any]:
    """How R(1, epsilon, lambda) falls: the mean slope per paraphrase level and per unit of
    fault share over adjacent grid points (the degradation gradient), and the critical
    threshold, the fault share at which pass^1 at the lowest epsilon first falls below
    CRITICAL_PASS (linear between grid points; None when it never does on the grid)."""
    es = sorted({e for _, e, _ in grid})
    ls = sorted({lam for _, _, lam in grid if lam is not None})

    def slopes(pairs: list[tuple[float, float, float, float]]) -> float | None:
        got = [(b - a) / (y - x) for x, a, y, b in pairs if y != x]
        return round(sum(got) / len(got), 4) if got else None

    lams: list[float | None] = list(ls) or [None]
    d_eps = slopes([(e0, grid[(1, e0, lam)], e1, grid[(1, e1, lam)])
                    for lam in lams for e0, e1 in itertools.pairwise(es)])
    d_lam = slopes([(l0, grid[(1, e, l0)], l1, grid[(1, e, l1)])
                    for e in es for l0, l1 in itertools.pairwise(ls)])
    critical = None
    curve = [(lam, grid[(1, es[0], lam)]) for lam in ls]
    for (l0, r0), (l1, r1) in itertools.pairwise(curve):
        if r0 >= CRITICAL_PASS > r1:
            critical = round(l0 + (r0 - CRITICAL_PASS) / (r0 - r1) * (l1 - l0), 4)
            break
    if curve and curve[0][1] < CRITICAL_PASS:
        critical = curve[0][0]
    return {"gradient": {"epsilon": d_eps, "lambda": d_lam}, "critical_lambda": critical}


def surface(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """pass^k over k x epsilon (paraphrase level) x lambda (the dial's absolute fault share),
    one surface per (agent, model, prompt, target without its fault rate, fault plan), with
    its volume, degradation gradient and critical threshold. Runs stored without a dial
    form their own surface with lambda None (the profile's faults, at no stated share), never
    a point on another's lambda axis. k runs to the smallest number of runs per task over
    the surface's cells."""
    groups = _group(rows, lambda r: (
        str(r.get("agent")), str(r.get("model") or "-"), str(r["prompt"]), base_target(r),
        str(r.get("fault_plan") or "-"), fault_rate(r) is not None,
    ))
    out = []
    for (agent, model, prompt, target, plan, _), rs in groups.items():
        cells = _group(rs, lambda r: (int(r.get("paraphrase") or 0), fault_rate(r)))
        hats = {cell: pass_k(crs)["pass^k"] for cell, crs in cells.items()}
        if not all(hats.values()):
            continue
        n = min(max(h) for h in hats.values())
        grid = {(k, e, lam): h[k] for (e, lam), h in hats.items() for k in range(1, n + 1)}
        lams = sorted({lam for _, lam in cells}, key=lambda x: -1.0 if x is None else x)
        out.append({
            "agent": agent, "model": model, "prompt": prompt, "target": target,
            "fault_plan": plan, "runs": len(rs), "k": list(range(1, n + 1)),
            "epsilon": sorted({e for e, _ in cells}), "lambda": lams,
            "cells": [{"k": k, "epsilon": e, "lambda": lam, "pass^k": round(v, 4)}
                      for (k, e, lam), v in sorted(grid.items(), key=lambda kv: (
                          kv[0][0], kv[0][1], -1.0 if kv[0][2] is None else kv[0][2]))],
            "volume": None if (v := volume(grid)) is None else round(v, 4),
            **degradation(grid),
        })
    return out


__all__ = [
    "PRICES",
    "cost",
    "degradation",
    "error_mix",
    "fault_rate",
    "load_prices",
    "prompt_type",
    "select",
    "summarise",
    "surface",
    "volume",
]
