"""Resolving a step's arguments from task inputs and earlier outputs, and reading outputs."""

from __future__ import annotations

import html
import re
from typing import Any

from realprobe.adapters.tool import MISSING as _MISSING
from realprobe.adapters.tool import lookup
from realprobe.tasks.model import PLACEHOLDER, Arg, Outputs

#: step id -> canonical output name -> value
Produced = dict[str, dict[str, Any]]


def extract_outputs(outputs: Outputs, data: dict[str, Any] | None) -> dict[str, Any]:
    """Canonical outputs from a tool's data; an output whose paths all miss is absent."""
    out: dict[str, Any] = {}
    if data is None:
        return out
    for name, paths in outputs.items():
        for path in [paths] if isinstance(paths, str) else paths:
            value = lookup(data, path)
            if value is not _MISSING and value is not None and value != "":
                out[name] = value
                break
    return out


def leaves(value: Any) -> list[Any]:
    """The scalars inside nested dicts and lists, in order."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in leaves(v)]
    return [value]


def as_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) >= 1e15 else repr(value)
    return str(value)


def render_template(template: str, produced: Produced) -> tuple[str, list[str]]:
    """Fill `{step.output}` placeholders; missing ones become `(unavailable)`."""
    missing: list[str] = []

    def sub(m: re.Match[str]) -> str:
        value = produced.get(m.group(1), {}).get(m.group(2), _MISSING)
        if value is _MISSING:
            missing.append(f"{m.group(1)}.{m.group(2)}")
            return "(unavailable)"
        return as_text(value)

    return PLACEHOLDER.sub(sub, template), missing


def resolve_args(
    args: dict[str, Arg], inputs: dict[str, Any], produced: Produced
) -> tuple[dict[str, Any], list[str]]:
    """Concrete arguments, and the names of those that could not be resolved (left out)."""
    out: dict[str, Any] = {}
    missing: list[str] = []
    for name, arg in args.items():  # exactly one source is set (`Arg`'s own check)
        if arg.input is not None:
            out[name] = inputs[arg.input]
        elif arg.step is not None and arg.output is not None:
            value = produced.get(arg.step, {}).get(arg.output, _MISSING)
            if value is _MISSING:
                missing.append(name)
            else:
                out[name] = value
        elif arg.template is not None:
            text, gaps = render_template(arg.template, produced)
            out[name] = text
            if gaps:
                missing.append(name)
        else:
            out[name] = arg.value
    return out, missing


def normalise(text: str) -> str:
    """For grounding: case, runs of whitespace and HTML entities (`&quot;`) do not count."""
    return " ".join(html.unescape(text).casefold().split())
