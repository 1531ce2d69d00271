"""The task set as a benchmark: at least 40 tasks graded C1 to C4, most with an alternative
tool, each with a cassette its reference solution replays from; `results` breaks outcomes
down per grade and says how many runs separate two agents."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from cli_runner import invoke

import realprobe
from realprobe.tasks.power import power_note, runs_to_separate

TASKS = {t.instance_id: t for t in realprobe.plan_tasks(all=True).tasks}


def test_at_least_40_tasks_every_grade_most_with_an_alternative() -> None:
    assert len(TASKS) >= 40
    grades = Counter(t.topology for t in TASKS.values())
    assert set(grades) == {"C1", "C2", "C3", "C4"} and grades["C4"] >= 5
    assert sum(t.has_alternative for t in TASKS.values()) > len(TASKS) / 2
    # the grade reads the data flow: C3/C4 tasks have a step with two API parents and one
    # with two API children, C4 ones an alternative as well
    for t in TASKS.values():
        if t.topology == "C4":
            assert t.has_alternative
        if t.topology == "C1":
            api = {s.id for s in t.workflow.steps[:-1]}
            assert all(len({r for r, _ in s.refs()} & api) <= 1 for s in t.workflow.steps[:-1])


def test_every_task_replays_its_shipped_cassette_and_the_new_ones_are_solved(
    no_network: None,
) -> None:
    res = realprobe.run_tasks(all=True, agent="reference", mode="replay")
    assert len(res.runs) == len(TASKS)
    readme = (Path(realprobe.data_dir("cassettes")) / "tasks" / "README.md").read_text()
    calm = {line.split("__")[0][2:] for line in readme.splitlines()
            if line.startswith("| ") and line.rstrip().endswith("| calm |")}
    assert len(calm) >= 26
    for r in res.runs:
        if r.row["task"] in calm:  # the reference solution, recorded with no faults
            assert (r.row["outcome"], r.row["grounded"]) == ("full", 1), r.row["task"]


def test_the_power_note_is_the_two_proportion_sample_size() -> None:
    # the textbook value: 0.6 vs 0.7 at 95% / 80% takes 356 per group
    assert runs_to_separate(0.6, 0.7) == 356
    assert runs_to_separate(0.7, 0.6) == 356
    assert runs_to_separate(0.5, 0.7) < runs_to_separate(0.6, 0.7)
    assert runs_to_separate(0.6, 0.7, power=0.9) > 356
    note = power_note(0.6, 42)
    assert (note["runs_per_agent"], note["repeats"], note["other_rate"]) == (356, 9, 0.7)
    assert power_note(0.95, 42)["other_rate"] == 0.85  # no room above: 10 points below
    with pytest.raises(ValueError):
        runs_to_separate(0.5, 0.5)


def test_results_break_outcomes_down_per_grade_with_a_power_note(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    realprobe.run_tasks(all=True, agent="reference", profile="published", db=db)
    got = invoke(["results", "--db", str(db), "--json"])
    assert got.exit_code == 0, got.output
    s = json.loads(got.output)
    grades = {r["topology"]: r for r in s["by_complexity"]}
    assert set(grades) == {"C1", "C2", "C3", "C4"}
    assert sum(r["runs"] for r in grades.values()) == len(TASKS)
    assert grades["C4"]["runs"] == sum(t.topology == "C4" for t in TASKS.values())
    (power,) = s["power"]
    assert power["tasks"] == len(TASKS) and power["runs_per_agent"] > 0
    shown = invoke(["results", "--db", str(db)], env={"COLUMNS": "100"})
    assert "by complexity" in shown.output and "C4" in shown.output
    assert "runs per agent" in shown.output
