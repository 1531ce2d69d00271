"""Completion of the names verbs take (tools, tasks, profiles) through the completion script
typer installs (`--install-completion` runs the command with `_REALPROBE_COMPLETE` set), and
help that reads plainly: arguments as `TOOL`/`SPEC...`, options in the right panel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def _script() -> str:
    beside = Path(sys.executable).parent / "realprobe"
    found = str(beside) if beside.exists() else shutil.which("realprobe")
    if found is None:
        pytest.skip("the realprobe console script is not installed")
    return found


def complete(*words: str) -> list[str]:
    """What bash is offered for the last of `words` (the script's own protocol)."""
    env = {**os.environ, "_REALPROBE_COMPLETE": "complete_bash",
           "COMP_WORDS": " ".join(["realprobe", *words]), "COMP_CWORD": str(len(words))}
    res = subprocess.run([_script()], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    return res.stdout.split()


def test_tool_names_complete() -> None:
    assert complete("call", "advice_r") == ["advice_random"]
    assert "jsonplaceholder_todos" in complete("call", "jsonplaceholder_")
    assert complete("call", "no_such_tool_") == []


def test_task_names_complete() -> None:
    assert complete("run", "quiz_") == ["quiz_night"]
    assert "star_wars_numbers" in complete("run", "quiz_night", "st")


def test_profile_names_complete() -> None:
    assert complete("call", "advice_random", "--profile", "ha") == ["harsh"]
    assert set(complete("probe", "--profile", "")) >= {"calm", "published", "harsh"}


def _help(*verb: str) -> str:
    res = subprocess.run([sys.executable, "-m", "realprobe.cli", *verb, "-h"],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "COLUMNS": "100"})
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_help_names_arguments_plainly_and_panels_hold_what_they_say() -> None:
    imp = _help("catalog", "import-openapi")
    assert "Usage: realprobe catalog import-openapi [OPTIONS] SPEC..." in imp
    assert "{spec}" not in imp and "  SPEC...  " in imp
    llm = imp.split("LLM agent:", 1)[1] if "LLM agent:" in imp else ""
    assert "--base-url" not in llm
    assert "--base-url URL" in imp.split("Output:", 1)[0]
    for verb, usage in ((("call",), "TOOL"), (("cassette", "inspect"), "FILE"),
                        (("catalog", "public-apis"), "[FILE]")):
        text = _help(*verb)
        assert f"[OPTIONS] {usage}" in text and "{" not in text.splitlines()[0], text
