"""The `realprobe` command. Thin: parses options and calls the rooms."""

from __future__ import annotations

import sys

import typer

from realprobe.commands import foundation
from realprobe.commands import replay as replay_commands
from realprobe.commands import probes as probe_commands
from realprobe.commands import mcp as mcp_commands
from realprobe.commands import analysis as analysis_commands
from realprobe.commands import tasks as task_commands
from realprobe.errors import RealprobeError

app = typer.Typer(
    name="realprobe",
    help="Measure how real public web APIs behave; replay, simulate and score agents on them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

foundation.register(app)
replay_commands.register(app)
probe_commands.register(app)
mcp_commands.register(app)
analysis_commands.register(app)
task_commands.register(app)


def main() -> None:
    try:
        app()
    except RealprobeError as exc:
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
