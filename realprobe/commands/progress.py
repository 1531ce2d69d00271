"""Progress bars and their ETA, for every long command (probe, run, sweep, cassette replay).

The ETA is recomputed every time the bar is drawn, not only when an item finishes, so it
never freezes: while nothing finishes it grows. It follows how the work is done:

- a probe's calls go host by host (`Lane`s: one call in flight per host, spaced by the
  host's interval), the hosts side by side: the time left is that of the slowest host,
  its calls left x its own time per call (a hang counts the whole deadline it took), less
  what the call in flight has already run, and never less than the interval waits owed;
- a sweep's runs go `workers` at a time: the runs left are scheduled on the workers, each
  taking the mean run so far (the runs in flight keep what they have run);
- anything else: the observed rate, time so far x items left / items done.

Before the first item finishes only the waits are known; with none, the bar says so.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress, Task
    from rich.text import Text


#: a lane's own time per item counts as many items as it has done; the mean of all lanes
#: counts as this many more (a few hangs in one lane say little about its next calls)
SHRINK = 3.0


@dataclass
class Lane:
    """Items done one after another, spaced by `gap_s` seconds (the calls to one host)."""

    planned: int
    gap_s: float
    done: int = 0
    last: float | None = None  # when the last of them finished

    def waits_left(self, now: float) -> float:
        """The gaps still owed before the last item can start (the first starts at once)."""
        if self.done == 0:
            return max(0, self.planned - 1) * self.gap_s
        if self.done >= self.planned:
            return 0.0
        assert self.last is not None
        return max(0.0, (self.planned - self.done) * self.gap_s - (now - self.last))

    def left_s(self, now: float, started: float, per_item: float | None) -> float | None:
        """Seconds until this lane's last item is done: its own time per item once it has
        one (`per_item`, the other lanes', before), less what the item in flight has run."""
        left = self.planned - self.done
        if left <= 0:
            return 0.0
        if self.done and per_item is not None:  # its own mean, shrunk towards the others'
            assert self.last is not None
            per_item = (self.last - started + SHRINK * per_item) / (self.done + SHRINK)
        elif self.done:
            assert self.last is not None
            per_item = (self.last - started) / self.done
        if per_item is None:
            return self.waits_left(now) or None
        running = now - (self.last if self.last is not None else started)
        return max(left * per_item - running, (left - 1) * per_item, self.waits_left(now))


@dataclass
class Eta:
    """Remaining time of `total` items (see the module docstring)."""

    total: int
    clock: Callable[[], float] = time.monotonic
    lanes: dict[str, Lane] = field(default_factory=dict)
    done: int = 0
    started: float | None = None
    workers: int | None = None  # items in flight at once (a sweep's concurrency)
    finishes: deque[float] = field(default_factory=deque)  # the last `workers` finish times

    def __post_init__(self) -> None:
        if self.started is None:
            self.started = self.clock()

    def advance(self, lane: str | None = None, n: int = 1) -> None:
        self.done += n
        now = self.clock()
        if lane is not None and lane in self.lanes:
            self.lanes[lane].done += n
            self.lanes[lane].last = now
        if self.workers:
            self.finishes.extend([now] * n)
            while len(self.finishes) > self.workers:
                self.finishes.popleft()

    def replan(self, total: int) -> None:
        """A new total (e.g. less what a resumed run already stored)."""
        self.total = total

    def waits_left(self) -> float:
        now = self.clock()
        return max((lane.waits_left(now) for lane in self.lanes.values()), default=0.0)

    def remaining(self) -> float | None:
        """Seconds left, or None while there is nothing to base an estimate on."""
        left = self.total - self.done
        if left <= 0:
            return 0.0
        now = self.clock()
        assert self.started is not None
        if self.lanes:
            return self._by_lanes(now)
        if self.done == 0:
            return None
        if self.workers:
            return self._by_workers(now, left)
        return (now - self.started) * left / self.done

    def _by_lanes(self, now: float) -> float | None:
        assert self.started is not None
        busy = [(lane.last, lane.done) for lane in self.lanes.values()
                if lane.done and lane.last is not None]
        prior = None
        if busy:  # lanes yet to finish an item: the mean time per item of those that have
            prior = sum(last - self.started for last, _ in busy) / sum(n for _, n in busy)
        each = [lane.left_s(now, self.started, prior) for lane in self.lanes.values()]
        known = [e for e in each if e is not None]
        return max(known) if known else None

    def _by_workers(self, now: float, left: int) -> float:
        """Every worker has been busy since the start, so the runs done took workers x
        elapsed less what the runs in flight have run: their mean is the time a run takes.
        The runs in flight end after what is left of theirs, each run still queued goes to
        the worker free first; the last to end is the ETA."""
        import heapq

        assert self.started is not None and self.workers
        w = self.workers
        ages = [now - t for t in self.finishes] + [now - self.started] * (w - len(self.finishes))
        per_run = max(w * (now - self.started) - sum(ages), 0.0) / self.done
        free = sorted(max(per_run - a, 0.0) for a in ages)[: min(w, left)]
        heapq.heapify(free)
        end = max(free, default=0.0)
        for _ in range(left - len(free)):
            t = heapq.heappop(free) + per_run
            heapq.heappush(free, t)
            end = max(end, t)
        return end


def lanes_for(items: Iterable[tuple[str, float]]) -> dict[str, Lane]:
    """Lanes from (host, gap in seconds) per planned item."""
    out: dict[str, Lane] = {}
    for key, gap in items:
        lane = out.setdefault(key, Lane(planned=0, gap_s=gap))
        lane.planned += 1
        lane.gap_s = max(lane.gap_s, gap)
    return out


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


__all__ = ["Eta", "Lane", "clock_text", "eta_column", "lanes_for", "progress_bar", "with_eta"]
