"""Operation parameters (path, query, header) to tool inputs, with example values.

Arrays follow their serialisation: `explode: false` (Swagger `csv`/`ssv`/`pipes`) becomes one
string of joined values, validated against the item enum when there is one; `explode: true`
(Swagger `multi`) sends one value of the item type, since a repeated key cannot be expressed
in one catalogue template.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from realprobe.adapters.openapi.document import Document, RefError
from realprobe.adapters.openapi.schemas import (
    FIELD_DESCRIPTION_LIMIT,
    MAX_ENUM_IN_PATTERN,
    SECRET_NAME_RE,
    Notes,
    as_list,
    clean_text,
    coerce,
    identifier,
    schema_type,
)

_SWAGGER_SEPARATORS = {"csv": ",", "ssv": " ", "tsv": "\t", "pipes": "|"}
_STYLE_SEPARATORS = {"form": ",", "simple": ",", "spaceDelimited": " ", "pipeDelimited": "|"}
_UNSUPPORTED_REGEX = re.compile(r"\(\?[=!<]|\\[1-9]|\(\?P=")


class SkipOperation(Exception):
    """The operation cannot become a tool; the message says why."""


@dataclass
class Param:
    name: str  # the input field name (a Python identifier)
    wire: str  # the name on the wire
    location: str  # path | query | header
    field: dict[str, Any]  # an InputField mapping
    example: Any = None  # from the description, coerced; None when absent
    derived: Any = None  # made up to fill a required field when no example exists


def collect(
    doc: Document, path_item: dict[str, Any], op: dict[str, Any], notes: Notes
) -> list[dict[str, Any]]:
    """Path-level and operation-level parameters, refs followed, the operation's winning."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for level in (path_item.get("parameters"), op.get("parameters")):
        for raw in level if isinstance(level, list) else []:
            try:
                p, _ = doc.deref(raw)
            except RefError as exc:
                raise SkipOperation(f"parameter {exc}") from None
            if not isinstance(p, dict) or not isinstance(p.get("name"), str):
                notes.add("a parameter without a name was left out")
                continue
            merged[(str(p.get("in")), p["name"])] = p
    return list(merged.values())


def read_parameter(
    doc: Document, p: dict[str, Any], notes: Notes, taken: set[str], include_auth: bool
) -> Param | None:
    """One parameter as an input, or None when it is left out (noted)."""
    wire: str = p["name"]
    where = str(p.get("in"))
    required = bool(p.get("required")) or where == "path"
    label = f"parameter {wire!r}"
    secret = bool(SECRET_NAME_RE.search(wire)) and where in ("query", "header")
    if not _kept(p, wire, where, required, secret, label, notes, include_auth):
        return None
    schema = _parameter_schema(doc, p, label)
    shape = _value_shape(doc, p, where, schema, required, notes, label)
    if shape is None:
        return None
    field = _input_field(p, shape, required, secret, notes, label)
    example = _explicit_example(
        p, shape.schema, shape.items, shape.kind, shape.joined, field, notes, label
    )
    name = identifier(wire, taken)
    taken.add(name)
    derived = None
    if example is None and required:
        derived = _derive(name, shape.kind, field, shape.schema)
        if derived is None:
            raise SkipOperation(f"no example for the required {label} and none can be derived")
    return Param(name, wire, where, _in_field_order(field), example, derived)


def _kept(
    p: dict[str, Any],
    wire: str,
    where: str,
    required: bool,
    secret: bool,
    label: str,
    notes: Notes,
    include_auth: bool,
) -> bool:
    """Whether the parameter becomes an input: bodies, cookies, client-set headers, left-out
    credentials and optional deprecated ones do not (noted; skips the operation if required)."""
    if where in ("body", "formData"):
        if required:
            raise SkipOperation(f"{label} is a required request body ({where})")
        notes.add(f"{label} ({where}) left out: request bodies are not sent")
        return False
    if where == "cookie" or where not in ("path", "query", "header"):
        if required:
            raise SkipOperation(f"required {label} in {where!r} is not supported")
        notes.add(f"{label} in {where!r} left out")
        return False
    if where == "header" and wire.lower() in ("accept", "content-type", "authorization"):
        return False  # the client sets these, and security schemes say how to authenticate
    if secret and not include_auth:
        if required:
            raise SkipOperation(f"needs the credential {label}; include_auth keeps it")
        notes.add(f"optional credential {label} left out (include_auth keeps it)")
        return False
    if p.get("deprecated") and not required:
        notes.add(f"deprecated {label} left out")
        return False
    return True


