"""Plans at doors that serve no task (the sandbox, `mcp` without `--task`, the MCP proxy):
a rule placed on a task's path binds to the tools it names, and a plan that needs a task's
path is refused in one line; no planned fault ever lands on a tool the plan did not name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import realprobe
from realprobe import FaultModel
from realprobe.simulator.plans import FaultPlan
from realprobe.simulator.profile import resolve_profile


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "realprobe.cli", *args], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


PLAN = ["--fault-plan", "toolmaze-explicit-permanent"]


@pytest.mark.parametrize("args", [
    ["sandbox", "--profile", "calm", *PLAN],
    ["mcp", "--mode", "simulate", *PLAN],
    ["mcp", "proxy", *PLAN, "--", sys.executable, "-c", "pass"],
])
def test_a_plan_that_needs_a_task_is_refused_in_one_line_at_a_door_without_one(
    args: list[str],
) -> None:
    res = _cli(*args)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "serves no task" in lines[0] and "on = 'branch'" in lines[0]


def _named(tool: str, on: str = "branch") -> FaultPlan:
    return FaultPlan.model_validate({"base": "none", "rules": [
        {"tool": tool, "on": on, "n": 1, "fault": "dead", "duration": "permanent"}]})


def test_a_rule_on_the_path_binds_to_the_tools_it_names_at_the_sandbox() -> None:
    sandbox = realprobe.make_sandbox("calm", fault_plan=_named("*joke*"), seed=1)
    model = sandbox.runtime.model
    # called first, but not named: never meets the fault
    assert all(model.draw("catfact_fact").ok for _ in range(5))
    first = model.draw("icanhazdadjoke_random")
    assert not first.ok and first.injected_by == "plan"
    assert not model.draw("icanhazdadjoke_random").ok  # dead from then on
    # the group binds to the first named tool entered: another joke tool stays clean
    assert model.draw("chucknorris_random").ok


def test_a_rule_that_names_no_tool_never_lands_when_no_task_binds_the_plan() -> None:
    plan = _named("*")
    model = FaultModel(resolve_profile("calm"), 0, plan)  # nothing told it a task's path
    assert all(model.draw(t).ok for t in ("catfact_fact", "icanhazdadjoke_random") * 3)
    assert model.ledger == []
    # bound to a task's path, the same plan lands where the path says
    bound = FaultModel(resolve_profile("calm"), 0, plan)
    bound.bind([["catfact_fact"], ["icanhazdadjoke_random", "chucknorris_random"]], {})
    assert bound.draw("catfact_fact").ok
    assert not bound.draw("icanhazdadjoke_random").ok


def test_a_plan_with_named_tools_is_taken_by_every_door_without_a_task(tmp_path: Path) -> None:
    plan = tmp_path / "named.toml"
    plan.write_text('base = "none"\n[[rules]]\ntool = "catfact_fact"\non = "branch"\n'
                    'n = 1\nfault = "dead"\n')
    from realprobe.api import mcp_service

    service = mcp_service(mode="simulate", fault_plan=str(plan))
    assert service.transport_options.fault_plan == str(plan)
    got = realprobe.call("catfact_fact", target=realprobe.options(fault_plan=str(plan)))
    assert not got.ok  # the named tool, the first call: the plan's fault
