"""The front door mirrors the command line: every verb is flag parsing and printing over one
documented library function, which the verb's own code calls."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from cli_runner import app

import realprobe

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
    "cassette export": "export_cassette",
    "cassette record-round": "record_round",
    "cassette replay-round": "replay_round",
    "run": "plan_tasks",  # then TaskBatch.run, which run_tasks is too
    "results": "task_results",
    "sweep": "sweep",
    "mcp": "serve_mcp",
    "mcp proxy": "mcp_proxy",
    "mcp replay": "mcp_replay",
    "mcp import": "mcp_import",
    "mcp export": "mcp_export",
    "exporter": "serve_exporter",
    "alert check": "check_alerts",
    "merge": "merge_databases",
    "history import": "import_history",
    "history calibrate": "calibrate_imported",
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


#: flags that only shape what the command prints (no keyword: the function returns data)
PRINTING = {"json", "list", "fail_on_worse", "explain", "threshold"}


def keywords(verb: str) -> set[str]:
    """The keywords a verb's front-door function takes, with the fields of the values it
    takes whole (`target`: where calls go; `settings`: an evaluation's settings; `**select`:
    which stored rows) and what it hands its `**keywords` on to."""
    from realprobe import EvalSettings, TaskBatch, TransportOptions
    from realprobe.api_rows import RowFilter
    from realprobe.sandbox.setup import sandbox_for

    functions = [getattr(realprobe, FUNCTIONS[verb])]
    functions += {"run": [realprobe.run_tasks, TaskBatch.plan, realprobe.evaluate],
                  "probe": [realprobe.probe_mcp], "schedule": [realprobe.schedule_mcp],
                  "mcp": [realprobe.api.mcp_service],
                  "sandbox": [sandbox_for]}.get(verb, [])
    out: set[str] = set()
    for function in functions:
        params = inspect.signature(function).parameters
        out |= {n for n, p in params.items() if p.kind is not p.VAR_KEYWORD}
        if "target" in params:
            out |= {f.name for f in dataclasses.fields(TransportOptions)}
        if "settings" in params:
            out |= set(EvalSettings.model_fields)
        if "Unpack[RowFilter]" in str(params.get("select", "")):
            out |= set(RowFilter.__annotations__) - {"target"}  # `target=`: kinds' old name
        if "tools" in params:
            out.add("all")  # `--all` is `tools=None`
    return out


@pytest.mark.parametrize("verb", sorted(FUNCTIONS))
def test_each_flag_is_a_keyword_of_the_verbs_function(verb: str) -> None:
    """`--foo-bar` is `foo_bar=` (the parameter of the command too); a repeatable `--item`
    fills `items=`; `--foo-env VAR` gives `foo=` read from that variable."""
    names = keywords(verb)
    wrong = []
    for p in COMMANDS[verb].params:
        if p.param_type_name != "option" or p.hidden or p.name == "help":
            continue
        flag = max((o for o in p.opts if o.startswith("--")), key=len)
        name = flag.removeprefix("--").replace("-", "_")
        if name in PRINTING:
            continue
        if p.name != name and not (p.name == "as_" + name or p.name == name + "_"):
            wrong.append(f"{flag} is the command's {p.name}")
        elif not ({name, name + "s", name.removesuffix("_env")} & names):
            wrong.append(f"{flag} is no keyword of realprobe.{FUNCTIONS[verb]}")
    assert not wrong, wrong
