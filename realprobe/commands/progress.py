"""Progress bars and their ETA, for every long command (probe, run, sweep, cassette replay).

The ETA knows the plan: the items left (a probe's calls, tool by tool; a sweep's runs, task
by task) in the order they start, and how they run: `workers` at a time and, for a probe
under politeness, host by host (a `Lane`: a host's calls start its interval apart, `slots`
of them in flight). The time left is when a schedule of everything left on those workers
and lanes ends, worked out again as the bar is drawn, so it never freezes.

- Items are measured per weight (1 for a call, a task's workflow steps for a run), recent
  ones weighing more. An item waiting costs its kind's mean (a tool, a task), shrunk towards
  the kinds' common mean as far as its kind's items differ among themselves more than the
  kinds differ (empirical Bayes); a kind not seen yet costs the common mean x its weight.
- An item in flight costs what items of its kind (else any) ran beyond its age, else up to
  the `deadline` (a hang), else its kind's cost again. Towards its kind's mean it counts as
  its age plus that when a deadline bounds it (a call), else as its age or the mean of its
  kind's finished items, whichever is more (a few long runs seen say little of the tail).
- With a deadline, the last item of each worker ends as such items did, not at their mean:
  the ETA is the expected latest of those ends (a few hangs at the end of a run decide when
  it ends).
- Starts are reported (`start`: a probe's calls) or inferred: items start in plan order as
  workers free up (a sweep's runs, which its executor starts in that order).

The bar never slows the work: the run only notes each start and end (O(1), no lock); the
bar's thread takes them in when it draws, and works the estimate out at most every
`FRESH_S` (its range every `RANGE_S`) and within `SHARE` of the wall time, counting down in
between, over at most `LIMIT` entries of the schedule (a long plan's front in batches).
Before the first item finishes only the politeness waits are known; with none, the bar says
so.
"""

from __future__ import annotations

import heapq
import math
import random
import threading
import time
from bisect import bisect_right, insort
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean, pstdev
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress, Task
    from rich.text import Text


#: finished items weigh exp(-(time since they ended) / (RECENCY x time so far)): a run whose
#: items grow slower or faster as it goes is judged more by its recent ones
RECENCY = 0.5
#: what an item in flight or the last wave draws on: this many of the latest items seen; the
#: means look at the latest WINDOW
SAMPLES, WINDOW = 200, 1_000
#: the prior's means count as this many items seen when scaling it to this machine; a prior
#: of one value per item (a run the target's seed decides) as EXACT_N: what is left to learn
#: is only this machine's speed, which every item that ends says
PRIOR_N, EXACT_N = 30, 1
#: the least doubt (sd of the log) of this machine's speed against a model of each item
EXACT_DOUBT = 0.03
#: the range (10th to 90th percentile of the time left) is drawn at most this often, from
#: at most this many simulated schedules (fewer for a long plan: DRAW_ITEMS items in all)
RANGE_S, DRAWS, DRAW_ITEMS = 1.0, 200, 5_000
#: the ETA is worked out again at most this often (seconds), and each time only after its
#: last working out took at most SHARE of the time since
FRESH_S, SHARE = 0.25, 0.03
#: a schedule has at most this many entries: past it, all but the last LIMIT // 2 items wait
#: in batches of a lane's consecutive items (ended by the same schedule one by one)
LIMIT = 400
#: an item in flight goes by its own kind's longer items when there are this many (one or
#: two say little: as its age nears theirs, it would seem about to end)
OWN = 3

#: per worker while scheduling: when it is free, a tie-break, then its last item (None:
#: none), the item's start and whether it is in flight
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
        """The expected time from a call's start to the next one's, one in flight at a time:
        E[max(call, gap + jitter)] over the call's `durations` (a long call holds the
        host's only slot, a short one leaves the rest of the gap to wait). Not the larger
        of the means: for calls that hang half the time the means say a third less."""
        a, j = self.gap_s, self.jitter_s

        def one(d: float) -> float:
            if d <= a:
                return a + j / 2
            if d >= a + j:
                return d
            return ((d - a) * d + ((a + j) ** 2 - d * d) / 2) / j

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
    """What a schedule works from: the items waiting (a batch stands for a lane's run of
    items: `batches`, its seconds), what an item costs and may take (`durations`; `spacing`:
    from its start to its lane's next), and what each item in flight may run beyond its age."""

    queue: list[Item]
    cost: Callable[[Item], float] | None
    durations: Callable[[Item], list[float]]
    excess: list[list[float]]
    batches: dict[Item, float] = field(default_factory=dict)
    spaced: dict[Item, float] = field(default_factory=dict)

    def spacing(self, lane: Lane, it: Item) -> float:
        if it not in self.spaced:
            self.spaced[it] = lane.spacing(self.durations(it))
        return self.spaced[it]


