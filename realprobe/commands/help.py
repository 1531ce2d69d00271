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
    "catalog": "FILE|FAMILY", "profile": "PROFILE",
    "cron": "'M H DOM MON DOW'", "tools": "NAME,...", "arg": "KEY=VALUE",
    "param": "KEY=VALUE", "header": "NAME", "secret": "VALUE", "model": "NAME",
    "api_key_env": "VAR", "auth_token_env": "VAR", "vantage": "NAME", "host": "ADDRESS",
    "toxic": "[SCOPE:]TYPE[:K=V,...]", "select": "PATTERN", "prompt": "PROMPT",
    "agent": "AGENT", "from_cassettes": "PATH",
}
#: a parameter's kind in the table of parameter types (`realprobe.ranges`) -> its metavar
BY_KIND = {"duration": "DURATION", "time": "WHEN", "window": "FROM..TO", "file": "FILE",
           "folder": "DIR", "database": "FILE", "output": "PATH", "cassette": "FILE"}
#: what the typer type label becomes when METAVARS does not name the parameter
BY_TYPE = {"str": "TEXT", "int": "N", "float": "X", "path": "PATH", "bool": "BOOL"}

#: parameters few users set (by name, or "verb name" for one verb's): each keeps its own
#: flag, and the help lists them once, under "Settings", settable as `--set NAME=VALUE`
SETTINGS = frozenset({
    # pacing and locks
    "lock_timeout", "force", "politeness", "jitter", "max_runs", "mcp_interval",
    # where rows come from and how calls are recorded
    "record_mode", "vantage", "mcp_calls", "mcp_server", "mcp_url", "latency_scale",
    "real_time",
    # the LLM agent's limits and the task variants
    "llm_rpm", "llm_tpm", "llm_concurrency", "max_turns", "call_timeout", "llm_timeout",
    "api_key_env", "flaw_seed", "paraphrase", "executor", "address", "tasks_dir",
    "run resume",
    # servers' limits and guards
    "max_sessions", "session_idle_timeout", "max_message_bytes", "upstream_sessions",
    "fault_methods", "allowed_host", "auth_token_env", "reserve_for_schedule",
    # fine print of analyses and imports
    "min_success_change", "min_latency_change", "deadline", "include_auth", "api_id",
    "prefix", "header", "param",
})


def is_setting(command: Any, param: Any) -> bool:
    """Whether `param` of `command` is listed under Settings (an option, never --help)."""
    return param.param_type_name == "option" and (
        param.name in SETTINGS or f"{command.name} {param.name}" in SETTINGS)


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
    from realprobe.ranges import PARAMS

    if name in PARAMS and PARAMS[name].name in BY_KIND:
        return BY_KIND[PARAMS[name].name]
    label = str(param.display_type(ctx) if hasattr(param, "display_type") else "")
    label = label.strip("<>")
    if "|" in label:
        return "[" + label.removeprefix("list[").rstrip("]") + "]"
    label = label.removeprefix("list[").removesuffix("]")
    return BY_TYPE.get(label, name.upper() or "VALUE")


def _format_options(self: Any, ctx: Any, formatter: Any) -> None:
    """click's `format_options`, with options in panels and readable metavars."""
    args: list[tuple[str, str]] = []
    sections: dict[str, list[tuple[str, str]]] = {p: [] for p in ("Options", *PANELS)}
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
    settings = [_setting_record(param, ctx) for param in getattr(self, "__realprobe_settings__",
                                                                   ())]
    if settings:
        with formatter.section("Settings (--set NAME=VALUE, repeatable; or --NAME VALUE)"):
            formatter.write_dl(settings)
    subs = [(name, cmd) for name, cmd in (getattr(self, "commands", None) or {}).items()
            if not cmd.hidden]
    if subs:  # a group: each sub-command with its first paragraph, whole (click cuts it)
        with formatter.section("Commands"):
            formatter.write_dl([(name, " ".join((cmd.short_help or cmd.help or "")
                                                .split("\n\n")[0].split()))
                                for name, cmd in subs])


def _setting_record(param: Any, ctx: Any) -> tuple[str, str]:
    name = max(param.opts, key=len).removeprefix("--")
    value = "" if param.is_flag else "=" + (param.metavar or _metavar(param, ctx))
    return name + value, param.help or ""


def readable_help(command: Any) -> None:
    """Panels and metavars in `command`'s help and its subcommands' (once); its settings
    (`SETTINGS`) listed in a section of their own instead of among the options."""
    for sub in (getattr(command, "commands", None) or {}).values():
        readable_help(sub)
    if not getattr(command, "__realprobe_help__", False):
        settings = [p for p in command.params if is_setting(command, p) and not p.hidden]
        for param in settings:
            param.hidden = True  # (its flag works as before)
        command.__realprobe_settings__ = settings
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


def setting_flags(args: list[str], command: Any) -> list[str]:
    """`args` with each `--set NAME=VALUE` spelled as the setting's own flag (`--llm-rpm 60`;
    a flag setting: `--set force=true`); `command` is the one `args` invoke. An unknown
    name or a pair without `=` is one line naming the command's settings."""
    from realprobe.errors import RealprobeError

    by_name = {max(p.opts, key=len).removeprefix("--"): p for p in command.params
               if p.param_type_name == "option"}
    out: list[str] = []
    pending = iter(range(len(args)))
    for i in pending:
        arg = args[i]
        if arg == "--":
            return out + args[i:]
        if arg != "--set" and not arg.startswith("--set="):
            out.append(arg)
            continue
        pair = arg.partition("=")[2] if arg.startswith("--set=") else (
            args[i + 1] if i + 1 < len(args) else "")
        if arg == "--set":
            next(pending, None)
        name, eq, value = pair.partition("=")
        param = by_name.get(name.strip().replace("_", "-"))
        if not eq or param is None:
            names = ", ".join(sorted(n for n, p in by_name.items() if is_setting(command, p)))
            raise RealprobeError(
                f"--set {pair!r}: expected NAME=VALUE with one of the settings of "
                f"`{command.name}`: {names or 'none'} (or any of its options)")
        flag = max(param.opts, key=len)
        if param.is_flag:
            if value.strip().lower() in ("1", "true", "yes", "on"):
                out.append(flag)
            elif param.secondary_opts:
                out.append(param.secondary_opts[0])
        else:
            out.extend([flag, value])
    return out


def deprecated(old: str, new: str) -> None:
    """The one line of notice an old spelling gets on stderr (it works for one more release)."""
    sys.stderr.write(f"note: {old} is deprecated, use {new} (same meaning)\n")


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
            deprecated(flag, new)
            told.add(flag)
        head, *rest = new.split()
        out.extend([head + eq + value, *rest])
    return out


__all__ = ["DEPRECATED_FLAGS", "PANELS", "SETTINGS", "readable_help", "renamed_flags",
           "setting_flags"]


class QuickHelpGroup(TyperGroup):
    """A command group whose own flags (`--help`, `--version`) take their values through the
    table (`commands.checks`), without typer's pydantic coercion: otherwise `realprobe <verb>
    --help` would import pydantic just to see that the group's flag was not given. (Its
    params are the group's and the help option: click parses by `get_params` alone.)"""

    def get_params(self, ctx: Any) -> Any:
        from realprobe.commands.checks import table_params

        params = super().get_params(ctx)
        table_params(params, self)
        return params
