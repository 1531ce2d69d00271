"""A tool's input and output JSON Schemas, written directly from its catalogue entry.

They equal what pydantic's `model_json_schema()` gives for the models `tool.py` builds (a test
checks every catalogue tool), but cost a dictionary walk instead of a model build plus schema
generation, so listing a few hundred tools stays fast.
"""

from __future__ import annotations

import re
from typing import Any

from realprobe.adapters.spec import InputField, OutputField, ToolSpec

_SCALAR = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}
#: an input's bounds: (InputField attribute, pydantic Field keyword, JSON Schema keyword)
BOUNDS = (("minimum", "ge", "minimum"), ("maximum", "le", "maximum"),
          ("min_length", "min_length", "minLength"), ("max_length", "max_length", "maxLength"),
          ("pattern", "pattern", "pattern"))


def model_name(tool: str, suffix: str) -> str:
    return "".join(p.title() for p in re.split(r"[_-]", tool)) + suffix


def _title(name: str) -> str:
    return name.title().replace("_", " ")


def _literal(values: list[Any]) -> dict[str, Any]:
    """pydantic's schema for `Literal[values]`."""
    out: dict[str, Any] = {"const": values[0]} if len(values) == 1 else {"enum": list(values)}
    kinds = {type(v) for v in values}
    if len(kinds) == 1:
        kind = kinds.pop()
        name = {str: "string", bool: "boolean", int: "integer", float: "number"}.get(kind)
        if name:
            out["type"] = name
        elif kind is type(None):
            out["type"] = "null"
    return out


def _input_base(f: InputField) -> dict[str, Any]:
    if f.enum:
        return _literal(f.enum)
    out: dict[str, Any] = {"type": _SCALAR[f.type]}
    out.update({key: getattr(f, attr) for attr, _, key in BOUNDS if getattr(f, attr) is not None})
    return out


def input_schema(spec: ToolSpec) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    for name, f in spec.input.items():
        base = _input_base(f)
        if f.required:
            prop = {**base}
            required.append(name)
        else:
            prop = {"anyOf": [base, {"type": "null"}], "default": f.default}
        if f.description:
            prop["description"] = f.description
        prop["title"] = _title(name)
        props[name] = prop
    out: dict[str, Any] = {"additionalProperties": False, "properties": props}
    if required:
        out["required"] = required
    out["title"] = model_name(spec.name, "Input")
    out["type"] = "object"
    return out


def _output_base(name: str, f: OutputField, owner: str, defs: dict[str, Any]) -> dict[str, Any]:
    if f.type == "array":
        if f.items:
            item_name = model_name(owner, name.title() + "Item")
            defs[item_name] = _object(f.items, owner + name, item_name, defs)
            return {"items": {"$ref": f"#/$defs/{item_name}"}, "type": "array"}
        kind = f.item_type or "any"
        return {"items": {} if kind == "any" else {"type": _SCALAR[kind]}, "type": "array"}
    if f.type == "object":
        return {"additionalProperties": True, "type": "object"}
    if f.type == "any":
        return {}
    return {"type": _SCALAR[f.type]}


def _object(
    fields: dict[str, OutputField], owner: str, title: str, defs: dict[str, Any]
) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    for name, f in fields.items():
        base = _output_base(name, f, owner, defs)
        if f.optional:
            prop: dict[str, Any] = {"anyOf": [base, {"type": "null"}], "default": None}
        else:
            prop = dict(base)
            required.append(name)
        if f.description:
            prop["description"] = f.description
        prop["title"] = _title(name)
        props[name] = prop
    out: dict[str, Any] = {"properties": props}
    if required:
        out["required"] = required
    out["title"] = title
    out["type"] = "object"
    return out


def output_schema(spec: ToolSpec) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    out = _object(spec.output, spec.name, model_name(spec.name, "Output"), defs)
    return {"$defs": dict(sorted(defs.items())), **out} if defs else out


def _type_problem(f: InputField, value: Any) -> str | None:
    if f.enum:
        return None if value in f.enum else f"input should be one of {f.enum!r}"
    if f.type == "string":
        return None if isinstance(value, str) else "input should be a valid string"
    if f.type == "boolean":
        ok = (
            isinstance(value, bool)
            or value in (0, 1)
            or (
                isinstance(value, str) and value.lower() in ("true", "false", "0", "1", "yes", "no")
            )
        )
        return None if ok else "input should be a valid boolean"
    if isinstance(value, bool):
        return f"input should be a valid {f.type}"
    number: float
    if isinstance(value, (int, float)):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return f"input should be a valid {f.type}"
    else:
        return f"input should be a valid {f.type}"
    if f.type == "integer" and number != int(number):
        return "input should be a valid integer"
    return None


def example_problem(spec: ToolSpec, args: dict[str, Any]) -> tuple[str, str] | None:
    """(where, what) when example arguments break the input fields' rules, else None.

    A quick check at catalogue load (the pydantic input model is built on first call);
    it applies the same rules: types, enums, bounds, lengths, patterns, required, no extras.
    """
    if not isinstance(args, dict):
        return "arguments", "should be a mapping"
    for key in args:
        if key not in spec.input:
            return key, "extra inputs are not permitted"
    for name, f in spec.input.items():
        if name not in args or args[name] is None:
            if f.required:
                return name, "field required"
            continue
        value = args[name]
        problem = _type_problem(f, value)
        if problem:
            return name, problem
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if f.minimum is not None and value < f.minimum:
                return name, f"input should be greater than or equal to {f.minimum:g}"
            if f.maximum is not None and value > f.maximum:
                return name, f"input should be less than or equal to {f.maximum:g}"
        if isinstance(value, str) and f.type == "string":
            if f.min_length is not None and len(value) < f.min_length:
                return name, f"string should have at least {f.min_length} characters"
            if f.max_length is not None and len(value) > f.max_length:
                return name, f"string should have at most {f.max_length} characters"
            if f.pattern is not None and not re.search(f.pattern, value):
                return name, f"string should match pattern {f.pattern!r}"
    return None
