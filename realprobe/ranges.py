"""Parameter types by name: one table for every door, and the one grammar of durations and
times.

Every CLI option and front-door keyword of a name in `PARAMS` is parsed and checked by that
name's `Kind`: the command line hands it the option's text (`commands.checks`), the front
door's functions hand it their keywords (`@checked`). So `--timeout 2s` and `timeout="2s"`
are two seconds, `--timeout nan` and `timeout=float("nan")` are refused in the same words,
and a FIFO given as `--profile` is refused in one line, before anything is opened, sent or
written. None (not given) is never looked at. Where calls go (`sandbox=`, `mode=`, ...) is
not here: that is the one target check, `TransportOptions.normalised`.

Durations: parts from `ms` to `w` (`500ms`, `90s`, `1m30s`, `2h`, `1w`) or plain seconds.
Times: an ISO date or datetime (naive means UTC), `YYYYMMDD`, `now`, or an age (a duration
ago: `7d`). Windows: `START..END` of two times. Digits are ASCII digits.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from realprobe.errors import BadArgument, RealprobeError

P = ParamSpec("P")
R = TypeVar("R")

# -- durations and times ----------------------------------------------------------------

#: one part of a duration: a number and its unit (`1h30m` is two parts)
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d|w)")
_PLAIN = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e[+-]?[0-9]+)?")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
DURATION_FORMS = "500ms, 90s, 1m30s, 2h, 1d, 1w, or plain seconds"
#: the longest duration anything takes (a year): past it a number is a mistake
MAX_DURATION_S = 366 * 86400.0
#: times from 1970 up to the year 9999
_LAST_TIME = datetime(9999, 12, 31, tzinfo=UTC).timestamp()


def _seconds(text: str) -> float | None:
    """Seconds from a duration (parts from `ms` to `w`, as in `1h30m`, or plain seconds);
    None when `text` is not one (ASCII digits only)."""
    raw = text.strip().lower().replace(" ", "")
    if not raw or not raw.isascii():
        return None
    if _PLAIN.fullmatch(raw):
        return float(raw)
    pos, seconds = 0, 0.0
    for m in _PART.finditer(raw):
        if m.start() != pos:
            return None
        seconds += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    return seconds if pos == len(raw) else None


def _number_seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf


def parse_duration(text: str | float, what: str = "duration") -> float:
    """Seconds from a duration (a number is seconds): the one grammar of every duration a
    user writes (flags, keywords, rule files), as the `duration` kind below takes it:
    positive, finite, at most a year. Refused in the words a flag's value is."""
    try:
        return float(SECONDS.parse(text))
    except Refused as exc:
        raise RealprobeError(exc.line(what, text)) from None


