"""The `realprobe` command. Thin: parses options and calls the rooms."""

from __future__ import annotations

import sys

import typer

from realprobe.commands import analysis, foundation, mcp, monitor, probes, replay, tasks
from realprobe.commands.checks import CheckedGroup
from realprobe.errors import RealprobeError

app = typer.Typer(
    name="realprobe",
    cls=CheckedGroup,
    help="Measure how real public web APIs behave; replay, simulate and score agents on them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# in the order a user meets them: tools, probing, analysis, cassettes, tasks, MCP
for room in (foundation, probes, analysis, replay, tasks, mcp, monitor):
    room.register(app)


def main() -> None:
    try:
        app()
    except RealprobeError as exc:
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
