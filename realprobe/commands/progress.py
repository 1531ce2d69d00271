"""Progress bars and their ETA, for every long command (probe, run, sweep, cassette replay).

The ETA is recomputed every time the bar is drawn, not only when an item finishes, so it
never freezes: while nothing finishes it grows. It is the larger of two honest estimates:

- the observed rate: time so far x items left / items done (whatever the concurrency);
- the politeness waits still owed: per host, the calls left on it x its minimum interval
  (calls to one host are spaced; that floor holds whatever the other hosts do).

Before the first item finishes only the waits are known; with none, the bar says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress, Task
    from rich.text import Text


@dataclass
class Lane:
    """Items that must be spaced by `gap_s` seconds (the calls to one host)."""

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


@dataclass
class Eta:
    """Remaining time of `total` items (see the module docstring)."""

    total: int
    clock: Callable[[], float] = time.monotonic
    lanes: dict[str, Lane] = field(default_factory=dict)
    done: int = 0
    started: float | None = None

    def __post_init__(self) -> None:
        if self.started is None:
            self.started = self.clock()

    def advance(self, lane: str | None = None, n: int = 1) -> None:
        self.done += n
        if lane is not None and lane in self.lanes:
            self.lanes[lane].done += n
            self.lanes[lane].last = self.clock()

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
        floor = self.waits_left()
        if self.done == 0:
            return floor or None
        assert self.started is not None
        by_rate = (self.clock() - self.started) * left / self.done
        return max(by_rate, floor)


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
