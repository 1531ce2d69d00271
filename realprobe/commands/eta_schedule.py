"""The schedule behind the progress bar's ETA (`progress.Eta`): what is left of a planned run,
on its workers and host lanes, simulated to when it ends.

Each item waiting takes the worker free last by the time its lane lets it start (else the
first free); a lane's starts are its gap apart, at most `slots` of its items in flight; items
in flight end after what such items ran beyond their age. Past `LIMIT` items waiting, all but
the last LIMIT // 2 go in as many batches of a lane's consecutive items (what they cost
together; on a lane, their spacings), so working a schedule out costs the same whatever the
plan's size.
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import bisect_right, insort
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import fmean

#: entries of a schedule at most (past it, all but the last LIMIT // 2 items in batches)
LIMIT = 400

#: per worker while scheduling: when free, a tie-break, its last item, that item's start,
#: whether it is in flight
Slot = tuple[float, int, "Item | None", float, bool]


@dataclass
class Lane:
    """The calls to one host under politeness: their starts `gap_s` plus a uniform jitter in
    [0, `jitter_s`] apart (each drawn anew), at most `slots` of them in flight."""

    gap_s: float = 0.0
    slots: int = 1
    jitter_s: float = 0.0
    last_start: float | None = None

    def spacing(self, durations: Sequence[float]) -> float:
        """E[max(call, gap + jitter)] over the call's `durations`, one in flight at a time (a
        long call holds the host, a short one leaves the gap to wait): for calls that hang
        half the time the larger of the means says a third less."""
        a, j = self.gap_s, self.jitter_s

        def one(d: float) -> float:
            if d <= a:
                return a + j / 2
            return d if d >= a + j else ((d - a) * d + ((a + j) ** 2 - d * d) / 2) / j

        return fmean(one(d) for d in durations) if durations else a + j / 2


@dataclass(frozen=True)
class Item:
    """One planned item: its kind (items of a kind cost alike), its lane ("": none) and its
    weight (what an unseen kind's cost grows with: a task's workflow steps; 1 for a call)."""

    kind: str = ""
    lane: str = ""
    weight: float = 1.0


@dataclass
class View:
    """What schedules work from: the items waiting (a batch for a lane's run of them, its
    seconds in `batches`), their costs and `durations`; the items in flight with their start
    and what each may run beyond its age (`excess`); the workers and lanes; whether each
    worker's last item ends as such items did (`waves`: calls behind a deadline, a prior)."""

    queue: list[Item]
    cost: Callable[[Item], float] | None
    durations: Callable[[Item], list[float]]
    flying: list[tuple[Item, float]]
    excess: list[list[float]]
    lanes: dict[str, Lane]
    workers: int
    waves: bool = False
    batches: dict[Item, float] = field(default_factory=dict)
    spaced: dict[Item, float] = field(default_factory=dict)

    def spacing(self, lane: Lane, it: Item) -> float:
        if it not in self.spaced:
            self.spaced[it] = lane.spacing(self.durations(it))
        return self.spaced[it]


