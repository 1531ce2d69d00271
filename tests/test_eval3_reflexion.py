"""Reflexion as ReliabilityBench runs it: an attempt, a verbal self-reflection when it falls
short, a fresh attempt whose prompt carries the reflection, up to the attempt cap. Three
scripted models on a loopback chat-completions server: one that reflects in plain text (as
the request invites), one that puts its reflection beside a tool call, one that ignores the
request. Runs go through `realprobe.run_tasks` into a database."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import realprobe
from tests.llm_server import (
    REFLECTION,
    ScriptedLLM,
    ignores_the_request,
    reflects_beside_a_call,
    second_attempt,
    text_reflector,
    users_of,
)


def _run(server: ScriptedLLM, db: Path, repeat: int) -> Any:
    return realprobe.run_tasks(
        ["pet_newsletter"], agent="openai-reflexion", base_url=server.base_url,
        model="scripted-1", api_key_env="REFLEXION_TEST_KEY", mode="simulate", profile="calm",
        prompt="optimal", repeat=repeat, db=db,
    )


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_a_text_reflecting_model_reaches_a_second_attempt_carrying_its_reflection_every_run(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("REFLEXION_TEST_KEY", "k")
    db = tmp_path / "eval.db"
    with ScriptedLLM([], responder=text_reflector) as server:
        res = _run(server, db, repeat=5)
        bodies = list(server.requests)
    assert len(res.runs) == 5
    for r in res.runs:
        assert (r.row["attempts"], r.row["outcome"], r.row["termination"]) == (2, "full",
                                                                              "finished")
        (first,) = r.row["reflections"]
        assert first["reflection"] == REFLECTION and first["outcome"] != "full"
    # every second attempt starts afresh, its prompt carrying the reflection
    openings = [b for b in bodies if second_attempt(b) and len(b["messages"]) == 2]
    assert len(openings) == 5
    assert all(REFLECTION in users_of(b)[0] for b in openings)
    (row,) = realprobe.task_results(db)["by_prompt"]
    assert row["attempts"] == 2.0 and row["full_rate"] == 1.0  # attempts used, per row
    stored = _rows(db, "SELECT attempts, reflections, outcome FROM task_runs")
    assert all(a == 2 and REFLECTION in json.loads(refl)[0]["reflection"] and o == "full"
               for a, refl, o in stored)
    # each attempt's calls are stored under it: 3 fetches, then 3 fetches and the post
    per_attempt = _rows(db, "SELECT run_id, attempt, count(*) FROM task_steps "
                            "GROUP BY run_id, attempt ORDER BY run_id, attempt")
    assert sorted({(a, n) for _, a, n in per_attempt}) == [(1, 3), (2, 4)]
    idx = _rows(db, "SELECT run_id, group_concat(idx) FROM task_steps GROUP BY run_id")
    assert all(sorted(map(int, ids.split(","))) == list(range(7)) for _, ids in idx)


def test_a_reflection_beside_a_tool_call_is_kept_and_the_call_is_not_run(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("REFLEXION_TEST_KEY", "k")
    with ScriptedLLM([], responder=reflects_beside_a_call) as server:
        res = _run(server, tmp_path / "b.db", repeat=2)
    for r in res.runs:
        assert r.row["attempts"] == 2 and r.row["outcome"] == "full"
        assert r.row["reflections"][0]["reflection"] == REFLECTION
        # the call beside the reflection never ran: 3 calls, then 3 and the post
        assert [s["attempt"] for s in r.steps] == [1, 1, 1, 2, 2, 2, 2]


def test_a_model_that_ignores_the_request_still_tries_again_up_to_the_cap(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("REFLEXION_TEST_KEY", "k")
    with ScriptedLLM([], responder=ignores_the_request) as server:
        res = _run(server, tmp_path / "c.db", repeat=2)
        bodies = list(server.requests)
    for r in res.runs:
        assert r.row["attempts"] == 3  # the cap: never ended by the ignored request
        assert [a["reflection"] for a in r.row["reflections"]] == ["", ""]
        assert r.row["termination"] == "finished" and r.row["outcome"] != "full"
        assert [s["attempt"] for s in r.steps] == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    third = [b for b in bodies if "Attempt 2: (no reflection given)" in users_of(b)[0]]
    assert third and all(len(b["messages"]) >= 2 for b in third)


def test_the_deadline_ends_a_reflexion_run_whatever_attempt_it_is_in(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("REFLEXION_TEST_KEY", "k")
    with ScriptedLLM([], responder=ignores_the_request) as server:
        res = realprobe.run_tasks(
            ["pet_newsletter"], agent="openai-reflexion", base_url=server.base_url,
            model="scripted-1", api_key_env="REFLEXION_TEST_KEY", mode="simulate",
            profile="calm", timeout=1.5,  # on the run's virtual clock: within attempt two
        )
    (run,) = res.runs
    assert run.row["termination"] == "deadline" and run.row["attempts"] == 2
    assert run.row["clock_s"] == 1.5 and run.row["outcome"] != "full"
