"""The ETA of long commands: within ±25% of the real remaining time at every moment from 20%
of the run on, for a scripted probe (tools of very different call times, hangs to the
deadline, politeness waits) and a scripted sweep (tasks of very different lengths planned
shortest first), and never frozen while nothing finishes. Runs on an injected clock: no wall
time is measured (the real runs are measured by bench/eta.py)."""

from __future__ import annotations

import heapq
import io
import random
from types import SimpleNamespace

from rich.console import Console

from realprobe.commands.progress import Eta, Item, Lane, clock_text, progress_bar, with_eta


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


#: (time, "start" or "end", kind, seconds it ran) of a scripted run
Events = list[tuple[float, str, str, float]]

DEADLINE = 2.0


def _call_time(profile: str, rng: random.Random) -> float:
    """Fast, slow, flaky (a third of its calls hang until the deadline) or dead (every call
    hangs); a hang ends just after the deadline, as the client reports it."""
    hang = DEADLINE + rng.uniform(0.0, 0.02)
    return {"fast": rng.uniform(0.05, 0.2), "slow": rng.uniform(0.8, 1.5),
            "flaky": hang if rng.random() < 0.33 else rng.uniform(0.1, 0.4),
            "dead": hang}[profile]


def _probe_plan(seed: int, polite: bool) -> tuple[list[Item], dict[str, str], dict[str, float]]:
    """24 tools on 12 hosts, 8 rounds, host by host as the run queues them; every four tools
    (two hosts) are one of each kind of call time, in an order and with hosts' intervals
    (1.25 to 6.25 s) that vary with the seed."""
    rng = random.Random(seed)
    profiles = [p for _ in range(6)
                for p in rng.sample(["fast", "slow", "flaky", "dead"], 4)]
    tools = {f"t{i:02d}": p for i, p in enumerate(profiles)}
    host_of = {t: f"h{i // 2}" for i, t in enumerate(tools)}
    gaps = {f"h{h}": rng.choice([1.25, 2.25, 5.25, 6.25]) for h in range(12)}
    plan = [Item(t, host_of[t] if polite else "") for h in gaps for r in range(8)
            for t in tools if host_of[t] == h]
    return plan, tools, gaps


def _polite_run(plan: list[Item], tools: dict[str, str], gaps: dict[str, float],
                seed: int) -> Events:
    """What the probe does under politeness: each host's calls one at a time, their starts
    at least the host's interval (plus up to 0.5 s of jitter) apart; hosts side by side."""
    rng = random.Random(seed + 1000)
    events: Events = []
    ready: dict[str, float] = {}
    for it in plan:
        start = ready.get(it.lane, 0.0)
        end = start + _call_time(tools[it.kind], rng)
        events += [(start, "start", it.kind, 0.0), (end, "end", it.kind, end - start)]
        ready[it.lane] = max(end, start + gaps[it.lane] + rng.uniform(0.0, 0.5))
    return sorted(events)


def _pool_run(plan: list[Item], times: list[float], workers: int) -> Events:
    """`workers` at a time, in plan order: each item (taking its `times`) takes the first
    worker free."""
    free = [0.0] * workers
    events: Events = []
    for it, took in zip(plan, times, strict=True):
        start = heapq.heappop(free)
        end = start + took
        events += [(start, "start", it.kind, 0.0), (end, "end", it.kind, end - start)]
        heapq.heappush(free, end)
    return sorted(events)


def _errors(eta: Eta, clock: FakeClock, events: Events, starts: bool = True) -> list[float]:
    """(estimate - actual) / actual at every 1% of the run from 20% of the way to 90% (in the
    last tenth a second is a large share of what is left)."""
    end, out, i = events[-1][0], [], 0
    for k in range(20, 91):
        t = end * k / 100
        while i < len(events) and events[i][0] <= t:
            clock.now, what, kind, seconds = events[i]
            if what == "end":
                eta.advance(kind, seconds)
            elif starts:
                eta.start(kind)
            i += 1
        clock.now = t
        left = eta.remaining()
        assert left is not None
        out.append((left - (end - t)) / (end - t))
    return out


def _worst(errors: list[float]) -> float:
    return max(errors, key=abs)


