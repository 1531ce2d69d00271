"""Progress bars and their ETA, for every long command (probe, run, sweep, cassette replay).

The ETA knows the plan: the items left (a probe's calls, a sweep's runs) in the order they
start, `workers` at a time and, under politeness, host by host (a `Lane`: starts its gap
apart, `slots` in flight). The time left is when a schedule of all that ends:
- an item waiting costs its kind's mean per weight (recent items weigh more), shrunk towards
  the kinds' common mean as far as its kind's items differ among themselves more than the
  kinds differ (empirical Bayes); an unseen kind costs the common mean x its weight; a kind
  with a prior (a fault model's times) costs the prior's mean scaled to this machine;
- an item in flight costs what items of its kind (else any) ran beyond its age, else up to
  the `deadline` (a hang); with a deadline, each worker's last item ends as such items did,
  and the ETA is the expected latest of those ends (a few hangs decide when a run ends);
- starts are reported (`start`: a probe's calls) or inferred (items start in plan order as
  workers free up: a sweep's runs).

It never slows the work: the run only notes each start and end (no lock); the bar's thread
takes them in and works the estimate (and its range, every RANGE_S) out at most every FRESH_S,
and only once its last working out took no more than SHARE of the time since, counting down
in between, over at most LIMIT entries (`eta_schedule`: a long plan's front in batches).
"""

from __future__ import annotations

import math
import random
import re
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from statistics import fmean, pstdev
from typing import TYPE_CHECKING, Any

from realprobe.commands.eta_schedule import Item, Lane, View, simulate, summarise

if TYPE_CHECKING:
    from rich.progress import Progress, Task
    from rich.text import Text

#: finished items weigh exp(-(time since they ended) / (RECENCY x time so far))
RECENCY = 0.5
#: items in flight and the last wave draw on the latest SAMPLES items seen; means, WINDOW
SAMPLES, WINDOW = 200, 1_000
#: the prior's means count as this many items seen when scaling it to this machine (EXACT_N
#: for one value per item: only the machine's speed is left to learn), its least doubt
PRIOR_N, EXACT_N, EXACT_DOUBT = 30, 1, 0.03
#: the range (10th to 90th percentile of the time left): at most this often, from at most
#: DRAWS simulated schedules (DRAW_ITEMS entries in all)
RANGE_S, DRAWS, DRAW_ITEMS = 1.0, 200, 5_000
#: the estimate at most this often, and once the time since is 1/SHARE of what it last took
FRESH_S, SHARE = 0.25, 0.002
#: an item in flight goes by its own kind's longer items when there are this many
OWN = 3


