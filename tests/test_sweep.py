"""Sweeps: one file expands into runs, one database, resumable after kill -9, on Ray too."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from realprobe import Catalog, Store, open_db, plan_tasks
from realprobe.tasks.store import TaskStore
from realprobe.tasks.sweep import load_sweep, plan_sweep, run_sweep
from tests.llm_server import ScriptedLLM, two_turns

TASKS = ["pet_newsletter", "content_social_post", "travel_briefing"]


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "realprobe.cli", *args], capture_output=True, text=True,
        timeout=timeout, env={**os.environ, **(env or {})},
    )


def keys(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT resume_key FROM task_runs")]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_sweep_runs_once_and_resume_skips_what_is_stored(tmp_path: Path) -> None:
    sweep = write(tmp_path / "s.toml", f"""
tasks = {json.dumps(TASKS)}
prompts = ["optimal", "flawed:missing_step"]
agents = ["reference"]
repeats = 2

[[targets]]
kind = "simulate"
profile = "harsh"

[[targets]]
kind = "simulate"
profile = "calm"
""")
    db = tmp_path / "s.db"
    first = cli("sweep", str(sweep), "--db", str(db), "--json", "--concurrency", "4")
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert out["summary"]["planned"] == out["summary"]["ran"] == 3 * 2 * 2 * 2
    assert {m["target"] for m in out["models"]} == {"simulate:harsh", "simulate:calm"}
    assert all(m["full_ci95"] is not None for m in out["models"])
    stored = keys(db)
    assert len(stored) == len(set(stored)) == 24
    again = cli("sweep", str(sweep), "--db", str(db), "--json", "--resume")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)["summary"]
    assert (summary["skipped"], summary["ran"]) == (24, 0)
    assert sorted(keys(db)) == sorted(stored)


def test_bad_sweep_files_are_one_line_errors(tmp_path: Path) -> None:
    cases = {
        "agents = ['gpt']": "agent 'gpt'",
        "agents = ['openai']": "LLM agents need",
        "prompts = ['nope']": "prompt",
        "[[targets]]\nkind = 'sandbox'": "sandbox target needs url",
        "not toml ===": "not valid TOML",
    }
    for body, message in cases.items():
        path = write(tmp_path / "bad.toml", body)
        res = cli("sweep", str(path), "--db", str(tmp_path / "x.db"))
        assert res.returncode == 2, (body, res.stderr)
        assert res.stderr.startswith("error: ") and message in res.stderr, res.stderr
        assert "Traceback" not in res.stderr


@pytest.fixture
def slow_llm() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM([], delay_s=0.3, responder=two_turns)
    server.start()
    yield server
    server.stop()


def llm_sweep(tmp_path: Path, llm: ScriptedLLM, repeats: int) -> Path:
    return write(tmp_path / "llm.toml", f"""
tasks = {json.dumps(TASKS)}
prompts = ["optimal", "cot"]
agents = ["openai"]
repeats = {repeats}

[[models]]
name = "scripted"
base_url = "{llm.base_url}"
model = "scripted-1"
api_key_env = "SWEEP_TEST_KEY"

[[targets]]
kind = "simulate"
profile = "calm"
""")


def test_kill_9_in_the_middle_then_resume_gives_each_run_exactly_once(
    tmp_path: Path, slow_llm: ScriptedLLM
) -> None:
    sweep = llm_sweep(tmp_path, slow_llm, repeats=3)  # 18 runs, 2 model turns each
    db = tmp_path / "k.db"
    env = {**os.environ, "SWEEP_TEST_KEY": "secret-test-key"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "sweep", str(sweep), "--db", str(db),
         "--concurrency", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if db.exists():
                try:
                    if len(keys(db)) >= 4:
                        break
                except sqlite3.Error:
                    pass
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    before = keys(db)
    assert 4 <= len(before) < 18, len(before)
    res = cli("sweep", str(sweep), "--db", str(db), "--resume", "--json",
              env={"SWEEP_TEST_KEY": "secret-test-key"})
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)["summary"]
    assert summary["skipped"] == len(before) and summary["ran"] == 18 - len(before)
    after = keys(db)
    assert len(after) == len(set(after)) == 18
    with open(db, "rb") as f:
        assert b"secret-test-key" not in f.read()


def test_the_api_key_variable_must_be_set(tmp_path: Path, slow_llm: ScriptedLLM) -> None:
    sweep = llm_sweep(tmp_path, slow_llm, repeats=1)
    env = {k: v for k, v in os.environ.items() if k != "SWEEP_TEST_KEY"}
    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "sweep", str(sweep), "--db",
         str(tmp_path / "x.db")], capture_output=True, text=True, timeout=120, env=env,
    )
    assert res.returncode == 2 and "$SWEEP_TEST_KEY is not set" in res.stderr


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items()
            if k not in ("id", "batch", "started_at", "wall_s", "vantage")}


def test_ray_executor_gives_the_same_rows_as_the_local_one(
    tmp_path: Path, catalog: Catalog
) -> None:
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'realprobe[ray]')")
    del ray
    sweep = load_sweep(write(tmp_path / "r.toml", f"""
tasks = {json.dumps(TASKS)}
prompts = ["optimal", "flawed:missing_step"]
repeats = 2
[[targets]]
kind = "simulate"
profile = "harsh"
"""))
    rows = {}
    for executor in ("local", "ray"):
        db = tmp_path / f"{executor}.db"
        summary = run_sweep(sweep, open_db(db), catalog=catalog, executor=executor,
                            concurrency=2)
        assert summary.ran == 12
        with Store(db) as store:
            rows[executor] = sorted(
                (comparable(r) for r in TaskStore(store).runs()), key=lambda r: r["resume_key"]
            )
    assert rows["local"] == rows["ray"]


def test_live_sweeps_on_ray_get_one_shared_politeness_state(tmp_path: Path) -> None:
    """Live targets go to Ray with a shared gate (the spacing itself is tested against
    loopback hosts in test_run_executors); simulated ones need none."""
    from realprobe.tasks.executors import reaches_apis

    live = load_sweep(write(tmp_path / "l.toml", '[[targets]]\nkind = "live"\n'))
    sim = load_sweep(write(tmp_path / "s.toml", '[[targets]]\nkind = "simulate"\n'))
    tasks = {t.instance_id: t for t in plan_tasks(all=True).tasks}
    assert reaches_apis(plan_sweep(live, tasks))
    assert not reaches_apis(plan_sweep(sim, tasks))
