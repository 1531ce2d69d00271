"""JSON Schema (as OpenAPI writes it) to catalogue fields: tool inputs from parameters, output
fields from the success response, example values, and soft-failure rules.

Real descriptions break the rules (`type: int`, `type: HourlyResponse`, `example: 13.419.52`);
each such case becomes a warning and the nearest safe reading, never an exception.
"""

from __future__ import annotations

import keyword
import math
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from realprobe.adapters.openapi.document import Document, RefError

JSON_TYPES = ("string", "integer", "number", "boolean", "object", "array", "null")
#: what careless descriptions write instead of a JSON Schema type
TYPE_ALIASES = {
    "int": "integer", "int32": "integer", "int64": "integer", "long": "integer",
    "float": "number", "double": "number", "decimal": "number",
    "bool": "boolean", "str": "string", "text": "string", "date": "string",
    "datetime": "string", "dict": "object", "map": "object", "list": "array",
}  # fmt: skip
_RESERVED = set(dir(BaseModel)) | set(keyword.kwlist) | {"self"}
MAX_OUTPUT_DEPTH = 2  # array items get their fields; arrays inside items pass through whole
#: a joined list is checked against the item enum up to this many values; beyond, the pattern
#: only checks the list's shape (a 300-value alternation would bloat every tools/list)
MAX_ENUM_IN_PATTERN = 60
DESCRIPTION_LIMIT = 600
FIELD_DESCRIPTION_LIMIT = 300
SECRET_NAME_RE = re.compile(r"(api[-_]?key|apikey|token|secret|password|passwd|auth)", re.I)


@dataclass
class Notes:
    """Warnings for one operation, each one line."""

    lines: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        if text not in self.lines:
            self.lines.append(text)


