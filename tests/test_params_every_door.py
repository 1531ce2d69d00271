"""Every time-, file- and cassette-valued parameter of every door has its parser in the
table of parameter types by name, and every kind refuses its hostile values in one line
before anything is written.

The doors are walked, not listed: every option and argument of every command and group
(the click tree of the `realprobe` program) and every keyword of the front door's
functions (`realprobe.__all__`). Which parameters hold a time, a file or a cassette is told
here from their names and declared types alone, so a parameter whose parser is removed from
the table (or a new `--foo-timeout` nobody registered) fails the first two tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import typer
from cli_runner import app, main

import realprobe
from realprobe import BadArgument
from realprobe.commands.checks import declared_types
from realprobe.ranges import PARAMS, parse, parse_time

#: names that hold a duration or a time, whatever their declared type
TIME_NAMES = {"timeout", "jitter", "interval", "every", "period", "window", "deadline",
              "since", "until", "baseline", "current", "retry_after", "timeout_s"}
TIME_SUFFIXES = ("_timeout", "_interval")
#: names that hold a file a user hands in (or a name of a shipped one)
FILE_NAMES = {"profile", "catalog", "fault_plan", "fault_plans", "spec", "specs", "rules",
              "alerts", "prices", "mcp_calls", "extra", "file", "path", "sources", "source",
              "tasks_dir", "db", "output", "record", "ref"}
#: parameters with Path in their type that are no file a user hands in
NOT_FILES: set[str] = set()
#: the kinds each class of parameter may have
KINDS = {"time": {"duration", "time", "window"},
         "file": {"file", "folder", "database", "output", "cassette"},
         "cassette": {"cassette"}}
GUARD_S = 30  # a case that starts real work with a hostile value fails, it does not hang


def _class_of(name: str, declared: Any) -> str | None:
    if "cassette" in name:
        return "cassette"
    if name in TIME_NAMES or name.endswith(TIME_SUFFIXES):
        return "time"
    if name in FILE_NAMES or ("Path" in str(declared) and name not in NOT_FILES):
        return "file"
    return None


def _commands() -> Iterator[tuple[str, Any]]:
    root = typer.main.get_command(app)

    def walk(cmd: Any, path: str) -> Iterator[tuple[str, Any]]:
        yield path, cmd
        if hasattr(cmd, "list_commands"):
            ctx = typer.Context(cmd)
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), f"{path} {name}".strip())

    yield from walk(root, "")


def _cli_params() -> list[tuple[str, str, str, str]]:
    """(verb, parameter name, its flag or '' for an argument, its class)."""
    out = []
    for verb, cmd in _commands():
        declared = declared_types(cmd)
        for param in cmd.params:
            cls = _class_of(param.name, declared.get(param.name))
            if cls is not None:
                flag = max(param.opts, key=len) if param.param_type_name == "option" else ""
                out.append((verb, param.name, flag, cls))
    return out


def _front_door() -> list[tuple[str, str, str]]:
    """(function, keyword, its class)."""
    out = []
    for name in sorted(realprobe.__all__):
        fn = getattr(realprobe, name)
        if not inspect.isfunction(fn):
            continue
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            cls = _class_of(p.name, p.annotation)
            if cls is not None:
                out.append((name, p.name, cls))
    return out


CLI = _cli_params()
FRONT = _front_door()


def test_every_time_file_and_cassette_option_has_its_parser() -> None:
    assert len(CLI) > 80 and {v for v, *_ in CLI} >= {"probe", "schedule", "stats", "mcp",
                                                        "cassette inspect", "run"}
    missing = [f"{verb or 'realprobe'} {flag or name}: a {cls} without its parser"
               for verb, name, flag, cls in CLI
               if name not in PARAMS or PARAMS[name].name not in KINDS[cls]]
    assert not missing, missing


def test_every_time_file_and_cassette_keyword_has_its_parser_at_the_front_door() -> None:
    assert len(FRONT) > 100
    missing = [f"{fn}({name}=): a {cls} without its parser" for fn, name, cls in FRONT
               if name not in PARAMS or PARAMS[name].name not in KINDS[cls]]
    unchecked = sorted({fn for fn, *_ in FRONT
                        if not getattr(getattr(realprobe, fn), "__realprobe_checked__", False)})
    assert not missing, missing
    assert not unchecked, f"front-door functions that skip the table: {unchecked}"


def test_every_file_kind_names_the_function_that_reads_it() -> None:
    import importlib

    for name, kind in PARAMS.items():
        if kind.reader is not None:
            module, _, attr = kind.reader.partition(":")
            assert callable(getattr(importlib.import_module(module), attr)), name


# -- hostile values ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One of each hostile file: a FIFO, a folder, a device, a symlink loop, a 1 GB sparse
    file (its size set, nothing written), a 5,000-deep JSON document."""
    base = tmp_path_factory.mktemp("hostile")
    fifo = base / "pipe.json"
    os.mkfifo(fifo)
    loop = base / "loop.json"
    loop.symlink_to(base / "loop2.json")
    (base / "loop2.json").symlink_to(loop)
    sparse = base / "sparse.json"
    with sparse.open("wb") as fh:
        fh.truncate(1 << 30)
    deep = base / "deep.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    folder = base / "folder.json"
    folder.mkdir()
    return {"fifo": str(fifo), "folder": str(folder), "device": "/dev/zero",
            "loop": str(loop), "sparse": str(sparse), "deep": str(deep)}


