"""The ETA of long commands: honest (within 2x of the actual remaining time on a simulated run,
politeness waits included), roughly monotonic, and never frozen while nothing finishes. Runs
on an injected clock: no wall time is measured."""

from __future__ import annotations

import heapq
import io
import itertools
import random

from rich.console import Console

from realprobe.commands.progress import Eta, clock_text, lanes_for, progress_bar, with_eta


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _polite_probe_run(seed: int) -> list[tuple[float, str]]:
    """(finish time, host) of a probe run: hosts in parallel, calls to one host spaced by its
    interval (plus jitter), each call 0.1-0.9 s."""
    rng = random.Random(seed)
    hosts = {"slow.example:443": (12, 5.5), "a.example:443": (20, 1.25),
             "b.example:443": (20, 1.25), "c.example:443": (6, 1.25)}
    events = []
    for host, (calls, gap) in hosts.items():
        t = 0.0
        for _ in range(calls):
            t += rng.uniform(0.1, 0.9)
            events.append((t, host))
            t += gap + rng.uniform(-0.25, 0.25)
    return sorted(events)


def _check(eta: Eta, clock: FakeClock, events: list[tuple[float, str | None]]) -> list[float]:
    end = events[-1][0]
    seen = []
    for i, (t, lane) in enumerate(events[:-1]):
        clock.now = t
        eta.advance(lane)
        left = eta.remaining()
        assert left is not None
        actual = end - t
        if i >= 2 and actual > 2.0:
            assert actual / 2 <= left <= actual * 2, (i, left, actual)
        seen.append(left)
    return seen


def test_eta_counts_politeness_waits_and_stays_within_2x() -> None:
    for seed in range(5):
        events = _polite_probe_run(seed)
        gaps = [(h, 5.5 if h.startswith("slow") else 1.25) for _, h in events]
        clock = FakeClock()
        eta = Eta(len(events), clock=clock, lanes=lanes_for(gaps))
        assert eta.remaining() is not None and eta.remaining() > 50  # the waits, before any call
        seen = _check(eta, clock, list(events))
        rises = sum(1 for a, b in itertools.pairwise(seen) if b > a * 1.25)
        assert rises <= len(seen) // 10, seen  # monotonic-ish


def test_eta_of_a_concurrent_sweep_stays_within_2x() -> None:
    rng = random.Random(7)
    running: list[float] = []
    events: list[tuple[float, str | None]] = []
    for _ in range(4):  # four workers
        heapq.heappush(running, 0.0)
    for _ in range(40):
        start = heapq.heappop(running)
        end = start + rng.uniform(5, 15)
        events.append((end, None))
        heapq.heappush(running, end)
    events.sort()
    clock = FakeClock()
    eta = Eta(len(events), clock=clock)
    assert eta.remaining() is None  # nothing to go on yet: the bar says "estimating"
    _check(eta, clock, events)


def test_eta_is_never_frozen_while_nothing_finishes() -> None:
    clock = FakeClock()
    eta = Eta(1320, clock=clock)
    clock.now = 3.0
    eta.advance(n=6)
    first = eta.remaining()
    clock.now = 58.0  # 55 s later, still 6 done: the old bar still said 0:00:03
    later = eta.remaining()
    assert first is not None and later is not None and later > first * 10


def test_the_bar_draws_the_eta_at_every_refresh() -> None:
    clock = FakeClock()
    eta = Eta(10, clock=clock)
    buf = io.StringIO()
    bar = progress_bar(console=Console(file=io.StringIO()))
    task = bar.add_task("probing", total=10, eta=eta)
    clock.now = 2.0
    eta.advance()
    bar.update(task, advance=1)
    assert clock_text(eta.remaining()) == "ETA 0:00:18"
    Console(file=buf, width=120).print(bar.get_renderable())
    assert "ETA 0:00:18" in buf.getvalue()
    clock.now = 4.0  # nothing finished since: drawn again, the estimate has moved
    Console(file=buf, width=120).print(bar.get_renderable())
    assert "ETA 0:00:36" in buf.getvalue()


def test_line_progress_gets_an_eta() -> None:
    clock = FakeClock()
    lines: list[str] = []
    show = with_eta(lines.append, clock=clock)  # the work starts at 0
    clock.now = 2.0
    show("[1/4] advice_random: recorded")
    clock.now = 4.0
    show("[2/4] agify_age: recorded")
    show("a line without a count")
    assert lines == ["[1/4] advice_random: recorded  (ETA 0:00:06)",
                     "[2/4] agify_age: recorded  (ETA 0:00:04)", "a line without a count"]


def test_each_schedule_round_counts_from_zero() -> None:
    from types import SimpleNamespace

    from realprobe.commands.probes import LiveCounts
    from realprobe.commands.progress import Lane

    live = LiveCounts(2, "round", enabled=False, lanes={"h:443": Lane(planned=2, gap_s=5.0)},
                      lane_of={"advice_random": "h:443"})
    live({"tool": "advice_random"}, SimpleNamespace(ok=True))  # type: ignore[arg-type]
    assert live.ok == 1 and live.eta.done == 1 and live.eta.lanes["h:443"].done == 1
    live.new_round()
    assert live.ok == 0 and live.eta.done == 0 and live.eta.lanes["h:443"].done == 0
    assert live.eta.remaining() == 5.0  # the next round owes its host one interval again
