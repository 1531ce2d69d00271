"""How many options the `realprobe` command has, and which flags are not spelled like a
keyword of the verb's front-door function (`--foo-bar` is `foo_bar=`).

    python bench/door_names.py [--save]

Counts every visible option of every verb (hidden aliases and --help excluded), and the
options whose parameter is named otherwise than their flag (`--as` filling `view`): each one
needs a bridge from the library's error messages to the command line. The keyword side is
held by tests/test_every_command_has_a_function.py.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import typer

from realprobe.cli import app


def verbs() -> dict[str, Any]:
    group = typer.main.get_command(app)
    ctx = group.make_context("realprobe", [], resilient_parsing=True)
    out: dict[str, Any] = {}

    def walk(command: Any, path: list[str]) -> None:
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name])
        else:
            out[" ".join(path)] = command

    walk(group, [])
    return out


def measure() -> dict[str, Any]:
    options = 0
    differ: dict[str, list[str]] = {}
    for verb, command in verbs().items():
        for p in command.params:
            if p.param_type_name != "option" or getattr(p, "hidden", False) or p.name == "help":
                continue
            options += 1
            flag = max(p.opts, key=len).removeprefix("--").replace("-", "_")
            if p.name not in (flag, "as_" + flag, flag + "_"):  # named unlike its flag
                differ.setdefault(verb, []).append(f"--{flag} is {p.name}")
    return {"options": options, "flags_named_otherwise": sum(map(len, differ.values())),
            "differ": differ}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--save", action="store_true")
    result = measure()
    print(json.dumps(result, indent=2))
    if parser.parse_args().save:
        out = Path(__file__).resolve().parent / "results" / "door_names.json"
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