def as_dict(value: Any) -> dict[str, Any]:
    """A mapping from the document, or {} where it holds something else."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """A list from the document, or [] where it holds something else."""
    return value if isinstance(value, list) else []


# -- text ------------------------------------------------------------------------------------


def clean_text(text: Any, limit: int = DESCRIPTION_LIMIT) -> str:
    """Markdown/HTML to one short plain paragraph an agent can act on."""
    if not isinstance(text, str):
        return ""
    s = re.sub(r"<[^>]{1,200}>", " ", text)
    s = re.sub(r"!?\[([^\]]*)\]\((?:[^()\s]|\([^()\s]*\))*\)", r"\1", s)  # [text](url) -> text
    s = re.sub(r"(?m)^\s{0,3}(#{1,6}|>+|[-*+]\s)\s*", "", s)
    s = s.replace("**", "").replace("__", "")
    s = re.sub(r"\s+", " ", s).strip()
    if len(s) <= limit:
        return s
    cut = s[:limit]
    end = max(cut.rfind(". "), cut.rfind("; "))
    return (cut[: end + 1] if end > limit // 2 else cut.rstrip() + "…").strip()


def identifier(name: str, taken: set[str] | None = None) -> str:
    """A Python-safe field name for a wire name (`filter[name]` -> `filter_name`)."""
    s = re.sub(r"[^a-zA-Z0-9_]+", "_", name).strip("_") or "arg"
    if s[0].isdigit():
        s = "p_" + s
    if s in _RESERVED or s.startswith("model_"):
        s += "_"
    base, n = s, 2
    while taken is not None and s in taken:
        s = f"{base}_{n}"
        n += 1
    return s


# -- schema reading --------------------------------------------------------------------------


def resolve(doc: Document, node: Any, notes: Notes, where: str) -> dict[str, Any] | None:
    """A schema with its `$ref` followed, or None (with a note) when it cannot be."""
    try:
        target, _ = doc.deref(node)
    except RefError as exc:
        notes.add(f"{where}: {exc}")
        return None
    return target if isinstance(target, dict) else None


def schema_type(schema: dict[str, Any], notes: Notes, where: str) -> tuple[str | None, bool]:
    """(JSON type or None when unknown, nullable)."""
    raw = schema.get("type")
    nullable = bool(schema.get("nullable"))
    if isinstance(raw, list):
        kinds = [t for t in raw if t != "null"]
        nullable = nullable or "null" in raw
        raw = kinds[0] if len(kinds) == 1 else None if not kinds else "any"
        if raw == "any":
            return None, nullable
    if raw is None:
        if "properties" in schema:
            return "object", nullable
        if "items" in schema:
            return "array", nullable
        if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
            return _type_of_value(schema["enum"][0]), nullable
        return None, nullable
    if not isinstance(raw, str):
        notes.add(f"{where}: `type` {raw!r} is not a type name; read as any")
        return None, nullable
    if raw in JSON_TYPES:
        return (None if raw == "null" else raw), nullable or raw == "null"
    alias = TYPE_ALIASES.get(raw.lower())
    if alias:
        notes.add(f"{where}: `type: {raw}` is not a JSON Schema type; read as {alias}")
        return alias, nullable
    notes.add(f"{where}: `type: {raw}` is not a JSON Schema type; read as any")
    return None, nullable


def _type_of_value(value: Any) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


def coerce(value: Any, kind: str) -> tuple[bool, Any]:
    """(ok, value) for a scalar of JSON type `kind`, without inventing anything."""
    if value is None:
        return False, None
    if kind == "string":
        if isinstance(value, (dict, list)):
            return False, None
        return True, (str(value).lower() if isinstance(value, bool) else str(value))
    if kind == "boolean":
        if isinstance(value, bool):
            return True, value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return True, value.lower() == "true"
        return False, None
    if kind in ("integer", "number"):
        if isinstance(value, bool):
            return False, None
        try:
            num = float(value) if isinstance(value, str) else value
        except ValueError:
            return False, None
        if not isinstance(num, (int, float)) or not math.isfinite(num):
            return False, None
        if kind == "integer":
            if float(num) != int(num):
                return False, None
            return True, int(num)
        return True, float(num) if isinstance(value, str) else num
    return False, None


def merge_object(
    doc: Document, schema: dict[str, Any], notes: Notes, where: str, seen: tuple[str, ...] = ()
) -> dict[str, Any]:
    """allOf/oneOf/anyOf folded into one schema (`properties`, `required`), refs followed."""
    out: dict[str, Any] = {k: v for k, v in schema.items() if k not in ("allOf", "oneOf", "anyOf")}
    props: dict[str, Any] = dict(as_dict(schema.get("properties")))
    required: list[str] = [r for r in as_list(schema.get("required")) if isinstance(r, str)]
    for part in as_list(schema.get("allOf")):
        try:
            sub, sub_seen = doc.deref(part, seen)
        except RefError as exc:
            notes.add(f"{where}: {exc}")
            continue
        if isinstance(sub, dict):
            sub = merge_object(doc, sub, notes, where, sub_seen)
            props.update(as_dict(sub.get("properties")))
            required += as_list(sub.get("required"))
            for key in ("type", "items", "description"):
                if key in sub:
                    out.setdefault(key, sub[key])
    branches = [*as_list(schema.get("oneOf")), *as_list(schema.get("anyOf"))]
    for part in branches:
        try:
            sub, sub_seen = doc.deref(part, seen)
        except RefError as exc:
            notes.add(f"{where}: {exc}")
            continue
        if isinstance(sub, dict) and sub.get("type") != "null":
            sub = merge_object(doc, sub, notes, where, sub_seen)
            for k, v in as_dict(sub.get("properties")).items():
                props.setdefault(k, v)
            if (
                len(branches)
                - sum(isinstance(b, dict) and b.get("type") == "null" for b in branches)
                == 1
            ):
                required += as_list(sub.get("required"))
                for key in ("type", "items", "description"):
                    if key in sub:
                        out.setdefault(key, sub[key])
    if props:
        out["properties"] = props
        out.setdefault("type", "object")
    out["required"] = required
    return out


# -- outputs ---------------------------------------------------------------------------------

_OUT_TYPES = {"string", "integer", "number", "boolean", "object", "array"}


def output_fields(
    doc: Document, schema: Any, notes: Notes, where: str
) -> dict[str, dict[str, Any]]:
    """OutputField mappings for a success body's schema."""
    try:
        node, seen = doc.deref(schema)
    except RefError as exc:
        notes.add(f"{where}: {exc}; output is the whole body")
        return {"body": {"type": "any", "from": "", "description": "The response body"}}
    if not isinstance(node, dict):
        return {"body": {"type": "any", "from": "", "description": "The response body"}}
    node = merge_object(doc, node, notes, where, seen)
    kind, _ = schema_type(node, notes, where)
    if kind == "object" and node.get("properties"):
        return _object_fields(doc, node, notes, where, seen, depth=0)
    desc = clean_text(node.get("description"), FIELD_DESCRIPTION_LIMIT) or "The response body"
    if kind == "array":
        field_ = _field(doc, node, notes, where, seen, depth=0, optional=False)
        field_.update({"from": "", "description": desc})
        return {"items": field_}
    return {"body": {"type": kind or "any", "from": "", "description": desc}}


