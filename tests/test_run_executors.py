"""`realprobe run --executor local|ray [--address]`, `run_tasks(executor=..., gates=...)`:
the same rows on either executor, the driver the only writer, `--resume` on Ray, live runs on
Ray sharing one politeness state, Ray imported only when asked for, and shared per-host
gates."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import realprobe
from realprobe import HostGates, RealprobeError, Store, VirtualClock
from realprobe.tasks.batch import infrastructure_failure_of, summary_of
from realprobe.tasks.executors import start_local_ray
from realprobe.tasks.store import TaskStore
from tests.llm_server import ScriptedLLM, two_turns
from tests.loopback_api import catfact_on_loopback

TASKS = ["pet_newsletter", "content_social_post", "travel_briefing"]
ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, code: str | None = None, timeout: float = 300
        ) -> subprocess.CompletedProcess[str]:
    argv = ["-c", code, *args] if code else ["-m", "realprobe.cli", *args]
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ}, cwd=ROOT)


def run_args(db: Path, *extra: str) -> list[str]:
    return ["run", *TASKS, "--profile", "harsh", "--prompt", "optimal,flawed:missing_step",
            "--repeat", "2", "--db", str(db), "--json", *extra]


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items()
            if k not in ("id", "batch", "started_at", "wall_s", "vantage")}


def stored(db: Path) -> list[dict[str, Any]]:
    with Store(db) as store:
        return sorted((comparable(r) for r in TaskStore(store).runs()),
                      key=lambda r: (r["task"], r["prompt"], r["repeat"]))


def keys(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT resume_key FROM task_runs")]


@pytest.fixture(scope="module")
def ray_node() -> Iterator[Any]:
    """One local Ray node (three CPUs) started as a run starts one, for this module's Ray
    tests: a node takes seconds to start, and a run that finds Ray up uses it and leaves it
    running. (A run starting and stopping its own node is tested with sweeps.)"""
    if importlib.util.find_spec("ray") is None:  # not imported here: Ray reads its switch once
        pytest.skip("Ray is not installed (pip install 'realprobe[ray]')")
    ray = start_local_ray(num_cpus=3)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_run_on_ray_stores_the_same_rows_as_local_and_resume_skips_stored_runs(
    tmp_path: Path, ray_node: Any
) -> None:
    local_db, ray_db = tmp_path / "local.db", tmp_path / "ray.db"
    local = cli(*run_args(local_db))
    assert local.returncode == 0, local.stderr
    # the command joins the running node by its address, as it would join a cluster
    on_ray = cli(*run_args(ray_db, "--executor", "ray", "--concurrency", "2", "--address",
                           ray_node.get_runtime_context().gcs_address))
    assert on_ray.returncode == 0, on_ray.stderr
    a, b = json.loads(local.stdout), json.loads(on_ray.stdout)
    assert len(a["runs"]) == len(b["runs"]) == 12
    # the same table (plan order) and the same summary, built from what Ray sent back
    assert [comparable(r) for r in a["runs"]] == [comparable(r) for r in b["runs"]]
    assert a["summary"] == b["summary"]
    assert {r["outcome"] for r in a["runs"]} >= {"full", "failure"}
    assert stored(local_db) == stored(ray_db)
    text = cli("run", *TASKS, "--profile", "harsh", "--prompt", "optimal,flawed:missing_step",
               "--repeat", "2", "--db", str(ray_db), "--resume", "--executor", "ray")
    assert text.returncode == 0 and "resume: 12 of 12 runs already stored" in text.stderr

    # lose five runs, then resume on Ray from Python: only those five run again
    with sqlite3.connect(ray_db) as conn:
        gone = [r[0] for r in conn.execute("SELECT id FROM task_runs ORDER BY id LIMIT 5")]
        conn.executemany("DELETE FROM task_steps WHERE run_id = ?", [(g,) for g in gone])
        conn.executemany("DELETE FROM task_runs WHERE id = ?", [(g,) for g in gone])
    seen: list[str] = []
    result = realprobe.run_tasks(
        TASKS, profile="harsh", prompt="optimal,flawed:missing_step", repeat=2, db=ray_db,
        resume=True, executor="ray", concurrency=2, on_done=lambda r: seen.append(r.row["id"]),
    )
    assert (len(result.runs), result.skipped, len(seen)) == (5, 7, 5)
    assert all(r.score.outcome == r.row["outcome"] for r in result.runs)  # whole outcomes
    after = keys(ray_db)
    assert len(after) == len(set(after)) == 12
    assert stored(ray_db) == stored(local_db)


def test_live_runs_on_ray_keep_each_hosts_spacing(tmp_path: Path, ray_node: Any) -> None:
    """Three Ray workers run live tasks against one host (a loopback server standing in for
    a real API: one call in flight, starts 0.3 s apart): they share one politeness state, so
    the server sees the starts spaced as runs in one process space them. The task's other
    APIs answer from their fixtures on loopback too: nothing reaches a real host."""
    with catfact_on_loopback(min_interval_s=0.3, others_on_loopback=True) as api:
        result = realprobe.run_tasks(
            ["pet_newsletter"], agent="reference", prompt="optimal", mode="live", repeat=6,
            catalog=api.catalog, executor="ray", concurrency=3,
        )
    assert len(result.runs) == 6 and len(api.starts) == 6
    assert all(r.row["outcome"] != "error" for r in result.runs)
    gaps = sorted(b - a for a, b in zip(sorted(api.starts), sorted(api.starts)[1:], strict=False))
    # starts are claimed on one clock; arrival at the server jitters by a few ms
    assert gaps[0] >= 0.25 and sum(gaps) / len(gaps) >= 0.29, gaps
    with pytest.raises(RealprobeError, match="gates cannot be shared with Ray workers"):
        realprobe.run_tasks(["pet_newsletter"], agent="reference", mode="live",
                            catalog=api.catalog, executor="ray", gates=HostGates())


def test_a_ray_imported_before_its_loopback_switch_is_refused() -> None:
    """Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER once, when first imported: a program that
    imported ray without it gets one clear refusal, not a node on the network address."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed (pip install 'realprobe[ray]')")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    code = "import ray, realprobe\nrealprobe.run_tasks(['pet_newsletter'], executor='ray')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 1
    assert ("RealprobeError: Ray was imported before realprobe could keep its node on "
            "127.0.0.1") in done.stderr


