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


def _errors(eta: Eta, clock: FakeClock, events: list[tuple[float, str | None]]) -> list[float]:
    """Relative error of the ETA (estimate - actual) / actual, every 1% of the run from 20%
    of the way on until the last tenth (where seconds are few and any error is large)."""
    end, out, i = events[-1][0], [], 0
    for k in range(20, 91):
        t = end * k / 100
        while i < len(events) and events[i][0] <= t:
            clock.now = events[i][0]
            eta.advance(events[i][1])
            i += 1
        clock.now = t
        left = eta.remaining()
        assert left is not None
        out.append((left - (end - t)) / (end - t))
    return out


def _probe_with_hangs(seed: int, deadline: float = 2.0) -> list[tuple[float, str | None]]:
    """25 hosts side by side, 1-4 tools each, 5 rounds, one call in flight per host; every
    fourth call hangs until the deadline, the others take 0.3-0.6 s."""
    rng = random.Random(seed)
    events: list[tuple[float, str | None]] = []
    for h in range(25):
        t = 0.0
        for k in range(5 * rng.randint(1, 4)):
            t += deadline if (k + h) % 4 == 0 else rng.uniform(0.3, 0.6)
            events.append((t, f"h{h}:443"))
    return sorted(events, key=lambda e: e[0])


def _sweep(seed: int, runs: int = 40, workers: int = 4) -> list[tuple[float, str | None]]:
    rng = random.Random(seed)
    free = [0.0] * workers
    events: list[tuple[float, str | None]] = []
    for _ in range(runs):
        end = heapq.heappop(free) + rng.uniform(5, 15)
        events.append((end, None))
        heapq.heappush(free, end)
    return sorted(events, key=lambda e: e[0])


def test_probe_eta_follows_the_slowest_host_hangs_included() -> None:
    """The old rate estimate (time x left / done) said about half the real time: fast hosts
    finish first. Per host, the calls left x that host's time per call is close."""
    ours, rate = [], []
    for seed in range(10):
        events = _probe_with_hangs(seed)
        clock = FakeClock()
        ours += _errors(Eta(len(events), clock=clock,
                            lanes=lanes_for([(h or "", 0.0) for _, h in events])), clock, events)
        clock = FakeClock()
        rate += _errors(Eta(len(events), clock=clock), clock, events)
    inside = sum(abs(e) <= 0.25 for e in ours) / len(ours)
    assert inside >= 0.8, inside
    assert sorted(abs(e) for e in ours)[len(ours) // 2] <= 0.12
    assert sum(abs(e) <= 0.25 for e in rate) / len(rate) < 0.1  # the old estimate


def test_sweep_eta_schedules_the_runs_left_on_its_workers() -> None:
    errors: list[float] = []
    for seed in range(10):
        events = _sweep(seed)
        clock = FakeClock()
        errors += _errors(Eta(len(events), clock=clock, workers=4), clock, events)
    inside = sum(abs(e) <= 0.25 for e in errors) / len(errors)
    assert inside >= 0.85, inside
    assert sorted(abs(e) for e in errors)[len(errors) // 2] <= 0.12