def _parameter_schema(doc: Document, p: dict[str, Any], label: str) -> dict[str, Any]:
    """The parameter's schema: the parameter itself in Swagger 2, its `schema` in OpenAPI 3."""
    if doc.version == "2.0":
        return p
    raw_schema = p.get("schema")
    if raw_schema is None and isinstance(p.get("content"), dict):
        raw_schema = {"type": "string"}  # a serialised structure: pass it as text
    try:
        schema, _ = doc.deref(raw_schema or {})
    except RefError as exc:
        raise SkipOperation(f"{label}: {exc}") from None
    return schema if isinstance(schema, dict) else {}


@dataclass
class _Shape:
    """What the tool sends: a value of `kind` checked against `schema`, or (joined) one
    string of array items that follow `items`."""

    kind: str
    schema: dict[str, Any]
    items: dict[str, Any] | None = None
    joined: bool = False
    sep: str = ","


def _value_shape(
    doc: Document,
    p: dict[str, Any],
    where: str,
    schema: dict[str, Any],
    required: bool,
    notes: Notes,
    label: str,
) -> _Shape | None:
    """Scalars as they are; arrays joined into one string or sent as one item (explode);
    objects and arrays of structures left out (None, noted)."""
    kind, _ = schema_type(schema, notes, label)
    if kind == "object":
        if required:
            raise SkipOperation(f"{label} is an object ({p.get('style') or 'form'} style)")
        notes.add(f"{label} (an object) left out")
        return None
    if kind != "array":
        return _Shape(kind or "string", schema)
    try:
        items, _ = doc.deref(schema.get("items") if isinstance(schema.get("items"), dict) else {})
    except RefError as exc:
        raise SkipOperation(f"{label} items: {exc}") from None
    item_schema = items if isinstance(items, dict) else {}
    sep = _separator(doc, p, where)
    item_kind, _ = schema_type(item_schema, notes, label + " items")
    if item_kind in ("object", "array"):
        if required:
            raise SkipOperation(f"{label} is an array of {item_kind}s")
        notes.add(f"{label} (array of {item_kind}s) left out")
        return None
    if sep is None:
        notes.add(f"{label}: array sent with explode=true; the tool sends one value")
        return _Shape(item_kind or "string", item_schema, items=item_schema)
    return _Shape("string", schema, items=item_schema, joined=True, sep=sep)


def _input_field(
    p: dict[str, Any], shape: _Shape, required: bool, secret: bool, notes: Notes, label: str
) -> dict[str, Any]:
    """The InputField mapping: type, required, secret, constraints and description."""
    field: dict[str, Any] = {}
    if shape.joined:
        assert shape.items is not None
        _joined_field(field, shape.items, shape.sep, notes, label)
    field["type"] = shape.kind
    if required:
        field["required"] = True
    if secret:
        field["secret"] = True
    if not shape.joined:
        _scalar_constraints(field, shape.schema, shape.kind, notes, label)
    desc = clean_text(
        p.get("description") or shape.schema.get("description"), FIELD_DESCRIPTION_LIMIT
    )
    if shape.joined:
        desc = (desc + " " if desc else "") + field.pop("_list_hint")
    if desc:
        field["description"] = desc
    return field


_FIELD_ORDER = ("type", "required", "secret", "description", "default", "enum", "minimum",
                "maximum", "min_length", "max_length", "pattern")  # fmt: skip


def _in_field_order(field: dict[str, Any]) -> dict[str, Any]:
    """The field's keys in the catalogue's order (unknown keys last, by first seen)."""
    return {k: field[k] for k in sorted(field, key=lambda k: (*_FIELD_ORDER, k).index(k))}


def _separator(doc: Document, p: dict[str, Any], where: str) -> str | None:
    """The join character for a non-exploded array, None for explode=true."""
    if doc.version == "2.0":
        fmt = p.get("collectionFormat") or "csv"
        return None if fmt == "multi" else _SWAGGER_SEPARATORS.get(fmt, ",")
    style = p.get("style") or ("form" if where == "query" else "simple")
    explode = p.get("explode", style == "form")
    if explode and style in ("form", "spaceDelimited", "pipeDelimited"):
        return None
    return _STYLE_SEPARATORS.get(style, ",")


def _joined_field(
    field: dict[str, Any], items: dict[str, Any], sep: str, notes: Notes, label: str
) -> None:
    values: list[str] = [
        str(v).lower() if isinstance(v, bool) else str(v)
        for v in as_list(items.get("enum"))
        if isinstance(v, (str, int, float))
    ]
    shown = ", ".join(values[:40]) + (f", … ({len(values) - 40} more)" if len(values) > 40 else "")
    sep_name = {",": "Comma", " ": "Space", "|": "Pipe", "\t": "Tab"}.get(sep, "Comma")
    field["_list_hint"] = f"{sep_name}-separated list" + (f" of: {shown}." if values else ".")
    if values and len(values) <= MAX_ENUM_IN_PATTERN:
        one = "(?:" + "|".join(re.escape(v) for v in values) + ")"
        field["pattern"] = f"^{one}(?:{re.escape(sep)}{one})*$"
    elif values and all(re.fullmatch(r"[A-Za-z0-9_.-]+", v) for v in values):
        one = "[A-Za-z0-9_.-]+"
        field["pattern"] = f"^{one}(?:{re.escape(sep)}{one})*$"
    elif items.get("pattern"):
        notes.add(f"{label}: item pattern not applied to the joined list")


