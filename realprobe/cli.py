"""The `realprobe` command. Thin: parses options and calls the library.

Command modules load on demand: `realprobe --help` imports none of them, and
`realprobe <verb> --help` imports only the module that defines the verb (whose own imports of
numpy, httpx, matplotlib and the like wait inside the command bodies). Help is plain click
formatting (grouped in panels by `commands.help`), not rich's renderer, because that alone
costs more than the whole start-up budget; the commands' output still uses rich.

Exit codes, the same on every verb: 0 ok; 1 a finding (a failed call, a firing alert, drift
worse, a cassette with problems); 2 a usage error (a bad option, a missing or unreadable
file); 3 a runtime or infrastructure failure (nothing reachable, the LLM endpoint down, no
rows in the window); 130 interrupted (Ctrl-C). Every error is one line on stderr: `error: ...`.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, ClassVar

import typer

from realprobe.commands.checks import CheckedGroup, apply_checks
from realprobe.commands.help import (
    QuickHelpGroup,
    readable_help,
    renamed_flags,
    setting_flags,
)

EXIT_OK, EXIT_FINDING, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

#: verb -> (module under realprobe.commands, one-line help), in the order a user meets them:
#: tools, probing, analysis, cassettes, tasks, MCP, monitoring. A test checks them against
#: the commands.
COMMANDS: dict[str, tuple[str, str]] = {
    "catalog": ("catalog", "List the tool definitions; import OpenAPI descriptions; read the "
                              "public-apis list."),
    "call": ("foundation", "Call one tool and print its result, or its error code and message."),
    "sandbox": ("foundation", "Serve every catalogue API on loopback from real fixture bodies "
                              "(or recordings, or a proxied upstream), with injected faults and "
                              "toxics; /_admin changes them at runtime."),
    "call-all": ("foundation", "Call every tool once (its first example), all APIs at once, and "
                               "print a table."),
    "demo": ("foundation", "The main job, offline: sandbox, probes, statistics, profile, report "
                           "and replayed tasks."),
    "probe": ("probes", "Call each chosen tool N times, politely, and store one row per call."),
    "schedule": ("probes", "Run probe rounds on a schedule (--every 30m runs its first round at "
                           "once; --cron waits for its first fire time)."),
    "stats": ("analysis", "Per tool: success rate with a 95% interval, error mix, latency fit, "
                          "bursts, variability."),
    "calibrate": ("analysis", "Turn stored probes into a simulator profile, or a ResiliBench / "
                              "ReliabilityBench view."),
    "drift": ("analysis", "Which tools changed between two windows: success, latency, error mix "
                          "(corrected)."),
    "report": ("analysis", "A self-contained HTML, Markdown or JSON report of the stored probes."),
    "history": ("history", "Import what uptime monitors already recorded (Upptime, Uptime "
                           "Kuma, Gatus, blackbox via Prometheus, Statuspage incidents)."),
    "cassette": ("replay", "Cassettes (HTTP and MCP sessions): inspect, verify, scrub, import, "
                           "recover, record a round."),
    "run": ("tasks", "Run real-world tasks under an agent, score them, and store the runs "
                     "(task_runs, task_steps)."),
    "results": ("tasks", "Task results like the paper's Table 5: full / partial / failure per "
                         "agent and prompt type, flaws, pass^k."),
    "sweep": ("sweep", "Run a sweep into one database, with progress and an ETA; --resume after "
                       "a kill."),
    "mcp": ("mcp", "Serve the catalogue tools over the Model Context Protocol (stdio or "
                   "streamable HTTP); `mcp proxy` puts realprobe in front of any MCP server, "
                   "`mcp replay` serves a recorded session."),
    "exporter": ("monitor", "Serve Prometheus metrics from the probe database (and /probe, "
                            "/status)."),
    "alert": ("monitor", "Alert rules over the probe database."),
    "merge": ("monitor", "Merge probe databases from several vantage points into one "
                         "(idempotent)."),
}


def command_group(module_name: str, verb: str | None = None) -> Any:
    """The click group holding the verbs that `realprobe.commands.<module_name>` registers;
    with `verb`, only that one is built (building a verb's parameters is most of what a
    help screen costs, so the module's other verbs are left alone)."""
    module = importlib.import_module(f"realprobe.commands.{module_name}")
    sub = typer.Typer(rich_markup_mode=None, add_completion=False)
    module.register(sub)
    if verb is not None:
        commands = [c for c in sub.registered_commands if c.name == verb]
        groups = [g for g in sub.registered_groups if g.name == verb]
        if commands or groups:
            sub.registered_commands, sub.registered_groups = commands, groups
    return typer.main.get_group(sub)


#: every command's help flags
HELP_NAMES = ["-h", "--help"]


class LazyGroup(QuickHelpGroup, CheckedGroup):
    """Lists the verbs from `COMMANDS` and imports a verb's module only when it is invoked;
    every verb gets the range checks of `commands.checks` on its options."""

    _groups: ClassVar[dict[str, Any]] = {}  # verb -> the group that holds it

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        if cmd_name not in self._groups:
            self._groups[cmd_name] = command_group(entry[0], cmd_name)
        command = self._groups[cmd_name].get_command(ctx, cmd_name)
        if command is not None:
            apply_checks(command)
            # made now, with the program's names whatever context asks (click keeps the
            # first it makes: one from a bare context would know only --help)
            command.get_help_option(typer.Context(command, help_option_names=HELP_NAMES))
            readable_help(command)
        return command

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        args = renamed_flags(args)
        if any(a == "--set" or a.startswith("--set=") for a in args):
            args = setting_flags(args, self._invoked(ctx, args))
        return super().parse_args(ctx, args)

    def _invoked(self, ctx: Any, args: list[str]) -> Any:
        """The command `args` invoke: the verb, or the verb's subcommand (`mcp proxy`)."""
        words = [a for a in args if not a.startswith("-")]
        command = self.get_command(ctx, words[0]) if words else None
        if command is None:
            return self
        if hasattr(command, "list_commands"):
            subs = set(command.list_commands(ctx))
            sub = next((w for w in words[1:] if w in subs), None)
            if sub is not None:
                apply_checks(command)
                return command.get_command(ctx, sub)
        return command

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in COMMANDS.items()])


