"""Severities as WorkflowPerturb defines them: round(p x |V|) steps (with the small-|V|
rule), levels nested (one seeded permutation of the steps, each level a prefix of it), the
realised share stored per run, and Chain F1 and Kendall tau of the reference agent falling
monotonically with severity on every shipped task, for every flaw type."""

from __future__ import annotations

from typing import Any

import pytest

import realprobe
from realprobe import default_catalog
from realprobe.tasks.flaws import ALL_FLAW_TYPES, SEVERITIES, affected, with_variant

TASKS = {t.instance_id: t for t in realprobe.plan_tasks(all=True).tasks}
CATALOG = default_catalog()


def test_the_count_is_round_p_v_with_the_small_v_rule() -> None:
    # exact where |V| allows it
    assert [affected(10, s) for s in SEVERITIES] == [1, 3, 5]
    assert [affected(20, s) for s in SEVERITIES] == [2, 6, 10]
    assert [affected(5, s) for s in SEVERITIES] == [1, 2, 3]  # 0.5, 1.5, 2.5 rounded half up
    assert [affected(6, s) for s in SEVERITIES] == [1, 2, 3]
    # small |V|: at least one, strictly more at each level while steps are left
    assert [affected(4, s) for s in SEVERITIES] == [1, 2, 3]
    assert [affected(3, s) for s in SEVERITIES] == [1, 2, 3]
    assert [affected(2, s) for s in SEVERITIES] == [1, 2, 2]
    assert [affected(1, s) for s in SEVERITIES] == [1, 1, 1]
    # any severity: at least the level below it, never more than |V|
    counts = [affected(4, s) for s in range(1, 101)]
    assert counts == sorted(counts) and counts[-1] == 4 and counts[0] == 1


@pytest.mark.parametrize("flaw", [t for t in ALL_FLAW_TYPES if t != "semantic_drift"])
def test_levels_are_nested_and_their_share_is_what_they_touched(flaw: str) -> None:
    for task in TASKS.values():
        n_api = len(task.workflow.steps) - 1
        touched: list[list[str]] = []
        for sev in SEVERITIES:
            name = f"{flaw}@{sev}"
            fw = with_variant(task, f"flawed:{name}", CATALOG, seed=0).flawed[name]
            got = list(fw.detail["affected"])
            assert fw.detail["share"] == round(len(set(got)) / n_api, 4)
            assert len(got) <= affected(n_api, sev)
            touched.append(got)
        assert set(touched[0]) <= set(touched[1]) <= set(touched[2]), (task.instance_id,
                                                                        touched)


def test_semantic_drift_drops_nested_sets_of_facts() -> None:
    for task in TASKS.values():
        dropped = [set(with_variant(task, f"flawed:semantic_drift@{s}", CATALOG)
                       .flawed[f"semantic_drift@{s}"].detail["affected"]) for s in SEVERITIES]
        assert dropped[0] <= dropped[1] <= dropped[2]


def _tau(value: Any) -> float:
    return -2.0 if value is None else float(value)  # no order to speak of: the least


def test_chain_f1_and_tau_fall_monotonically_with_severity_on_every_task() -> None:
    prompts = ",".join(f"flawed:{t}@{s}" for t in ALL_FLAW_TYPES for s in SEVERITIES)
    res = realprobe.run_tasks(all=True, agent="reference", profile="calm", prompt=prompts)
    cells: dict[tuple[str, str], dict[int, tuple[float, float, float]]] = {}
    for r in res.runs:
        flaw, sev = r.row["prompt"].split(":", 1)[1].split("@")
        assert r.row["severity"] == int(sev) and r.row["severity_share"] is not None
        cells.setdefault((r.row["task"], flaw), {})[int(sev)] = (
            r.row["chain_f1"], _tau(r.row["kendall_tau"]), r.row["severity_share"])
    assert len(cells) == len(TASKS) * len(ALL_FLAW_TYPES)
    for key, by_sev in cells.items():
        f1 = [by_sev[s][0] for s in SEVERITIES]
        tau = [by_sev[s][1] for s in SEVERITIES]
        assert f1 == sorted(f1, reverse=True), (key, f1)
        assert tau == sorted(tau, reverse=True), (key, tau)
    # where a flaw takes steps out of the run, Chain F1 really falls from 10 to 50 (on a
    # task whose first step goes, every level leaves nothing to run: it stays at its floor)
    for flaw in ("missing_steps", "tool_misuse", "missing_step"):
        falls = [task for task in TASKS
                 if cells[(task, flaw)][SEVERITIES[-1]][0] < cells[(task, flaw)][SEVERITIES[0]][0]]
        assert len(falls) >= 0.8 * len(TASKS), (flaw, sorted(set(TASKS) - set(falls)))
