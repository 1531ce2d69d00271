"""One table of range checks for every door: each public function with a parameter the table
names refuses a bad value by that rule, before anything runs, in the words the command line
uses for the same option."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from typer.testing import CliRunner

import realprobe
from realprobe.cli import app
from realprobe.errors import BadArgument, RealprobeError
from realprobe.ranges import CHECKS, problem

BAD: dict[str, list[Any]] = {
    "timeout": [0, -1.0, float("nan"), float("inf"), "10", True],
    "call_timeout": [0, float("nan")],
    "llm_timeout": [0, float("inf")],
    "lock_timeout": [-1, float("nan")],
    "jitter": [-0.5, float("inf")],
    "interval": [-1, float("nan")],
    "port": [-1, 70000, 1.5, True],
    "rounds": [0, -3, 2.5, "3", True],
    "concurrency": [0, 1.5],
    "repeat": [0, "2"],
    "max_runs": [0],
    "max_turns": [0],
    "latency_scale": [-1, float("nan")],
    "min_success_change": [-0.1],
    "min_latency_change": [float("inf")],
    "alpha": [0, 1, 1.5, float("nan")],
    "threshold": [0, 1.5, 95, float("nan")],
    "sandbox": ["localhost:8765", "ftp://127.0.0.1:1", 3],
    "base_url": ["example.org", ""],
    "upstream": ["ftp://127.0.0.1:1", "Live"],
}


def _doors() -> list[tuple[str, str]]:
    out = []
    for name in sorted(realprobe.__all__):
        fn = getattr(realprobe, name)
        if inspect.isfunction(fn):
            out += [(name, p) for p in inspect.signature(fn).parameters if p in CHECKS]
    return out


DOORS = _doors()


def test_every_rule_has_bad_values_and_the_doors_are_found() -> None:
    assert set(BAD) == set(CHECKS)
    assert len({name for name, _ in DOORS}) >= 20  # call, probe, schedule, sweep, mcp_*, ...


@pytest.mark.parametrize(("door", "param"), DOORS)
def test_a_bad_value_is_refused_by_the_one_rule_at_every_door(door: str, param: str) -> None:
    fn = getattr(realprobe, door)
    for value in BAD[param]:
        with pytest.raises(BadArgument) as caught:
            result = fn(**{param: value})  # checked before required arguments are missed
            if inspect.isgenerator(result) or hasattr(result, "__enter__"):
                with result:  # a context manager checks when it is created, not entered
                    pass
        assert caught.value.params == (param,)
        assert str(caught.value) == f"{param} {problem(param, value)} (got {value!r})"


@pytest.mark.parametrize("param", ["timeout", "rounds", "concurrency", "port", "alpha"])
def test_the_command_line_says_the_same_rule(param: str) -> None:
    verb = {"port": ["sandbox"], "alpha": ["drift"]}.get(param, ["probe"])
    value = BAD[param][0]
    flag = "--" + param.replace("_", "-")
    out = CliRunner().invoke(app, [*verb, flag, str(value)])
    assert isinstance(out.exception, RealprobeError)  # `realprobe` prints it, exit 2
    assert str(out.exception).startswith(f"{flag} {problem(param, value)} (got ")