def parse_time(text: str | float, now: float | None = None) -> float:
    """Epoch seconds from an ISO date/datetime (naive means UTC), an 8-digit date
    (`20261101`), `now`, or an age (a duration: `7d`, `1h30m`, `500ms` ago); a number is
    epoch seconds, and an 8-digit whole number a date too."""
    now = datetime.now(UTC).timestamp() if now is None else now
    if not isinstance(text, str):
        seconds = _number_seconds(text)
        if seconds is not None and isinstance(text, int) and 10_000_000 <= text <= 99_999_999:
            return parse_time(str(text), now)
        return _in_range(seconds, text)
    s = text.strip()
    if s.lower() == "now":
        return now
    if not s.isascii():
        raise RealprobeError(f"time {text!r}: expected ASCII digits")
    if re.fullmatch(r"[0-9]{8}", s):  # a date, never an age
        try:
            return datetime.strptime(s, "%Y%m%d").replace(tzinfo=UTC).timestamp()
        except ValueError:
            raise RealprobeError(f"time {text!r}: not a date (YYYYMMDD)") from None
    age = _seconds(s)
    if age is not None:
        return _in_range(now - age, text)
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise RealprobeError(
            f"time {text!r}: expected an ISO date or datetime (2026-11-01, 2026-11-01T02:00Z, "
            f"20261101), `now`, or an age ({DURATION_FORMS})"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def _in_range(seconds: float | None, given: Any) -> float:
    if seconds is None or not 0 <= seconds <= _LAST_TIME:
        raise RealprobeError(f"time {str(given)[:40]!r}: not a time between 1970 and 9999")
    return seconds


def parse_window(text: str, now: float | None = None) -> tuple[float | None, float | None]:
    """`T1..T2` (either end may be empty: open) as epoch seconds; checks T1 < T2."""
    if ".." not in text:
        raise RealprobeError(
            f"window {text!r}: expected START..END, e.g. 14d..7d or 2026-11-01..now"
        )
    a, _, b = text.partition("..")
    start = parse_time(a, now) if a.strip() else None
    end = parse_time(b, now) if b.strip() else None
    if start is not None and end is not None and start >= end:
        raise RealprobeError(f"window {text!r}: the start is not before the end")
    return start, end


# -- kinds -------------------------------------------------------------------------------


class Refused(ValueError):
    """What is wrong with a value: the words after the parameter's name, or (`whole`) a
    line of its own that names the value already (a file's refusal names the file)."""

    def __init__(self, what: str, whole: bool = False, quoted: bool = False) -> None:
        super().__init__(what)
        self.whole, self.quoted = whole, quoted

    def line(self, name: str, value: Any) -> str:
        """The one line a door says (`name` as the door spells it): `--rounds must be at
        least 1 (got 0)`, `--every 'soon': expected ...`, or `--profile: <the file's line>`."""
        if self.whole:
            return f"{name}: {self}"
        if self.quoted:
            return f"{name} {str(value)[:60]!r}: {self}"
        return f"{name} {self} (got {value!r})"


@dataclass(frozen=True)
class Kind:
    """What a parameter of some names holds. `parse` takes what a user gave (the option's
    text, or a keyword's value) and returns what the code takes, or raises Refused;
    `reader` names the function that reads a value of this kind (`module:function`), for
    the kinds that are files."""

    name: str
    parse: Callable[[Any], Any]
    reader: str | None = None


def _ascii_number(value: Any, whole: bool) -> Any:
    """A number from a keyword's value or an option's text (ASCII digits only), else None."""
    if isinstance(value, str):
        text = value.strip()
        if not text.isascii() or not re.fullmatch(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)"
                                                  r"(?:[eE][+-]?[0-9]+)?", text):
            return None
        try:
            return int(text) if whole else float(text)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int if whole else int | float):
        return None
    return value


def _numbers(what: str, ok: Callable[[float], bool], whole: bool = False
             ) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        number = _ascii_number(value, whole)
        try:
            good = number is not None and math.isfinite(number) and ok(number)
        except OverflowError:
            good = False
        if not good:
            raise Refused(what)
        return number

    return parse


def _duration(zero: bool) -> Callable[[Any], Any]:
    """A duration: text that is none is named with its value (`--every 'soon': expected
    ...`); a number out of range says the range (`--timeout must be positive`)."""
    low = ">= 0" if zero else "positive"
    forms = f"a duration like {DURATION_FORMS}"

    def parse(value: Any) -> float:
        if isinstance(value, str):
            raw = value.strip()
            seconds = _seconds(raw.removeprefix("-"))
            seconds = -seconds if seconds is not None and raw.startswith("-") else seconds
        else:
            seconds = _number_seconds(value)
        if seconds is None or math.isnan(seconds):
            raise Refused(f"expected {forms} (at most 366d)", quoted=True)
        if seconds < 0 or (seconds == 0 and not zero):
            raise Refused(f"must be {low} (2s, 1m30s, 500ms, or plain seconds)")
        if not seconds <= MAX_DURATION_S:
            raise Refused("must be at most 366d (a year)")
        return seconds

    return parse


def _time(value: Any) -> Any:
    """A time, checked by the one grammar; given on as it came (the reader parses it)."""
    try:
        parse_time(value)
    except RealprobeError as exc:
        raise Refused(_not_a("time", exc), quoted=True) from None
    return value


def _window(value: Any) -> Any:
    if isinstance(value, tuple | list):
        if len(value) != 2:
            raise Refused("not a window: expected START..END or a (start, end) pair",
                          quoted=True)
        for end in value:
            if end is not None:
                _time(end)
        return value
    if not isinstance(value, str):
        raise Refused("not a window: expected START..END, e.g. 14d..7d or 2026-11-01..now",
                      quoted=True)
    try:
        parse_window(value)
    except RealprobeError as exc:
        raise Refused(_not_a("window", exc), quoted=True) from None
    return value


def _not_a(what: str, exc: RealprobeError) -> str:
    """`time '...': expected ...` as `not a time: expected ...` (the door says the value)."""
    text = str(exc)
    text = text.split(": ", 1)[1] if ": " in text else text
    return text if text.startswith("not a") else f"not a {what}: {text}"


