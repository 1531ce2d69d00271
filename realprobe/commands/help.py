"""How `--help` reads and how old flag names keep working.

Help stays plain click formatting (rich's help renderer costs more than the whole start-up
budget), but options are grouped in panels by what they are about, and every value gets a
readable metavar (`--sandbox URL`, `--rounds N`, `--mode [live|record|replay|simulate]`)
instead of a Python type. Panels and metavars are given here by parameter name, once for
every verb, so a new verb's `--db` or `--json` lands in the same panel as everyone else's.
"""

from __future__ import annotations

import re
import sys
import types
from typing import Any

from typer.core import TyperGroup

#: panel -> the parameters in it (by Python name); anything else is under "Options"
PANELS: dict[str, tuple[str, ...]] = {
    "Where calls go": (
        "mode", "sandbox", "profile", "cassette", "record_mode", "seed", "catalog",
        "on_exhausted", "replay_latency", "real_time", "from_cassettes", "upstream", "toxic",
        "latency_scale", "timeout", "call_timeout", "transport",
    ),
    "Stored data": (
        "db", "since", "until", "tools", "kinds", "target", "vantage", "by", "period", "baseline",
        "current", "window", "batch",
    ),
    "Pacing": (
        "politeness", "polite", "concurrency", "lock_timeout", "force", "rounds", "every",
        "cron", "max_runs", "jitter", "interval", "repeat", "resume",
    ),
    "LLM agent": (
        "base_url", "model", "api_key_env", "llm_timeout", "llm_rpm", "llm_tpm",
        "llm_concurrency", "max_turns",
    ),
    "Output": ("as_json", "output", "format_", "view", "dry_run"),
}
PANEL_OF = {name: panel for panel, names in PANELS.items() for name in names}

#: parameter name -> metavar, where the type alone says too little
METAVARS = {
    "sandbox": "URL", "base_url": "URL", "upstream": "live|URL", "address": "HOST:PORT",
    "db": "FILE", "catalog": "FILE|FAMILY", "cassette": "FILE",
    "output": "PATH", "profile": "PROFILE", "alerts": "FILE",
    "since": "WHEN", "until": "WHEN", "baseline": "FROM..TO", "current": "FROM..TO",
    "every": "INTERVAL", "cron": "'M H DOM MON DOW'", "tools": "NAME,...", "arg": "KEY=VALUE",
    "param": "KEY=VALUE", "header": "NAME", "secret": "VALUE", "model": "NAME",
    "api_key_env": "VAR", "auth_token_env": "VAR", "vantage": "NAME", "host": "ADDRESS",
    "toxic": "[SCOPE:]TYPE[:K=V,...]", "select": "PATTERN", "prompt": "PROMPT",
    "agent": "AGENT", "tasks_dir": "DIR", "from_cassettes": "PATH",
}
#: what the typer type label becomes when METAVARS does not name the parameter
BY_TYPE = {"str": "TEXT", "int": "N", "float": "X", "path": "PATH", "bool": "BOOL"}
SECONDS = ("timeout", "interval", "jitter", "lock_timeout", "deadline", "window")

#: old flag (or "verb --flag") -> the name every verb uses now, spelled like the keyword of
#: the verb's function (kept working, hidden, with one line of notice)
DEPRECATED_FLAGS = {
    **{f"{verb} --target": "--kinds" for verb in ("stats", "calibrate", "drift", "report")},
    "calibrate --as": "--view", "calibrate --from": "--source",
    "--simulate": "--profile", "--out": "--output",
    "--polite": "--politeness catalog", "--no-polite": "--politeness off",
    "--no-politeness": "--politeness off", "--task-prompt": "--prompt",
    "--task-model": "--model",
}


def _metavar(param: Any, ctx: Any) -> str:
    name = param.name or ""
    if name in METAVARS:
        return METAVARS[name]
    if any(name.endswith(s) for s in SECONDS):
        return "SECONDS"
    label = str(param.display_type(ctx) if hasattr(param, "display_type") else "")
    label = label.strip("<>")
    if "|" in label:
        return "[" + label.removeprefix("list[").rstrip("]") + "]"
    label = label.removeprefix("list[").removesuffix("]")
    return BY_TYPE.get(label, name.upper() or "VALUE")


