"""The front door mirrors the command line: every verb is flag parsing and printing over one
documented library function, which the verb's own code calls."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import typer

import realprobe
from realprobe.cli import app

#: verb -> the front-door function behind it
FUNCTIONS = {
    "catalog import-openapi": "import_openapi",
    "catalog record-fixtures": "record_fixtures",
    "catalog public-apis": "public_apis",
    "call": "call",
    "sandbox": "make_sandbox",
    "call-all": "call_all",
    "demo": "run_demo",
    "probe": "probe",
    "schedule": "schedule",
    "stats": "stats",
    "calibrate": "calibrate_export",
    "drift": "drift",
    "report": "make_report",
    "cassette inspect": "inspect_cassette",
    "cassette verify": "verify_cassette",
    "cassette scrub": "scrub_cassette",
    "cassette recover": "recover_cassette",
    "cassette import": "import_cassette",
    "cassette record-round": "record_round",
    "cassette replay-round": "replay_round",
    "run": "plan_tasks",  # then TaskBatch.run, which run_tasks is too
    "results": "task_results",
    "sweep": "sweep",
    "mcp": "serve_mcp",
    "mcp proxy": "mcp_proxy",
    "mcp replay": "mcp_replay",
    "mcp import": "mcp_import",
    "exporter": "serve_exporter",
    "alert check": "check_alerts",
    "merge": "merge_databases",
}

#: groups that are verbs too (the group's own callback does the work without a sub-verb)
GROUP_VERBS = {"mcp"}


def leaves() -> Iterator[tuple[str, Any]]:
    group = typer.main.get_command(app)
    ctx = group.make_context("realprobe", [], resilient_parsing=True)

    def walk(command: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        if hasattr(command, "list_commands"):
            if " ".join(path) in GROUP_VERBS:
                yield " ".join(path), command  # a verb of its own, with sub-verbs
            for name in command.list_commands(ctx):
                yield from walk(command.get_command(ctx, name), [*path, name])
        else:
            yield " ".join(path), command

    yield from walk(group, [])


COMMANDS = dict(leaves())


def test_the_table_names_every_verb() -> None:
    assert set(COMMANDS) == set(FUNCTIONS)


@pytest.mark.parametrize("verb", sorted(FUNCTIONS))
def test_each_verb_calls_its_documented_function(verb: str) -> None:
    name = FUNCTIONS[verb]
    assert name in realprobe.__all__, f"{name} is not in the front door"
    function = getattr(realprobe, name)
    assert function.__doc__, f"realprobe.{name} has no docstring"
    source = inspect.getsource(COMMANDS[verb].callback)
    assert f"{name}(" in source, f"`realprobe {verb}` does not call {name}"
