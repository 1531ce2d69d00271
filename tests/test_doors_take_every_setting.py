"""Every door takes every setting of an evaluation whole: `run`, a sweep file, `sandbox`,
`mcp`, `mcp --task`, `realprobe.evaluate` and the Inspect task. For each door and each
setting, changing the setting (and nothing else) changes what the door does: the calls it
makes or serves, their outcomes and latencies, the prompt the agent reads, where the calls
go. A door that cannot honour a setting refuses it in one line before anything runs.

Offline: simulate on a virtual clock, and one loopback sandbox for the target setting."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import realprobe
from realprobe import EvalSettings, RealprobeError, default_catalog
from realprobe.sandbox.server import running

TASK = "pet_newsletter"
CATALOG = default_catalog()
FLAWED = "flawed:missing_steps@10"  # 1 of the task's 3 API steps: which, by the seed
#: every setting -> (the settings it starts from, the settings it changes to)
CHANGES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "target": ({}, {"sandbox": "SANDBOX", "profile": None}),
    "profile": ({}, {"profile": "calm"}),
    "seed": ({}, {"seed": 7}),
    # faults over calm tools, so that the faults met are the plan's or the rate's
    "fault_plan": ({"profile": "calm"}, {"profile": "calm",
                                         "fault_plan": "toolmaze-explicit-permanent"}),
    "fault_rate": ({"profile": "calm"}, {"profile": "calm", "fault_rate": 1.0}),
    "prompt": ({}, {"prompt": FLAWED}),
    "flaw_seed": ({"prompt": FLAWED}, {"prompt": FLAWED, "flaw_seed": 5}),
    "paraphrase": ({}, {"paraphrase": 2}),
}
#: the settings every door starts from (before a change)
BASE = {"profile": "harsh", "prompt": "optimal"}


def test_the_changes_cover_every_setting() -> None:
    """A new field of EvalSettings fails here until each door is shown to take it."""
    target = {"mode", "sandbox", "cassette"}
    assert set(EvalSettings.model_fields) == (set(CHANGES) - {"target"}) | target


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    """One loopback sandbox (calm, answering at once) for the target setting."""

    sb = realprobe.make_sandbox("calm", latency_scale=0.0)
    with running(sb) as url:
        sb.url_ = url
        yield sb


def settings_for(fields: dict[str, Any], sb: Any) -> dict[str, Any]:
    out = {**BASE, **fields}
    if out.get("sandbox") == "SANDBOX":
        out["sandbox"] = sb.url_
    return {k: v for k, v in out.items() if v is not None}


Call = tuple[str, bool, str | None, float | None]  # tool, ok, error code, latency (ms)
Trace = tuple[Any, list[Call]]  # what the agent was shown, and every call


def steps_of(db: Path) -> list[Call]:
    """What the runs did: every call's tool, outcome and (virtual) latency, in order."""
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT s.tool, s.ok, s.error_code, round(s.latency_ms, 3) FROM task_steps s "
            "JOIN task_runs r ON r.id = s.run_id ORDER BY r.started_at, r.repeat, s.idx"
        ).fetchall()
    return [(t, bool(ok), code, ms) for t, ok, code, ms in rows]


def shown(settings: dict[str, Any]) -> str:
    """The prompt a run under `settings` shows its agent, by the runner's own rendering."""
    from realprobe import plan_tasks
    from realprobe.tasks.prompts import render
    from realprobe.tasks.runner import run_variant

    cfg = EvalSettings(**settings).run_config()
    task = plan_tasks([TASK]).tasks[0]
    return render(run_variant(task, cfg, cfg.prompts[0], CATALOG), cfg.prompts[0]).user


def script() -> list[tuple[str, dict[str, Any]]]:
    """The calls an outside agent makes: the reference agent's on a calm target."""
    ref = realprobe.run_tasks([TASK], profile="calm", prompt="optimal").runs[0]
    return [(s.tool, dict(s.args)) for s in ref.state.steps]


SCRIPT = script()
TOOL_SCRIPT = [(t, a) for t, a in SCRIPT if t in CATALOG.tools]  # the catalogue's calls


# -- the doors: each runs once under `settings` and says what it did ---------------------


def door_run(settings: dict[str, Any], tmp: Path) -> Trace:
    db = tmp / "run.db"
    realprobe.run_tasks([TASK], db=db, **settings)
    return shown(settings), steps_of(db)


def door_sweep(settings: dict[str, Any], tmp: Path) -> Trace:
    s = dict(settings)
    lines = [f'tasks = ["{TASK}"]', f'prompts = ["{s.pop("prompt")}"]',
             f"seed = {s.pop('seed', 0)}", f"flaw_seed = {s.pop('flaw_seed', 0)}",
             f"paraphrase = [{s.pop('paraphrase', 0)}]"]
    if "fault_plan" in s:
        lines.append(f'fault_plans = ["{s.pop("fault_plan")}"]')
    if "fault_rate" in s:
        lines.append(f"lambda = [{s.pop('fault_rate')}]")
    lines.append("[[targets]]")
    if "sandbox" in s:
        lines += ['kind = "sandbox"', f'url = "{s.pop("sandbox")}"']
    else:
        lines += ['kind = "simulate"', f'profile = "{s.pop("profile")}"']
    assert not s, s
    file = tmp / "sweep.toml"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    db = tmp / "sweep.db"
    realprobe.sweep(file, db=db, concurrency=1)
    return shown(settings), steps_of(db)


