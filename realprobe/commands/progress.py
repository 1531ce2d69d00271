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
import threading
import time
from bisect import bisect_right, insort
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress, Task
    from rich.text import Text


#: finished items weigh exp(-(time since they ended) / (RECENCY x time so far)): a run whose
#: items grow slower or faster as it goes is judged more by its recent ones
RECENCY = 0.5
#: what an item in flight or the last wave draws on: this many of the latest items seen
SAMPLES = 200
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
                 starts_reported: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock, self.workers, self.deadline = clock, max(1, workers), deadline
        self.lanes = lanes or {}
        self.reported = starts_reported
        self.started = clock()
        self.seen: list[tuple[Item, float, float]] = []  # finished: item, seconds, end
        self.flying: list[tuple[Item, float]] = []  # in flight, with their start
        self.queue: deque[Item] = deque()
        self.done = self.total = 0
        self.lock = threading.Lock()  # the bar draws from its own thread
        self.last: tuple[float, float | None] | None = None  # when last worked out, and what
        self.replan(plan)

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
        """Inferred starts: the next items in plan order take the free workers."""
        while not self.reported and self.queue and len(self.flying) < self.workers:
            self.flying.append((self.queue.popleft(), self.started if not self.done else now))

    def _excess(self, item: Item, age: float) -> list[float]:
        """What items of its kind (at least `OWN` of them, else any, per weight) that ran
        longer than `age` ran beyond it; else up to the deadline."""
        recent = self.seen[-SAMPLES:]
        for pool, least in (([d for it, d, _ in recent if it.kind == item.kind], OWN),
                            ([d / it.weight * item.weight for it, d, _ in recent], 1)):
            longer = [d - age for d in pool if d > age]
            if len(longer) >= least:
                return longer
        return [max(self.deadline - age, 0.0)] if self.deadline is not None else []

    def _costs(self, now: float) -> Callable[[Item], float] | None:
        """Seconds an item waiting will take (empirical Bayes over the kinds, per weight, see
        the module docstring); None before anything has finished."""
        if not self.seen:
            return None
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
            if item.kind not in means:
                return pooled * item.weight
            n = ns[item.kind]
            share = (n / (n + 1) if within is None  # one item per kind: nothing to go on
                     else between / (between + within / n) if between + within else 1.0)
            return (pooled + share * (means[item.kind] - pooled)) * item.weight

        return cost

    def waits_left(self) -> float:
        """The politeness waits still owed: the schedule of what is left at no cost."""
        with self.lock:
            return self._schedule(self.clock(), None)

    def remaining(self) -> float | None:
        """Seconds left, or None while there is nothing to base an estimate on. Worked out
        at most every `FRESH_S` seconds (a long run's schedule takes some milliseconds);
        in between it counts down."""
        with self.lock:
            if self.total - self.done <= 0:
                return 0.0
            now = self.clock()
            if self.last is not None and now - self.last[0] < FRESH_S:
                return None if self.last[1] is None else max(0.0, self.last[1] - now + self.last[0])
            cost = self._costs(now)
            left = self._schedule(now, cost) if cost else self._schedule(now, None) or None
            self.last = (now, left)
            return left

    def _schedule(self, now: float, cost: Callable[[Item], float] | None) -> float:
        """When the last item ends, less now: the items in flight end after what is left of
        theirs; each item waiting takes the worker free last by the time its lane lets it
        start (else the first free); a lane's items start its gap apart. The last item of
        each worker ends as such items did (`_last_wave`). No `cost`: every item takes no
        time (what is left are the waits). An item in flight longer than any seen is
        expected to run its kind's cost more."""
        free: list[Slot] = []
        lane_ends: dict[str, list[float]] = defaultdict(list)  # heaps, at most `slots` long
        nxt = {k: lane.last_start + lane.gap_s + lane.jitter_s / 2
               for k, lane in self.lanes.items() if lane.last_start is not None}
        durations = self._durations(cost)
        for j, (it, t0) in enumerate(self.flying):
            excess = self._excess(it, now - t0) if cost else [0.0]
            end = now + (fmean(excess) if excess else cost(it) if cost else 0.0)
            free.append((end, j, it, t0, True))
            heapq.heappush(lane_ends[it.lane], end)
            lane = self.lanes.get(it.lane)
            if cost and lane is not None and lane.slots == 1:
                nxt[it.lane] = t0 + lane.spacing([now - t0 + x for x in excess or [end - now]])
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
            end = begin + (cost(it) if cost else 0.0)
            insort(free, (end, j, it, begin, False), key=lambda w: w[:2])
            if lane is not None:
                nxt[it.lane] = begin + (lane.spacing(durations(it)) if cost and lane.slots == 1
                                        else lane.gap_s + lane.jitter_s / 2)
                heapq.heappush(lane_ends[it.lane], end)
        if cost is None or self.deadline is None:
            return max((w[0] for w in free), default=now) - now
        return self._last_wave(now, free, cost) - now

    def _durations(self, cost: Callable[[Item], float] | None) -> Callable[[Item], list[float]]:
        """How long an item waiting may take: what its kind's items took (at least `OWN` of
        them, else any, per weight), scaled to its cost, at most the deadline."""
        recent = self.seen[-SAMPLES:]
        cap = self.deadline if self.deadline is not None else math.inf
        memo: dict[Item, list[float]] = {}

        def durations(it: Item) -> list[float]:
            if it not in memo and cost is not None:
                own = [d for k, d, _ in recent if k.kind == it.kind]
                pool = own if len(own) >= OWN else [d / k.weight for k, d, _ in recent]
                scale = cost(it) / (fmean(pool) or 1.0)
                memo[it] = [min(d * scale, cap) for d in pool]
            return memo.get(it, [])

        return durations

    def _last_wave(self, now: float, free: list[Slot], cost: Callable[[Item], float]) -> float:
        """The expected end of the last items, the latest of each worker's: one in flight
        ends after what items like it ran beyond its age; one waiting takes what the items
        seen took per weight, scaled to its kind's cost (at most the deadline). The expected
        maximum of these independent ends, exactly: the first end + the integral of
        1 - prod F_w."""
        seen = [d / it.weight for it, d, _ in self.seen[-SAMPLES:]]
        typical = fmean(seen) or 1.0
        cap = self.deadline if self.deadline is not None else math.inf
        options = []
        for end, _, it, begin, flying in free:
            if it is None:
                continue
            if flying:
                options.append([now + x for x in self._excess(it, now - begin)] or [end])
            else:
                options.append([begin + min(d / typical * cost(it), cap) for d in seen])
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


