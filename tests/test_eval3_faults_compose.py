"""A fault plan and the fault-rate dial compose: the plan's faults at their places, the
dial's everywhere else, each labelled with the setting that put it there; a plan that would
silently cancel a profile's ResiliBench rule is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import realprobe
from realprobe.simulator.plans import plan_for


def _steps(res: Any) -> list[dict[str, Any]]:
    return [s for r in res.runs for s in r.steps]


def test_a_plan_and_a_fault_rate_both_apply_and_are_labelled_apart() -> None:
    res = realprobe.run_tasks(
        all=True, agent="reference", profile="calm", repeat=2,
        fault_plan="toolmaze-explicit-permanent", fault_rate=0.3,
    )
    steps = [s for s in _steps(res) if s["kind"] == "api"]
    by_source: dict[str | None, int] = {}
    for s in steps:
        by_source[s["fault_source"]] = by_source.get(s["fault_source"], 0) + 1
    # every run meets its plan fault (the permanent one, on every later call of that tool)
    for r in res.runs:
        assert any(s["fault_source"] == "plan" for s in r.steps), r.row["task"]
    plan_calls = by_source["plan"]
    rate_faults = by_source.get("rate", 0)
    elsewhere = len(steps) - plan_calls
    assert rate_faults > 0 and by_source.get("profile", 0) == 0
    assert 0.15 < rate_faults / elsewhere < 0.45, (rate_faults, elsewhere)
    assert all(r.row["fault_rate"] == 0.3 for r in res.runs)


def test_a_plan_alone_gives_only_its_own_faults_and_the_dial_alone_is_labelled_rate() -> None:
    alone = realprobe.run_tasks(
        all=True, agent="reference", profile="calm", fault_plan="toolmaze-explicit-permanent",
    )
    sources = {s["fault_source"] for s in _steps(alone)}
    assert sources == {None, "plan"}
    dial = realprobe.run_tasks(all=True, agent="reference", profile="calm", fault_rate=0.5)
    assert {s["fault_source"] for s in _steps(dial)} == {None, "rate"}


def _rule_profile(tmp_path: Path) -> Path:
    path = tmp_path / "rb.json"
    path.write_text(json.dumps({
        "format": "realprobe-profile/1", "name": "rb", "rule": "resilibench-paper",
        "default": {"success_rate": 0.8, "errors": {"TIMEOUT": 0.5, "OPERATION_FAILED": 0.5}},
    }))
    return path


def test_a_plan_that_would_cancel_a_profile_rule_is_refused_in_one_line(tmp_path: Path) -> None:
    profile = _rule_profile(tmp_path)
    got = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "run", "pet_newsletter", "--profile",
         str(profile), "--fault-plan", "toolmaze-explicit-permanent",
         "--db", str(tmp_path / "x.db")],
        capture_output=True, text=True, timeout=120,
    )
    assert got.returncode == 2, got.stderr
    lines = [ln for ln in got.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "resilibench-paper" in lines[0] and "base" in lines[0], lines
    assert not (tmp_path / "x.db").exists()
    # a plan on top of the profile honours the rule: accepted
    plan = tmp_path / "on-top.toml"
    plan.write_text('base = "profile"\n[[rules]]\non = "branch"\nn = 1\nfault = "dead"\n')
    res = realprobe.run_tasks(["pet_newsletter"], agent="reference", profile=str(profile),
                              fault_plan=str(plan))
    assert len(res.runs) == 1


def test_every_door_composes_the_same_way(tmp_path: Path) -> None:
    plan = plan_for("toolmaze-explicit-transient", 0.2)
    assert plan is not None and plan.base == "profile"
    assert plan_for(None, None) is None
    named = tmp_path / "cat.toml"  # a door without a task takes plans that name their tools
    named.write_text('base = "none"\n[[rules]]\ntool = "catfact_fact"\nevery = 5\n'
                     'fault = "500"\n')
    sandbox = realprobe.make_sandbox("calm", fault_plan=str(named), fault_rate=0.4, seed=3)
    model = sandbox.runtime.model
    outs = [model.draw("catfact_fact") for _ in range(200)]
    labels = {o.injected_by for o in outs}
    assert labels == {None, "plan", "rate"}, labels
