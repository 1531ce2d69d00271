"""The CLI framework is fenced: realprobe uses typer's and click's public API only, the
declared typer range has both ends (the floor is run by CI), every command shows at most 20
options, and a setting set apart in the help is set with `--set NAME=VALUE` as with its own
flag."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer

import realprobe
from realprobe.cli import HELP_NAMES, app, main

ROOT = Path(realprobe.__file__).parent
PRIVATE = re.compile(r"typer\._|from typer\._|click\._|import _click|atexit\._")


def test_no_private_name_of_the_cli_framework_is_used() -> None:
    used = [f"{p.relative_to(ROOT)}:{n}" for p in sorted(ROOT.rglob("*.py"))
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if PRIVATE.search(line)]
    assert not used, used


def test_typer_is_declared_with_a_floor_and_a_ceiling() -> None:
    project = tomllib.loads((ROOT.parent / "pyproject.toml").read_text(encoding="utf-8"))
    (typer_req,) = [d for d in project["project"]["dependencies"] if d.startswith("typer")]
    assert re.fullmatch(r"typer>=[0-9.]+,<[0-9.]+", typer_req), typer_req
    floor, ceiling = re.findall(r"[0-9][0-9.]*", typer_req)
    low, high = (tuple(map(int, v.split("."))) for v in (floor, ceiling))
    assert low <= tuple(map(int, typer.__version__.split(".")[:2])) < high
    ci = (ROOT.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "--resolution lowest-direct -e ." in ci  # CI installs every declared floor


def _commands() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []

    def walk(command: Any, path: list[str]) -> None:
        ctx = typer.Context(command, info_name=" ".join(["realprobe", *path]),
                            help_option_names=HELP_NAMES)  # as the program makes them
        command.get_help(ctx)
        out.append((" ".join(path), command))
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name])

    walk(typer.main.get_command(app), [])
    return out


COMMANDS = _commands()


def test_no_command_shows_more_than_20_options() -> None:
    shown = {verb: sum(1 for p in cmd.params if p.param_type_name == "option"
                       and not p.hidden and p.name != "help")
             + bool(getattr(cmd, "__realprobe_settings__", ())) for verb, cmd in COMMANDS}
    assert max(shown.values()) <= 20, sorted(shown.items(), key=lambda kv: -kv[1])[:3]
    assert sum(shown.values()) < 280


@pytest.mark.parametrize("verb", ["probe", "run", "mcp proxy"])
def test_a_setting_is_set_by_name_and_checked_by_its_kind(
    verb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command = dict(COMMANDS)[verb]
    settings = getattr(command, "__realprobe_settings__", ())
    assert settings and all(p.hidden for p in settings)
    help_text = command.get_help(typer.Context(command, info_name=verb,
                                               help_option_names=HELP_NAMES))
    assert "Settings (--set NAME=VALUE" in help_text
    for param in settings:
        assert max(param.opts, key=len).removeprefix("--") in help_text
    timed = next(p for p in settings if p.name.endswith("timeout"))
    name = max(timed.opts, key=len).removeprefix("--")
    with pytest.raises(SystemExit) as ended:
        main([*verb.split(), "--set", f"{name}=nan"])
    assert ended.value.code == 2
    assert capsys.readouterr().err.startswith(f"error: --{name} 'nan': expected")
    with pytest.raises(SystemExit) as ended:
        main([*verb.split(), "--set", "no-such-setting=1"])
    assert ended.value.code == 2
    assert name in capsys.readouterr().err  # the line names the command's settings
