"""Output that never misleads at 80 columns: the demo's prose and `results`' tables fit an
80-column terminal even in a pipe, and no name (task, target path) is cut."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len


def _cli(cwd: Path, *args: str) -> str:
    res = subprocess.run([sys.executable, "-m", "realprobe.cli", *args], capture_output=True,
                         text=True, timeout=300, cwd=cwd, env={**os.environ, "COLUMNS": "80"})
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    here = tmp_path_factory.mktemp("fh3")
    return here / "demo", _cli(here, "demo", "--rounds", "2", "--output", "demo")


def test_the_demo_fits_80_columns_in_a_pipe(demo: tuple[Path, str]) -> None:
    _, text = demo
    lines = text.splitlines()
    assert len(lines) < 100
    wide = [ln for ln in lines if cell_len(ln) > 80]
    assert not wide, wide
    assert "How to read:" in text


def test_results_cuts_no_name_and_fits_80_columns(demo: tuple[Path, str],
                                                  tmp_path: Path) -> None:
    folder, _ = demo
    db = folder / "demo.db"
    text = _cli(tmp_path, "results", "--db", str(db))  # from another folder
    wide = [ln for ln in text.splitlines() if cell_len(ln) > 80]
    assert not wide, wide
    words = set(text.replace("│", " ").replace("┃", " ").split())
    conn = sqlite3.connect(db)
    tasks = {r[0] for r in conn.execute("select distinct task from task_runs")}
    conn.close()
    assert "Task outcomes" in text and tasks
    # the shipped cassettes' absolute folder is shown whole, relative to the shipped data
    assert "replay:<realprobe>/cassettes/tasks" in words, text