def test_a_ray_started_here_listens_on_loopback_only(ray_node: Any) -> None:
    """An attacker on the network finds no Ray port: every socket the local node (GCS,
    raylet, workers, this driver) listens on is bound to 127.0.0.1."""
    import psutil

    assert ray_node.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    ours = {os.getpid()} | {p.pid for p in psutil.Process().children(recursive=True)}
    listening = [c.laddr.ip for c in psutil.net_connections("inet")
                 if c.status == psutil.CONN_LISTEN and c.pid in ours]
    assert listening and set(listening) <= {"127.0.0.1", "::ffff:127.0.0.1"}, listening


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--executor", "dask"], "error: --executor 'dask': choose local or ray"),
     (["--address", "10.0.0.5:6379"], "error: --address needs --executor ray"),
     (["--executor", "ray", "--address", " "], "error: --address is empty")],
)
def test_bad_executor_options_are_one_line_errors(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    res = cli("run", "pet_newsletter", "--mode", "replay", "--db", str(tmp_path / "x.db"),
              *extra)
    assert res.returncode == 2 and res.stderr.startswith(message), res.stderr
    assert "Traceback" not in res.stderr


def test_without_ray_installed_the_error_says_how_to_get_it(tmp_path: Path) -> None:
    code = (
        "import sys\nsys.modules['ray'] = None  # as if not installed\n"
        "from realprobe.cli import main\nsys.argv = ['realprobe', *sys.argv[1:]]\nmain()\n"
    )
    res = cli("run", "pet_newsletter", "--mode", "replay", "--executor", "ray",
              "--db", str(tmp_path / "x.db"), code=code)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("error: --executor ray needs Ray: pip install")
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr


@pytest.mark.parametrize("args", [["run", "--help"], ["sweep", "--help"]])
def test_help_does_not_import_ray(args: list[str]) -> None:
    code = (
        "import sys\nfrom realprobe.cli import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print('ray' in sys.modules, 'realprobe.tasks.executors' in sys.modules)\n"
    )
    res = cli(*args, code=code)
    assert res.returncode == 0 and "executor=" in res.stdout and "address=" in res.stdout
    assert res.stdout.strip().splitlines()[-1] == "False False"


def test_the_local_executor_does_not_import_ray(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom realprobe.cli import main\nsys.argv = ['realprobe', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n"
        "print('ray' in sys.modules)\n"
    )
    res = cli("run", "pet_newsletter", "--mode", "replay", "--executor", "local",
              "--db", str(tmp_path / "x.db"), code=code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "False"


def test_summary_and_infrastructure_failure_come_from_rows_alone(tmp_path: Path) -> None:
    result = realprobe.run_tasks(TASKS, profile="harsh", repeat=2, db=tmp_path / "s.db")
    with Store(tmp_path / "s.db") as store:
        rows = TaskStore(store).runs()
    assert summary_of(rows) == summary_of(result.runs) == result.summary
    assert result.summary["infra_errors"] == 0
    assert infrastructure_failure_of(rows) is None
    down = [{**r, "infra_error": "LLM endpoint unreachable", "outcome": "error"} for r in rows]
    assert infrastructure_failure_of(down) == (
        f"all {len(rows)} runs failed on infrastructure, not on the agent: "
        "LLM endpoint unreachable"
    )
    assert summary_of(down)["infra_errors"] == len(rows)
    assert summary_of(down)["levels"]["error"] == len(rows)


def test_a_task_batch_keeps_to_the_host_gates_it_is_given() -> None:
    """Three live runs call one API whose starts must be 5 s apart. With the caller's
    gates (on a virtual clock) the spacing is kept on those gates: the clock moves 10 s and
    no real time passes; a probe run or an MCP server holding the same gates would wait
    their turn behind these runs."""
    llm = ScriptedLLM([], responder=two_turns)
    llm.start()
    clock = VirtualClock(0.0)
    gates = HostGates(clock)
    os.environ["RUN_EXECUTORS_TEST_KEY"] = "k"
    try:
        with catfact_on_loopback(min_interval_s=5.0) as api:
            t0 = time.monotonic()
            result = realprobe.run_tasks(
                ["pet_newsletter"], agent="openai", base_url=llm.base_url, model="scripted-1",
                api_key_env="RUN_EXECUTORS_TEST_KEY", prompt="optimal", mode="live", repeat=3,
                catalog=api.catalog, gates=gates,
            )
            took = time.monotonic() - t0
    finally:
        os.environ.pop("RUN_EXECUTORS_TEST_KEY", None)
        llm.stop()
    starts, local = api.starts, api.api
    assert len(result.runs) == 3 and len(starts) == 3
    assert all(r.row["outcome"] != "error" for r in result.runs)
    assert clock.now() == pytest.approx(10.0)  # two waits of 5 s, on the shared gates
    assert took < 5.0  # a private gate set would have slept them for real
    # the gates remember the host: the next user of them waits its turn
    waits: list[float] = []

    async def next_turn() -> None:
        async with gates.turn(local, budget_s=30.0) as waited:
            waits.append(waited)

    asyncio.run(next_turn())
    assert waits == [pytest.approx(5.0)]
