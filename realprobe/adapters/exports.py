"""Tool definitions for agents: MCP, OpenAI chat completions (plain and strict), Responses.

One source per shape, so what `realprobe catalog --format X` prints is exactly what the MCP
server lists and what the OpenAI agent sends.

Strict function calling (`strict: true`) accepts a subset of JSON Schema: every property
listed in `required`, `additionalProperties: false` on every object, and no `default` or
value constraints. `strict_schema` rewrites an input schema into that subset: optional
properties become required-but-nullable (the model sends `null` for "not given", which the
tool's input model reads as absent), and constraints that strict mode does not enforce
(`minimum`, `maximum`, `pattern`, lengths, formats, defaults) move into the property's
description, so the model still sees them and the tool's own validation still applies them.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

from realprobe.adapters.spec import ApiSpec, ToolSpec


class Tool(Protocol):
    """What the exports read of a catalogue tool (`adapters.tool.Tool`)."""

    name: str
    spec: ToolSpec
    api: ApiSpec

    @property
    def input_schema(self) -> dict[str, Any]: ...

    @property
    def output_schema(self) -> dict[str, Any]: ...

MCP_META_KEY = "realprobe/api"

#: keywords strict mode does not accept, and how each is said in words instead
_MOVED = {
    "minimum": "minimum {}",
    "maximum": "maximum {}",
    "exclusiveMinimum": "greater than {}",
    "exclusiveMaximum": "less than {}",
    "multipleOf": "multiple of {}",
    "pattern": "matches the regular expression {}",
    "minLength": "at least {} characters",
    "maxLength": "at most {} characters",
    "format": "format {}",
    "minItems": "at least {} items",
    "maxItems": "at most {} items",
    "uniqueItems": "unique items",
    "default": "default {}",
}
_DROPPED = ("title", "examples", "minProperties", "maxProperties", "patternProperties")


def mcp_definition(tool: Tool) -> dict[str, Any]:
    """The MCP `Tool` exactly as `tools/list` serves it."""
    api = tool.api
    return {
        "name": tool.name,
        "title": tool.spec.title,
        "description": f"{tool.spec.description} (API: {api.name}, {api.base_url})",
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        # every catalogue tool only reads a public API: read-only, not destructive, open
        # world; not idempotent, as most answer something new each call (a random joke)
        "annotations": {
            "title": tool.spec.title,
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": True,
        },
        "_meta": {MCP_META_KEY: {"id": api.id, "name": api.name, "docs_url": api.docs_url}},
    }


def _description(tool: Tool) -> str:
    return f"{tool.spec.title}. {tool.spec.description}"


def openai_chat(tool: Tool, *, strict: bool = False) -> dict[str, Any]:
    """A chat-completions function tool (`{"type": "function", "function": {...}}`)."""
    function: dict[str, Any] = {
        "name": tool.name,
        "description": _description(tool),
        "parameters": strict_schema(tool.input_schema) if strict else tool.input_schema,
    }
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def openai_responses(tool: Tool, *, strict: bool = True) -> dict[str, Any]:
    """A Responses API function tool: flat, `strict` at the top level."""
    return {
        "type": "function",
        "name": tool.name,
        "description": _description(tool),
        "parameters": strict_schema(tool.input_schema) if strict else tool.input_schema,
        "strict": strict,
    }


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` rewritten into the subset that OpenAI strict mode accepts (see module doc)."""
    return _strict(copy.deepcopy(schema), nullable=False)


def _strict(node: dict[str, Any], *, nullable: bool) -> dict[str, Any]:
    notes = _move_constraints(node)
    for key in _DROPPED:
        node.pop(key, None)
    for key in ("anyOf", "oneOf"):
        if key in node:
            branches = node.pop(key)
            for branch in branches:  # a branch's constraints are said on the property
                notes += _move_constraints(branch)
            node["anyOf"] = [_strict(branch, nullable=False) for branch in branches]
    if node.get("type") == "object" or "properties" in node:
        props: dict[str, Any] = node.get("properties", {})
        required = set(node.get("required", []))
        node["properties"] = {
            name: _strict(sub, nullable=name not in required) for name, sub in props.items()
        }
        node["required"] = list(props)
        node["additionalProperties"] = False
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        node["items"] = _strict(node["items"], nullable=False)
    if notes:
        text = node.get("description", "")
        extra = "; ".join(notes)
        node["description"] = f"{text} ({extra})" if text else extra.capitalize()
    if nullable:
        _make_nullable(node)
    return node


def _move_constraints(node: dict[str, Any]) -> list[str]:
    notes = []
    for key, words in _MOVED.items():
        if key in node:
            value = node.pop(key)
            if key == "default" and value is None:
                continue
            if key == "uniqueItems":
                if value:
                    notes.append(words)
                continue
            notes.append(words.format(_show(value)))
    return notes


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _make_nullable(node: dict[str, Any]) -> None:
    """Accept null as "not given" (a no-op when null is already allowed)."""
    branches = node.get("anyOf")
    if branches is not None:
        if not any(b.get("type") == "null" for b in branches):
            branches.append({"type": "null"})
        return
    kind = node.get("type")
    if isinstance(kind, str):
        if kind != "null":
            node["type"] = [kind, "null"]
            if "enum" in node and None not in node["enum"]:
                node["enum"] = [*node["enum"], None]
    elif isinstance(kind, list):
        if "null" not in kind:
            node["type"] = [*kind, "null"]
    else:
        node["anyOf"] = [{k: node.pop(k) for k in list(node) if k != "description"},
                         {"type": "null"}]


def drop_nulls(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments from a strict call: `null` means the model left an optional one out."""
    return {k: v for k, v in args.items() if v is not None}
