"""Range checks by parameter name: one table for every door.

The command line attaches them to the options of these names (`commands.checks`), and the
front door's functions check their keywords by the same table (`@checked`), so
`--timeout nan` and `timeout=float("nan")` are refused by one rule, in the same words, before
anything is opened, sent or written. None (not given) is never checked.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from realprobe.errors import BadArgument

P = ParamSpec("P")
R = TypeVar("R")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _whole(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _url(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(("http://", "https://")) and len(value) > 8


def _rule(ok: Callable[[Any], bool], what: str) -> Callable[[Any], str | None]:
    return lambda value: None if ok(value) else what


SECONDS = _rule(lambda v: _number(v) and v > 0, "must be positive (seconds)")
SECONDS_OR_ZERO = _rule(lambda v: _number(v) and v >= 0, "must be >= 0 (seconds)")
AT_LEAST_ONE = _rule(lambda v: _whole(v) and v >= 1, "must be at least 1")
PORT = _rule(lambda v: _whole(v) and 0 <= v <= 65535,
             "must be a port from 0 to 65535 (0 picks a free one)")
NON_NEGATIVE = _rule(lambda v: _number(v) and v >= 0, "must be a number >= 0")
UPSTREAM = _rule(lambda v: v == "live" or _url(v),
                 "must be live or an http(s) URL: expected a URL like http://127.0.0.1:8765, "
                 "or live")
URL = _rule(_url, "must be an http(s) URL: expected a URL like http://127.0.0.1:8765")
PROBABILITY = _rule(lambda v: _number(v) and 0 < v < 1, "must be between 0 and 1")

#: parameter (option) name -> its rule
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
    "threshold": _rule(lambda v: _number(v) and 0 < v <= 1, "must be a share in (0, 1]"),
    "sandbox": URL,
    "base_url": URL,
    "upstream": UPSTREAM,
}


def problem(name: str, value: Any) -> str | None:
    """What is wrong with `value` for the parameter `name` (None: nothing, or no rule)."""
    rule = CHECKS.get(name)
    return None if rule is None or value is None else rule(value)


def checked(fn: Callable[P, R]) -> Callable[P, R]:
    """Check `fn`'s parameters that have a rule, by name, before its body runs."""
    names = [n for n in inspect.signature(fn).parameters if n in CHECKS]
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        given = signature.bind_partial(*args, **kwargs).arguments
        for name in names:
            what = problem(name, given.get(name))
            if what:
                raise BadArgument(name, f"{name} {what} (got {given[name]!r})")
        return fn(*args, **kwargs)

    return run if names else fn


__all__ = ["CHECKS", "checked", "problem"]