def test_a_polite_probe_eta_counts_hangs_and_waits_within_25_percent() -> None:
    for seed in range(6):
        plan, tools, gaps = _probe_plan(seed, polite=True)
        events = _polite_run(plan, tools, gaps, seed)
        clock = FakeClock()
        lanes = {h: Lane(gap_s=g, jitter_s=0.5) for h, g in gaps.items()}
        eta = Eta(plan, workers=32, lanes=lanes, deadline=DEADLINE, starts_reported=True,
                  clock=clock)
        assert eta.remaining() is not None  # the waits owed, before any call ends
        errors = _errors(eta, clock, events)
        assert all(abs(e) <= 0.25 for e in errors), (seed, _worst(errors))


def test_a_probe_side_by_side_eta_counts_hangs() -> None:
    """Without politeness the run starts its calls host by host, all rounds of a tool
    together: a tool not seen yet costs the mean of the tools seen, so while the last few
    unseen tools differ from that mean the ETA can be off by a third; nine readings in ten
    are within ±25%."""
    errors: list[float] = []
    for seed in range(6):
        plan, tools, _ = _probe_plan(seed, polite=False)
        rng = random.Random(seed)
        events = _pool_run(plan, [_call_time(tools[it.kind], rng) for it in plan], workers=8)
        clock = FakeClock()
        eta = Eta(plan, workers=8, deadline=DEADLINE, starts_reported=True, clock=clock)
        errors += _errors(eta, clock, events)
    assert all(abs(e) <= 0.35 for e in errors), _worst(errors)
    assert sum(abs(e) <= 0.25 for e in errors) >= 0.9 * len(errors)


def _sweep_plan() -> tuple[list[Item], dict[str, float]]:
    """12 tasks of 1 to 12 workflow steps, 3 repeats each, planned alphabetically, which is
    shortest first: the long tasks are all unseen until the end. A run takes 4 s a step,
    within ±10%."""
    steps = {f"task_{chr(97 + k)}": k + 1 for k in range(12)}
    plan = [Item(t, weight=s) for t, s in steps.items() for _ in range(3)]
    return plan, {t: 4.0 * s for t, s in steps.items()}


def test_a_sweep_eta_knows_its_tasks_within_25_percent() -> None:
    for seed in range(6):
        plan, per_task = _sweep_plan()
        rng = random.Random(seed)
        times = [per_task[it.kind] * rng.uniform(0.9, 1.1) for it in plan]
        events = _pool_run(plan, times, 4)
        clock = FakeClock()
        eta = Eta(plan, workers=4, clock=clock)  # runs start in plan order: inferred
        errors = _errors(eta, clock, events, starts=False)
        assert all(abs(e) <= 0.25 for e in errors), (seed, _worst(errors))


def test_a_sweep_eta_without_the_plan_would_not_be() -> None:
    """The same sweep with its runs counted but not known (one kind, no steps): the ETA
    from the mean run so far says far too little while the long tasks are still to come."""
    plan, per_task = _sweep_plan()
    rng = random.Random(0)
    times = [per_task[it.kind] * rng.uniform(0.9, 1.1) for it in plan]
    events = [(t, what, "", s) for t, what, _, s in _pool_run(plan, times, 4)]
    clock = FakeClock()
    errors = _errors(Eta(len(plan), workers=4, clock=clock), clock, events, starts=False)
    assert min(errors) < -0.5


def test_eta_is_never_frozen_while_nothing_finishes() -> None:
    clock = FakeClock()
    eta = Eta(1320, clock=clock)
    for k in range(6):
        clock.now = 0.5 * (k + 1)
        eta.advance()
    first = eta.remaining()
    clock.now = 58.0  # 55 s later, still 6 done: the old bar still said 0:00:03
    later = eta.remaining()
    assert first is not None and later is not None and later > first * 10


def test_an_item_in_flight_runs_to_the_deadline_when_such_items_hung() -> None:
    clock = FakeClock()
    eta = Eta([Item("dead")] * 3, workers=1, deadline=DEADLINE, starts_reported=True,
              clock=clock)
    eta.start("dead")
    clock.now = 2.0
    eta.advance("dead")
    eta.start("dead")
    clock.now = 3.5  # 1.5 s into a call of a tool whose calls hang: 0.5 s + one more call
    assert eta.remaining() == 2.5


