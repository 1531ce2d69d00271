"""The one way tests reach the `realprobe` command in process.

Tests drive the command line as a user types it. Only this file knows where the command lives,
so a change to the CLI's plumbing touches one test file, not fifty:

- `invoke(args, **kwargs)`: click's test runner on the command group; returns click's `Result`
  (`exit_code`, `output`, `stdout`, `stderr`, `exception`). Keywords go to `CliRunner.invoke`
  (`input=`, `env=`, `catch_exceptions=`).
- `main(argv=None)`: the installed `realprobe` entry point itself (reads `sys.argv` when `argv`
  is None and exits with the command's code), for tests of what the console script does.
- `run(args)`: `main` in process with stdout and stderr caught; returns what a subprocess
  run of the command would (`returncode`, `stdout`, `stderr`), error lines and exit codes
  included, without starting an interpreter.
- `app` and `COMMANDS`: the command group and its table of verbs, for tests that walk every
  command.
"""

from __future__ import annotations

import io
import subprocess
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

from click.testing import Result
from typer.testing import CliRunner

from realprobe.cli import COMMANDS, app, main

__all__ = ["COMMANDS", "app", "invoke", "main", "run"]


def invoke(args: Sequence[str] | str, **kwargs: Any) -> Result:
    """Run `realprobe <args>` in process; the result holds the exit code and what was printed."""
    return CliRunner().invoke(app, args if isinstance(args, str) else list(args), **kwargs)


def run(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """`realprobe <args>` through the entry point, in process: its exit code and what it
    wrote to stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())
