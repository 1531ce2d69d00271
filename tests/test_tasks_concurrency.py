"""Concurrent task runs: faster by the concurrency, same results as sequential, politeness
per API host across runs, LLM limits and 429s honoured."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from realprobe import Catalog, Mode, VirtualClock, plan_tasks
from realprobe.tasks.agents import LlmSettings
from realprobe.tasks.agents.limits import LlmLimiter, LlmLimits
from realprobe.tasks.prompts import prompt_variants
from realprobe.tasks.runner import RunConfig, run_batch
from tests.llm_server import ScriptedLLM, http_error, two_turns
from tests.loopback_api import catfact_on_loopback

TASKS = {t.instance_id: t for t in plan_tasks(all=True).tasks}


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items()
            if k not in ("id", "batch", "started_at", "wall_s")}


def test_results_do_not_depend_on_the_concurrency(catalog: Catalog) -> None:
    tasks = list(TASKS.values())[:3]
    cfg = dict(agent="reference", prompts=prompt_variants("optimal,flawed:all"),
               mode=Mode.SIMULATE,
               profile="harsh", repeat=2)
    seq = asyncio.run(run_batch(tasks, RunConfig(**cfg), catalog))  # type: ignore[arg-type]
    par = asyncio.run(run_batch(tasks, RunConfig(**cfg, concurrency=8), catalog))  # type: ignore[arg-type]
    assert len(seq) == len(par) == 3 * len(cfg["prompts"]) * 2  # type: ignore[arg-type]
    assert [comparable(r.row) for r in seq] == [comparable(r.row) for r in par]
    assert {r.row["outcome"] for r in seq} >= {"full", "failure"}


@pytest.fixture
def slow_llm() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM([], delay_s=0.2, responder=two_turns)
    server.start()
    yield server
    server.stop()


def llm_cfg(server: ScriptedLLM, **extra: Any) -> RunConfig:
    settings = LlmSettings(base_url=server.base_url, model="scripted-1", api_key="k")
    return RunConfig(agent="openai", prompts=["optimal"], mode=Mode.SIMULATE,
                     profile="calm", llm=settings, **extra)


class PeakCounter:
    """Wraps a responder: each answer takes `hold_s`; `peak` is the most in flight at once."""

    def __init__(self, server: ScriptedLLM, hold_s: float) -> None:
        self.answer = server.responder
        assert self.answer is not None
        self.hold_s, self.in_flight, self.peak = hold_s, 0, 0
        self.lock = threading.Lock()
        server.responder, server.delay_s = self, 0.0

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        time.sleep(self.hold_s)
        with self.lock:
            self.in_flight -= 1
        assert self.answer is not None
        return self.answer(body)


def test_concurrency_divides_the_time_spent_waiting_for_the_model(
    catalog: Catalog, slow_llm: ScriptedLLM
) -> None:
    """40 runs at --concurrency 8: eight requests wait on the model at once (the makespan
    against the ideal is measured in bench/tasks_concurrency.py, not timed here)."""
    import realprobe.tasks.agents.openai_native  # noqa: F401  (the SDK's import is not the test)

    counter = PeakCounter(slow_llm, 0.2)
    tasks = list(TASKS.values())[:10]
    cfg = llm_cfg(slow_llm, repeat=4, concurrency=8)  # 40 runs, 2 requests each
    out = asyncio.run(run_batch(tasks, cfg, catalog))
    assert len(out) == 40 and len(slow_llm.requests) == 80
    assert counter.peak == 8


def test_llm_concurrency_limit_holds(catalog: Catalog, slow_llm: ScriptedLLM) -> None:
    counter = PeakCounter(slow_llm, 0.1)
    cfg = llm_cfg(slow_llm, repeat=4, concurrency=8, llm_limits=LlmLimits(concurrency=2))
    asyncio.run(run_batch(list(TASKS.values())[:4], cfg, catalog))
    assert counter.peak == 2


def test_a_429_with_retry_after_pauses_every_run_then_they_go_on(
    catalog: Catalog, slow_llm: ScriptedLLM
) -> None:
    slow_llm.delay_s = 0.0
    slow_llm.script = [http_error(429, "slow down", retry_after="1")]
    cfg = llm_cfg(slow_llm, repeat=3, concurrency=3)
    out = asyncio.run(run_batch([TASKS["pet_newsletter"]], cfg, catalog))
    assert all(r.row["outcome"] != "error" for r in out), [r.row["infra_error"] for r in out]
    first_429 = slow_llm.times[0]
    later = [t for t in slow_llm.times[1:] if t - first_429 < 0.9]
    # the two other runs may send both of their requests before this process has read the
    # 429 (on a loaded machine it can be read late); the run that got it, and every request
    # after the pause began, wait: at most 2 x 2 early requests, never the 429'd run's retry
    assert len(later) <= 4
    assert len(slow_llm.requests) == 1 + 3 * 2


def test_rpm_limit_on_a_virtual_clock() -> None:
    clock = VirtualClock(0.0)
    limiter = LlmLimiter(LlmLimits(rpm=10), clock)
    starts: list[float] = []

    async def go() -> None:
        for _ in range(25):
            async with limiter.slot():
                starts.append(clock.now())

    asyncio.run(go())
    assert starts[:10] == [0.0] * 10
    assert starts[10] == pytest.approx(60.0) and starts[20] == pytest.approx(120.0)


def test_an_unreachable_llm_is_an_infrastructure_error_not_a_score(catalog: Catalog) -> None:
    settings = LlmSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="k",
                           timeout_s=2)
    cfg = RunConfig(agent="openai", prompts=["optimal"], mode=Mode.SIMULATE, profile="calm",
                    llm=settings)
    (res,) = asyncio.run(run_batch([TASKS["pet_newsletter"]], cfg, catalog))
    assert res.row["outcome"] == "error" and res.row["infra_error"]
    assert res.row["resume_key"].startswith("pet_newsletter|openai|m|optimal|simulate:calm|")


def test_politeness_per_host_holds_across_concurrent_live_runs() -> None:
    """Eight concurrent live runs all call one API: its starts stay min_interval apart."""
    llm = ScriptedLLM([], responder=two_turns)
    llm.start()
    try:
        with catfact_on_loopback(min_interval_s=0.25) as api:
            settings = LlmSettings(base_url=llm.base_url, model="scripted-1", api_key="k")
            cfg = RunConfig(agent="openai", prompts=["optimal"], mode=Mode.LIVE, llm=settings,
                            repeat=8, concurrency=8)
            out = asyncio.run(run_batch([TASKS["pet_newsletter"]], cfg, api.catalog))
    finally:
        llm.stop()
    starts = api.starts
    assert len(out) == 8 and len(starts) == 8
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # starts are spaced on the client; arrival at the server jitters by a few ms
    assert min(gaps) >= 0.15 and sum(gaps) / len(gaps) >= 0.23, gaps


def test_run_cli_concurrency_and_resume(tmp_path: Any) -> None:
    import json

    from cli_runner import run

    db = tmp_path / "r.db"
    args = ["run", "--all", "--profile", "harsh", "--repeat", "2", "--db", str(db), "--json"]
    first = run([*args, "--concurrency", "8"])
    assert first.returncode == 0, first.stderr
    runs = json.loads(first.stdout)["runs"]
    again = run([*args, "--resume"])
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["runs"] == []  # every run is stored complete
    sequential = run([*args[:-3], "--json", "--db", str(tmp_path / "s.db")])
    seq = json.loads(sequential.stdout)["runs"]
    keep = ("task", "prompt", "repeat", "outcome", "tool_calls", "failures", "artifact")
    assert [{k: r[k] for k in keep} for r in seq] == [{k: r[k] for k in keep} for r in runs]


def test_runs_of_a_batch_share_one_pooled_connection_to_the_model(catalog: Catalog) -> None:
    """Simulate mode sends the model's requests out for real: the runs of a batch reuse the
    batch's kept-alive connections to the endpoint instead of opening one each."""
    server = ScriptedLLM([], responder=two_turns, keep_alive=True)
    base = server.start()
    try:
        cfg = RunConfig(
            agent="openai", prompts=["baseline"], mode=Mode.SIMULATE, profile="calm",
            repeat=3, llm=LlmSettings(base_url=base, model="scripted", api_key="k"),
        )
        out = asyncio.run(run_batch([TASKS["pet_newsletter"]], cfg, catalog))
    finally:
        server.stop()
    assert len(out) == 3 and len(server.peers) == 6  # two model turns per run
    assert len(set(server.peers)) == 1  # one connection, reused by every run in turn