def door_evaluate(settings: dict[str, Any], tmp: Path) -> Trace:
    seen: list[str] = []

    async def agent(prompt: str, box: Any) -> str:
        seen.append(prompt)
        for tool, args in SCRIPT:
            await box.call(tool, args)
        return "TASK COMPLETE"

    db = tmp / "eval.db"
    realprobe.evaluate(agent, [TASK], db=db, **settings)
    return seen, steps_of(db)


def door_mcp_task(settings: dict[str, Any], tmp: Path) -> Trace:
    from mcp import Client

    db = tmp / "mcp.db"

    async def go() -> str:
        service = realprobe.api.mcp_service(task=TASK, db=db, catalog=CATALOG, **settings)
        async with service, Client(service.server) as client:
            prompt = (await client.call_tool("task_prompt", {})).content[0].text  # type: ignore[union-attr]
            for tool, args in SCRIPT:
                await client.call_tool(tool, args)
            await client.call_tool("finish", {"answer": "TASK COMPLETE"})
        return prompt

    return asyncio.run(go()), steps_of(db)


def taskless(settings: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """A door without a task takes a plan placed on a task's path only when its rules name
    their tools: the same plan, bound to the first tool the script calls."""
    if settings.get("fault_plan") != "toolmaze-explicit-permanent":
        return settings
    plan = tmp / "named.toml"
    plan.write_text(f'base = "none"\n[[rules]]\ntool = "{TOOL_SCRIPT[0][0]}"\non = "branch"\n'
                    'n = 1\nfault = "dead"\nduration = "permanent"\n', encoding="utf-8")
    return {**settings, "fault_plan": str(plan)}


def door_mcp(settings: dict[str, Any], tmp: Path) -> Trace:
    from mcp import Client

    settings = taskless(settings, tmp)
    db = tmp / "tools.db"

    async def go() -> list[Any]:
        service = realprobe.api.mcp_service(db=db, catalog=CATALOG, **settings)
        out = []
        async with service, Client(service.server) as client:
            for tool, args in TOOL_SCRIPT * 2:
                res = await client.call_tool(tool, args)
                out.append(res.content[0].text[:80])  # type: ignore[union-attr]
        return out

    texts = asyncio.run(go())
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT tool, outcome, error_code, round(latency_ms, 3) FROM probes "
                           "ORDER BY started_at, rowid").fetchall()
    return texts, [(t, outcome == "ok", code, ms) for t, outcome, code, ms in rows]


def door_sandbox(settings: dict[str, Any], tmp: Path) -> Trace:
    settings = taskless(settings, tmp)
    sb = realprobe.make_sandbox(latency_scale=0.0, settings=EvalSettings(**settings))
    with running(sb) as url:
        target = realprobe.options(sandbox=url)
        # a simulated hang holds its call until the client gives up: 3 s, not the default 10
        results = [(tool, realprobe.call(tool, args, target=target, catalog=CATALOG, timeout=3))
                   for tool, args in TOOL_SCRIPT * 2]
    return None, [(t, r.ok, r.error.code.value if r.error else None, None) for t, r in results]


def door_inspect(settings: dict[str, Any], tmp: Path) -> Trace:
    inspect_ai = pytest.importorskip("inspect_ai")
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    from realprobe.tasks.inspect_eval import inspect_task

    outputs = [ModelOutput.for_tool_call("mockllm/model", t, a) for t, a in SCRIPT]
    outputs.append(ModelOutput.from_content("mockllm/model", "TASK COMPLETE"))
    for out in outputs:  # scripted usage: the mock model would fetch a tokenizer otherwise
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    db = tmp / "inspect.db"
    task = inspect_task(TASK, settings=EvalSettings(**settings), db=db, catalog=CATALOG)
    (log,) = inspect_ai.eval(task, model=get_model("mockllm/model", custom_outputs=outputs),
                             display="none", log_dir=str(tmp / "logs"))
    assert log.status == "success", log.error
    return log.samples[0].input, steps_of(db)


DOORS: dict[str, Callable[[dict[str, Any], Path], Trace]] = {
    "run": door_run, "sweep": door_sweep, "sandbox": door_sandbox, "mcp": door_mcp,
    "mcp --task": door_mcp_task, "evaluate": door_evaluate, "inspect": door_inspect,
}
#: what a door cannot honour, refused in one line (tools served without a task show no
#: prompt; a sandbox serves APIs, it is no target of its own and shows no prompt)
REFUSED = {
    "sandbox": {"target", "prompt", "flaw_seed", "paraphrase"},
    "mcp": {"prompt", "flaw_seed", "paraphrase"},
}


def _without_prompt(door: str, fields: dict[str, Any]) -> dict[str, Any]:
    if door in REFUSED and "prompt" in REFUSED[door]:
        return {k: v for k, v in fields.items() if k != "prompt"}
    return fields