class Eta:
    """Remaining time of a planned run (module docstring). `plan`: the items in the order
    they start, or how many. `start`, `advance`, `replan`, `set_prior` only note (any thread);
    the readers (`remaining`, `spread`, the state below) take the notes in."""

    def __init__(self, plan: int | Sequence[Item] = 0, *, workers: int = 1,
                 lanes: dict[str, Lane] | None = None, deadline: float | None = None,
                 starts_reported: bool = False, prior: Mapping[str, Sequence[float]] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock, self.workers, self.deadline = clock, max(1, workers), deadline
        self.lanes, self.reported, self.started = lanes or {}, starts_reported, clock()
        self.notes: deque[tuple[float, str, Any, float | None]] = deque()
        self.lock = threading.Lock()  # between readers: the run never takes it
        self.prior: dict[str, Sequence[float]] = {}
        self.mean: dict[str, float] = {}  # the prior's, per kind, and its spread (`_doubt`)
        self.cv: dict[str, float] = {}
        self.scale, self.exact = 1.0, False  # how far off the prior is here; one value each
        self._seen: list[tuple[Item, float, float]] = []  # the latest finished: seconds, end
        self._flying: list[tuple[Item, float]] = []  # in flight, with their start
        self.order: list[Item] = []  # the plan; an item's place among its kind's (`nth`)
        self.nth: list[int] = []
        self.began: Counter[str] = Counter()  # each kind's items started, the first ones
        self.head = self.waiting = self._done = self._total = self.n_seen = 0
        #: when last worked out and what: the estimate, the range (`_draw`, once `spread` is
        #: asked); the next working out waits till `free_at` (SHARE of the time)
        self.last: tuple[float, float | None] | None = None
        self.range: tuple[float, float, float, float] | None = None
        self.ranged, self.free_at = False, -math.inf
        self._set_prior(prior or {})
        self._replan(plan, self.started)

    def start(self, kind: str = "") -> None:
        """An item of `kind` starts now (the first of that kind still planned)."""
        self.notes.append((self.clock(), "start", kind, None))

    def advance(self, kind: str = "", seconds: float | None = None) -> None:
        """An item of `kind` finished now, after `seconds` when known (the one of that kind in
        flight that started closest to then, else the longest)."""
        self.notes.append((self.clock(), "end", kind, seconds))

    def replan(self, plan: int | Sequence[Item]) -> None:
        """A new plan of what is left to start (a count: less what is done or in flight;
        items, with inferred starts: of what is not done, those in flight first)."""
        self.notes.append((self.clock(), "replan", plan, None))

    def set_prior(self, prior: Mapping[str, Sequence[float]]) -> None:
        """What a model says items of each kind take (seconds, one a sample): it stands for
        the kind's items until they are seen, scaled by how far the items seen ran from it."""
        self.notes.append((self.clock(), "prior", prior, None))

    def _read(self, get: Callable[[], Any]) -> Any:
        with self.lock:
            self._sync()
            return get()

    done = property(lambda self: self._read(lambda: self._done))
    total = property(lambda self: self._read(lambda: self._total))
    flying = property(lambda self: self._read(lambda: list(self._flying)))
    seen = property(lambda self: self._read(lambda: list(self._seen)))
    queue = property(lambda self: self._read(self._waiting))

    def _sync(self) -> None:
        """Take in the notes (the caller holds the lock); priors last, each kind's latest."""
        prior: dict[str, Sequence[float]] = {}
        for _ in range(len(self.notes)):
            now, what, arg, seconds = self.notes.popleft()
            if what == "prior":
                prior.update(arg)
            else:
                step: Callable[[Any, float, Any], None] = getattr(self, f"_{what}")
                step(arg, now, seconds)
        if prior:
            self._set_prior(prior)

    def _set_prior(self, prior: Mapping[str, Sequence[float]]) -> None:
        new = any(k not in self.prior for k, v in prior.items() if v)
        for k, v in prior.items():
            if v:
                self.prior[k], self.mean[k] = v, fmean(v)
                self.cv[k] = pstdev(v, self.mean[k]) / (self.mean[k] or 1.0)
        self.exact = bool(self.prior) and all(len(v) == 1 for v in self.prior.values())
        if new:  # worked out again at once (a kind's next model waits its turn)
            self.last = self.range = None

    def _replan(self, plan: int | Sequence[Item], now: float, _: object = None) -> None:
        left = ([Item()] * max(0, plan - self._done - len(self._flying)) if isinstance(plan, int)
                else list(plan))
        if not isinstance(plan, int) and not self.reported:
            self._flying = []  # inferred: the plan's first items, started again below
        self.count, self.nth = Counter[str](), []
        self.like: dict[str, Item] = {}  # each kind's first item
        for it in left:
            self.nth.append(self.count[it.kind])
            self.count[it.kind] += 1
            self.like.setdefault(it.kind, it)
        self.order, self.began, self.head, self.waiting = left, Counter[str](), 0, len(left)
        self._total = self._done + len(self._flying) + len(left)
        self.last = self.range = None
        self._fill(now)

    def _waiting(self) -> list[Item]:
        return [it for it, n in zip(self.order[self.head:], self.nth[self.head:], strict=True)
                if n >= self.began[it.kind]]

    def _take(self, kind: str) -> Item | None:
        """The first item of `kind` waiting starts (None: none waits)."""
        if self.began[kind] >= self.count[kind]:
            return None
        self.began[kind] += 1
        self.waiting -= 1
        return self.like[kind]

    def _start(self, kind: str, now: float, _: object = None) -> None:
        item = self._take(kind) or Item(kind)
        self._flying.append((item, now))
        if item.lane in self.lanes:
            self.lanes[item.lane].last_start = now

    def _end(self, kind: str, now: float, seconds: float | None) -> None:
        self._done += 1
        mine = [i for i, (it, _) in enumerate(self._flying) if it.kind == kind]
        if mine:
            when = now - seconds if seconds is not None else -math.inf
            item, t0 = self._flying.pop(min(mine, key=lambda i: abs(self._flying[i][1] - when)))
            self._seen.append((item, now - t0, now))
            self.n_seen += 1
            if len(self._seen) > 2 * WINDOW:
                del self._seen[:-WINDOW]
        else:  # it ran unseen: it leaves the queue, and the item thought to run instead waits
            self._take(kind)
            back = self._flying.pop()[0] if self._flying and not self.reported else None
            if back is not None and self.began[back.kind]:
                self.began[back.kind] -= 1
                self.waiting, self.head = self.waiting + 1, 0
        self._fill(now)

    def _fill(self, now: float) -> None:
        """Inferred starts: the next items in plan order take the free workers, when their
        lane lets them (a start still to come counts as one)."""
        while not self.reported and self.waiting and len(self._flying) < self.workers:
            while self.nth[self.head] < self.began[self.order[self.head].kind]:
                self.head += 1
            item = self._take(self.order[self.head].kind)
            assert item is not None
            t0, lane = self.started if not self._done else now, self.lanes.get(item.lane)
            if lane is not None:
                if lane.last_start is not None:
                    t0 = max(t0, lane.last_start + lane.gap_s + lane.jitter_s / 2)
                lane.last_start = t0
            self._flying.append((item, t0))

    def _excess(self, item: Item, age: float) -> list[float]:
        """What items of its kind (at least OWN, else any, per weight) longer than `age` ran
        beyond it; else up to the deadline."""
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
        """Seconds an item waiting will take (empirical Bayes, module docstring)."""
        if self.prior:
            self.scale = self._scale(now)
        if not self._seen:  # the prior's means (an unseen kind: their mean x its weight)
            return None if not self.prior else lambda it: (
                self.mean.get(it.kind) or fmean(self.mean.values()) * it.weight) * self.scale
        tau = RECENCY * (now - self.started) or 1.0
        values: dict[str, list[tuple[float, float]]] = defaultdict(list)  # per weight, weight
        for it, d, end in self._seen[-WINDOW:]:
            values[it.kind].append((d / it.weight, math.exp((end - now) / tau)))
        finished = {k: fmean(v for v, _ in vs) for k, vs in values.items()}
        typical = fmean(finished.values())
        for it, t0 in self._flying:  # with a deadline: its age and what such items ran beyond
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

    def _scale(self, now: float) -> float:
        """How much longer items ran here than the prior says (those in flight: their age, or
        what the prior's longer ones ran), with PRIOR_N items' worth of the model's own."""
        pairs = [(d, self.mean[it.kind]) for it, d, _ in self._seen[-WINDOW:]
                 if it.kind in self.prior]
        for it, t0 in self._flying:
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
        """The sd of the log of the prior's scale: its spread / sqrt(the items it stands on)."""
        if not self.prior:
            return 0.0
        if self.exact:  # the machine's speed: as uncertain as the items ran from their models
            logs = [math.log(r) for r in self._ratios() if r > 0]
            return max(EXACT_DOUBT, pstdev(logs) if len(logs) > 1 else 2 * EXACT_DOUBT)
        seen = sum(it.kind in self.prior for it, _, _ in self._seen[-WINDOW:])
        return fmean(self.cv.values()) / math.sqrt(PRIOR_N + seen)

    def remaining(self) -> float | None:
        """Seconds left (None: nothing to go on), worked out when due, counted down between.
        Items with a prior and no deadline (runs a fault model gives, a few long among many
        short) are skewed: for them, the median of the drawn schedules."""
        with self.lock:
            self._sync()
            if self._total - self._done <= 0:
                return 0.0
            now = self.clock()
            if self.last is not None and (now - self.last[0] < FRESH_S or now < self.free_at):
                if self.last[1] is not None:
                    return max(0.0, self.last[1] - now + self.last[0])
                if not self._seen:  # the first item to end gives an estimate at once
                    return None
            cost = self._costs(now)
            if cost and self.prior and self.deadline is None:
                left: float | None = self._draw(now, cost)[1]
            else:
                view = self._view(now, cost)
                left = simulate(now, view)
                left = left if cost or left else None  # no cost: the waits, if any
                if cost and self.ranged and (self.range is None or now - self.range[0] >= RANGE_S):
                    self._draw(now, cost, view)  # its range with it, once `spread` was asked
            self.last = (now, left)
            self.free_at = now + (self.clock() - now) / SHARE
            return left

    def spread(self) -> tuple[float, float] | None:
        """The 10th and 90th percentiles of the time left (drawn with the estimate, at most
        every RANGE_S; counted down in between)."""
        with self.lock:
            self._sync()
            self.ranged, now = True, self.clock()
            if self._total - self._done <= 0:
                return None
            if self.range is None and now >= self.free_at:
                cost = self._costs(now)
                if cost is None:
                    return None
                self._draw(now, cost)
                self.free_at = now + (self.clock() - now) / SHARE
            if self.range is None:
                return None
            passed = now - self.range[0]
            return max(0.0, self.range[2] - passed), max(0.0, self.range[3] - passed)

    def _draw(self, now: float, cost: Callable[[Item], float], view: View | None = None
              ) -> tuple[float, float, float, float]:
        """Schedules of times drawn as such items took (or the prior), each scaled by a factor
        as uncertain as the prior's scale (`_doubt`): (now, median, 10th, 90th percentile).
        `view`: the one the estimate was just worked out from, else made once for every draw."""
        rng, doubt = random.Random(self.n_seen), self._doubt()
        view = view or self._view(now, cost)
        draws = sorted(simulate(now, view, rng, math.exp(rng.gauss(0.0, doubt)))
                       for _ in range(max(20, min(DRAWS, DRAW_ITEMS // (len(view.queue) + 1)))))
        n = len(draws)
        self.range = (now, draws[n // 2], draws[n // 10], draws[-1 - n // 10])
        return self.range

    def _view(self, now: float, cost: Callable[[Item], float] | None) -> View:
        """What schedules work from (`eta_schedule.View`), a long plan summarised."""
        return summarise(View(
            self._waiting(), cost, self._durations(cost), list(self._flying),
            [self._excess(it, now - t0) if cost else [0.0] for it, t0 in self._flying],
            self.lanes, self.workers, self.deadline is not None or bool(self.prior)))

    def _durations(self, cost: Callable[[Item], float] | None) -> Callable[[Item], list[float]]:
        """What an item waiting may take: what its kind's items took (at least OWN, else any,
        per weight) scaled to its cost, at most the deadline; what that cuts off comes back as
        more hangs, the longest first (the mean stays its cost: early items are the short)."""
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


def clock_text(seconds: float | None, spread: tuple[float, float] | None = None) -> str:
    """`ETA 0:02:10`, with its `spread` when past ±25% of it: `ETA 0:02:10 (1:40-3:05)`."""
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
    """Line-by-line progress (`[3/40] tool: ...`): each counted line gets the ETA. Told the
    `plan` (each call's tool, host and its interval; one call at a time) it schedules it."""

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
        transient=transient, refresh_per_second=2,
    )


__all__ = ["Eta", "Item", "Lane", "LineProgress", "bar_wanted", "clock_text", "eta_column",
           "progress_bar"]