class Eta:
    """Remaining time of a planned run (see the module docstring). `plan`: the items in the
    order they start, or how many (all of one kind). `start`, `advance`, `replan` and
    `set_prior` note what happened (from any thread, at once); `remaining` and `spread`
    take it in (the bar's thread)."""

    def __init__(self, plan: int | Sequence[Item] = 0, *, workers: int = 1,
                 lanes: dict[str, Lane] | None = None, deadline: float | None = None,
                 starts_reported: bool = False, prior: Mapping[str, Sequence[float]] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock, self.workers, self.deadline = clock, max(1, workers), deadline
        self.lanes = lanes or {}
        self.reported = starts_reported
        self.started = clock()
        self.events: deque[tuple[float, str, Any, float | None]] = deque()  # noted, not taken in
        self.lock = threading.Lock()  # between readers: the run never waits on it
        self.prior: dict[str, Sequence[float]] = {}
        self.mean: dict[str, float] = {}  # the prior's, per kind, and its spread (`_doubt`)
        self.cv: dict[str, float] = {}
        self.scale = 1.0  # how far off the prior is here
        self.exact = False  # one value per item of every kind with a prior
        self._seen: list[tuple[Item, float, float]] = []  # the latest finished: seconds, end
        self.n_seen = 0
        self._flying: list[tuple[Item, float, int]] = []  # start, place in `order` (-1: none)
        self.order: list[Item] = []  # the plan: `taken` once started, `head` the first not
        self.taken = bytearray()
        self.head = self.waiting = self._done = self._total = 0
        self.by_kind: dict[str, deque[int]] = {}  # the places of each kind's items waiting
        #: when last worked out, and what: the estimate and, when last drawn, its range; and
        #: how long each took to work out (`_due`)
        self.last: tuple[float, float | None] | None = None
        self.range: tuple[float, float, float, float] | None = None  # `_draw`
        self.took = {"point": 0.0, "range": 0.0}
        self._set_prior(prior or {})
        self._replan(plan, self.started)

    def start(self, kind: str = "") -> None:
        """An item of `kind` starts now (the first of that kind still planned)."""
        self.events.append((self.clock(), "start", kind, None))

    def advance(self, kind: str = "", seconds: float | None = None) -> None:
        """An item of `kind` finished now, after `seconds` when known (the one of that kind in
        flight that started closest to then, else the longest)."""
        self.events.append((self.clock(), "end", kind, seconds))

    def replan(self, plan: int | Sequence[Item]) -> None:
        """A new plan of what is left to start (a count: less what is done or in flight;
        items, with inferred starts: of what is not done, those in flight first)."""
        self.events.append((self.clock(), "plan", plan, None))

    def set_prior(self, prior: Mapping[str, Sequence[float]]) -> None:
        """What a model of the target says items of each kind take (seconds, one a sample:
        a fault profile's call times, a task's simulated runs): it stands for the kind's
        items until they are seen, scaled by how far the items seen ran from it."""
        self.events.append((self.clock(), "prior", prior, None))

    @property
    def done(self) -> int:
        with self.lock:
            self._sync()
            return self._done

    @property
    def total(self) -> int:
        with self.lock:
            self._sync()
            return self._total

    @property
    def flying(self) -> list[tuple[Item, float]]:
        with self.lock:
            self._sync()
            return [(it, t0) for it, t0, _ in self._flying]

    @property
    def seen(self) -> list[tuple[Item, float, float]]:
        with self.lock:
            self._sync()
            return list(self._seen)

    @property
    def queue(self) -> list[Item]:
        with self.lock:
            self._sync()
            return self._waiting()

    def _sync(self) -> None:
        """Take in what was noted since (the caller holds the lock); priors last, the latest
        of each kind."""
        prior: dict[str, Sequence[float]] = {}
        for _ in range(len(self.events)):
            now, what, arg, seconds = self.events.popleft()
            if what == "start":
                self._start(now, arg)
            elif what == "end":
                self._end(now, arg, seconds)
            elif what == "plan":
                self._replan(arg, now)
            else:
                prior.update(arg)
        if prior:
            self._set_prior(prior)

    def _set_prior(self, prior: Mapping[str, Sequence[float]]) -> None:
        new = False
        for k, v in prior.items():
            if v:
                new = new or k not in self.prior
                self.prior[k], self.mean[k] = v, fmean(v)
                self.cv[k] = pstdev(v, self.mean[k]) / (self.mean[k] or 1.0)
        self.exact = bool(self.prior) and all(len(v) == 1 for v in self.prior.values())
        if new:  # worked out again at once (a kind's next model, as items end, waits its turn)
            self.last = self.range = None

    def _replan(self, plan: int | Sequence[Item], now: float) -> None:
        left = ([Item()] * max(0, plan - self._done - len(self._flying)) if isinstance(plan, int)
                else list(plan))
        if not isinstance(plan, int) and not self.reported:
            self._flying = []  # inferred: the plan's first items, started again below
        self._flying = [(it, t0, -1) for it, t0, _ in self._flying]
        self.order, self.taken, self.head, self.waiting = left, bytearray(len(left)), 0, len(left)
        self.by_kind = defaultdict(deque)
        for i, it in enumerate(left):
            self.by_kind[it.kind].append(i)
        self._total = self._done + len(self._flying) + len(left)
        self.last = self.range = None
        self._fill(now)

    def _take(self, kind: str) -> int | None:
        """The first item of `kind` waiting starts: its place in `order` (None: none)."""
        places = self.by_kind.get(kind)
        if not places:
            return None
        i = places.popleft()
        self.taken[i], self.waiting = 1, self.waiting - 1
        while self.head < len(self.order) and self.taken[self.head]:
            self.head += 1
        return i

    def _waiting(self) -> list[Item]:
        return [self.order[i] for i in range(self.head, len(self.order)) if not self.taken[i]]

    def _start(self, now: float, kind: str) -> None:
        i = self._take(kind)
        item = Item(kind) if i is None else self.order[i]
        self._flying.append((item, now, -1 if i is None else i))
        if item.lane in self.lanes:
            self.lanes[item.lane].last_start = now

    def _end(self, now: float, kind: str, seconds: float | None) -> None:
        self._done += 1
        mine = [i for i, (it, _, _) in enumerate(self._flying) if it.kind == kind]
        if mine:
            when = now - seconds if seconds is not None else -math.inf
            item, t0, _ = self._flying.pop(min(mine, key=lambda i: abs(self._flying[i][1] - when)))
            self._seen.append((item, now - t0, now))
            self.n_seen += 1
            if len(self._seen) > 2 * WINDOW:
                del self._seen[:-WINDOW]
        else:  # it ran unseen: it leaves the queue, and the item thought to run instead waits
            self._take(kind)
            if self._flying and not self.reported and self._flying[-1][2] >= 0:
                i = self._flying.pop()[2]
                self.taken[i], self.waiting, self.head = 0, self.waiting + 1, min(self.head, i)
                self.by_kind[self.order[i].kind].appendleft(i)  # the first of its kind
        self._fill(now)

    def _fill(self, now: float) -> None:
        """Inferred starts: the next items in plan order take the free workers, when their
        lane lets them (a start still to come counts as one)."""
        while not self.reported and self.waiting and len(self._flying) < self.workers:
            i = self._take(self.order[self.head].kind)  # the head is the first of its kind
            assert i is not None
            item, t0 = self.order[i], self.started if not self._done else now
            lane = self.lanes.get(item.lane)
            if lane is not None:
                if lane.last_start is not None:
                    t0 = max(t0, lane.last_start + lane.gap_s + lane.jitter_s / 2)
                lane.last_start = t0
            self._flying.append((item, t0, i))

    def _excess(self, item: Item, age: float) -> list[float]:
        """What items of its kind (at least `OWN` of them, else any, per weight) that ran
        longer than `age` ran beyond it; else up to the deadline."""
        recent = self._seen[-SAMPLES:]
        model = [d * self.scale for d in self.prior.get(item.kind, ())]
        if self.exact and model:  # its one modelled time by how far items ran from theirs
            ratios = self._ratios()
            model += [d * r for d in self.prior[item.kind] for r in ratios]
            if all(d <= age for d in model):  # past all of them: about to end
                return [0.1 * model[0]]
        for pool, least in ((model, 1), ([d for it, d, _ in recent if it.kind == item.kind], OWN),
                            ([d / it.weight * item.weight for it, d, _ in recent], 1)):
            longer = [d - age for d in pool if d > age]
            if len(longer) >= least:
                return longer
        return [max(self.deadline - age, 0.0)] if self.deadline is not None else []

    def _costs(self, now: float) -> Callable[[Item], float] | None:
        """Seconds an item waiting will take (empirical Bayes over the kinds, per weight, see
        the module docstring); None before anything has finished."""
        if self.prior:
            self.scale = self._scale(now)
        if not self._seen:
            return self._modelled(lambda: fmean(self.mean.values()))
        tau = RECENCY * (now - self.started) or 1.0
        values: dict[str, list[tuple[float, float]]] = defaultdict(list)  # per weight, weight
        for it, d, end in self._seen[-WINDOW:]:
            values[it.kind].append((d / it.weight, math.exp((end - now) / tau)))
        finished = {k: fmean(v for v, _ in vs) for k, vs in values.items()}
        typical = fmean(finished.values())
        for it, t0, _ in self._flying:  # with a deadline: its age and what such items ran beyond
            age = now - t0  # it; else at least its age, or as finished items of its kind
            if self.deadline is not None:
                excess = self._excess(it, age)
                value = (age + (fmean(excess) if excess else 0.0)) / it.weight
            else:
                value = max(age / it.weight, finished.get(it.kind, typical))
            values[it.kind].append((value, 1.0))

        def mean(vs: list[tuple[float, float]]) -> float:
            return sum(v * w for v, w in vs) / sum(w for _, w in vs)

        everything = [x for vs in values.values() for x in vs]
        means = {k: mean(vs) for k, vs in values.items()}
        ns = {k: sum(w for _, w in vs) ** 2 / sum(w * w for _, w in vs)  # effective counts
              for k, vs in values.items()}
        free = sum(ns.values()) - len(ns)  # degrees of freedom within kinds
        within = (sum(w * (v - means[k]) ** 2 for k, vs in values.items() for v, w in vs)
                  / sum(w for _, w in everything) * sum(ns.values()) / free
                  if free > 0.5 else None)
        spread = fmean([(m - fmean(means.values())) ** 2 for m in means.values()])
        between = (spread if within is None
                   else max(0.0, spread - within * fmean([1 / n for n in ns.values()])))
        # what a kind not seen yet costs: the kinds' means, each weighed by its precision
        # (alike kinds: by their items; kinds far apart: one each)
        weight = {k: 1 / (between + (within or 0.0) / n or 1.0) for k, n in ns.items()}
        pooled = sum(means[k] * w for k, w in weight.items()) / sum(weight.values())

        def cost(item: Item) -> float:
            if item.kind in self.prior:
                return self.mean[item.kind] * self.scale
            if item.kind not in means:
                return pooled * item.weight
            n = ns[item.kind]
            share = (n / (n + 1) if within is None  # one item per kind: nothing to go on
                     else between / (between + within / n) if between + within else 1.0)
            return (pooled + share * (means[item.kind] - pooled)) * item.weight

        return cost

    def _modelled(self, typical: Callable[[], float]) -> Callable[[Item], float] | None:
        """Before anything finished: the prior's mean of each kind (a kind without one: the
        kinds' typical mean x its weight); None without a prior."""
        if not self.prior:
            return None
        return lambda it: (self.mean[it.kind] if it.kind in self.prior
                           else typical() * it.weight) * self.scale

    def _scale(self, now: float) -> float:
        """How much longer items ran here than the prior says: the seconds of the items seen
        (of kinds with a prior) and of those in flight (their age, or what the prior's items
        that ran longer ran: the short ones end first) over their kinds' modelled means,
        with `PRIOR_N` items' worth of the model's own (a few long runs seen say little)."""
        pairs = [(d, self.mean[it.kind]) for it, d, _ in self._seen[-WINDOW:]
                 if it.kind in self.prior]
        for it, t0, _ in self._flying:
            if it.kind in self.prior:
                longer = [d for d in self.prior[it.kind] if d > now - t0]
                pairs.append((fmean(longer) if longer else now - t0, self.mean[it.kind]))
        if not pairs:
            return 1.0
        m = fmean(b for _, b in pairs) * (EXACT_N if self.exact else PRIOR_N)
        return (sum(a for a, _ in pairs) + m) / (sum(b for _, b in pairs) + m)

    def _ratios(self) -> list[float]:
        """How long the latest items with a prior ran over their kinds' modelled means."""
        return [d / self.mean[it.kind] for it, d, _ in self._seen[-SAMPLES:]
                if it.kind in self.prior and self.mean[it.kind] > 0]

    def _doubt(self) -> float:
        """How uncertain the prior's scale is (the sd of its log): its items' spread over
        the square root of the items it stands on (`PRIOR_N`, and those seen); 0 without."""
        if not self.prior:
            return 0.0
        if self.exact:  # the machine's speed: as uncertain as the items ran from their models
            logs = [math.log(r) for r in self._ratios() if r > 0]
            return max(EXACT_DOUBT, pstdev(logs) if len(logs) > 1 else 2 * EXACT_DOUBT)
        seen = sum(it.kind in self.prior for it, _, _ in self._seen[-WINDOW:])
        return fmean(self.cv.values()) / math.sqrt(PRIOR_N + seen)

    def remaining(self) -> float | None:
        """Seconds left, or None while there is nothing to base an estimate on. Worked out
        when due (`_due`); in between it counts down. Items with a prior and no deadline (runs
        whose length a fault model gives: a few long ones among many short) are skewed, their
        mean above what most runs see: for them it is the median of the drawn schedules."""
        with self.lock:
            self._sync()
            if self._total - self._done <= 0:
                return 0.0
            now = self.clock()
            if self.last is not None and not self._due("point", self.last[0], FRESH_S, now):
                if self.last[1] is not None:
                    return max(0.0, self.last[1] - now + self.last[0])
                if not self._seen:  # the first item to end gives an estimate at once
                    return None
            cost = self._costs(now)
            if cost and self.prior and self.deadline is None:
                left: float | None = self._draw(now, cost)[1]
            else:
                left = self._schedule(now, self._view(now, cost))
                left = left if cost or left else None  # no cost: the waits, if any
            self.last = (now, left)
            self.took["point"] = self.clock() - now
            return left

    def _due(self, what: str, since: float, every: float, now: float) -> bool:
        """Whether to work `what` out again: `every` seconds after the last time, and only
        once the time since is SHARE of what that took (a long plan on a busy machine: less
        often, never slowing the work)."""
        return now - since >= max(every, self.took[what] / SHARE)

    def spread(self) -> tuple[float, float] | None:
        """The 10th and 90th percentiles of the time left (drawn when due, counted down
        since); None before there is a range."""
        with self.lock:
            self._sync()
            now = self.clock()
            if self._total - self._done <= 0:
                return None
            if self.range is None or self._due("range", self.range[0], RANGE_S, now):
                cost = self._costs(now)
                if cost is None:
                    return None
                self._draw(now, cost)
            assert self.range is not None
            passed = now - self.range[0]
            return max(0.0, self.range[2] - passed), max(0.0, self.range[3] - passed)

    def _draw(self, now: float, cost: Callable[[Item], float]) -> tuple[float, float, float, float]:
        """Schedules with each item's time drawn from what its kind's items took (or the
        prior), each schedule's times by a factor as uncertain as the prior's scale to this
        machine (`_doubt`): (now, their median, 10th and 90th percentiles)."""
        rng, doubt = random.Random(self.n_seen), self._doubt()
        view = self._view(now, cost)  # once for every draw
        draws = sorted(self._schedule(now, view, rng, math.exp(rng.gauss(0.0, doubt)))
                       for _ in range(max(20, min(DRAWS, DRAW_ITEMS // (len(view.queue) + 1)))))
        n = len(draws)
        self.range = (now, draws[n // 2], draws[n // 10], draws[-1 - n // 10])
        self.took["range"] = self.clock() - now
        return self.range

    def _view(self, now: float, cost: Callable[[Item], float] | None) -> View:
        """What the schedules work from (`View`). Past `LIMIT` items waiting, all but the last
        LIMIT // 2 go in as many batches, each of a lane's consecutive items, taking what
        they cost together (on a lane: their spacings, or its gaps, whichever is more)."""
        queue, durations = self._waiting(), self._durations(cost)
        view = View(queue, cost, durations,
                    [self._excess(it, now - t0) if cost else [0.0] for it, t0, _ in self._flying])
        cut, tail = len(queue) - LIMIT // 2, LIMIT // 2
        if cut <= tail:
            return view
        size, view.queue, i = -(-cut // tail), [], 0
        while i < cut:
            j = i + 1
            while j < min(i + size, cut) and queue[j].lane == queue[i].lane:
                j += 1
            lane = self.lanes.get(queue[i].lane)
            batch = Item(f"\0{len(view.batches)}", queue[i].lane, j - i)
            calls = sum(map(cost, queue[i:j])) if cost else 0.0
            if lane is not None and cost and lane.slots == 1:
                calls = sum(view.spacing(lane, it) for it in queue[i:j])
            elif lane is not None:
                calls = max((j - i) * (lane.gap_s + lane.jitter_s / 2), calls / lane.slots)
            view.batches[batch] = calls
            view.queue.append(batch)
            i = j
        view.queue += queue[cut:]
        return view

    def _schedule(self, now: float, view: View, rng: random.Random | None = None,
                  factor: float = 1.0) -> float:
        """When the last item ends, less now: the items in flight end after what is left of
        theirs; each item waiting takes the worker free last by the time its lane lets it
        start (else the first free); a lane's items start its gap apart (a batch: after the
        one before). The last item of each worker ends as such items did (`_last_wave`).
        No cost: every item takes no time (what is left are the waits). An item in flight
        longer than any seen is expected to run its kind's cost more. With `rng`: one
        possible schedule, each item taking a time drawn from those its kind's items took
        (`_durations`), each gap its jitter drawn."""
        cost, free = view.cost, list[Slot]()
        lane_ends: dict[str, list[float]] = defaultdict(list)  # heaps, at most `slots` long
        nxt = {k: lane.last_start + lane.gap_s + lane.jitter_s / 2
               for k, lane in self.lanes.items() if lane.last_start is not None}

        def gap(lane: Lane, took: list[float]) -> float:  # from a start to the next
            return max([lane.gap_s + rng.uniform(0.0, lane.jitter_s), *took[:lane.slots]]) \
                if rng is not None else lane.spacing(took)

        for j, (it, t0, _) in enumerate(self._flying):
            excess = view.excess[j]
            end = now + (fmean(excess) if excess and rng is None else factor * rng.choice(excess)
                         if excess and rng else cost(it) if cost else 0.0)
            free.append((end, j, it, t0, True))
            heapq.heappush(lane_ends[it.lane], end)
            lane = self.lanes.get(it.lane)
            if cost and lane is not None and lane.slots == 1:
                nxt[it.lane] = t0 + gap(lane, [end - t0] if rng else
                                        [now - t0 + x for x in excess or [end - now]])
        n = min(self.workers, len(self._flying) + len(view.queue))
        free += [(now, -1 - j, None, now, False) for j in range(n - len(free))]
        free.sort(key=lambda w: w[:2])
        for j, it in enumerate(view.queue, len(self._flying)):
            ready = now
            lane = self.lanes.get(it.lane)
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
        if cost is None or rng is not None or (self.deadline is None and not self.prior):
            return max((w[0] for w in free), default=now) - now
        return self._last_wave(now, free, view) - now

    def _durations(self, cost: Callable[[Item], float] | None) -> Callable[[Item], list[float]]:
        """How long an item waiting may take: what its kind's items took (at least `OWN` of
        them, else any, per weight), scaled to its cost, at most the deadline; what the
        deadline cuts off comes back as more items that hang to it, the longest first (so
        their mean stays its cost: items seen early are the short ones)."""
        recent = self._seen[-SAMPLES:]
        cap = self.deadline if self.deadline is not None else math.inf
        memo: dict[Item, list[float]] = {}

        def durations(it: Item) -> list[float]:
            if it not in memo and cost is not None and it.kind in self.prior:
                memo[it] = [min(d * self.scale, cap) for d in self.prior[it.kind]]
            elif it not in memo and cost is not None and recent:
                own = [d for k, d, _ in recent if k.kind == it.kind]
                pool = own if len(own) >= OWN else [d / k.weight for k, d, _ in recent]
                c = cost(it)
                out = sorted(min(d * c / (fmean(pool) or 1.0), cap) for d in pool)
                short = c * len(out) - sum(out)
                for i in range(len(out) - 1, -1, -1):
                    if short <= 0:
                        break
                    short -= cap - out[i]
                    out[i] = cap
                memo[it] = out
            return memo.get(it, [])

        return durations

    def _last_wave(self, now: float, free: list[Slot], view: View) -> float:
        """The expected end of the last items, the latest of each worker's: one in flight
        ends after what items like it ran beyond its age; one waiting takes what its kind's
        items took (`_durations`). The expected maximum of these independent ends, exactly:
        the first end + the integral of 1 - prod F_w."""
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


def clock_text(seconds: float | None, spread: tuple[float, float] | None = None) -> str:
    """`ETA 0:02:10`; with its `spread` when that reaches past ±25% of it (a few long runs
    decide when the work ends): `ETA 0:02:10 (1:40-3:05)`."""
    if seconds is None:
        return "ETA estimating"

    def hms(x: float) -> str:
        h, rest = divmod(round(x), 3600)
        return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"

    text = f"ETA {hms(seconds) if seconds >= 3600 else '0:' + hms(seconds).zfill(5)}"
    if spread is not None and not 0.75 * seconds <= spread[0] <= spread[1] <= 1.25 * seconds:
        low, high = hms(spread[0]), hms(spread[1])
        if low != high:  # a range within one second says nothing
            text += f" ({low}-{high})"
    return text


class LineProgress:
    """For line-by-line progress (`[3/40] tool: ...`, where no bar is drawn): each counted
    line gets the ETA appended. Told the `plan` (each call's tool and host, the host's
    interval, the deadline; one call at a time), the ETA schedules it; else it counts."""

    def __init__(self, show: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.show, self.clock = show, clock
        self.eta = Eta(0, clock=clock)  # the work starts now; its size comes with a line
        self.planned = False

    def plan(self, calls: Sequence[tuple[str, str, float]], deadline: float | None) -> None:
        lanes = {host: Lane(gap_s=gap) for _, host, gap in calls}
        self.eta = Eta([Item(tool, host) for tool, host, _ in calls], lanes=lanes,
                       deadline=deadline, clock=self.clock)
        self.planned = True

    def __call__(self, text: str) -> None:
        import re

        m = re.match(r"\[(\d+)/(\d+)\] ([^:]*)", text)
        if m is not None:
            if not self.planned:
                self.eta.replan(int(m.group(2)))
            self.eta.advance(m.group(3) if self.planned else "")
            text = f"{text}  ({clock_text(self.eta.remaining())})"
        self.show(text)


def eta_column() -> Any:
    """A rich column that draws `task.fields["eta"]` (an Eta) at every refresh."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class EtaColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            eta = task.fields.get("eta")
            if task.finished or eta is None:
                return Text("")
            left = eta.remaining()
            return Text(clock_text(left, eta.spread() if left else None),
                        style="progress.remaining")

    return EtaColumn()


def bar_wanted(as_json: bool = False) -> bool:
    """Whether a long command draws its bar (and works out its ETA at all): only on a terminal
    that redraws a line (stderr; not TERM=dumb), and not under --json."""
    from realprobe.commands.common import err_console

    return not as_json and err_console.is_terminal and not err_console.is_dumb_terminal


def progress_bar(*extra: Any, console: Any, disable: bool = False,
                 transient: bool = False) -> Progress:
    """The bar every long command shows: label, bar, n/N, `extra` columns, elapsed, ETA."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), *extra,
        TimeElapsedColumn(), eta_column(), console=console, disable=disable,
        transient=transient,
    )


__all__ = ["Eta", "Item", "Lane", "LineProgress", "bar_wanted", "clock_text", "eta_column",
           "progress_bar"]
