"""Task files: every one validates, covers the catalogue as promised, and its flawed variants
really differ from the optimal workflow in the way their type says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from realprobe import Catalog, RealprobeError
from realprobe.tasks.flaws import generate, regenerate
from realprobe.tasks.model import (
    FLAW_TYPES,
    Step,
    Task,
    TaskFileError,
    default_tasks_dir,
    load_task,
    load_tasks,
    pick_tasks,
)
from realprobe.tasks.outputs import OUTPUT_TOOLS
from realprobe.tasks.prompts import prompt_variants, render

TASKS = load_tasks(default_tasks_dir())


def test_enough_tasks_each_3_to_6_tools_over_2_apis(catalog: Catalog) -> None:
    assert len(TASKS) >= 10
    covered: set[str] = set()
    for task in TASKS.values():
        assert 3 <= len(task.required_tools) <= 6, task.instance_id
        apis = {catalog.get(t).api_id for t in task.required_tools[:-1]}
        assert len(apis) >= 2, task.instance_id
        for step in task.workflow.steps:
            for tool in step.tools():
                assert tool in catalog or tool in OUTPUT_TOOLS, f"{task.instance_id}: {tool}"
                if tool in catalog:
                    covered.add(tool)
        assert task.expected_outputs.artifact_tool in OUTPUT_TOOLS
        assert set(task.flawed) == set(FLAW_TYPES)
    assert len({t for task in TASKS.values() for t in task.required_tools[:-1]}) >= 20
    assert len(covered) >= 20


def test_stored_flaws_are_what_the_seeded_generator_makes(catalog: Catalog) -> None:
    for task in TASKS.values():
        fresh = generate(task, catalog)
        assert fresh == generate(task, catalog)  # seeded: the same every time
        for flaw, stored in task.flawed.items():
            if flaw == "tool_misuse" and fresh[flaw] != stored:
                # the pick depends on the catalogue, which may have grown since: the stored
                # wrong tool must still exist and still be wrong
                used = {t for s in task.workflow.steps for t in s.tools()}
                assert stored.detail["used"] in catalog and stored.detail["used"] not in used
                continue
            assert fresh[flaw] == stored, (
                f"{task.instance_id}: stored {flaw} is stale; run `python -m realprobe.tasks.flaws`"
            )


def _ids(steps: list[Step]) -> list[str]:
    return [s.id for s in steps]


def _output_refs(task_steps: list[Step]) -> set[tuple[str, str]]:
    return set(task_steps[-1].refs())


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_each_flaw_differs_the_way_its_type_says(task_id: str, catalog: Catalog) -> None:
    task = TASKS[task_id]
    opt = task.workflow.steps
    f = task.flawed

    inv = f["sequential_inversion"].steps
    assert sorted(_ids(inv)) == sorted(_ids(opt)) and _ids(inv) != _ids(opt)
    # a step now runs before one whose output it reads (the output step reads every item)
    pos = {s.id: k for k, s in enumerate(inv)}
    assert any(pos[r] > pos[s.id] for s in inv for r, _ in s.refs())

    mis = f["tool_misuse"]
    changed = [(a, b) for a, b in zip(opt, mis.steps, strict=True) if a.tool != b.tool]
    assert len(changed) == 1
    _, wrong = changed[0]
    assert wrong.tool in catalog and wrong.tool not in {t for s in opt for t in s.tools()}

    par = f["parameter_error"]
    diff = [(a, b) for a, b in zip(opt, par.steps, strict=True) if a.args != b.args]
    assert len(diff) == 1 and [s.tool for s in par.steps] == [s.tool for s in opt]
    before, after = diff[0]
    name = par.detail["arg"]
    if par.detail["kind"] == "missing_required":
        assert name in before.args and name not in after.args
        assert catalog.get(before.tool).spec.input[name].required
    else:  # a value the tool's input schema rejects
        with pytest.raises(Exception):  # noqa: B017 - pydantic's ValidationError
            catalog.get(after.tool).validate_args({name: after.args[name].value})

    miss = f["missing_step"].steps
    assert len(miss) == len(opt) - 1
    (dropped,) = set(_ids(opt)) - set(_ids(miss))
    assert task.step(dropped).tool in task.required_tools

    red = f["redundant_operation"].steps
    assert len(red) == len(opt) + 1
    i = next(k for k, s in enumerate(red) if s.id.endswith("_again"))
    assert red[i].tool == red[i - 1].tool and red[i].args == red[i - 1].args

    dis = f["logical_discontinuity"]
    assert [s.tool for s in dis.steps] == [s.tool for s in opt]
    step = next(s for s in dis.steps if s.id == dis.detail["step"])
    arg = step.args[dis.detail["arg"]]
    assert arg.kind == "step" and f"{arg.step}.{arg.output}" == dis.detail["now"]
    assert task.step(step.id).args.get(dis.detail["arg"]) != arg

    drift = f["semantic_drift"].steps
    assert _ids(drift) == _ids(opt) and drift[:-1] == opt[:-1]
    assert _output_refs(drift) < _output_refs(opt)
    assert drift[-1].purpose != opt[-1].purpose


def test_prompts_render_every_variant_and_the_flawed_one_shows_the_flaw() -> None:
    task = TASKS["travel_briefing"]
    variants = prompt_variants("baseline,cot,optimal,flawed:all")
    assert len(variants) == 3 + len(FLAW_TYPES)
    texts = {v: render(task, v) for v in variants}
    assert "Recommended workflow" not in texts["baseline"].user
    assert "step by step" in texts["cot"].user
    assert "Recommended workflow" in texts["optimal"].user
    for flaw in FLAW_TYPES:
        flawed = texts[f"flawed:{flaw}"].user
        assert "Recommended workflow" in flawed and flawed != texts["optimal"].user
    dropped = task.flawed["missing_step"].detail["tool"]
    assert f"call `{dropped}`" in texts["optimal"].user
    assert f"call `{dropped}`" not in texts["flawed:missing_step"].user
    text_proto = render(task, "baseline", protocol="text").system
    assert "<tool_call>" in text_proto and "<tool_call>" not in texts["baseline"].system


@pytest.mark.parametrize("bad", ["flawed:typo", "fancy", "", "flawed:"])
def test_bad_prompt_names_are_one_line_errors(bad: str) -> None:
    with pytest.raises(RealprobeError):
        prompt_variants(bad)


def test_bad_task_files_fail_with_the_file_and_the_field(tmp_path: Path) -> None:
    raw = json.loads((default_tasks_dir() / "pet_newsletter.json").read_text())
    raw["required_tools"] = list(reversed(raw["required_tools"]))
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(raw))
    with pytest.raises(TaskFileError, match=r"bad\.json.*required_tools must list"):
        load_task(p)
    raw = json.loads((default_tasks_dir() / "travel_briefing.json").read_text())
    raw["workflow"]["steps"][1]["args"]["latitude"] = {"step": "holidays", "output": "first_name"}
    p.write_text(json.dumps(raw))
    with pytest.raises(TaskFileError, match="not an earlier step"):
        load_task(p)
    p.write_text("{not json")
    with pytest.raises(RealprobeError, match="not valid JSON"):
        load_task(p)
    with pytest.raises(TaskFileError, match="Did you mean: pet_newsletter"):
        pick_tasks(TASKS, ["pet_newslettre"], False)


def test_task_model_rejects_an_argument_with_two_sources() -> None:
    raw = json.loads((default_tasks_dir() / "name_insights.json").read_text())
    raw["workflow"]["steps"][0]["args"]["name"] = {"input": "name", "value": "x"}
    with pytest.raises(Exception, match="exactly one of"):
        Task.model_validate(raw)


def test_the_generator_writes_flaws_into_task_files(tmp_path: Path, catalog: Catalog) -> None:
    raw = json.loads((default_tasks_dir() / "quiz_night.json").read_text())
    del raw["flawed"]
    (tmp_path / "quiz_night.json").write_text(json.dumps(raw))
    assert regenerate(tmp_path, catalog, check=True) == [tmp_path / "quiz_night.json"]
    assert "flawed" not in json.loads((tmp_path / "quiz_night.json").read_text())
    regenerate(tmp_path, catalog)
    written = load_task(tmp_path / "quiz_night.json")
    assert set(written.flawed) == set(FLAW_TYPES)
    assert regenerate(tmp_path, catalog, check=True) == []
