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
from dataclasses import dataclass
from statistics import fmean, pstdev
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress, Task
    from rich.text import Text


#: finished items weigh exp(-(time since they ended) / (RECENCY x time so far)): a run whose
#: items grow slower or faster as it goes is judged more by its recent ones
RECENCY = 0.5
#: what an item in flight or the last wave draws on: this many of the latest items seen
SAMPLES = 200
#: the prior's means count as this many items seen when scaling it to this machine; a prior
#: of one value per item (a run the target's seed decides) as EXACT_N: what is left to learn
#: is only this machine's speed, which every item that ends says
PRIOR_N, EXACT_N = 30, 1
#: the least doubt (sd of the log) of this machine's speed against a model of each item
EXACT_DOUBT = 0.03
#: the range (10th to 90th percentile of the time left) is drawn at most this often, from
#: at most this many simulated schedules (fewer for a long plan: DRAW_ITEMS items in all)
RANGE_S, DRAWS, DRAW_ITEMS = 1.0, 200, 5_000
#: the ETA is worked out again at most this often (seconds)
FRESH_S = 0.25
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


class Eta:
    """Remaining time of a planned run (see the module docstring). `plan`: the items in the
    order they start, or how many (all of one kind)."""

    def __init__(self, plan: int | Sequence[Item] = 0, *, workers: int = 1,
                 lanes: dict[str, Lane] | None = None, deadline: float | None = None,
                 starts_reported: bool = False, prior: Mapping[str, Sequence[float]] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock, self.workers, self.deadline = clock, max(1, workers), deadline
        self.prior: dict[str, Sequence[float]] = {}
        self.mean: dict[str, float] = {}  # the prior's, per kind, and its spread (`_doubt`)
        self.cv: dict[str, float] = {}
        self.scale = 1.0  # how far off the prior is here
        self.exact = False  # one value per item of every kind with a prior
        self.lanes = lanes or {}
        self.reported = starts_reported
        self.started = clock()
        self.seen: list[tuple[Item, float, float]] = []  # finished: item, seconds, end
        self.flying: list[tuple[Item, float]] = []  # in flight, with their start
        self.queue: deque[Item] = deque()
        self.done = self.total = 0
        self.lock = threading.Lock()  # the bar draws from its own thread
        #: when last worked out, and what: the estimate and, when last drawn, its range
        self.last: tuple[float, float | None] | None = None
        self.range: tuple[float, float, float, float] | None = None  # `_draw`
        self.set_prior(prior or {})
        self.replan(plan)

    def set_prior(self, prior: Mapping[str, Sequence[float]]) -> None:
        """What a model of the target says items of each kind take (seconds, one a sample:
        a fault profile's call times, a task's simulated runs): it stands for the kind's
        items until they are seen, scaled by how far the items seen ran from it."""
        with self.lock:
            for k, v in prior.items():
                if v:
                    self.prior[k], self.mean[k] = v, fmean(v)
                    self.cv[k] = pstdev(v, self.mean[k]) / (self.mean[k] or 1.0)
            self.exact = bool(self.prior) and all(len(v) == 1 for v in self.prior.values())
            self.last = self.range = None

    def replan(self, plan: int | Sequence[Item]) -> None:
        """A new plan of what is left to start (a count: less what is done or in flight;
        items, with inferred starts: of what is not done, those in flight first)."""
        left = ([Item()] * max(0, plan - self.done - len(self.flying)) if isinstance(plan, int)
                else list(plan))
        with self.lock:
            if not isinstance(plan, int) and not self.reported:
                self.flying = []  # inferred: the plan's first items, started again below
            self.queue = deque(left)
            self.total = self.done + len(self.flying) + len(left)
            self._fill(self.clock())

    def _take(self, kind: str) -> Item | None:
        item = next((it for it in self.queue if it.kind == kind), None)
        if item is not None:
            self.queue.remove(item)
        return item

    def start(self, kind: str = "") -> None:
        """An item of `kind` starts now (the first of that kind still planned)."""
        now = self.clock()
        with self.lock:
            item = self._take(kind) or Item(kind)
            self.flying.append((item, now))
            if item.lane in self.lanes:
                self.lanes[item.lane].last_start = now

    def advance(self, kind: str = "", seconds: float | None = None) -> None:
        """An item of `kind` finished now, after `seconds` when known (the one of that kind in
        flight that started closest to then, else the longest)."""
        now = self.clock()
        with self.lock:
            self.done += 1
            mine = [i for i, (it, _) in enumerate(self.flying) if it.kind == kind]
            if mine:
                when = now - seconds if seconds is not None else -math.inf
                item, t0 = self.flying.pop(min(mine, key=lambda i: abs(self.flying[i][1] - when)))
                self.seen.append((item, now - t0, now))
            else:  # it ran unseen: it leaves the queue, and the item thought to run instead
                self._take(kind)  # waits
                if self.flying and not self.reported:
                    self.queue.appendleft(self.flying.pop()[0])
            self._fill(now)

    def _fill(self, now: float) -> None:
        """Inferred starts: the next items in plan order take the free workers, when their
        lane lets them (a start still to come counts as one)."""
        while not self.reported and self.queue and len(self.flying) < self.workers:
            item, t0 = self.queue.popleft(), self.started if not self.done else now
            lane = self.lanes.get(item.lane)
            if lane is not None:
                if lane.last_start is not None:
                    t0 = max(t0, lane.last_start + lane.gap_s + lane.jitter_s / 2)
                lane.last_start = t0
            self.flying.append((item, t0))

    def _excess(self, item: Item, age: float) -> list[float]:
        """What items of its kind (at least `OWN` of them, else any, per weight) that ran
        longer than `age` ran beyond it; else up to the deadline."""
        recent = self.seen[-SAMPLES:]
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
        if not self.seen:
            return self._modelled(lambda: fmean(self.mean.values()))
        tau = RECENCY * (now - self.started) or 1.0
        values: dict[str, list[tuple[float, float]]] = defaultdict(list)  # per weight, weight
        for it, d, end in self.seen:
            values[it.kind].append((d / it.weight, math.exp((end - now) / tau)))
        finished = {k: fmean(v for v, _ in vs) for k, vs in values.items()}
        typical = fmean(finished.values())
        for it, t0 in self.flying:  # with a deadline: its age and what such items ran beyond
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
        pairs = [(d, self.mean[it.kind]) for it, d, _ in self.seen
                 if it.kind in self.prior]
        for it, t0 in self.flying:
            if it.kind in self.prior:
                longer = [d for d in self.prior[it.kind] if d > now - t0]
                pairs.append((fmean(longer) if longer else now - t0, self.mean[it.kind]))
        if not pairs:
            return 1.0
        m = fmean(b for _, b in pairs) * (EXACT_N if self.exact else PRIOR_N)
        return (sum(a for a, _ in pairs) + m) / (sum(b for _, b in pairs) + m)

    def _ratios(self) -> list[float]:
        """How long the latest items with a prior ran over their kinds' modelled means."""
        return [d / self.mean[it.kind] for it, d, _ in self.seen[-SAMPLES:]
                if it.kind in self.prior and self.mean[it.kind] > 0]

    def _doubt(self) -> float:
        """How uncertain the prior's scale is (the sd of its log): its items' spread over
        the square root of the items it stands on (`PRIOR_N`, and those seen); 0 without."""
        if not self.prior:
            return 0.0
        if self.exact:  # the machine's speed: as uncertain as the items ran from their models
            logs = [math.log(r) for r in self._ratios() if r > 0]
            return max(EXACT_DOUBT, pstdev(logs) if len(logs) > 1 else 2 * EXACT_DOUBT)
        seen = sum(it.kind in self.prior for it, _, _ in self.seen)
        return fmean(self.cv.values()) / math.sqrt(PRIOR_N + seen)

    def waits_left(self) -> float:
        """The politeness waits still owed: the schedule of what is left at no cost."""
        with self.lock:
            return self._schedule(self.clock(), None)

    def remaining(self) -> float | None:
        """Seconds left, or None while there is nothing to base an estimate on. Worked out
        at most every `FRESH_S` seconds (a long run's schedule takes some milliseconds);
        in between it counts down. Items with a prior and no deadline (runs whose length a
        fault model gives: a few long ones among many short) are skewed, their mean above
        what most runs see: for them it is the median of the drawn schedules (`spread`)."""
        with self.lock:
            if self.total - self.done <= 0:
                return 0.0
            now = self.clock()
            if self.last is not None and now - self.last[0] < FRESH_S:
                return None if self.last[1] is None else max(0.0, self.last[1] - now + self.last[0])
            cost = self._costs(now)
            if cost and self.prior and self.deadline is None:
                left: float | None = self._draw(now, cost)[1]
            else:
                left = self._schedule(now, cost) if cost else self._schedule(now, None) or None
            self.last = (now, left)
            return left

    def spread(self) -> tuple[float, float] | None:
        """The 10th and 90th percentiles of the time left (drawn at most every `RANGE_S`),
        counted down since; None before there is a range."""
        with self.lock:
            now = self.clock()
            if self.total - self.done <= 0:
                return None
            if self.range is None or now - self.range[0] >= RANGE_S:
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
        rng, doubt = random.Random(len(self.seen)), self._doubt()
        durations = self._durations(cost)  # once for every draw
        excess = [self._excess(it, now - t0) for it, t0 in self.flying]
        draws = sorted(self._schedule(now, cost, rng, math.exp(rng.gauss(0.0, doubt)),
                                      (durations, excess))
                       for _ in range(max(20, min(DRAWS, DRAW_ITEMS // (len(self.queue) + 1)))))
        n = len(draws)
        self.range = (now, draws[n // 2], draws[n // 10], draws[-1 - n // 10])
        return self.range

    def _schedule(self, now: float, cost: Callable[[Item], float] | None,
                  rng: random.Random | None = None, factor: float = 1.0,
                  memo: tuple[Callable[[Item], list[float]], list[list[float]]] | None = None,
                  ) -> float:
        """When the last item ends, less now: the items in flight end after what is left of
        theirs; each item waiting takes the worker free last by the time its lane lets it
        start (else the first free); a lane's items start its gap apart. The last item of
        each worker ends as such items did (`_last_wave`). No `cost`: every item takes no
        time (what is left are the waits). An item in flight longer than any seen is
        expected to run its kind's cost more. With `rng`: one possible schedule, each item
        taking a time drawn from those its kind's items took (`_durations`), each gap its
        jitter drawn (`memo`: the items' times and the excess of those in flight, worked
        out once for many draws)."""
        free: list[Slot] = []
        lane_ends: dict[str, list[float]] = defaultdict(list)  # heaps, at most `slots` long
        nxt = {k: lane.last_start + lane.gap_s + lane.jitter_s / 2
               for k, lane in self.lanes.items() if lane.last_start is not None}
        durations = memo[0] if memo else self._durations(cost)

        def gap(lane: Lane, took: list[float]) -> float:  # from a start to the next
            if rng is not None:
                return max([lane.gap_s + rng.uniform(0.0, lane.jitter_s), *took[:lane.slots]])
            return (lane.spacing(took) if cost and lane.slots == 1
                    else lane.gap_s + lane.jitter_s / 2)

        for j, (it, t0) in enumerate(self.flying):
            excess = memo[1][j] if memo else self._excess(it, now - t0) if cost else [0.0]
            end = now + (fmean(excess) if excess and rng is None else factor * rng.choice(excess)
                         if excess and rng else cost(it) if cost else 0.0)
            free.append((end, j, it, t0, True))
            heapq.heappush(lane_ends[it.lane], end)
            lane = self.lanes.get(it.lane)
            if cost and lane is not None and lane.slots == 1:
                took = [end - t0] if rng else [now - t0 + x for x in excess or [end - now]]
                nxt[it.lane] = t0 + gap(lane, took)
        n = min(self.workers, len(self.flying) + len(self.queue))
        free += [(now, -1 - j, None, now, False) for j in range(n - len(free))]
        free.sort(key=lambda w: w[:2])
        for j, it in enumerate(self.queue, len(self.flying)):
            ready = now
            lane = self.lanes.get(it.lane)
            if lane is not None:
                busy = lane_ends[it.lane]
                while len(busy) >= lane.slots:
                    ready = max(ready, heapq.heappop(busy))
                ready = max(ready, nxt.get(it.lane, now))
            i = bisect_right(free, (ready, math.inf), key=lambda w: w[:2]) - 1
            begin = max(ready, free.pop(max(i, 0))[0])
            d = (factor * rng.choice(durations(it) or [cost(it)]) if rng and cost
                 else cost(it) if cost else 0.0)
            insort(free, (begin + d, j, it, begin, False), key=lambda w: w[:2])
            if lane is not None:
                nxt[it.lane] = begin + gap(lane, [d] if rng else durations(it))
                heapq.heappush(lane_ends[it.lane], begin + d)
        if cost is None or rng is not None or (self.deadline is None and not self.prior):
            return max((w[0] for w in free), default=now) - now
        return self._last_wave(now, free, durations) - now

    def _durations(self, cost: Callable[[Item], float] | None) -> Callable[[Item], list[float]]:
        """How long an item waiting may take: what its kind's items took (at least `OWN` of
        them, else any, per weight), scaled to its cost, at most the deadline; what the
        deadline cuts off comes back as more items that hang to it, the longest first (so
        their mean stays its cost: items seen early are the short ones)."""
        recent = self.seen[-SAMPLES:]
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

    def _last_wave(self, now: float, free: list[Slot],
                   durations: Callable[[Item], list[float]]) -> float:
        """The expected end of the last items, the latest of each worker's: one in flight
        ends after what items like it ran beyond its age; one waiting takes what its kind's
        items took (`_durations`). The expected maximum of these independent ends, exactly:
        the first end + the integral of 1 - prod F_w."""
        options = []
        for end, _, it, begin, flying in free:
            if it is None:
                continue
            if flying:
                options.append([now + x for x in self._excess(it, now - begin)] or [end])
            else:
                options.append([begin + d for d in durations(it)] or [end])
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


__all__ = ["Eta", "Item", "Lane", "LineProgress", "clock_text", "eta_column", "progress_bar"]
