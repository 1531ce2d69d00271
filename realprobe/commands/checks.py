"""Every option's value through the table of parameter types by name, and the group that
applies it.

One table (`realprobe.ranges`, which the Python front door parses its keywords by too)
instead of a callback on each option: a new command with a `--timeout`, a `--since` or a
`--profile FILE` takes the same grammar and the same checks without anyone remembering
to. An option of a name the table knows gets its text parsed by that name's kind (`2s` is
two seconds, `20261101` a date, a FIFO given as a file refused without opening it); a value
out of range is a RealprobeError naming the flag, raised before the command body runs
(`realprobe` prints it on one line and exits 2); a file that cannot be written or read
(OSError) becomes one too.

The values are taken through click's `Parameter.process_value` (click's public API): text,
a path, a flag or a value the table parses needs nothing of typer's coercion, which builds a
pydantic adapter (20-30 ms of a command's start) only for what still needs converting.
"""

from __future__ import annotations

import enum
import functools
import inspect
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typer.core import TyperGroup

# realprobe.ranges, realprobe.errors and commands.common load when a verb is built or runs,
# not for `realprobe --help`


def _speaking_flags(command: Any) -> None:
    """Library errors name parameters; raised inside this command, they name its flags."""
    body = getattr(command, "callback", None)
    if body is None or getattr(body, "__realprobe_flags__", False):
        return
    flags = {o for p in getattr(command, "params", []) for o in getattr(p, "opts", [])}

    @functools.wraps(body)
    def run(*args: Any, **kwargs: Any) -> Any:
        from realprobe.commands.common import in_cli_terms
        from realprobe.errors import RealprobeError

        try:
            return body(*args, **kwargs)
        except RealprobeError as exc:
            in_cli_terms(exc, flags)
            raise

    run.__realprobe_flags__ = True  # type: ignore[attr-defined]
    command.callback = run


def declared_types(command: Any) -> dict[str, Any]:
    """Parameter name -> the bare type its command function declares (`float` for
    `float | None`, `Path` for `list[Path] | None`)."""
    body = getattr(command, "callback", None)
    if body is None:
        return {}
    try:
        hints = typing.get_type_hints(inspect.unwrap(body))
    except Exception:  # an annotation that cannot be resolved: typer's coercion decides
        return {}
    return {name: _bare(hint) for name, hint in hints.items()}


def _bare(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        return _bare(args[0])
    if typing.get_origin(hint) in (list, tuple) and args:
        return _bare(args[0])
    return hint


def _processor(param: Any, bare: Any) -> Callable[[Any, Any], Any]:
    """`param.process_value` through the table (or without typer's coercion where there is
    nothing to convert); typer's own for the rest."""
    original = param.process_value
    kind_of = param.name

    def finish(ctx: Any, value: Any) -> Any:
        return param.callback(ctx, param, value) if param.callback is not None else value

    def process_value(ctx: Any, value: Any) -> Any:
        multi = bool(param.multiple or param.nargs != 1)
        if value is None or (multi and value == ()):
            return original(ctx, value) if param.required or multi else finish(ctx, None)
        if isinstance(value, bool) and getattr(param, "is_flag", False):
            return finish(ctx, value)  # (`--help` loads nothing more)
        from realprobe.ranges import PARAMS

        items = list(value) if multi and isinstance(value, list | tuple) else [value]
        # text, or a declared default (taken as the front door takes it)
        if kind_of in PARAMS and (not multi or all(isinstance(v, str) for v in items)):
            out = [_parsed(param, bare, v) for v in items]
            return finish(ctx, out if multi else out[0])
        if not multi and isinstance(value, str):
            if bare is str:
                return finish(ctx, value)
            if bare is Path and value not in ("", "-"):
                return finish(ctx, Path(value))
            if isinstance(bare, type) and issubclass(bare, enum.Enum):
                try:
                    return finish(ctx, bare(value))
                except ValueError:
                    pass  # typer's coercion says which values there are
        return original(ctx, value)

    process_value.__realprobe_table__ = True  # type: ignore[attr-defined]
    return process_value


def _parsed(param: Any, bare: Any, value: Any) -> Any:
    from realprobe.errors import RealprobeError
    from realprobe.ranges import Refused, parse

    try:
        parsed = parse(param.name, value)
    except Refused as exc:
        flag = max(param.opts, key=len) if param.opts else param.name.upper()
        raise RealprobeError(exc.line(flag, value)) from None
    # as the command declares it: text stays the text it was (the library reads it by the
    # same grammar), a path becomes a Path, a number the parsed number
    if not isinstance(value, str) or bare not in (str, Path):
        return parsed
    return value if bare is str else Path(value)


def table_params(params: Any, command: Any = None) -> None:
    """Have each of `params` take its value through the table (once)."""
    bare = declared_types(command) if command is not None else {}
    for param in params or []:
        if param is None or getattr(param.process_value, "__realprobe_table__", False):
            continue
        param.process_value = _processor(param, bare.get(param.name))


def apply_checks(command: Any) -> None:
    """Parse every option of `command` and its subcommands by the table (once), and have
    library errors raised in their bodies name the flags."""
    for sub in (getattr(command, "commands", None) or {}).values():
        apply_checks(sub)
    table_params(getattr(command, "params", []), command)
    _speaking_flags(command)
    _tabled_help(command)


def _tabled_help(command: Any) -> None:
    """The command's `--help` (made when click first asks) through the table too."""
    made = command.get_help_option
    if getattr(made, "__realprobe_table__", False):
        return

    def get_help_option(ctx: Any) -> Any:
        opt = made(ctx)
        table_params([opt])
        return opt

    get_help_option.__realprobe_table__ = True  # type: ignore[attr-defined]
    command.get_help_option = get_help_option


class CheckedGroup(TyperGroup):
    """The `realprobe` group: the table on every option, and an OSError (a file that cannot
    be read or written) turned into a RealprobeError, which `realprobe` prints on one line
    with exit 2 (in process, e.g. under CliRunner, it is the exception raised)."""

    def invoke(self, ctx: Any) -> Any:
        apply_checks(self)
        try:
            return super().invoke(ctx)
        except OSError as exc:
            from realprobe.errors import RealprobeError

            where = f"{exc.filename}: " if exc.filename else ""
            raise RealprobeError(f"{where}{exc.strerror or exc}") from exc
