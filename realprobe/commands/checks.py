"""Range checks every command's options get by name, and the group that applies them.

One table instead of a callback on each option: a new command with a `--timeout` or a
`--port` is checked the same way without anyone remembering to. A value out of range is a
RealprobeError naming the flag, raised before the command body runs (`realprobe` prints it on
one line and exits 2); a file that cannot be written or read (OSError) becomes one too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from typer.core import TyperGroup

# realprobe.errors and commands.common load when a check fails or a command runs, not for --help


def _finite(value: float) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _check(ok: Callable[[Any], bool], what: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if ok(value) else what

    return check


SECONDS = _check(lambda v: _finite(v) and v > 0, "must be positive (seconds)")
SECONDS_OR_ZERO = _check(lambda v: _finite(v) and v >= 0, "must be >= 0 (seconds)")
AT_LEAST_ONE = _check(lambda v: v >= 1, "must be at least 1")
PORT = _check(lambda v: 0 <= v <= 65535, "must be a port from 0 to 65535 (0 picks a free one)")
NON_NEGATIVE = _check(lambda v: _finite(v) and v >= 0, "must be a number >= 0")
UPSTREAM = _check(
    lambda v: v == "live" or (isinstance(v, str) and v.startswith(("http://", "https://"))
                              and len(v) > 8),
    "must be live or an http(s) URL: expected a URL like http://127.0.0.1:8765, or live",
)
URL = _check(
    lambda v: isinstance(v, str) and v.startswith(("http://", "https://")) and len(v) > 8,
    "must be an http(s) URL: expected a URL like http://127.0.0.1:8765",
)
PROBABILITY = _check(lambda v: _finite(v) and 0 < v < 1, "must be between 0 and 1")

#: option (parameter) name -> its check; None values (option not given) are never checked
CHECKS: dict[str, Callable[[Any], str | None]] = {
    "timeout": SECONDS,
    "call_timeout": SECONDS,
    "llm_timeout": SECONDS,
    "lock_timeout": SECONDS_OR_ZERO,
    "jitter": SECONDS_OR_ZERO,
    "interval": SECONDS_OR_ZERO,
    "port": PORT,
    "rounds": AT_LEAST_ONE,
    "concurrency": AT_LEAST_ONE,
    "repeat": AT_LEAST_ONE,
    "max_runs": AT_LEAST_ONE,
    "max_turns": AT_LEAST_ONE,
    "latency_scale": NON_NEGATIVE,
    "min_success_change": NON_NEGATIVE,
    "min_latency_change": NON_NEGATIVE,
    "alpha": PROBABILITY,
    "sandbox": URL,
    "base_url": URL,
    "upstream": UPSTREAM,
}


def _callback(name: str, previous: Callable[..., Any] | None) -> Callable[..., Any]:
    check = CHECKS[name]

    def callback(ctx: Any, param: Any, value: Any) -> Any:
        if previous is not None:
            value = previous(ctx, param, value)
        if value is not None:
            problem = check(value)
            if problem:
                from realprobe.errors import RealprobeError

                flag = max(param.opts, key=len)
                raise RealprobeError(f"{flag} {problem} (got {value})")
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


def apply_checks(command: Any) -> None:
    """Attach the range checks to every option of `command` and its subcommands (once), and
    have library errors raised in their bodies name the flags."""
    for sub in (getattr(command, "commands", None) or {}).values():
        apply_checks(sub)
    _speaking_flags(command)
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
