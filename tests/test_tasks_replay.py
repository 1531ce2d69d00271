"""Record against the sandbox, replay offline: same steps, same scores. The shipped cassettes
replay offline through the CLI, and bad runner input is a one-line error."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_runner import invoke

from realprobe import Catalog, Mode, RealprobeError, Task, data_dir, plan_tasks
from realprobe.tasks.runner import RunConfig, RunOutcome, run_batch, shipped_cassettes

TASKS = {t.instance_id: t for t in plan_tasks(all=True).tasks}


def fast(task: Task) -> Task:
    """Short backoff: record mode runs on the real clock."""
    c = task.constraints.model_copy(update={"backoff_base_s": 0.01, "backoff_max_s": 0.02})
    return task.model_copy(update={"constraints": c})


def comparable(r: RunOutcome) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    row = {
        k: v
        for k, v in r.row.items()
        if k
        not in (
            "id", "batch", "started_at", "wall_s", "clock_s", "mode", "cassette",
            "target_kind", "target", "resume_key", "profile",  # sandbox when recorded
        )
    }
    # who caused a fault depends on the target: the sandbox's injection when recorded, the
    # recorded answer when replayed (its kind, and every count, stay the same)
    skip = ("run_id", "latency_ms", "fault_origin")
    steps = [{k: v for k, v in s.items() if k not in skip} for s in r.steps]
    return row, steps


def test_recorded_runs_replay_byte_for_byte(
    catalog: Catalog, sandbox_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sandbox_factory("published", seed=3)
    tasks = [
        fast(TASKS[t]) for t in ("content_social_post", "travel_briefing", "star_wars_numbers")
    ]
    rec_cfg = RunConfig(
        agent="reference",
        prompts=["optimal"],
        mode=Mode.RECORD,
        sandbox=url,
        cassette=tmp_path / "cas",
        call_timeout_s=0.2,
    )
    recorded = asyncio.run(run_batch(tasks, rec_cfg, catalog))
    assert sum(r.row["retries"] + r.row["fallbacks"] for r in recorded) > 0, "no faults met"

    import socket

    def guard(*a: object, **k: object) -> None:
        raise AssertionError("replay opened a socket")

    monkeypatch.setattr(socket.socket, "connect", guard)
    rep_cfg = RunConfig(
        agent="reference",
        prompts=["optimal"],
        mode=Mode.REPLAY,
        cassette=tmp_path / "cas",
        call_timeout_s=0.2,
    )
    replayed = asyncio.run(run_batch(tasks, rep_cfg, catalog))
    for a, b in zip(recorded, replayed, strict=True):
        assert comparable(a) == comparable(b), a.row["task"]
        for x, y in zip(a.steps, b.steps, strict=True):  # latency is replayed, to the ms
            assert abs(x["latency_ms"] - y["latency_ms"]) < 1.0


def shipped_table() -> dict[str, str]:
    text = (shipped_cassettes() / "README.md").read_text()
    return {
        m[0].split("__")[0]: m[1] for m in re.findall(r"^\| (\S+__\S+) \| (\w+) \|", text, re.M)
    }


def test_shipped_cassettes_replay_offline_through_the_cli(tmp_path: Path, no_network: None) -> None:
    shipped = shipped_table()
    assert set(shipped) == set(TASKS)  # one shipped run per task
    db = tmp_path / "r.db"
    res = invoke(
        ["run", "--all", "--agent", "reference", "--mode", "replay", "--db", str(db), "--json"]
    )
    assert res.exit_code == 0, res.output
    runs = json.loads(res.output)["runs"]
    assert {r["task"]: r["outcome"] for r in runs} == shipped  # as recorded
    again = invoke(["run", "--all", "--mode", "replay", "--db", str(db), "--json"])
    assert [r["artifact"] for r in json.loads(again.output)["runs"]] == [
        r["artifact"] for r in runs
    ]
    out = invoke(["results", "--db", str(db), "--json"])
    summary = json.loads(out.output)
    assert summary["runs"] == 2 * len(TASKS)
    (row,) = summary["by_prompt"]
    assert row["agent"] == "reference" and row["runs"] == 2 * len(TASKS)
    table = invoke(["results", "--db", str(db)])
    assert table.exit_code == 0 and "Task outcomes" in table.output


def rp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "realprobe.cli", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "nope_task", "--profile", "calm"], "unknown task 'nope_task'"),
        (["run", "--profile", "calm"], "name tasks to run, or run every task (--all)"),
        (
            ["run", "--all", "--prompt", "flawed:typo", "--profile", "calm"],
            "--prompt 'flawed:typo'",
        ),
        (["run", "--all", "--agent", "gpt"], "--agent 'gpt'"),
        (["run", "--all", "--agent", "openai", "--profile", "calm"], "needs --base-url"),
        (
            ["run", "--all", "--profile", "calm", "--sandbox", "http://127.0.0.1:1"],
            "exclude each other",
        ),
        (["run", "--all", "--profile", "nosuchprofile"], "nosuchprofile"),
        (["run", "--all", "--mode", "record"], "--mode record needs --cassette"),
        (
            ["run", "pet_newsletter", "--mode", "replay", "--cassette", "/nonexistent/dir"],
            "nothing recorded for run",
        ),
        (
            ["run", "--all", "--cassette", "/tmp/one.json", "--mode", "record"],
            "one file but this is",
        ),
        (["run", "--all", "--repeat", "0", "--profile", "calm"], "--repeat"),
        (["run", "--all", "--profile", "calm", "--timeout", "-1"], "--timeout must be positive"),
    ],
)
def test_bad_runner_input_is_a_clear_error(args: list[str], message: str, tmp_path: Path) -> None:
    res = invoke([*args, "--db", str(tmp_path / "x.db")])
    assert isinstance(res.exception, RealprobeError), res.output
    assert message in str(res.exception) and "\n" not in str(res.exception)
    assert not (tmp_path / "x.db").exists()  # bad input is refused before anything is stored


def test_no_tasks_named_names_the_front_doors_keyword() -> None:
    """`plan_tasks()` with no task and not `all=True` names `all`, the keyword it takes (and
    the flag `--all` of `realprobe run` above)."""
    from realprobe import plan_tasks

    with pytest.raises(RealprobeError, match=r"run every task \(all\)") as exc:
        plan_tasks(profile="calm")
    assert exc.value.params == ("all",)


def test_the_command_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    p = rp("run", "nope_task", "--profile", "calm", "--db", str(tmp_path / "x.db"))
    assert p.returncode == 2 and p.stderr.startswith("error: unknown task 'nope_task'")
    assert "Traceback" not in p.stderr and p.stderr.count("\n") == 1
    p = rp("results", "--db", str(tmp_path / "none.db"))
    assert p.returncode == 2 and "no database" in p.stderr


def test_flawed_prompts_fill_the_per_flaw_table(tmp_path: Path) -> None:
    db = str(tmp_path / "f.db")
    res = invoke(
        [
            "run",
            "pet_newsletter",
            "travel_briefing",
            "--profile",
            "calm",
            "--prompt",
            "optimal,flawed:all",
            "--db",
            db,
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    runs = json.loads(res.output)["runs"]
    assert len(runs) == 2 * 8
    summary = json.loads(invoke(["results", "--db", db, "--json"]).output)
    prompts = {r["prompt"]: r for r in summary["by_prompt"]}
    assert set(prompts) == {"optimal", "flawed"}
    assert prompts["optimal"]["strict_rate"] == 1.0 > prompts["flawed"]["strict_rate"]
    flaws = {r["flaw"]: r for r in summary["by_flaw"]}
    assert len(flaws) == 7 and all(r["runs"] == 2 for r in flaws.values())
    assert flaws["missing_step"]["full_rate"] == 0.0
    assert flaws["semantic_drift"]["grounded_rate"] == 0.0


def test_a_custom_task_folder_is_checked_against_the_catalogue(tmp_path: Path) -> None:
    raw = json.loads((data_dir("tasks_realworld") / "pet_newsletter.json").read_text())
    del raw["flawed"]
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "pets.json").write_text(json.dumps(raw))
    db = str(tmp_path / "c.db")
    ok = invoke(
        ["run", "--all", "--tasks-dir", str(folder), "--profile", "calm", "--db", db, "--json"],
    )
    assert ok.exit_code == 0 and json.loads(ok.output)["runs"][0]["outcome"] == "full"
    no_flaws = invoke(
        [
            "run",
            "--all",
            "--tasks-dir",
            str(folder),
            "--profile",
            "calm",
            "--prompt",
            "flawed:missing_step",
            "--db",
            db,
        ],
    )
    assert "python -m realprobe.tasks.flaws" in str(no_flaws.exception)
    raw["workflow"]["steps"][2]["alternatives"][0]["tool"] = "chuck_random"
    (folder / "pets.json").write_text(json.dumps(raw))
    bad = invoke(
        ["run", "--all", "--tasks-dir", str(folder), "--profile", "calm", "--db", db]
    )
    assert isinstance(bad.exception, RealprobeError)
    assert "do not exist: chuck_random" in str(bad.exception)