def summarise(view: View) -> View:
    """`view` with past LIMIT items waiting, all but the last LIMIT // 2 in as many batches of
    a lane's consecutive items (their costs, on a lane their spacings)."""
    queue, cost, costs = view.queue, view.cost, dict[Item, float]()
    cut, tail = len(queue) - LIMIT // 2, LIMIT // 2
    if cut <= tail:
        return view
    size, view.queue, i = -(-cut // tail), [], 0
    while i < cut:
        j = i + 1
        while j < min(i + size, cut) and queue[j].lane == queue[i].lane:
            j += 1
        lane = view.lanes.get(queue[i].lane)
        batch = Item(f"\0{len(view.batches)}", queue[i].lane, j - i)
        calls = sum(costs[it] if it in costs else costs.setdefault(it, cost(it))
                    for it in queue[i:j]) if cost else 0.0
        if lane is not None and cost and lane.slots == 1:
            calls = sum(view.spacing(lane, it) for it in queue[i:j])
        elif lane is not None:
            calls = max((j - i) * (lane.gap_s + lane.jitter_s / 2), calls / lane.slots)
        view.batches[batch] = calls
        view.queue.append(batch)
        i = j
    view.queue += queue[cut:]
    return view


def simulate(now: float, view: View, rng: random.Random | None = None,
             factor: float = 1.0) -> float:
    """When the last item ends, less now: items in flight end after what is left of theirs;
    each waiting takes the worker free last when its lane lets it start (else the first
    free), a lane's starts its gap apart (a batch: after the one before); each worker's
    last item ends as such items did (`last_wave`). No cost: only the waits. With `rng`:
    one possible schedule, times drawn as such items took, each gap's jitter drawn."""
    cost, free = view.cost, list[Slot]()
    lane_ends: dict[str, list[float]] = defaultdict(list)  # heaps, at most `slots` long
    nxt = {k: lane.last_start + lane.gap_s + lane.jitter_s / 2
           for k, lane in view.lanes.items() if lane.last_start is not None}

    def gap(lane: Lane, took: list[float]) -> float:  # from a start to the next
        return max([lane.gap_s + rng.uniform(0.0, lane.jitter_s), *took[:lane.slots]]) \
            if rng is not None else lane.spacing(took)

    for j, (it, t0) in enumerate(view.flying):
        excess = view.excess[j]
        end = now + (fmean(excess) if excess and rng is None else factor * rng.choice(excess)
                     if excess and rng else cost(it) if cost else 0.0)
        free.append((end, j, it, t0, True))
        heapq.heappush(lane_ends[it.lane], end)
        lane = view.lanes.get(it.lane)
        if cost and lane is not None and lane.slots == 1:
            nxt[it.lane] = t0 + gap(lane, [end - t0] if rng else
                                    [now - t0 + x for x in excess or [end - now]])
    n = min(view.workers, len(view.flying) + len(view.queue))
    free += [(now, -1 - j, None, now, False) for j in range(n - len(free))]
    free.sort(key=lambda w: w[:2])
    for j, it in enumerate(view.queue, len(view.flying)):
        ready = now
        lane = view.lanes.get(it.lane)
        if lane is not None:
            busy = lane_ends[it.lane]
            while len(busy) >= lane.slots:
                ready = max(ready, heapq.heappop(busy))
            ready = max(ready, nxt.get(it.lane, now))
        i = bisect_right(free, (ready, math.inf), key=lambda w: w[:2]) - 1
        begin = max(ready, free.pop(max(i, 0))[0])
        batch = view.batches.get(it)
        d = (factor * batch if batch is not None
             else factor * rng.choice(view.durations(it) or [cost(it)]) if rng and cost
             else cost(it) if cost else 0.0)
        insort(free, (begin + d, j, it, begin, False), key=lambda w: w[:2])
        if lane is not None:
            nxt[it.lane] = begin + (d if batch is not None else gap(lane, [d]) if rng
                                    else view.spacing(lane, it) if cost and lane.slots == 1
                                    else lane.gap_s + lane.jitter_s / 2)
            heapq.heappush(lane_ends[it.lane], begin + d)
    if cost is None or rng is not None or not view.waves:
        return max((w[0] for w in free), default=now) - now
    return last_wave(now, free, view) - now


def last_wave(now: float, free: list[Slot], view: View) -> float:
    """The expected latest end of each worker's last item (in flight: what such items ran
    beyond its age; waiting: `durations`): the first end + the integral of 1 - prod F_w."""
    options = []
    for end, j, it, begin, flying in free:
        if it is None:
            continue
        if flying:
            options.append([now + x for x in view.excess[j]] or [end])
        else:
            options.append([begin + d for d in view.durations(it) if it not in view.batches]
                           or [end])
    if not options:
        return now
    points = sorted((v, w) for w, vs in enumerate(options) for v in vs)
    counts, empty, product = [0] * len(options), len(options), 1.0
    expected = points[0][0]
    for k, (v, w) in enumerate(points):
        c = counts[w]
        counts[w] = c + 1
        product *= (c + 1) / c if c else 1 / len(options[w])
        empty -= not c
        upto = points[k + 1][0] if k + 1 < len(points) else v
        expected += (1.0 - (product if not empty else 0.0)) * (upto - v)
    return expected
