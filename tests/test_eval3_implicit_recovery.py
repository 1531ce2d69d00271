"""The reference agent knows the implicit failure modes it can see in one answer (a needed
output blank or gone, a text that reads backwards): such an answer counts as failed, is
asked again once, then the step's alternative takes over. What looks like a true answer
(an older recorded one, a drift the parser hides) passes, as it would for any agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import realprobe
from realprobe.tasks.agents.answer_checks import reads_backwards, suspect


def _plan(folder: Path, tool: str, fault: str, duration: Any) -> str:
    path = folder / f"{tool}-{fault}-{duration}.json"
    path.write_text(json.dumps({"base": "none", "rules": [
        {"tool": tool, "n": 1, "fault": fault, "duration": duration}]}))
    return str(path)


@pytest.mark.parametrize("fault", ["empty", "wrong"])
def test_a_permanent_implicit_fault_it_can_see_sends_it_to_the_alternative(
    fault: str, tmp_path: Path
) -> None:
    res = realprobe.run_tasks(["morning_boost"], agent="reference", profile="calm",
                              fault_plan=_plan(tmp_path, "zenquotes_random", fault, "permanent"))
    (run,) = res.runs
    zen = [(s["tool"], s["role"], s["fault_source"]) for s in run.steps if s["step_id"] == "zen"]
    assert zen == [("zenquotes_random", "call", "plan"), ("zenquotes_random", "retry", "plan"),
                   ("quotable_random", "fallback", None)]
    assert (run.row["outcome"], run.row["grounded"]) == ("full", 1), run.score.reasons


def test_a_transient_one_clears_when_asked_again(tmp_path: Path) -> None:
    res = realprobe.run_tasks(["morning_boost"], agent="reference", profile="calm",
                              fault_plan=_plan(tmp_path, "zenquotes_random", "empty", 1))
    (run,) = res.runs
    zen = [(s["tool"], s["role"]) for s in run.steps if s["step_id"] == "zen"]
    assert zen == [("zenquotes_random", "call"), ("zenquotes_random", "retry")]
    assert run.row["outcome"] == "full"


def test_true_answers_pass_the_checks_and_cost_no_extra_call() -> None:
    res = realprobe.run_tasks(all=True, agent="reference", profile="calm")
    assert all(r.row["tool_calls"] == r.row["optimal_calls"] for r in res.runs)
    assert not reads_backwards("I learned the value of hard work by working hard.")
    assert reads_backwards("hard. working by work hard of value the learned I")
    assert reads_backwards('everything". and universe the life to answer the is 42')
    assert suspect({"text": ""}, ["text"], {"quote": ""}) is not None
    assert suspect({"text": "x"}, ["text"], {"url": "moc.elpmaxe//:sptth"}) is not None
    assert suspect({"text": "Fine words."}, ["text"], {"quote": "Fine words."}) is None


def test_no_true_answer_of_any_catalogue_tool_looks_doubtful() -> None:
    catalog = realprobe.load_catalog()
    seen = 0
    for tool in catalog:
        args = tool.examples[0] if tool.examples else {}
        for seed in range(8):
            got = realprobe.call(tool.name, args, catalog=catalog,
                                 target=realprobe.options(profile="calm", seed=seed))
            if got.ok:
                seen += 1
                assert suspect({}, [], got.data) is None, (tool.name, got.data)
    assert seen >= 200


def test_counts_and_identifiers_that_do_not_fit_are_doubtful() -> None:
    assert suspect({}, [], {"fact": "Cats purr.", "length": 11}) is not None
    assert suspect({}, [], {"fact": "Cats purr.", "length": 10}) is None
    assert suspect({}, [], {"quote": "q", "author": "a", "id": None}) is not None
    assert reads_backwards("office our is world The")
    assert not reads_backwards("The world is our office")
