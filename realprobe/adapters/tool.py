"""A Tool: one catalogue entry turned into pydantic models, a request builder and a parser."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cached_property, lru_cache
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import SchemaValidator

from realprobe.adapters import parsers, schema_json
from realprobe.adapters.bounded import DEFAULT_LIMITS, ParseLimits, load_json, load_text
from realprobe.adapters.spec import PLACEHOLDER_RE, ApiSpec, InputField, OutputField, Rule, ToolSpec
from realprobe.errors import BadResponse, ErrorCode
from realprobe.secrets import secret_header, secret_name

_PY_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict[str, Any],
    "any": Any,
}


#: scalar output types whose values the validator hands back as they are when of exactly
#: that type (None: any value)
_EXACT: dict[str, type | None] = {"string": str, "integer": int, "number": float,
                                  "boolean": bool, "any": None}


def _input_field(f: InputField) -> tuple[Any, Any]:
    ann = Literal[tuple(f.enum)] if f.enum else _PY_TYPES[f.type]
    constraints: dict[str, Any] = {"description": f.description or None}
    constraints.update({field: getattr(f, attr) for attr, field, _ in schema_json.BOUNDS
                        if getattr(f, attr) is not None})
    if f.secret:
        constraints["json_schema_extra"] = {"writeOnly": True, "format": "password"}
    if f.required:
        return (ann, Field(..., **constraints))
    return (ann | None, Field(default=f.default, **constraints))


def _output_annotation(name: str, f: OutputField, owner: str) -> Any:
    if f.type == "array":
        if f.items:
            item_model = create_model(  # type: ignore[call-overload]
                schema_json.model_name(owner, name.title() + "Item"),
                **{k: _output_field(k, v, owner + name) for k, v in f.items.items()},
            )
            return list[item_model]  # type: ignore[valid-type]
        return list[_PY_TYPES[f.item_type or "any"]]  # type: ignore[misc]
    return _PY_TYPES[f.type]


def _output_field(name: str, f: OutputField, owner: str) -> tuple[Any, Any]:
    ann = _output_annotation(name, f, owner)
    desc = f.description or None
    if f.optional:
        return (ann | None, Field(default=None, description=desc))
    return (ann, Field(..., description=desc))


#: characters an argument may keep literally inside a path segment
PATH_SAFE = ",:@!$'()*+"


@lru_cache(maxsize=4096)
def _parts(template: str) -> tuple[str, ...]:
    """A template split once: literal text at even places, placeholder names at odd ones."""
    return tuple(PLACEHOLDER_RE.split(template))


def _fill(template: str, args: dict[str, Any], *, in_path: bool) -> str | None:
    """A template with its placeholders filled from `args`; None when one is unset."""
    parts = _parts(template)
    if len(parts) == 1:
        return _no_dot_segments(template) if in_path else template
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(part)
            continue
        v = args.get(part)
        if v is None:
            return None
        text = str(v).lower() if isinstance(v, bool) else str(v)
        # an argument stays inside its segment: `/ ? # & = ;` are encoded; list separators
        # stay literal (JokeAPI takes `Programming,Pun` in the path)
        out.append(quote(text, safe=PATH_SAFE) if in_path else text)
    filled = "".join(out)
    return _no_dot_segments(filled) if in_path else filled


@lru_cache(maxsize=4096)
def _no_dot_segments(path: str) -> str:
    """Encode `.` and `..` segments (an argument of `..` must not climb the path)."""
    parts = path.split("/")
    return "/".join(p.replace(".", "%2E") if p in (".", "..") else p for p in parts)


MISSING = object()
_MISSING = MISSING  # what `lookup` returns for an absent path


def lookup(body: Any, path: str | None) -> Any:
    """Read a dotted path (`a.b.0.c`) from parsed JSON; `_MISSING` when absent."""
    if path is None or path == "":
        return body
    if type(body) is dict and "." not in path:  # a top-level key: most fields
        return body.get(path, _MISSING)
    cur = body
    for part in path.split("."):
        if isinstance(cur, dict):
            if part not in cur:
                return _MISSING
            cur = cur[part]
        elif isinstance(cur, list):
            try:
                cur = cur[int(part)]
            except (ValueError, IndexError):
                return _MISSING
        else:
            return _MISSING
    return cur


#: one output field, read once from its OutputField: (name, path, path is one key,
#: optional, array, max_items, the plan of its items)
_Read = tuple[str, str, bool, bool, bool, "int | None", "tuple[_Read, ...] | None"]


def _plan(fields: dict[str, OutputField]) -> tuple[_Read, ...]:
    out = []
    for name, f in fields.items():
        path = f.from_ if f.from_ is not None else name
        array = f.type == "array"
        items = _plan(f.items) if array and f.items else None
        out.append((name, path, path != "" and "." not in path, f.optional, array,
                    f.max_items, items))
    return tuple(out)


def _extract(body: Any, plan: tuple[_Read, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    top = body if type(body) is dict else None
    for name, path, key, optional, array, max_items, items in plan:
        value = top.get(path, _MISSING) if key and top is not None else lookup(body, path)
        if value is _MISSING or value is None:
            if optional:
                out[name] = None
                continue
            raise BadResponse(
                ErrorCode.INVALID_RESPONSE, f"field {name!r} missing at {path or name!r}"
            )
        if array and isinstance(value, list):
            if max_items is not None:
                value = value[:max_items]
            if items:
                value = [_extract(el, items) for el in value]
        out[name] = value
    return out


def _same(value: Any, expected: Any) -> bool:
    """Equality that keeps booleans apart from 0 and 1."""
    if isinstance(expected, bool) or isinstance(value, bool):
        return type(value) is type(expected) and value == expected
    return bool(value == expected)


def _rule_matches(rule: Rule, body: Any) -> bool:
    value = lookup(body, rule.path)
    present = value is not _MISSING
    if rule.exists is not None:
        return present == rule.exists
    if not present:
        return False
    if rule.equals is not None:
        return _same(value, rule.equals)
    if rule.not_equals is not None:
        return not _same(value, rule.not_equals)
    if rule.contains is not None:
        return isinstance(value, str) and rule.contains.lower() in value.lower()
    if rule.in_ is not None:
        return value in rule.in_
    if rule.not_in is not None:
        return value not in rule.not_in
    if rule.matches is not None:
        return isinstance(value, str) and re.search(rule.matches, value) is not None
    return False


class Tool:
    """One callable tool. Pure: builds requests and parses bodies; the network is elsewhere."""

    def __init__(self, api: ApiSpec, spec: ToolSpec) -> None:
        self.api = api
        self.spec = spec
        self.name = spec.name
        self.limits: ParseLimits = DEFAULT_LIMITS
        for name, f in spec.input.items():
            if f.pattern is not None:
                try:
                    re.compile(f.pattern)
                except re.error as exc:
                    raise ValueError(
                        f"tool {spec.name!r}: input {name!r} has an invalid pattern: {exc}"
                    ) from exc
        for i, example in enumerate(spec.examples):
            problem = schema_json.example_problem(spec, example)
            if problem is not None:
                where, msg = problem
                raise ValueError(
                    f"tool {spec.name!r}: examples[{i}] fails the input schema at {where}: "
                    f"{msg[0].upper() + msg[1:]}"
                )

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a catalogue shipped to workers) without the requests prepared here: they
        may carry declared secrets."""
        return {k: v for k, v in self.__dict__.items() if k != "prepared"}

    @property
    def api_id(self) -> str:
        return self.api.id

    @cached_property
    def input_model(self) -> type[BaseModel]:
        """Built on first use, like the output model (examples are checked at load)."""
        fields = {name: _input_field(f) for name, f in self.spec.input.items()}
        return create_model(  # type: ignore[call-overload,no-any-return]
            schema_json.model_name(self.name, "Input"),
            __config__=ConfigDict(extra="forbid", strict=False), **fields)

    @cached_property
    def output_model(self) -> type[BaseModel]:
        """Built on first use: most tools of a large catalogue are listed, not called."""
        fields = {k: _output_field(k, v, self.name) for k, v in self.spec.output.items()}
        return create_model(schema_json.model_name(self.name, "Output"), **fields)  # type: ignore[call-overload,no-any-return]

    @cached_property
    def _validate_input(self) -> Callable[[Any], dict[str, Any]]:
        """`input_model.model_validate(args).model_dump()` without the two method calls."""
        model = self.input_model
        validate, dump = model.__pydantic_validator__.validate_python, model.__pydantic_serializer__
        return lambda args: dump.to_python(validate(args))  # type: ignore[no-any-return]

    @cached_property
    def _validate_output(self) -> Callable[[Any], dict[str, Any]]:
        """`output_model.model_validate(data).model_dump(mode="json")`, likewise. Fields of
        JSON values only (no array of objects, whose items are models): the model's field
        validator alone gives that dict, without building the model and dumping it."""
        model = self.output_model
        schema = model.__pydantic_core_schema__
        if schema["type"] == "model" and not any(f.items for f in self.spec.output.values()):
            fields = SchemaValidator(schema["schema"], schema.get("config")).validate_python
            out = self.spec.output
            if not all(f.type in _EXACT for f in out.values()):
                return lambda data: fields(data)[0]  # type: ignore[no-any-return]
            plan = tuple((name, _EXACT[f.type], f.optional) for name, f in out.items())

            def scalars(data: dict[str, Any]) -> dict[str, Any]:
                # values of their field's exact type (or None where optional) are what the
                # validator would hand back: checked in one loop; anything else goes to it
                if len(data) == len(plan):
                    for name, kind, optional in plan:
                        value = data.get(name, data)  # `data`: the field is absent
                        if value is data or (kind is not None and type(value) is not kind
                                             and not (optional and value is None)):
                            break
                    else:
                        return data
                return fields(data)[0]  # type: ignore[no-any-return]

            return scalars
        validate, dump = model.__pydantic_validator__.validate_python, model.__pydantic_serializer__
        return lambda data: dump.to_python(validate(data), mode="json")  # type: ignore[no-any-return]

    @cached_property
    def prepared(self) -> dict[Any, Any]:
        """Requests built for arguments seen before (`adapter._prepare`'s cache)."""
        return {}

    @cached_property
    def _output_plan(self) -> tuple[_Read, ...]:
        return _plan(self.spec.output)

    @cached_property
    def _flat_plan(self) -> tuple[tuple[str, str], ...] | None:
        """(name, key) of each output field when every one is a top-level key taken as it is
        (no item fields, no cut)."""
        plan = self._output_plan
        if all(key and not (array and (cut is not None or items))
               for _, _, key, _, array, cut, items in plan):
            return tuple((r[0], r[1]) for r in plan)
        return None

    def extract(self, decoded: Any) -> dict[str, Any]:
        """The output fields read from a decoded body, not yet checked against their types;
        BadResponse when a required one is missing."""
        flat = self._flat_plan
        if flat is not None and type(decoded) is dict:
            out = {}
            for name, key in flat:  # a body holding every field: read in one short loop
                value = decoded.get(key)
                if value is None:  # missing or null: `_extract` says what that means
                    break
                out[name] = value
            else:
                return out
        return _extract(decoded, self._output_plan)

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        return schema_json.input_schema(self.spec)

    @cached_property
    def output_schema(self) -> dict[str, Any]:
        return schema_json.output_schema(self.spec)

    @property
    def examples(self) -> list[dict[str, Any]]:
        return self.spec.examples

    @cached_property
    def secret_inputs(self) -> frozenset[str]:
        """Inputs declared `secret = true` in the catalogue, and inputs sent as a credential
        (filling a query parameter or header named like one)."""
        out = {n for n, f in self.spec.input.items() if f.secret}
        for key, template in self.spec.query.items():
            if secret_name(key):
                out.update(PLACEHOLDER_RE.findall(template))
        for key, template in self.spec.headers.items():
            if secret_header(key):
                out.update(PLACEHOLDER_RE.findall(template))
        return frozenset(out & set(self.spec.input))

    def secret_values(self, args: dict[str, Any] | None) -> list[str]:
        """The values of secret inputs in `args` (to declare them secret before use)."""
        if not args or not self.secret_inputs:
            return []
        return [str(args[n]) for n in self.secret_inputs if args.get(n) is not None]

    def validate_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validated arguments with defaults filled in; raises pydantic.ValidationError."""
        return self._validate_input(args)

    def build_request(self, args: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
        """(method, url, query params) for validated args. Unset optional params are dropped."""
        path = _fill(self.spec.path, args, in_path=True)
        if path is None:
            raise ValueError(f"{self.name}: a path argument is missing")
        params: dict[str, str] = {}
        for key, template in self.spec.query.items():
            value = _fill(template, args, in_path=False)
            if value is not None:
                params[key] = value
        return self.spec.method, self.api.base_url + path, params

    def request_headers(self, args: dict[str, Any] | None = None) -> dict[str, str]:
        """Headers to send; `{name}` placeholders are filled from `args` (a header whose
        argument is unset is left out)."""
        headers: dict[str, str] = {}
        for key, template in self.spec.headers.items():
            names = PLACEHOLDER_RE.findall(template)
            if not names:
                headers[key] = template
            elif args is not None and all(args.get(n) is not None for n in names):
                headers[key] = PLACEHOLDER_RE.sub(lambda m: str(args[m.group(1)]), template)
        if self.api.accept_json and self.spec.response == "json":
            headers.setdefault("Accept", "application/json")
        return headers

    def parse(self, body: bytes) -> dict[str, Any]:
        """Body bytes to output data under `self.limits`. Raises BadResponse with the code to
        report (and nothing else: a parser or rule that trips over odd data is the server's
        INVALID_RESPONSE, not a crash)."""
        try:
            if self.spec.response == "text":
                decoded: Any = load_text(body, self.limits)
            else:
                decoded = load_json(body, self.limits)
            for rule in self.spec.soft_failures:
                if _rule_matches(rule, decoded):
                    raise BadResponse(rule.code, rule.message)
            if self.spec.parser:
                decoded = parsers.get(self.spec.parser)(decoded)
            data = self.extract(decoded)
            try:
                return self._validate_output(data)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise BadResponse(
                    ErrorCode.INVALID_RESPONSE, f"output fails schema at {where}: {first['msg']}"
                ) from exc
        except BadResponse:
            raise
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as exc:
            raise BadResponse(
                ErrorCode.INVALID_RESPONSE, f"body could not be read ({type(exc).__name__}: {exc})"
            ) from exc

    # -- definitions for agents -------------------------------------------------------

    def mcp_definition(self) -> dict[str, Any]:
        """The MCP tool exactly as the MCP server lists it."""
        from realprobe.adapters.exports import mcp_definition

        return mcp_definition(self)

    def openai_definition(self, *, strict: bool = False) -> dict[str, Any]:
        """An OpenAI chat-completions function tool (strict mode on request)."""
        from realprobe.adapters.exports import openai_chat

        return openai_chat(self, strict=strict)

    def catalog_entry(self) -> dict[str, Any]:
        return {
            **self.mcp_definition(),
            "api": {
                "id": self.api.id,
                "name": self.api.name,
                "base_url": self.api.base_url,
                "docs_url": self.api.docs_url,
                "category": self.api.category,
                "https": self.api.https,
                "in_public_apis": self.api.in_public_apis,
            },
            "method": self.spec.method,
            "path": self.spec.path,
            "examples": self.spec.examples,
            "fixtures": [
                {"kind": f.kind, "source": f.source, "origin": f.origin}
                for f in self.spec.fixtures
            ],
            "sandbox_ready": any(f.kind == "ok" for f in self.spec.fixtures),
            **({"no_fixture": self.spec.no_fixture} if self.spec.no_fixture else {}),
        }
