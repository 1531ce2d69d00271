"""The bar never slows the work: a finished call only notes itself (it never waits for a
redraw working the ETA out), the ETA is worked out within a share of the time whatever the
plan's size (a long plan's schedule summarised), and a long plan's ETA stays as accurate.
On an injected clock: no wall time is measured (bench/progress_cost.py measures the cost)."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
from test_progress_eta import FakeClock, _errors, _polite_run, _pool_run

from realprobe.commands import eta_schedule, progress
from realprobe.commands.progress import Eta, Item, Lane


def test_a_finished_call_never_waits_for_a_redraw(monkeypatch: pytest.MonkeyPatch) -> None:
    """A redraw stuck in the middle of its schedule: the run's 1,000 next calls start and
    end all the same, and the redraw after takes every one of them in."""
    eta = Eta([Item("t")] * 5_000, workers=32, deadline=10.0, starts_reported=True)
    inside, release = threading.Event(), threading.Event()
    real = progress.simulate

    def stuck(*args: Any, **kw: Any) -> float:
        inside.set()
        release.wait(120)
        return real(*args, **kw)

    monkeypatch.setattr(progress, "simulate", stuck)
    for _ in range(32):
        eta.start("t")
    eta.advance("t", 0.1)
    redraw = threading.Thread(target=eta.remaining)
    redraw.start()
    assert inside.wait(120)

    def run() -> None:
        for _ in range(1_000):
            eta.start("t")
            eta.advance("t", 0.1)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(60)
    went_on = not worker.is_alive()
    release.set()
    redraw.join()
    worker.join()
    assert went_on, "a finished call waited for the redraw"
    assert eta.done == 1_001 and eta.total == 5_000 and len(eta.flying) == 31


def test_the_eta_is_worked_out_within_its_share_of_the_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each working out of a 20,000-call plan made to take 0.2 s: read ten times a second
    for a minute, it is worked out again only once the time since is 1/SHARE of what it
    took, and counts down in between; each schedule has at most LIMIT entries."""
    clock = FakeClock()
    eta = Eta([Item(f"t{i % 32}") for i in range(20_000)], workers=32, deadline=10.0,
              starts_reported=True, clock=clock)
    entries: list[int] = []
    real_costs, real_schedule = Eta._costs, progress.simulate

    def slow_costs(self: Eta, now: float) -> Any:
        clock.now += 0.2
        return real_costs(self, now)

    def counted(now: float, view: eta_schedule.View, *args: Any, **kw: Any) -> float:
        entries.append(len(view.queue))
        return real_schedule(now, view, *args, **kw)

    monkeypatch.setattr(Eta, "_costs", slow_costs)
    monkeypatch.setattr(progress, "simulate", counted)
    works = 0
    readings: list[float] = []
    for k in range(600):  # a call starts every 0.1 s and takes 0.3 s
        clock.now = 0.1 * k
        eta.start(f"t{k % 32}")
        if k >= 3:
            eta.advance(f"t{(k - 3) % 32}", 0.3)
        before = eta.last
        left = eta.remaining()
        eta.spread()
        works += eta.last is not before
        assert left is not None or k < 3
        if left is not None:
            readings.append(left)
    # 0.2 s of work (point) at most every 0.2 / SHARE seconds of the 60 (and the range alike)
    assert works <= 1 + 60 * progress.SHARE / 0.2 + 1
    assert max(entries) <= eta_schedule.LIMIT
    assert len(set(readings)) > 100  # counted down between workings out, never frozen


@pytest.mark.parametrize("seed", range(3))
def test_a_long_plan_side_by_side_is_within_25_percent(seed: int) -> None:
    """5,000 calls of 32 tools, eight side by side, a tool's calls taking 0.05 to 1 s (its
    own range): the summarised schedule keeps the ETA within ±25% from 20% on."""
    rng = random.Random(seed)
    scale = {f"t{i}": rng.uniform(0.05, 1.0) for i in range(32)}
    plan = [Item(t) for _ in range(157) for t in scale][:5_000]
    times = [scale[it.kind] * rng.uniform(0.8, 1.2) for it in plan]
    events = _pool_run(plan, times, 8)
    clock = FakeClock()
    eta = Eta(plan, workers=8, starts_reported=True, clock=clock)
    errors = _errors(eta, clock, events)
    assert all(abs(e) <= 0.25 for e in errors), max(errors, key=abs)


def test_a_long_polite_plan_is_within_25_percent() -> None:
    """The polite probe of test_progress_eta at 60 rounds (1,440 calls, past LIMIT): hosts'
    calls a few seconds apart, a third of one kind hanging to the deadline."""
    from test_progress_eta import DEADLINE, _probe_plan

    plan8, tools, gaps = _probe_plan(0, polite=True)
    hosts: dict[str, list[Item]] = {}
    for it in plan8:  # each host's tools, in the plan's order
        if it not in hosts.setdefault(it.lane, []):
            hosts[it.lane].append(it)
    plan = [it for kinds in hosts.values() for _ in range(60) for it in kinds]
    assert len(plan) > eta_schedule.LIMIT
    events = _polite_run(plan, tools, gaps, 0)
    clock = FakeClock()
    lanes = {h: Lane(gap_s=g, jitter_s=0.5) for h, g in gaps.items()}
    eta = Eta(plan, workers=32, lanes=lanes, deadline=DEADLINE, starts_reported=True,
              clock=clock)
    errors = _errors(eta, clock, events)
    assert all(abs(e) <= 0.25 for e in errors), max(errors, key=abs)
