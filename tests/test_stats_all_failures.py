"""A tool that never succeeded, alone in its rows: a few pairs after a failure and none after
a success leave its chain's rho unknown, and every reader still answers."""

from __future__ import annotations

from pathlib import Path

from cli_runner import invoke
from monitor_helpers import write_rows

import realprobe


def test_a_tool_that_only_failed_is_reported_not_a_crash(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    write_rows(db, "agify_age", "xxx")
    got = realprobe.stats(db)
    (tool,) = got.tools
    assert tool.success.successes == 0 and tool.success.n == 3
    for fmt in ("html", "json", "md"):
        res = invoke(["report", "--db", str(db), "--format", fmt, "-o", str(tmp_path / f"r.{fmt}")])
        assert res.exit_code == 0, res.output
    res = invoke(["stats", "--db", str(db)])
    assert res.exit_code in (0, 1) and "agify_age" in res.output, res.output
