"""Scoring rules on hand-built runs, and the pass^k / recovery aggregates."""

from __future__ import annotations

from math import comb
from typing import Any

from realprobe import plan_tasks
from realprobe.tasks.metrics import levels, pass_k, recovery
from realprobe.tasks.scoring import score_run
from realprobe.tasks.state import RunState, StepRecord

TASK = plan_tasks(["pet_newsletter"]).tasks[0]
DATA: dict[str, dict[str, Any]] = {
    "catfact_fact": {"fact": "Cats sleep 16 hours a day.", "length": 26},
    "dogceo_random_image": {"image_url": "https://images.dog.ceo/breeds/x/1.jpg"},
    "icanhazdadjoke_random": {
        "joke": "I used to hate facial hair, but then it grew on me.",
        "id": "a",
    },
    "chucknorris_random": {"joke": "Chuck Norris counted to infinity. Twice."},
}


def rec(i: int, tool: str, ok: bool = True, code: str | None = None) -> StepRecord:
    kind = "output" if tool == "compose_post" else "api"
    data = DATA.get(tool) if ok and kind == "api" else ({"stored": True} if ok else None)
    return StepRecord(
        idx=i,
        turn=i + 1,
        tool=tool,
        kind=kind,
        role="call",
        args={},
        ok=ok,
        error_code=None if ok else (code or "TIMEOUT"),
        data=data,
    )


def state(tools: list[tuple[str, bool]], artifact: str | None, complete: bool = True) -> RunState:
    s = RunState(steps=[rec(i, t, ok) for i, (t, ok) in enumerate(tools)])
    s.artifact = artifact
    s.completion_signal = complete
    return s


GOOD_POST = (
    "Cat fact: Cats sleep 16 hours a day.\nDog: https://images.dog.ceo/breeds/x/1.jpg\n"
    "Joke: I used to hate facial hair, but then it grew on me."
)
ALL = [
    ("catfact_fact", True),
    ("dogceo_random_image", True),
    ("icanhazdadjoke_random", True),
    ("compose_post", True),
]


def test_full_and_grounded_is_strict() -> None:
    s = score_run(TASK, state(ALL, GOOD_POST))
    assert (s.outcome, s.score, s.grounded, s.strict) == ("full", 1.0, True, True)


def test_an_alternative_tool_counts_for_its_step() -> None:
    tools = [ALL[0], ALL[1], ("icanhazdadjoke_random", False), ("chucknorris_random", True), ALL[3]]
    post = GOOD_POST.replace(
        DATA["icanhazdadjoke_random"]["joke"], DATA["chucknorris_random"]["joke"]
    )
    s = score_run(TASK, state(tools, post))
    assert s.outcome == "full" and s.grounded


def test_made_up_content_is_full_by_the_paper_but_fails_grounding() -> None:
    s = score_run(TASK, state(ALL, "Cats are great! Here is a dog. Why did the chicken cross?"))
    assert s.outcome == "full" and not s.grounded and not s.strict
    assert any("grounding: cat.fact" in r for r in s.reasons)


def test_out_of_order_is_not_full() -> None:
    # the output step before a step it reads is out of order; independent steps are not
    tools = [ALL[0], ALL[1], ALL[3], ALL[2]]
    s = score_run(TASK, state(tools, GOOD_POST))
    assert s.outcome == "partial"
    assert "out of order: post before joke, whose output it reads" in " ".join(s.reasons)
    assert score_run(TASK, state([ALL[1], ALL[2], ALL[0], ALL[3]], GOOD_POST)).outcome == "full"


def test_partial_needs_two_of_four_conditions() -> None:
    # one API tool failed, output ran, 3 successful calls (min 3), no completion signal
    tools = [ALL[0], ALL[1], ("icanhazdadjoke_random", False), ALL[3]]
    s = score_run(TASK, state(tools, GOOD_POST, complete=False))
    assert s.outcome == "partial" and s.score == 0.6
    assert s.conditions == {
        "coverage_60": True,
        "output_ran": True,
        "min_calls": True,
        "completion_signal": False,
    }
    # only the output ran: one condition out of four
    s = score_run(TASK, state([("catfact_fact", False), ALL[3]], "x", complete=False))
    assert s.outcome == "failure"


def test_loop_and_consecutive_failures_are_failures() -> None:
    for why in ("loop", "consecutive_failures"):
        st = state(ALL, GOOD_POST)
        st.termination = why
        assert score_run(TASK, st).outcome == "failure"


def test_llm_endpoint_failure_is_error_not_failure() -> None:
    st = state([], None, complete=False)
    st.error = "LLM endpoint: APIConnectionError"
    assert score_run(TASK, st).outcome == "error"


def row(
    task: str, outcome: str, failures: int = 0, calls: int = 4, strict: int = 1
) -> dict[str, Any]:
    return {
        "task": task,
        "prompt": "optimal",
        "agent": "a",
        "model": "m",
        "outcome": outcome,
        "strict": strict,
        "grounded": strict,
        "score": {"full": 1.0, "partial": 0.6}.get(outcome, 0.0),
        "failures": failures,
        "tool_calls": calls,
        "optimal_calls": 4,
    }


def test_pass_hat_k_is_the_tau_bench_estimator() -> None:
    rows = [row("a", "full")] * 4 + [row("b", "full")] * 2 + [row("b", "failure")] * 2
    got = pass_k(rows)
    for k in range(1, 5):
        want = (comb(4, k) / comb(4, k) + comb(2, k) / comb(4, k)) / 2
        assert abs(got["pass^k"][k] - want) < 1e-12
        want_at = ((1 - comb(0, k) / comb(4, k)) + (1 - comb(2, k) / comb(4, k))) / 2
        assert abs(got["pass@k"][k] - want_at) < 1e-12
    assert got["pass^k"][4] == 0.5 and got["pass@k"][4] == 1.0
    # endpoint errors are left out, not counted as failures
    assert pass_k([*rows, row("a", "error")]) == got


def test_recovery_rate_and_cost() -> None:
    rows = [
        row("a", "full", failures=2, calls=7),
        row("b", "partial", failures=1, calls=5),
        row("c", "full", failures=0, calls=4),
    ]
    r = recovery(rows)
    assert r["runs_with_failures"] == 2
    assert r["recovery_rate"] == 0.5
    assert r["recovery_cost"] == (3 + 1) / 3
    lv = levels(rows)
    assert (lv["full"], lv["partial"], lv["failure"]) == (2, 1, 0)


def test_pass_k_with_uneven_runs_uses_each_tasks_first_n() -> None:
    rows = [
        row("a", "full"),
        row("a", "failure"),
        row("a", "full"),
        row("b", "full"),
        row("b", "full"),
    ]
    got = pass_k(rows)
    assert set(got["pass^k"]) == {1, 2}  # n = 2, the smaller count
    assert got["pass^k"][2] == (0 + 1) / 2  # a: [full, failure] -> 0; b: both -> 1
