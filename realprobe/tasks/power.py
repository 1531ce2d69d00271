"""How many runs tell two agents apart: the two-proportion z-test's sample size (two-sided,
pooled variance under the null), for full-success rates measured over the task set."""

from __future__ import annotations

import math
from typing import Any

#: the defaults `results` quotes: 95% confidence, 80% power, a difference of 10 points
ALPHA = 0.05
POWER = 0.8
DIFFERENCE = 0.10


def runs_to_separate(p1: float, p2: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """Runs per agent for a two-sided two-proportion test at level `alpha` to tell
    full-success rates `p1` and `p2` apart with probability `power`:
    n = (z(1-α/2)·sqrt(2·p̄(1-p̄)) + z(power)·sqrt(p1(1-p1) + p2(1-p2)))² / (p1-p2)²,
    p̄ = (p1+p2)/2. It counts runs as independent: repeats of one task are not (a task an
    agent always fails adds no information), so read it as a lower bound."""
    if not (0 <= p1 <= 1 and 0 <= p2 <= 1) or p1 == p2:
        raise ValueError("two different rates between 0 and 1")
    # the normal quantile from the statistics' own scipy.special loader: importing
    # scipy.stats after it has run fails (its stand-in `scipy` has no `_lib`)
    from realprobe.probes.lazy_special import special

    za, zb = float(special.ndtri(1 - alpha / 2)), float(special.ndtri(power))
    pbar = (p1 + p2) / 2
    spread = za * math.sqrt(2 * pbar * (1 - pbar)) + zb * math.sqrt(
        p1 * (1 - p1) + p2 * (1 - p2))
    return math.ceil(spread**2 / (p1 - p2) ** 2)


def power_note(full_rate: float, tasks: int, difference: float = DIFFERENCE,
               alpha: float = ALPHA, power: float = POWER) -> dict[str, Any]:
    """For a row's full-success rate: the runs (and repeats of its `tasks`) that separate it
    from an agent `difference` better (or worse, where better is past 100%)."""
    other = full_rate + difference if full_rate + difference <= 1 else full_rate - difference
    other = min(1.0, max(0.0, other))
    runs = runs_to_separate(full_rate, other, alpha, power) if other != full_rate else None
    return {
        "full_rate": round(full_rate, 4), "other_rate": round(other, 4),
        "difference": difference, "confidence": 1 - alpha, "power": power,
        "runs_per_agent": runs, "tasks": tasks,
        "repeats": math.ceil(runs / tasks) if runs is not None and tasks else None,
    }


__all__ = ["ALPHA", "DIFFERENCE", "POWER", "power_note", "runs_to_separate"]
