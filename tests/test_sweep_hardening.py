"""A sweep file is checked like the command line's options, and a resumed sweep runs exactly
what is missing: resume keys are what a sweep runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import realprobe
from realprobe import RealprobeError, plan_tasks
from realprobe.tasks.sweep import load_sweep, plan_sweep

TASK = "pet_newsletter"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_the_reference_agents_prompt_types_are_one_run_and_resume_loses_none(
    tmp_path: Path,
) -> None:
    """baseline, cot and optimal are the same run for the reference agent: the sweep runs it
    once per key, so a kill in the middle and --resume give every run exactly once."""
    sweep = write(tmp_path / "s.toml", f"""
tasks = ["{TASK}"]
prompts = ["baseline", "cot", "optimal", "flawed:missing_step"]
agents = ["reference"]
repeats = 3

[[targets]]
kind = "simulate"
profile = "harsh"
""")
    jobs = plan_sweep(load_sweep(sweep), {t.instance_id: t for t in plan_tasks(all=True).tasks})
    assert len(jobs) == len({j.key for j in jobs}) == 2 * 3
    db = tmp_path / "s.db"
    first = realprobe.sweep(sweep, db=db)
    assert first.summary.ran == 6
    with sqlite3.connect(db) as conn:  # what a kill -9 after four runs leaves behind
        conn.execute("DELETE FROM task_runs WHERE rowid IN "
                     "(SELECT rowid FROM task_runs ORDER BY started_at DESC LIMIT 2)")
    again = realprobe.sweep(sweep, db=db, resume=True)
    assert (again.summary.skipped, again.summary.ran) == (4, 2)
    with sqlite3.connect(db) as conn:
        stored = [r[0] for r in conn.execute("SELECT resume_key FROM task_runs")]
    assert sorted(stored) == sorted(j.key for j in jobs)


@pytest.mark.parametrize(
    ("target", "needle"),
    [
        ('kind = "sandbox"\nurl = "file:///etc/passwd"', "expected a URL like http://"),
        ('kind = "sandbox"\nurl = "http://127.0.0.1:9/_fault/nope/"', "unknown fault variant"),
        ('kind = "simulate"\nprofile = "no-such-profile"', "no-such-profile"),
        ('kind = "live"\nurl = "http://127.0.0.1:9"', "url is for sandbox targets"),
        ('kind = "sandbox"\nurl = "http://127.0.0.1:99999"', "expected a URL like http://"),
        ('kind = "simulat"', "kind 'simulat': choose one of live, sandbox, simulate, replay"),
    ],
)
def test_targets_are_checked_like_the_command_lines(
    tmp_path: Path, target: str, needle: str
) -> None:
    sweep = write(tmp_path / "s.toml", f'tasks = ["{TASK}"]\n\n[[targets]]\n{target}\n')
    with pytest.raises(RealprobeError) as info:
        realprobe.sweep(sweep, db=tmp_path / "s.db")
    assert needle in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "s.db").exists()


def test_a_sweep_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    sweep = tmp_path / "s.toml"
    sweep.write_bytes('tasks = ["caf\u00e9"]\n'.encode("latin-1"))
    with pytest.raises(RealprobeError, match="not UTF-8 text"):
        load_sweep(sweep)


def test_a_target_kind_is_read_in_any_case_like_the_options(tmp_path: Path) -> None:
    sweep = write(tmp_path / "s.toml",
                  f'tasks = ["{TASK}"]\n\n[[targets]]\nkind = "Simulate"\nprofile = "calm"\n')
    (target,) = load_sweep(sweep).targets
    assert (target.kind, target.label) == ("simulate", realprobe.options(
        mode="Simulate", profile="calm").target.label)