def _format_options(self: Any, ctx: Any, formatter: Any) -> None:
    """click's `format_options`, with options in panels and readable metavars."""
    args: list[tuple[str, str]] = []
    sections: dict[str, list[tuple[str, str]]] = {"Options": []}
    for panel in PANELS:
        sections[panel] = []
    for param in self.get_params(ctx):
        if param.param_type_name == "option" and param.metavar is None and not param.is_flag:
            param.metavar = _metavar(param, ctx)
        record = param.get_help_record(ctx)
        if record is None:
            continue
        if param.param_type_name == "argument":  # `TOOL`, not `TOOL <str>` nor `tool`
            args.append((re.sub(r" <[^>]*>$", "", record[0]).upper(), record[1]))
            continue
        panel = getattr(param, "rich_help_panel", None) or PANEL_OF.get(param.name, "Options")
        sections.setdefault(panel, []).append(record)
    if args:
        with formatter.section("Arguments"):
            formatter.write_dl(args)
    for panel, records in sections.items():
        if records:
            with formatter.section(panel):
                formatter.write_dl(records)
    subs = [(name, cmd) for name, cmd in (getattr(self, "commands", None) or {}).items()
            if not cmd.hidden]
    if subs:  # a group: each sub-command with its first paragraph, whole (click cuts it)
        with formatter.section("Commands"):
            formatter.write_dl([(name, " ".join((cmd.short_help or cmd.help or "")
                                                .split("\n\n")[0].split()))
                                for name, cmd in subs])


def readable_help(command: Any) -> None:
    """Panels and metavars in `command`'s help and its subcommands' (once)."""
    for sub in (getattr(command, "commands", None) or {}).values():
        readable_help(sub)
    if not getattr(command, "__realprobe_help__", False):
        command.format_options = types.MethodType(_format_options, command)
        command.collect_usage_pieces = types.MethodType(_usage_pieces, command)
        command.__realprobe_help__ = True


def _usage_pieces(self: Any, ctx: Any) -> list[str]:
    """click's usage pieces with arguments as `TOOL`, `SPEC...`, `[FILE]` (typer writes a
    required one as `{tool}`, which reads like a template)."""
    pieces = type(self).collect_usage_pieces(self, ctx)
    return [re.sub(r"^\{([^{}]+)\}", lambda m: m.group(1).upper(),
                   re.sub(r"^\[([a-z_]+)\]", lambda m: f"[{m.group(1).upper()}]", piece))
            for piece in pieces]


def renamed_flags(args: list[str]) -> list[str]:
    """`args` with each old flag name spelled the way every verb spells it now; one line on
    stderr says so (the old names work for one more release)."""
    out: list[str] = []
    told: set[str] = set()
    verb = next((a for a in args if not a.startswith("-")), "")
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        flag, eq, value = arg.partition("=")
        new = DEPRECATED_FLAGS.get(f"{verb} {flag}") or DEPRECATED_FLAGS.get(flag)
        if new is None:
            out.append(arg)
            continue
        if flag not in told:
            sys.stderr.write(f"note: {flag} is deprecated, use {new} (same meaning)\n")
            told.add(flag)
        head, *rest = new.split()
        out.extend([head + eq + value, *rest])
    return out


__all__ = ["DEPRECATED_FLAGS", "PANELS", "readable_help", "renamed_flags"]


class QuickHelpGroup(TyperGroup):
    """A command group whose own flags (`--help`, `--version`) take their values through the
    table (`commands.checks`), without typer's pydantic coercion: otherwise `realprobe <verb>
    --help` would import pydantic just to see that the group's flag was not given."""

    def get_help_option(self, ctx: Any) -> Any:
        from realprobe.commands.checks import table_params

        opt = super().get_help_option(ctx)
        table_params([opt])
        return opt

    def get_params(self, ctx: Any) -> Any:
        from realprobe.commands.checks import table_params

        params = super().get_params(ctx)
        table_params(params, self)
        return params