def _url(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(("http://", "https://")) and len(value) > 8


def _text(ok: Callable[[Any], bool], what: str) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        if not ok(value):
            raise Refused(what)
        return value

    return parse


def _file(what: str, *, missing_ok: bool = False, directory: bool = False,
          names: bool = False, urls: bool = False, database: bool = False,
          document: bool = False) -> Callable[[Any], Any]:
    """A path the command will read (or create, with `missing_ok`), looked at by the input
    limits (`limits.check_input`): a FIFO, a device, a folder where a file is wanted, a
    symlink loop or a file over the size cap is refused in one line without opening it.
    With `names`, a value that names nothing on disk is a name (`--profile calm`); with
    `urls`, an http(s) URL passes to the reader. With `document`, a JSON, YAML or TOML
    file is read whole by the one limited reader (`limits.read_document`: a 5,000-deep or
    binary file is refused here, before the command has made anything). A value that is not
    a path (a Profile, a Catalog, a Cassette) is the library's to take."""

    def parse(value: Any) -> Any:
        from realprobe.limits import check_input, input_cap, max_bytes, read_document

        if isinstance(value, list | tuple):
            return type(value)(parse(v) for v in value)
        if not isinstance(value, str | os.PathLike):
            return value  # a value of the library's own (a Profile, a Catalog, a Cassette)
        text = os.fspath(value)
        if urls and isinstance(text, str) and text.startswith(("http://", "https://")):
            return value
        if names and not _on_disk(text) and "/" not in str(text):
            return value
        cap = None if database else max(max_bytes(), input_cap())
        try:
            path = check_input(text, what, directory=directory, missing_ok=missing_ok, cap=cap)
            if document and path.suffix.lower() in DOCUMENT_SUFFIXES and path.is_file():
                read_document(path, what)
        except RealprobeError as exc:
            raise Refused(str(exc), whole=True) from None
        return value

    return parse


def _on_disk(text: Any) -> bool:
    try:
        os.lstat(text)
    except (OSError, ValueError):
        return False
    return True


def _output(value: Any) -> Any:
    """A path the command writes: what is already there must be a file or a folder (never
    a FIFO, a device or a symlink loop: writing there would block or go nowhere)."""
    if isinstance(value, list | tuple):
        return type(value)(_output(v) for v in value)
    if not isinstance(value, str | os.PathLike) or not os.fspath(value):
        raise Refused("must be a path")
    p = Path(value)
    if not _on_disk(p):
        return value
    try:
        st = p.stat()
    except OSError as exc:
        raise Refused(f"{p}: cannot be written ({exc.strerror or exc})", whole=True) from None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise Refused(f"{p}: not a regular file or folder (a device or pipe)", whole=True)
    return value


SECONDS = Kind("duration", _duration(zero=False))
SECONDS_OR_ZERO = Kind("duration", _duration(zero=True))
TIME = Kind("time", _time)
WINDOW = Kind("window", _window)
COUNT = Kind("count", _numbers("must be at least 1 (a whole number up to 1,000,000)",
                               lambda v: 1 <= v <= 1_000_000, whole=True))
PORT = Kind("port", _numbers("must be a port from 0 to 65535 (0 picks a free one)",
                             lambda v: 0 <= v <= 65535, whole=True))
NON_NEGATIVE = Kind("number", _numbers("must be a number >= 0", lambda v: v >= 0))
PROBABILITY = Kind("share", _numbers("must be between 0 and 1", lambda v: 0 < v < 1))
SHARE = Kind("share", _numbers("must be a share in (0, 1]", lambda v: 0 < v <= 1))
URL = Kind("url", _text(_url, "must be an http(s) URL: expected a URL like "
                              "http://127.0.0.1:8765"))
UPSTREAM = Kind("url", _text(lambda v: v == "live" or _url(v),
                             "must be live or an http(s) URL: expected a URL like "
                             "http://127.0.0.1:8765, or live"))
DOCUMENT_SUFFIXES = (".json", ".yaml", ".yml", ".toml")
FILE = Kind("file", _file("file"), "realprobe.limits:read_input")
def _document(what: str, names: bool = False) -> Kind:
    """A JSON, YAML or TOML file read whole (with `names`, or the name of a shipped one)."""
    return Kind("file", _file(what, names=names, document=True), "realprobe.limits:read_document")
SPEC = Kind("file", _file("description", urls=True), "realprobe.limits:read_text_input")
FOLDER = Kind("folder", _file("folder", directory=True))
DATABASE = Kind("database", _file("database", missing_ok=True, database=True),
                "realprobe.store:open_db")
OUTPUT = Kind("output", _output, "realprobe.outputs:write_output")
#: a cassette: looked at here, read by the cassettes' one format-detecting loader (a
#: cassette to record may not exist yet; a folder holds one cassette per task or session)
CASSETTE = Kind("cassette", _file("cassette", missing_ok=True, directory=True),
                "realprobe.cassettes.importers:load_any")
CASSETTE_SOURCE = Kind("cassette", _file("cassette", directory=True),
                       "realprobe.cassettes.importers:load_any")

#: parameter (option and keyword) name -> its kind
PARAMS: dict[str, Kind] = {
    # durations: seconds, or the duration grammar
    "timeout": SECONDS,
    "timeout_s": SECONDS,
    "call_timeout": SECONDS,
    "llm_timeout": SECONDS,
    "session_idle_timeout": SECONDS,
    "deadline": SECONDS,
    "every": SECONDS,
    "period": SECONDS,
    "window": SECONDS,
    "lock_timeout": SECONDS_OR_ZERO,
    "jitter": SECONDS_OR_ZERO,
    "interval": SECONDS_OR_ZERO,
    "mcp_interval": SECONDS_OR_ZERO,
    # times and windows
    "since": TIME,
    "until": TIME,
    "baseline": WINDOW,
    "current": WINDOW,
    # numbers
    "port": PORT,
    "rounds": COUNT,
    "concurrency": COUNT,
    "repeat": COUNT,
    "max_runs": COUNT,
    "max_turns": COUNT,
    "max_sessions": COUNT,
    "latency_scale": NON_NEGATIVE,
    "min_success_change": NON_NEGATIVE,
    "min_latency_change": NON_NEGATIVE,
    "alpha": PROBABILITY,
    "threshold": SHARE,
    "reserve_for_schedule": Kind("share", _numbers("must be a share in [0, 1)",
                                                   lambda v: 0 <= v < 1)),
    "base_url": URL,
    "upstream": UPSTREAM,
    # files a user hands in
    "alerts": _document("alert rules file"),
    "rules": _document("alert rules file"),
    "prices": _document("price file"),
    "mcp_calls": _document("calls file"),
    "file": FILE,
    "spec": SPEC,
    "specs": SPEC,
    "profile": _document("profile", names=True),
    "catalog": _document("catalogue file", names=True),
    "extra": _document("catalogue file", names=True),
    "fault_plan": _document("fault plan", names=True),
    "source": _document("profile", names=True),
    "ref": _document("profile", names=True),
    "fault_plans": _document("fault plan", names=True),
    "tasks_dir": FOLDER,
    "db": DATABASE,
    "sources": DATABASE,
    "cassette": CASSETTE,
    "more_cassettes": CASSETTE,
    "from_cassettes": CASSETTE_SOURCE,
    "path": CASSETTE,
    "session": CASSETTE,
    # files written
    "output": OUTPUT,
    "record": OUTPUT,
}


def parse(name: str, value: Any) -> Any:
    """`value` for the parameter `name` as the code takes it (None and names without a kind
    as given); Refused says what is wrong."""
    kind = PARAMS.get(name)
    return value if kind is None or value is None else kind.parse(value)


def checked(fn: Callable[P, R]) -> Callable[P, R]:
    """Parse and check `fn`'s parameters that have a kind, by name, before its body runs
    (a duration given as text reaches the body as seconds)."""
    signature = inspect.signature(fn)
    names = [n for n in signature.parameters if n in PARAMS]

    def parsed(args: Any, kwargs: Any) -> inspect.BoundArguments:
        bound = signature.bind_partial(*args, **kwargs)
        for name in names:
            if name not in bound.arguments:
                continue
            value = bound.arguments[name]
            try:
                bound.arguments[name] = parse(name, value)
            except Refused as exc:
                raise BadArgument(name, exc.line(name, value)) from None
        return bound

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        bound = parsed(args, kwargs)
        return fn(*bound.args, **bound.kwargs)

    @functools.wraps(fn)
    async def run_async(*args: Any, **kwargs: Any) -> Any:
        bound = parsed(args, kwargs)
        return await fn(*bound.args, **bound.kwargs)  # type: ignore[misc]

    door: Any = run_async if inspect.iscoroutinefunction(fn) else run
    door.__realprobe_checked__ = True
    return door if names else fn  # type: ignore[no-any-return]


__all__ = ["PARAMS", "Kind", "Refused", "checked", "parse", "parse_duration", "parse_time",
           "parse_window"]
