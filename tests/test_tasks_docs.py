"""The offline commands in docs/tasks.md run as written (each with a throwaway --db)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from cli_runner import invoke

DOC = Path(__file__).resolve().parent.parent / "docs" / "tasks.md"


def offline_commands() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"### Try it offline\s*```bash\n(.*?)```", text, re.S)
    assert m, "docs/tasks.md lost its 'Try it offline' block"
    cmds = []
    for line in m.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            argv = shlex.split(line)
            assert argv[0] == "realprobe"
            cmds.append(argv[1:])
    return cmds


def test_the_offline_examples_run(tmp_path: Path, no_network: None) -> None:
    cmds = offline_commands()
    assert len(cmds) >= 4 and any("--json" in c for c in cmds)
    db = str(tmp_path / "docs.db")
    for argv in cmds:
        res = invoke([*argv, "--db", db])
        assert res.exit_code == 0, (argv, res.output, res.exception)
    out = invoke(["results", "--db", db, "--json"])
    summary = json.loads(out.output)
    assert {r["prompt"] for r in summary["by_prompt"]} == {"optimal", "flawed"}
    assert len(summary["by_flaw"]) == 7