def clock_text(seconds: float | None) -> str:
    if seconds is None:
        return "ETA estimating"
    s = round(seconds)
    h, rest = divmod(s, 3600)
    return f"ETA {h}:{rest // 60:02d}:{rest % 60:02d}"


def with_eta(show: Callable[[str], None],
             clock: Callable[[], float] = time.monotonic) -> Callable[[str], None]:
    """For line-by-line progress (`[3/40] tool: ...`, where no bar is drawn): each counted
    line gets the ETA appended."""
    import re

    eta = Eta(0, clock=clock)  # the work starts now; its size comes with the first line

    def line(text: str) -> None:
        m = re.match(r"\[(\d+)/(\d+)\]", text)
        if m is not None:
            eta.replan(int(m.group(2)))
            eta.advance()
            text = f"{text}  ({clock_text(eta.remaining())})"
        show(text)

    return line


def eta_column() -> Any:
    """A rich column that draws `task.fields["eta"]` (an Eta) at every refresh."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class EtaColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            eta = task.fields.get("eta")
            if task.finished or eta is None:
                return Text("")
            return Text(clock_text(eta.remaining()), style="progress.remaining")

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


__all__ = ["Eta", "Item", "Lane", "clock_text", "eta_column", "progress_bar", "with_eta"]
