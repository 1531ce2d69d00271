"""Range checks every command's options get by name, and the group that applies them.

One table (`realprobe.ranges`, which the Python front door checks its keywords by too)
instead of a callback on each option: a new command with a `--timeout` or a
`--port` is checked the same way without anyone remembering to. A value out of range is a
RealprobeError naming the flag, raised before the command body runs (`realprobe` prints it on
one line and exits 2); a file that cannot be written or read (OSError) becomes one too.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typer.core import TyperGroup

# realprobe.ranges, realprobe.errors and commands.common load when a verb is built or runs,
# not for `realprobe --help`


def _callback(name: str, previous: Callable[..., Any] | None) -> Callable[..., Any]:
    def callback(ctx: Any, param: Any, value: Any) -> Any:
        if previous is not None:
            value = previous(ctx, param, value)
        if value is not None:
            from realprobe.errors import RealprobeError
            from realprobe.ranges import problem

            what = problem(name, value)
            if what:
                flag = max(param.opts, key=len)
                raise RealprobeError(f"{flag} {what} (got {value})")
        return value

    callback.__realprobe_check__ = True  # type: ignore[attr-defined]
    return callback


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


class _Deferred:
    """typer's coercion of one parameter (a pydantic adapter, whose module alone costs a
    command 20-30 ms of start-up), built only for a value it must convert: a missing value,
    text for a text option and a path for a `Path` one come out as typer gives them, by typer's
    own path checks; anything else (or anything those refuse) goes to typer's coercion."""

    def __init__(self, param: Any) -> None:
        self.param = param

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        desc = param.type_descriptor
        info, ann = desc.parameter_info, desc.annotation
        if info.parser is None and desc.file_annotation is None and not (
                param.multiple or param.nargs != 1):
            if value is None:
                return None
            if type(value) is str and ann is str:
                return value
            if type(value) is str and value not in ("", "-") and ann is Path:
                with contextlib.suppress(Exception):  # typer's coercion says why
                    from typer._param_types import coerce_cli_path

                    return coerce_cli_path(Path(value), info, path_type=Path, param=param,
                                           ctx=ctx)
        from typer._coercion import build_runtime_param

        param._runtime_param = real = build_runtime_param(desc)
        return real.coerce(value, param=param, ctx=ctx)


def _defer_coercion(command: Any) -> None:
    for param in [*getattr(command, "params", []), getattr(command, "_help_option", None)]:
        if getattr(param, "_runtime_param", False) is None and hasattr(param, "type_descriptor"):
            param._runtime_param = _Deferred(param)


def apply_checks(command: Any) -> None:
    """Attach the range checks to every option of `command` and its subcommands (once), and
    have library errors raised in their bodies name the flags."""
    from realprobe.ranges import CHECKS

    for sub in (getattr(command, "commands", None) or {}).values():
        apply_checks(sub)
    _speaking_flags(command)
    _defer_coercion(command)
    for param in getattr(command, "params", []):
        if param.name in CHECKS and not getattr(param.callback, "__realprobe_check__", False):
            param.callback = _callback(param.name, param.callback)


class CheckedGroup(TyperGroup):
    """The `realprobe` group: range checks on every option, and an OSError (a file that
    cannot be read or written) turned into a RealprobeError, which `realprobe` prints on one
    line with exit 2 (in process, e.g. under CliRunner, it is the exception raised)."""

    def invoke(self, ctx: Any) -> Any:
        apply_checks(self)
        try:
            return super().invoke(ctx)
        except OSError as exc:
            from realprobe.errors import RealprobeError

            where = f"{exc.filename}: " if exc.filename else ""
            raise RealprobeError(f"{where}{exc.strerror or exc}") from exc