NUMBERS = ["nan", "inf", "-1", "1e400", "", "١٢"]
#: what each kind is given on the command line ("@x" is the hostile file x)
CLI_VALUES: dict[str, list[str]] = {
    "duration": [*NUMBERS, "99999w", "soon"],
    "time": ["nan", "inf", "-1", "1e400", "", "٢٠٢٦١١٠١", "20261399"],
    "window": ["nan..now", "", "١..٢", "now..1d"],
    "file": ["@fifo", "@folder", "@device", "@loop", "@sparse", "@deep"],
    "folder": ["@fifo", "@device", "@loop", "@sparse"],
    "database": ["@fifo", "@folder", "@device", "@loop", "@sparse", "@deep"],
    "output": ["@fifo", "@device", "@loop"],
    "cassette": ["@fifo", "@device", "@loop", "@sparse", "@deep"],
    "count": [*NUMBERS, "99999999999", "1.5"],
    "port": [*NUMBERS, "65536"],
    "number": NUMBERS,
    "share": [*NUMBERS, "1.5"],
    "url": ["", "nan", "ftp://127.0.0.1/"],
}


def _cli_cases() -> list[tuple[str, str, str, str]]:
    """(verb, parameter, flag or '', hostile value) for every parameter with a kind."""
    out = []
    for verb, cmd in _commands():
        for param in cmd.params:
            kind = PARAMS.get(param.name)
            flag = max(param.opts, key=len) if param.param_type_name == "option" else ""
            for value in CLI_VALUES.get(kind.name, []) if kind is not None else []:
                out.append((verb, param.name, flag, value))
    return out