def _deref_child(doc: Document, node: Any, seen: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
    """A property's or item's schema. A `$ref` back to an enclosing schema is recursion (a
    tree), not a broken cycle: it is read as its type alone, without descending again."""
    if isinstance(node, dict) and node.get("$ref") in seen:
        target = doc.lookup(node["$ref"])
        if isinstance(target, dict):
            kind = "array" if "items" in target and "properties" not in target else "object"
            return {
                "type": target.get("type", kind),
                "description": target.get("description"),
            }, seen
    return doc.deref(node, seen)


def _object_fields(
    doc: Document,
    node: dict[str, Any],
    notes: Notes,
    where: str,
    seen: tuple[str, ...],
    depth: int,
) -> dict[str, dict[str, Any]]:
    required = {r for r in as_list(node.get("required")) if isinstance(r, str)}
    out: dict[str, dict[str, Any]] = {}
    taken: set[str] = set()
    for key in sorted(as_dict(node.get("properties"))):
        if not isinstance(key, str) or "." in key or not key:
            notes.add(f"{where}: output property {key!r} cannot be addressed; left out")
            continue
        try:
            sub, sub_seen = _deref_child(doc, node["properties"][key], seen)
        except RefError as exc:
            notes.add(f"{where}.{key}: {exc}; read as any")
            sub, sub_seen = {}, seen
        if not isinstance(sub, dict):
            sub = {}
        name = identifier(key, taken)
        taken.add(name)
        f = _field(doc, sub, notes, f"{where}.{key}", sub_seen, depth, key not in required)
        if name != key:
            f["from"] = key
        out[name] = f
    return out


def _field(
    doc: Document,
    schema: dict[str, Any],
    notes: Notes,
    where: str,
    seen: tuple[str, ...],
    depth: int,
    optional: bool,
) -> dict[str, Any]:
    schema = merge_object(doc, schema, notes, where, seen)
    kind, nullable = schema_type(schema, notes, where)
    f: dict[str, Any] = {"type": kind if kind in _OUT_TYPES else "any"}
    desc = clean_text(schema.get("description") or schema.get("title"), FIELD_DESCRIPTION_LIMIT)
    if desc:
        f["description"] = desc
    if optional or nullable:
        f["optional"] = True
    if kind == "array":
        try:
            items, items_seen = _deref_child(doc, as_dict(schema.get("items")), seen)
        except RefError as exc:
            notes.add(f"{where}[]: {exc}; items read as any")
            items, items_seen = {}, seen
        if isinstance(items, dict):
            items = merge_object(doc, items, notes, where + "[]", items_seen)
            item_kind, _ = schema_type(items, notes, where + "[]")
            if item_kind == "object" and items.get("properties") and depth < MAX_OUTPUT_DEPTH - 1:
                sub = _object_fields(doc, items, notes, where + "[]", items_seen, depth + 1)
                if sub:
                    f["items"] = sub
            elif item_kind in ("string", "integer", "number", "boolean"):
                f["item_type"] = item_kind
    return f


# -- soft failures ----------------------------------------------------------------------------

_FAIL_STATUS = ("error", "fail", "failed", "failure", "err")


def soft_failure_rules(
    doc: Document, schema: Any, notes: Notes, where: str, api_name: str
) -> list[dict[str, Any]]:
    """Rules for an error the description documents inside a 2xx body."""
    try:
        node, seen = doc.deref(schema)
    except RefError:
        return []
    if not isinstance(node, dict):
        return []
    rules: list[dict[str, Any]] = []
    branches = [*as_list(node.get("oneOf")), *as_list(node.get("anyOf"))]
    for part in branches:
        ref = part.get("$ref") if isinstance(part, dict) else None
        try:
            sub, sub_seen = doc.deref(part, seen)
        except RefError:
            continue
        if not isinstance(sub, dict):
            continue
        label = f"{ref or ''} {sub.get('title') or ''}".lower()
        if "error" in label or "fault" in label or "problem" in label:
            sub = merge_object(doc, sub, Notes(), where, sub_seen)
            others: set[str] = set()
            for other in branches:
                if other is part:
                    continue
                try:
                    o, o_seen = doc.deref(other, seen)
                except RefError:
                    continue
                if isinstance(o, dict):
                    merged_o = merge_object(doc, o, Notes(), where, o_seen)
                    others |= set(as_dict(merged_o.get("properties")))
            own = [p for p in as_list(sub.get("required")) or sorted(as_dict(sub.get("properties")))
                   if p not in others]  # fmt: skip
            if own:
                rules.append({
                    "path": own[0], "exists": True, "code": "INVALID_RESPONSE",
                    "message": f"{api_name} answered an error object inside a success status",
                })  # fmt: skip
    merged = merge_object(doc, node, Notes(), where, seen)
    props = as_dict(merged.get("properties"))
    for key, code_hint in (("error", True), ("success", False), ("ok", False)):
        sub = resolve(doc, props.get(key), Notes(), where) if key in props else None
        if sub is not None and sub.get("type") == "boolean":
            rules.append({
                "path": key, "equals": code_hint, "code": "INVALID_RESPONSE",
                "message": f"{api_name} reported `{key}: {str(code_hint).lower()}` "
                           "inside a success status",
            })  # fmt: skip
    status = resolve(doc, props.get("status"), Notes(), where) if "status" in props else None
    if status is not None and isinstance(status.get("enum"), list):
        bad = [v for v in status["enum"] if isinstance(v, str) and v.lower() in _FAIL_STATUS]
        if bad:
            rules.append({
                "path": "status", "in": bad, "code": "INVALID_RESPONSE",
                "message": f"{api_name} reported status {'/'.join(bad)} inside a success status",
            })  # fmt: skip
    if rules:
        notes.add(f"{where}: error body documented inside 2xx; {len(rules)} soft-failure rule(s)")
    return rules
