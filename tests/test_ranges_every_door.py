"""One table of range checks for every door: each public function with a parameter the table
names refuses a bad value by that rule, before anything runs, in the words the command line
uses for the same option."""

from __future__ import annotations

import contextlib
import inspect
from typing import Any

import pytest
from cli_runner import invoke

import realprobe
from realprobe import BadArgument, RealprobeError
from realprobe.ranges import PARAMS, Refused, parse

BAD: dict[str, list[Any]] = {
    "timeout": [0, -1.0, float("nan"), float("inf"), "ten", True],
    "call_timeout": [0, float("nan")],
    "llm_timeout": [0, float("inf")],
    "lock_timeout": [-1, float("nan")],
    "jitter": [-0.5, float("inf")],
    "interval": [-1, float("nan")],
    "port": [-1, 70000, 1.5, True],
    "rounds": [0, -3, 2.5, "three", True],
    "concurrency": [0, 1.5],
    "repeat": [0, "２"],
    "max_runs": [0],
    "max_turns": [0],
    "latency_scale": [-1, float("nan")],
    "min_success_change": [-0.1],
    "min_latency_change": [float("inf")],
    "alpha": [0, 1, 1.5, float("nan")],
    "threshold": [0, 1.5, 95, float("nan")],
    "base_url": ["example.org", ""],
    "upstream": ["ftp://127.0.0.1:1", "Live"],
}


def _enter(result: Any) -> None:
    """Enter what a door hands back if it is a context manager (a check made on entering
    would fail the test: it must come when the door is called)."""
    if hasattr(result, "__enter__"):
        with contextlib.ExitStack() as stack:
            stack.enter_context(result)


def _doors() -> list[tuple[str, str]]:
    out = []
    for name in sorted(realprobe.__all__):
        fn = getattr(realprobe, name)
        if inspect.isfunction(fn):
            out += [(name, p) for p in inspect.signature(fn).parameters if p in BAD]
    return out


DOORS = _doors()


def test_every_rule_has_bad_values_and_the_doors_are_found() -> None:
    assert set(BAD) <= set(PARAMS)
    assert {"call", "call_all", "probe", "schedule", "sweep", "drift", "mcp_proxy", "mcp_replay",
            "evaluate", "record_round", "serve_exporter", "run_demo"} <= {n for n, _ in DOORS}


SANDBOX_DOORS = sorted(
    name for name in realprobe.__all__ if inspect.isfunction(getattr(realprobe, name))
    and "sandbox" in inspect.signature(getattr(realprobe, name)).parameters
)


@pytest.mark.parametrize("door", SANDBOX_DOORS)
def test_a_bad_sandbox_url_is_refused_by_the_one_target_check_at_every_door(door: str) -> None:
    """Where calls go is not a range: every door asks the target check (its message)."""
    assert {"options", "record_round", "use_cassette"} <= set(SANDBOX_DOORS)
    fn = getattr(realprobe, door)
    for bad in ("127.0.0.1:9", "ftp://127.0.0.1:9/"):
        with pytest.raises(RealprobeError,
                           match=f"^sandbox '{bad}': expected a URL like http://127.0.0.1:8765$"):
            first = {"use_cassette": {"path": "never.json"}, "record_fixtures": {"file": __file__}}
            _enter(fn(sandbox=bad, **first.get(door, {})))


@pytest.mark.parametrize(("door", "param"), DOORS)
def test_a_bad_value_is_refused_by_the_one_rule_at_every_door(door: str, param: str) -> None:
    fn = getattr(realprobe, door)
    for value in BAD[param]:
        with pytest.raises(BadArgument) as caught:
            _enter(fn(**{param: value}))  # checked before required arguments are missed
        assert caught.value.params == (param,)
        with pytest.raises(Refused) as why:
            parse(param, value)
        assert str(caught.value) == why.value.line(param, value)


@pytest.mark.parametrize("param", ["timeout", "rounds", "concurrency", "port", "alpha"])
def test_the_command_line_says_the_same_rule(param: str) -> None:
    verb = {"port": ["sandbox"], "alpha": ["drift"]}.get(param, ["probe"])
    value = BAD[param][0]
    flag = "--" + param.replace("_", "-")
    out = invoke([*verb, flag, str(value)])
    assert isinstance(out.exception, RealprobeError)  # `realprobe` prints it, exit 2
    with pytest.raises(Refused) as why:
        parse(param, str(value))
    assert str(out.exception) == why.value.line(flag, str(value))