app = typer.Typer(
    name="realprobe",
    cls=LazyGroup,
    invoke_without_command=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": HELP_NAMES},
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        sys.stdout.write(f"realprobe {version('realprobe')}\n")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Measure how real public web APIs behave; replay, simulate and score agents on them.

    Exit codes: 0 ok, 1 a finding (failed call, firing alert, drift worse), 2 usage error,
    3 runtime failure (nothing reachable, LLM endpoint down, no rows), 130 interrupted."""
    if ctx.invoked_subcommand is None:  # bare `realprobe`: the help, and success
        sys.stdout.write(ctx.get_help() + "\n")
        raise typer.Exit(EXIT_OK)


def click_errors() -> tuple[type[Exception], type[Exception]]:
    """click's UsageError and ClickException, whichever click typer runs on (older typers
    use the click package, newer ones carry a copy of their own): the bases of typer's
    public BadParameter, so no private module of either is named."""
    bases = {c.__name__: c for c in typer.BadParameter.__mro__}
    return bases["UsageError"], bases["ClickException"]


def exit_code(exc: BaseException) -> int:
    """The exit code of an error that ended a command (see the module docstring)."""
    from realprobe.errors import Unavailable

    if isinstance(exc, Unavailable):
        return EXIT_UNAVAILABLE
    if isinstance(exc, KeyboardInterrupt | typer.Abort):
        return EXIT_INTERRUPTED
    return EXIT_USAGE


def error_line(exc: BaseException) -> str:
    """One line for an error: `error: ...` (click's usage errors included, with a pointer to
    the verb's --help instead of the whole usage block)."""
    from realprobe.commands.common import in_cli_terms
    from realprobe.errors import RealprobeError

    usage, click_error = click_errors()
    if isinstance(exc, RealprobeError):
        return f"error: {in_cli_terms(exc)}"
    if isinstance(exc, usage):
        msg = exc.format_message().rstrip(".")  # type: ignore[attr-defined]
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "realprobe"
        return f"error: {msg[:1].lower() + msg[1:]} (see `{where} --help`)"
    if isinstance(exc, click_error):
        return f"error: {exc.format_message()}"  # type: ignore[attr-defined]
    return "error: interrupted"


def _realprobe_error() -> type[Exception]:
    """RealprobeError, imported when an error needs it (an except clause's classes are looked
    up only when an exception reaches it): `realprobe --help` never loads realprobe.errors."""
    from realprobe.errors import RealprobeError

    return RealprobeError


def main(argv: list[str] | None = None) -> None:
    """`realprobe`: run the command, then exit with the code of the module docstring."""
    import warnings

    # numpy's and scipy's warnings (a RuntimeWarning from an optimiser step, a degenerate
    # fit) are for library users; the commands say what matters about the numbers themselves
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    warnings.filterwarnings("ignore", module=r"(numpy|scipy)(\.|$)")
    try:
        code = app(args=argv, prog_name="realprobe", standalone_mode=False)
    except (_realprobe_error(), click_errors()[1], typer.Abort, KeyboardInterrupt) as exc:
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            sys.stdout.write(ctx.get_help() + "\n")  # a bare group: its help, and success
            sys.exit(EXIT_OK if hasattr(ctx.command, "commands") else EXIT_USAGE)
        sys.stderr.write(error_line(exc) + "\n")
        sys.exit(exit_code(exc))
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def run() -> None:
    """The `realprobe` program: `main`, in the program's own process (`commands.OWN_PROCESS`:
    a one-shot command may set the process up for itself, `commands.common.one_shot`)."""
    import realprobe.commands

    realprobe.commands.OWN_PROCESS = True
    main()


if __name__ == "__main__":
    run()
