"""`sandbox --db` counts calls to an upstream against their daily budget: without --upstream
there is nothing to count, and the door refuses the setting in one line instead of ignoring it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CLI = [str(Path(sys.executable).parent / "realprobe")]


def test_sandbox_db_without_upstream_is_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    out = subprocess.run([*CLI, "sandbox", "--db", str(db)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--upstream" in lines[0] and "--db" in lines[0]
    assert out.stdout == "" and not db.exists()  # nothing served, nothing written