@pytest.mark.parametrize("setting", list(CHANGES))
@pytest.mark.parametrize("door", list(DOORS))
def test_each_setting_changes_what_each_door_does(
    door: str, setting: str, sandbox: Any, tmp_path: Path
) -> None:
    before, after = (settings_for(f, sandbox) for f in CHANGES[setting])
    if setting in REFUSED.get(door, ()):
        with pytest.raises(RealprobeError) as exc:
            DOORS[door](after, tmp_path)
        message = str(exc.value)
        assert "cannot honour" in message and "\n" not in message
        assert not list(tmp_path.iterdir())  # refused before anything ran or was written
        return
    before, after = _without_prompt(door, before), _without_prompt(door, after)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    served = len(sandbox.journal.dump())
    first = DOORS[door](before, tmp_path / "a")
    hits_before = len(sandbox.journal.dump()) - served
    second = DOORS[door](after, tmp_path / "b")
    hits_after = len(sandbox.journal.dump()) - served - hits_before
    assert (first, hits_before) != (second, hits_after), f"{door} ignored {setting}"
    if setting == "target":
        assert hits_before == 0 and hits_after > 0  # the calls went to the sandbox
    if setting in ("fault_rate", "fault_plan"):  # the faults were met
        assert failed(second) > failed(first), (first, second)


def failed(trace: Trace) -> int:
    return sum(not ok for _, ok, _, _ in trace[1])


@pytest.mark.parametrize("args", [["mcp", "--prompt", "cot"], ["mcp", "--paraphrase", "2"],
                                  ["sandbox", "--prompt", "cot"]])
def test_the_command_line_refuses_what_a_door_cannot_honour(args: list[str]) -> None:
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "realprobe.cli", *args], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and args[1] in res.stderr


#: each setting's flag and a value other than its default, as the command line reads it
FLAGS: dict[str, tuple[str, str, Any]] = {
    "mode": ("--mode", "simulate", "simulate"), "sandbox": ("--sandbox", "http://127.0.0.1:9",
                                                            "http://127.0.0.1:9"),
    "profile": ("--profile", "harsh", "harsh"), "seed": ("--seed", "7", 7),
    "fault_plan": ("--fault-plan", "toolmaze-explicit-permanent", "toolmaze-explicit-permanent"),
    "fault_rate": ("--fault-rate", "0.5", 0.5), "prompt": ("--prompt", FLAWED, FLAWED),
    "flaw_seed": ("--flaw-seed", "5", 5), "paraphrase": ("--paraphrase", "2", 2),
}
#: the command of each door, the front-door function it hands the settings to, its flags
COMMANDS = {
    "run": (["run", TASK], "plan_tasks", set(FLAGS)),
    "mcp": (["mcp", "--task", TASK], "serve_mcp", set(FLAGS)),
    "sandbox": (["sandbox"], "make_sandbox", {"profile", "seed", "fault_plan", "fault_rate"}),
}


class Captured(Exception):
    pass


@pytest.mark.parametrize("door", list(COMMANDS))
def test_each_flag_reaches_the_settings_whole(
    door: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command builds one EvalSettings from its flags and hands it on whole."""
    import sys

    from cli_runner import main

    from realprobe import api

    args, function, flags = COMMANDS[door]

    def capture(*a: Any, **kw: Any) -> None:
        raise Captured(kw["settings"])

    monkeypatch.setattr(api, function, capture)
    for name in sorted(flags):
        flag, text, value = FLAGS[name]
        monkeypatch.setattr(sys, "argv", ["realprobe", *args, flag, text])
        with pytest.raises(Captured) as got:
            main()
        settings = got.value.args[0]
        assert isinstance(settings, EvalSettings)
        assert getattr(settings, name) == value, (door, name)


def test_a_sweep_without_a_simulated_target_refuses_its_faults(tmp_path: Path) -> None:
    file = tmp_path / "s.toml"
    file.write_text(f'tasks = ["{TASK}"]\nlambda = [0.5]\n[[targets]]\nkind = "sandbox"\n'
                    'url = "http://127.0.0.1:9"\n', encoding="utf-8")
    with pytest.raises(RealprobeError, match="apply to simulate targets") as exc:
        realprobe.sweep(file, db=tmp_path / "s.db")
    assert "\n" not in str(exc.value) and not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("rate", [1.5, -0.1, float("nan"), True, "0.3"])
@pytest.mark.parametrize("door", ["mcp_proxy", "mcp_replay", "options"])
def test_a_fault_rate_outside_0_to_1_is_one_line_at_every_door(
    door: str, rate: object, tmp_path: Path
) -> None:
    """The one check of a fault rate (`clients.check_fault_rate`) at each door that takes it."""
    call = {
        "mcp_proxy": lambda: realprobe.mcp_proxy(["true"], fault_rate=rate),
        "mcp_replay": lambda: realprobe.mcp_replay(tmp_path / "none.jsonl", fault_rate=rate),
        "options": lambda: realprobe.options(fault_rate=rate).normalised(),
    }[door]
    with pytest.raises(RealprobeError, match="expected a share between 0 and 1"):
        call()