def _scalar_constraints(
    field: dict[str, Any], schema: dict[str, Any], kind: str, notes: Notes, label: str
) -> None:
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        good = []
        for v in enum:
            ok, value = coerce(v, kind)
            if ok and value not in good:
                good.append(value)
        if len(good) < len([v for v in enum if v is not None]):
            notes.add(f"{label}: enum values that are not {kind} left out")
        if good:
            field["enum"] = good
    if "default" in schema:
        ok, value = coerce(schema["default"], kind)
        if ok and ("enum" not in field or value in field["enum"]):
            field["default"] = value
        elif schema["default"] is not None:
            notes.add(f"{label}: default {schema['default']!r} is not a valid {kind}; ignored")
    if kind in ("integer", "number"):
        for key, out in (("minimum", "minimum"), ("maximum", "maximum")):
            ok, value = coerce(schema.get(key), "number")
            if ok:
                field[out] = value
        if "default" in field and not _in_range(field["default"], field):
            notes.add(f"{label}: default {field.pop('default')!r} is out of range; ignored")
    if kind == "string":
        for key, out in (("minLength", "min_length"), ("maxLength", "max_length")):
            ok, value = coerce(schema.get(key), "integer")
            if ok and value >= 0:
                field[out] = value
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            if _usable_pattern(pattern):
                field["pattern"] = pattern
            else:
                notes.add(f"{label}: pattern {pattern!r} cannot be checked; left out")


def _usable_pattern(pattern: str) -> bool:
    if _UNSUPPORTED_REGEX.search(pattern):
        return False
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def _in_range(value: Any, field: dict[str, Any]) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return True
    lo, hi = field.get("minimum"), field.get("maximum")
    return (lo is None or value >= lo) and (hi is None or value <= hi)


def _fits(value: Any, field: dict[str, Any]) -> bool:
    if "enum" in field and value not in field["enum"]:
        return False
    if not _in_range(value, field):
        return False
    if isinstance(value, str):
        if len(value) < field.get("min_length", 0):
            return False
        if "max_length" in field and len(value) > field["max_length"]:
            return False
        if "pattern" in field and not re.search(field["pattern"], value):
            return False
    return True


def _explicit_example(
    p: dict[str, Any],
    schema: dict[str, Any],
    items: dict[str, Any] | None,
    kind: str,
    joined: bool,
    field: dict[str, Any],
    notes: Notes,
    label: str,
) -> Any:
    candidates: list[Any] = []
    if "example" in p:
        candidates.append(p["example"])
    if isinstance(p.get("examples"), dict):
        for ex in p["examples"].values():
            if isinstance(ex, dict) and "value" in ex:
                candidates.append(ex["value"])
    if "example" in schema:
        candidates.append(schema["example"])
    if isinstance(schema.get("examples"), list):
        candidates.extend(schema["examples"])
    for cand in candidates:
        value = cand
        if joined and isinstance(cand, list):
            value = ",".join(str(c) for c in cand)
        ok, coerced = coerce(value, kind)
        if ok and _fits(coerced, field):
            return coerced
        notes.add(f"{label}: example {cand!r} is not a valid {kind}; ignored")
    return None


_GEO = {"latitude": 52.52, "lat": 52.52, "longitude": 13.41, "lon": 13.41, "lng": 13.41}


def _derive(name: str, kind: str, field: dict[str, Any], schema: dict[str, Any]) -> Any:
    """A value that passes the field's checks, from the default, the enum, or the name."""
    if "default" in field:
        return field["default"]
    if field.get("enum"):
        return field["enum"][0]
    lower = name.lower()
    candidates: list[Any]
    if kind == "boolean":
        candidates = [False]
    elif kind in ("integer", "number"):
        lo = field.get("minimum")
        base: list[Any] = [_GEO[lower]] if lower in _GEO else []
        base += [lo if lo is not None else 1, 1, 0]
        candidates = [int(v) if kind == "integer" else float(v) for v in base]
    else:
        fmt = schema.get("format")
        candidates = []
        if fmt == "date":
            candidates.append("2025-01-01")
        elif fmt == "date-time":
            candidates.append("2025-01-01T00:00:00Z")
        if lower in _GEO:
            candidates.append(str(_GEO[lower]))
        candidates += ["1", "example", "a"]
    for cand in candidates:
        if kind == "integer" and isinstance(cand, float) and cand != int(cand):
            continue
        if _fits(cand, field):
            return cand
    return None