def _guard(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError("the command started work with a hostile value")


@pytest.mark.parametrize(("verb", "name", "flag", "value"), _cli_cases())
def test_a_hostile_value_is_one_line_and_exit_2_with_nothing_written(
    verb: str, name: str, flag: str, value: str, hostile: dict[str, str],
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    given = hostile[value[1:]] if value.startswith("@") else value
    if value == "@deep" and PARAMS[name].name not in ("file", "cassette", "database"):
        pytest.skip("a deep document is a file's content")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REALPROBE_DB", str(tmp_path / "default.db"))
    argv = [*verb.split(), *([flag] if flag else []), given]
    old = signal.signal(signal.SIGALRM, _guard)
    signal.alarm(GUARD_S)
    try:
        with pytest.raises(SystemExit) as ended:
            main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("note: ")]
    assert ended.value.code == 2, (argv, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
    assert "Traceback" not in err
    assert not list(tmp_path.iterdir()), (argv, list(tmp_path.iterdir()))


FRONT_VALUES: dict[str, list[Any]] = {
    "duration": [float("nan"), float("inf"), -1, 10**400, "", "١٢", True, "99999w"],
    "time": [float("nan"), float("inf"), -1.0, 10**400, "", "٢٠٢٦١١٠١", 20261399],
    "window": ["nan..now", "", "now..1d", (float("nan"), None)],
    "file": ["@fifo", "@folder", "@device", "@loop", "@sparse"],
    "folder": ["@fifo", "@device", "@loop", "@sparse"],
    "database": ["@fifo", "@folder", "@device", "@loop"],
    "output": ["@fifo", "@device", "@loop"],
    "cassette": ["@fifo", "@device", "@loop", "@sparse"],
    "count": [float("nan"), -1, 10**400, "", "١٢", True, 1.5],
    "port": [float("nan"), -1, 10**400, "", "١٢", 65536],
    "number": [float("nan"), float("inf"), -1, 10**400, "", "١٢"],
    "share": [float("nan"), float("inf"), -1, 10**400, "", "١٢", 1.5],
    "url": ["", "nan", "ftp://127.0.0.1/"],
}


def _front_cases() -> list[tuple[str, str]]:
    """(function, keyword) for every keyword with a kind."""
    return [(name, p.name) for name in sorted(realprobe.__all__)
            if inspect.isfunction(getattr(realprobe, name))
            for p in inspect.signature(getattr(realprobe, name)).parameters.values()
            if p.name in PARAMS and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


@pytest.mark.parametrize(("fn", "name"), _front_cases())
def test_a_hostile_keyword_is_refused_before_the_body_runs(
    fn: str, name: str, hostile: dict[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REALPROBE_DB", str(tmp_path / "default.db"))
    door = getattr(realprobe, fn)
    for value in FRONT_VALUES.get(PARAMS[name].name, []):
        given = Path(hostile[value[1:]]) if isinstance(value, str) and value.startswith(
            "@") else value
        with pytest.raises(BadArgument) as caught:
            result = door(**{name: given})
            if inspect.iscoroutine(result):
                asyncio.run(result)
            if hasattr(result, "__enter__"):
                with contextlib.ExitStack() as stack:
                    stack.enter_context(result)
        assert caught.value.params == (name,)
        assert "\n" not in str(caught.value)
    assert not list(tmp_path.iterdir())


def test_the_one_grammar_at_both_doors(tmp_path: Path) -> None:
    """`2s`, `1m30s`, `500ms` and plain seconds are durations; `20261101` is a date, never
    an age; `7d` stays an age."""

    assert [parse("timeout", v) for v in ("2s", "1m30s", "500ms", "2h", "90", 3)] == [
        2.0, 90.0, 0.5, 7200.0, 90.0, 3]
    assert parse_time("20261101") == parse_time("2026-11-01") == parse_time(20261101)
    assert parse_time("7d", now=1e9) == 1e9 - 7 * 86400
    assert json.loads(json.dumps(parse("since", "20261101"))) == "20261101"


@pytest.mark.parametrize("reader", ["read_input", "read_text_input", "read_document",
                                    "read_bounded"])
def test_the_limited_readers_refuse_what_the_table_lets_through_to_them(
    reader: str, hostile: dict[str, str]
) -> None:
    """Behind the doors, the one reader refuses a FIFO, a device, a folder or a huge file
    itself, without blocking on a pipe (opened non-blocking, looked at before reading)."""
    from realprobe import RealprobeError, limits

    read = getattr(limits, reader)
    args = {"read_input": ("file", 1 << 20), "read_text_input": ("file",),
            "read_document": ("file",), "read_bounded": ()}[reader]
    old = signal.signal(signal.SIGALRM, _guard)
    signal.alarm(GUARD_S)
    try:
        for name in ("fifo", "device", "folder", "sparse", "loop"):
            with pytest.raises(RealprobeError) as refused:
                read(Path(hostile[name]), *args)
            assert "\n" not in str(refused.value) and hostile[name] in str(refused.value)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