def test_a_run_in_flight_near_its_one_twin_is_not_about_to_end() -> None:
    """One finished run of its task says little: as the second nears its length, what runs
    of any task ran beyond that age counts, not the 0.1 s its twin had left."""
    clock = FakeClock()
    eta = Eta([Item("b"), Item("b"), Item("b"), Item("a"), Item("a")], clock=clock)
    for t in (30.0, 60.0, 90.0, 100.0):  # b: 30 s each, then a: 10 s
        clock.now = t
        eta.advance("b" if t <= 90 else "a")
    clock.now = 109.9  # the second "a" has run 9.9 s
    left = eta.remaining()
    assert left is not None and left > 5


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
    clock.now = 10.0  # nothing finished since: drawn again, the estimate has moved
    Console(file=buf, width=120).print(bar.get_renderable())
    assert "ETA 0:00:18" not in buf.getvalue().split("ETA 0:00:18", 1)[1]


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
    from realprobe.commands.probes import LiveCounts

    plan = [Item("advice_random", "h:443")] * 2
    live = LiveCounts(plan, "round", enabled=False, lanes={"h:443": Lane(gap_s=5.0)})
    live.started("advice_random")
    live({"tool": "advice_random"}, SimpleNamespace(ok=True))  # type: ignore[arg-type]
    assert live.ok == 1 and live.eta.done == 1 and live.eta.lanes["h:443"].last_start is not None
    live.new_round()
    assert live.ok == 0 and live.eta.done == 0 and live.eta.lanes["h:443"].last_start is None
    assert live.eta.total == 2


def test_the_probe_plan_follows_the_run() -> None:
    """Host by host as the run queues its calls; lanes only where politeness holds."""
    from realprobe.clients import TransportOptions
    from realprobe.commands.common import PolitenessChoice, load_catalog
    from realprobe.commands.probes import probe_plan
    from realprobe.http.mode import Mode

    tools = list(load_catalog(None))[:6]
    plan, lanes, workers = probe_plan(tools, 2, TransportOptions(mode=Mode.LIVE), None)
    assert len(plan) == 12 and workers is None and set(lanes) == {it.lane for it in plan}
    hosts = [it.lane for it in plan]
    assert hosts == sorted(hosts, key=hosts.index)  # each host's calls together
    assert all(lane.gap_s >= 1.0 for lane in lanes.values())
    plan, lanes, _ = probe_plan(tools, 2, TransportOptions(mode=Mode.LIVE),
                                PolitenessChoice.OFF)
    assert not lanes and {it.lane for it in plan} == {""}
    _, _, workers = probe_plan(tools, 2, TransportOptions(mode=Mode.SIMULATE), None)
    assert workers == 1  # one call at a time on a simulated clock


def test_a_sweep_told_how_many_then_which() -> None:
    from realprobe.commands.sweep import SweepProgress

    progress = SweepProgress(disable=True, workers=4)
    progress.planned(3, 0)
    assert progress.eta.total == 3
    jobs = [SimpleNamespace(key=f"k{i}", cfg=None,
                            task=SimpleNamespace(instance_id=f"t{i}",
                                                 workflow=SimpleNamespace(steps=[1, 2])))
            for i in range(3)]
    progress.plan(jobs)  # type: ignore[arg-type]
    assert progress.eta.total == 3 and len(progress.eta.flying) == 3
    assert {it.kind for it, _ in progress.eta.flying} == {"t0@0", "t1@0", "t2@0"}
    progress.finished(SimpleNamespace(row={"resume_key": "k1", "wall_s": 1.0}))
    assert progress.eta.done == 1 and len(progress.eta.flying) == 2


def test_a_host_lane_waits_for_each_hang_not_for_the_mean_call() -> None:
    """One call at a time, 1 to 1.5 s apart; calls hang 2 s half the time, else take 0.3 s.
    A call that hangs holds the host past its gap, one that does not leaves the gap to wait:
    each call costs E[max(call, gap)] = 1.625 s, not the larger of the means (1.25 s)."""
    clock = FakeClock()
    plan = [Item("flaky", "h")] * 14
    eta = Eta(plan, workers=4, lanes={"h": Lane(gap_s=1.0, jitter_s=0.5)},
              starts_reported=True, clock=clock)
    for start, took in ((0.0, 2.0), (2.0, 0.3), (3.25, 2.0), (5.25, 0.3)):
        clock.now = start
        eta.start("flaky")
        clock.now = start + took
        eta.advance("flaky", took)
    left = eta.remaining()  # at 5.55: the next start at 6.5, 9 more spacings, the last call
    # (recent calls weigh more: the mean is a little under 1.15 s); by the means: 13.3 s
    assert left is not None and 15.5 < left < 0.95 + 9 * 1.625 + 1.15
