"""How many options the `realprobe` command shows, and which flags are not spelled like a
keyword of the verb's front-door function (`--foo-bar` is `foo_bar=`).

    python bench/door_names.py [--save]

Counts every visible option of every command and group as its `-h` lists them (hidden
aliases and --help excluded; a command's Settings section, set with `--set NAME=VALUE`,
counts as the one option `--set`), the most on one command, and the options whose parameter
is named otherwise than their flag (`--as` filling `view`): each one needs a bridge from the
library's error messages to the command line. The keyword side is held by
tests/test_every_command_has_a_function.py.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import typer

from realprobe.cli import HELP_NAMES, app


def commands() -> dict[str, Any]:
    """Every command and group, by its words (`""` is `realprobe` itself), help made."""
    group = typer.main.get_command(app)
    out: dict[str, Any] = {}

    def walk(command: Any, path: list[str]) -> None:
        ctx = typer.Context(command, info_name=" ".join(["realprobe", *path]),
                            help_option_names=HELP_NAMES)  # as the program makes them
        command.get_help(ctx)  # the help screen as a user sees it (its settings set apart)
        out[" ".join(path)] = command
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name])

    walk(group, [])
    return out


def measure() -> dict[str, Any]:
    per: dict[str, int] = {}
    differ: dict[str, list[str]] = {}
    for verb, command in commands().items():
        shown = [p for p in command.params if p.param_type_name == "option"
                 and not getattr(p, "hidden", False) and p.name != "help"]
        per[verb or "realprobe"] = len(shown) + bool(getattr(command, "__realprobe_settings__",
                                                             ()))
        for p in shown:
            flag = max(p.opts, key=len).removeprefix("--").replace("-", "_")
            if p.name not in (flag, "as_" + flag, flag + "_"):  # named unlike its flag
                differ.setdefault(verb, []).append(f"--{flag} is {p.name}")
    most = max(per, key=lambda v: per[v])
    return {"options": sum(per.values()), "commands": len(per), "most": [most, per[most]],
            "flags_named_otherwise": sum(map(len, differ.values())), "per_command": per,
            "differ": differ}


#: the count before settings were set apart (this script at its commit)
BEFORE = {"options": 327, "most": ["run", 34], "flags_named_otherwise": 1, "commit": "f06b6b3",
          "how": "PYTHONPATH=<a checkout of f06b6b3> python bench/door_names.py"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--save", action="store_true")
    result = measure()
    print(json.dumps(result, indent=2))
    if parser.parse_args().save:
        out = Path(__file__).resolve().parent / "results" / "door_names.json"
        saved = {"before": BEFORE, "after": result}
        out.write_text(json.dumps(saved, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
