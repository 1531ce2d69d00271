"""A task run against a sandbox numbers its calls (`X-Realprobe-Draw`), so the faults it meets
are the sandbox's seed's and the run's own: not the order runs arrive in, how many run side by
side, or what the sandbox served before. The simulator seeded for the run plays the same run,
which is what the progress bar's model of a sandbox sweep stands on."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from realprobe import Catalog, api, plan_tasks
from realprobe.commands.probes import LiveCounts, probe_model
from realprobe.sandbox.admin import served_draws, served_profile
from realprobe.sandbox.server import running
from realprobe.tasks.executors import modelled_seconds
from realprobe.tasks.runner import Job, RunConfig, draw_key, jobs_for, run_local, run_one, run_seed

TASKS = ("pokemon_quiz", "author_workload", "dev_standup")
#: the harsh profile's failures and bursts on quick calls, so the runs take seconds
QUICK = {"format": "realprobe-profile/1", "name": "quick-harsh", "tools": {},
         "default": {"success_rate": 0.5,
                     "errors": {"TIMEOUT": 0.3, "SERVER_ERROR": 0.3, "NETWORK_ERROR": 0.2,
                                "INVALID_RESPONSE": 0.1, "NOT_FOUND": 0.1},
                     "latency_ms": {"lognormal": {"mu": 3.0, "sigma": 1.0}},
                     "burst": {"p_fail_after_fail": 0.7, "p_fail_after_ok": 0.3},
                     # each UTC day its own failure rate, as a calibrated profile may say
                     "daily_logit_sd": 1.5}}


def _quick(task: Any) -> Any:
    """The task with a tenth of its backoff between retries: a live run waits them out on
    the real clock, and the faults met are drawn by call number, not by when calls come."""
    c = task.constraints
    return task.model_copy(update={"constraints": c.model_copy(update={
        "backoff_base_s": c.backoff_base_s / 10, "backoff_max_s": c.backoff_max_s / 10})})


def _jobs(url: str) -> list[Job]:
    tasks = {t.instance_id: t for t in plan_tasks(all=True).tasks}
    # a hang waits out a short call deadline, so the runs stay quick
    cfg = RunConfig(mode="live", sandbox=url, seed=3, repeat=2, call_timeout_s=0.4)
    return jobs_for([_quick(tasks[t]) for t in TASKS], cfg)


def _trail(steps: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(s["tool"], s["ok"], s["error_code"]) for s in steps]


def _run(jobs: list[Job], concurrency: int) -> dict[str, tuple[list[tuple[Any, ...]], float]]:
    got: dict[str, tuple[list[tuple[Any, ...]], float]] = {}

    def done(f: Any) -> None:
        got[str(f.row["resume_key"])] = (_trail(f.steps), float(f.row["wall_s"]))

    asyncio.run(run_local(jobs, Catalog.load([]), concurrency=concurrency, on_done=done,
                          batch="b"))
    return got


def _utc_day() -> int:
    return int(time.time() // 86400)


@pytest.fixture(scope="module")
def sandbox_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("profile") / "quick.json"
    path.write_text(json.dumps(QUICK))
    sb = api.make_sandbox(path, seed=11)
    day = _utc_day()
    with running(sb) as url:
        jobs = _jobs(url)
        side_by_side = _run(jobs, concurrency=6)
        # the same runs again on the same sandbox, reversed, two at a time
        one_by_one = _run(list(reversed(jobs)), concurrency=2)
        profile, draws = served_profile(url), served_draws(url)
    assert draws is not None and draws.latency_scale == 1.0
    return {"jobs": jobs, "four": side_by_side, "one": one_by_one, "profile": profile,
            "seed": draws.seed, "path": path, "day": day}


def test_runs_meet_the_same_faults_side_by_side_or_again(sandbox_runs: dict[str, Any]
                                                               ) -> None:
    four, one = sandbox_runs["four"], sandbox_runs["one"]
    assert set(four) == set(one) and len(four) == 2 * len(TASKS)
    assert {k: v[0] for k, v in four.items()} == {k: v[0] for k, v in one.items()}
    # some runs meet faults, and the two repeats of a task differ
    trails = [v[0] for v in four.values()]
    assert any(not ok for t in trails for _, ok, _ in t)
    assert len({tuple(t) for t in trails}) > len(TASKS)


def test_the_simulator_seeded_for_a_run_plays_that_run(sandbox_runs: dict[str, Any]) -> None:
    from dataclasses import replace

    from realprobe.simulator.faults import caller_seed

    assert sandbox_runs["seed"] == 11 and sandbox_runs["profile"].name == "quick-harsh"
    cat = Catalog.load([])
    for job in sandbox_runs["jobs"]:
        key = draw_key(run_seed(job.task.instance_id, job.cfg.agent, job.prompt, job.cfg.seed,
                                job.repeat))
        cfg = replace(job.cfg, mode="simulate", sandbox=None,
                      profile=str(sandbox_runs["path"]))
        played = asyncio.run(run_one(job.task, cfg, job.prompt, job.repeat, cat,
                                     fault_seed=caller_seed(11, key)))
        if _utc_day() != sandbox_runs["day"]:
            pytest.skip("the UTC day changed since the sandbox ran: its day effect did too")
        assert _trail(played.steps) == sandbox_runs["four"][job.key][0], job.key


def test_the_model_of_a_run_is_its_length_and_without_the_seed_a_spread(
        sandbox_runs: dict[str, Any]) -> None:
    cat, profile = Catalog.load([]), sandbox_runs["profile"]
    exact = {j.key: modelled_seconds(j, cat, profile, sandbox_seed=11)
             for j in sandbox_runs["jobs"]}
    assert all(len(v) == 1 for v in exact.values())
    # the real runs took at least their modelled time (the sandbox acts every delay out)
    for key, (_, wall) in sandbox_runs["four"].items():
        assert wall >= exact[key][0] * 0.95 - 0.05, (key, wall, exact[key])
    spread = modelled_seconds(sandbox_runs["jobs"][0], cat, profile, samples=8)
    assert len(spread) == 8 and len(set(spread)) > 1


def test_a_sandbox_that_does_not_say_its_seed_gives_none() -> None:
    sb = api.make_sandbox("calm", seed=0, admin=False)
    with running(sb) as url:
        assert served_draws(url) is None and served_profile(url) is None
    with api.sandbox_running("calm", seed="nightly") as url:
        draws = served_draws(url)
        assert draws is not None and draws.seed == "nightly"


def test_a_model_of_a_latency_scaled_sandbox_meets_its_delays() -> None:
    """A sandbox started with a latency scale says so, and the profile scaled by it draws
    the very delays the sandbox acts out: the same draws, times the scale."""
    from realprobe import FaultModel, load_profile

    sb = api.make_sandbox("published", seed=4, latency_scale=0.25)
    with running(sb) as url:
        draws = served_draws(url)
        assert draws is not None and draws.latency_scale == 0.25
    prof = load_profile("published")
    for k in (0.25, 3.0):
        base, scaled = FaultModel(prof, 4), FaultModel(prof.latency_scaled(k), 4)
        for tool in ("advice_random", "pokeapi_pokemon", "not_in_the_catalogue"):
            for _ in range(30):
                a, b = base.draw(tool), scaled.draw(tool)
                assert a.code == b.code and a.pick == b.pick
                assert b.latency_s == pytest.approx(a.latency_s * k, rel=1e-9)
    # a scale of 0 (the sandbox answers at once) is a profile that still loads
    zero = prof.latency_scaled(0.0)
    assert type(prof).model_validate_json(zero.model_dump_json()).default is not None


def test_a_numbered_call_sent_on_to_its_moved_path_is_answered_as_moved() -> None:
    """Where a numbered call was redirected to, the sandbox answers as the moved resource:
    its outcome was drawn with the call (drawing call n again would play the redirect
    again). Unnumbered requests there draw as before."""
    import httpx

    def status(client: httpx.Client, headers: dict[str, str]) -> int | str:
        try:
            return client.get("/advice-slip/_moved/advice", headers=headers).status_code
        except httpx.HTTPError as exc:  # a dropped connection, a cut body
            return type(exc).__name__

    with (api.sandbox_running("harsh", seed=2) as url,
          httpx.Client(base_url=url, timeout=5.0) as client):
        numbered = [status(client, {"X-Realprobe-Draw": f"run-1:{n}",
                                    "X-Realprobe-Budget": "0.5"}) for n in range(12)]
        plain = [status(client, {"X-Realprobe-Budget": "0.5"}) for _ in range(12)]
    assert numbered == [200] * 12
    assert any(code != 200 for code in plain)


def test_a_seeded_probe_meets_the_calls_its_model_says(tmp_path: Path) -> None:
    """The probe's model of a sandbox that says its seed: each call's seconds as the sandbox
    will draw them. Every call it says hangs to the deadline was a TIMEOUT, and no other; a
    second probe with the same seed on the same sandbox meets the same outcomes."""

    path = tmp_path / "quick.json"
    path.write_text(json.dumps(QUICK))
    tools = ["advice_random", "catfact_fact", "pokeapi_version"]
    with api.sandbox_running(path, seed=5) as url:
        target = api.options(sandbox=url)
        cat = api.load_catalog()
        _, exact = probe_model([cat.get(t) for t in tools], 6, target, 0.5, seed=3)
        codes: list[dict[tuple[str, int], Any]] = [{}, {}]
        for n, got in enumerate(codes):
            api.probe(tools, rounds=6, target=target, db=tmp_path / f"p{n}.db", timeout=0.5,
                      politeness="off", seed=3,
                      on_call=lambda row, _, got=got: got.__setitem__(
                          (row["tool"], row["round"]), row["error_code"]))
        _, other = probe_model([cat.get(t) for t in tools], 6, target, 0.5, seed=4)
    assert codes[0] == codes[1] and len(codes[0]) == 18
    hangs = {(t, r) for t, secs in exact.items() for r, s in enumerate(secs) if s == 0.5}
    assert hangs and hangs == {k for k, code in codes[0].items() if code == "TIMEOUT"}
    assert other != exact  # another seed, other outcomes


def test_a_probe_without_a_seed_draws_as_seed_0() -> None:
    """A library probe run without a seed (`run_probes`) meets seed 0's outcomes, as a
    transport without a seed does, so a test or bench on a fresh sandbox repeats itself."""
    from realprobe.probes.runner import probe_draw_key

    assert probe_draw_key(None) == probe_draw_key(0) == "probe-0" != probe_draw_key(1)


def test_the_probe_bar_counts_each_call_by_its_own_model() -> None:
    """With a model of each call, the bar's items are the calls themselves (tool#round):
    a start takes the tool's next round, an end its row's round, and what is left is what
    the calls not ended will take."""
    from realprobe.commands.progress import Item

    plan = [Item("a"), Item("b"), Item("a"), Item("b")]
    live = LiveCounts(plan, "probing", enabled=False, workers=1, deadline=10.0,
                      exact={"a": [1.0, 10.0], "b": [2.0, 3.0]})
    assert [it.kind for it in live.eta.queue] == ["a#0", "b#0", "a#1", "b#1"]
    live.started("a")
    assert [it.kind for it, _ in live.eta.flying] == ["a#0"]
    left = live.eta.remaining()
    assert left is not None and 15.0 < left <= 16.0
    live.started("b")
    live({"tool": "a", "round": 0, "latency_ms": 1000.0}, SimpleNamespace(ok=True))  # type: ignore[arg-type]
    assert [it.kind for it, _ in live.eta.flying] == ["b#0"] and live.eta.done == 1
    # a schedule's next round: another seed, so its calls' own model
    live.new_round({"a": [5.0, 5.0], "b": [1.0, 1.0]})
    assert live.eta.prior["a#1"] == [5.0] and live.eta.done == 0
    left = live.eta.remaining()
    assert left is not None and 11.0 < left <= 12.5
