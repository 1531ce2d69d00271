"""The README's first command: the main job runs offline and leaves its artefacts behind."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path


def test_demo_runs_offline_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    res = subprocess.run(
        [sys.executable, "-W", "default", "-m", "realprobe.cli", "demo", "--rounds", "2",
         "--output", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    for step in ("1/5", "2/5", "3/5", "4/5", "5/5"):
        assert step in res.stdout
    # the answer first, notes counted: no footnote line per tool, no library warning
    assert "Verdict at a 95% success threshold" in res.stdout
    assert not [ln for ln in res.stdout.splitlines() if ln.startswith(("† ", "‡ "))
                and " tool" not in ln.split(":")[0]]
    assert "Warning" not in res.stderr  # with warnings on (-W default)
    # the first step counts each failing code, naming its tools only when they are few
    # (its paragraph, wrapped at 80 columns)
    step = res.stdout.split("1/5", 1)[1].split("2/5", 1)[0].splitlines()[1:-1]
    first = " ".join(ln.strip() for ln in step)
    assert first.split(" · ")[0].endswith(" ok")
    for part in first.removesuffix(" (--explain names every tool)").split(" · ")[1:]:
        code, _, names = part.partition(": ")
        assert len(names.split(", ")) == int(code.split()[1]) <= 3 if names else \
            int(code.split()[1]) > 3, first
    # a column left out at 80 columns is pointed to where it is (the demo has no --json)
    hints = [ln for ln in " ".join(res.stdout.split("\n")).split("left out to fit:")[1:]]
    assert hints
    for hint in hints:
        assert "--json" not in hint.split(")")[0]
        # shown relative to the working folder the demo ran in
        assert "demo/report.html" in hint or "demo/demo.db" in hint
    db = sqlite3.connect(out / "demo.db")
    n_tools = db.execute("select count(distinct tool) from probes").fetchone()[0]
    n_rows = db.execute("select count(*) from probes").fetchone()[0]
    n_tasks = db.execute("select count(*) from task_runs").fetchone()[0]
    assert n_tools >= 25 and n_rows == 2 * n_tools
    assert n_tasks >= 10
    profile = json.loads((out / "profile.json").read_text())
    assert profile["format"] == "realprobe-profile/1" and len(profile["tools"]) == n_tools
    html = (out / "report.html").read_text()
    assert "<svg" in html or "data:image/png" in html
