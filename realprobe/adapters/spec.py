"""The declarative catalogue format: what a TOML/YAML/JSON catalogue file may say.

Built-in APIs and user catalogues (`--catalog my.toml`) use the same models, so a user adds
an API without writing Python. Python is needed only for a named `parser` (see parsers.py).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from realprobe.addresses import is_metadata_url
from realprobe.errors import ErrorCode

TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
API_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")
PLACEHOLDER_RE = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*)\}")

ScalarType = Literal["string", "integer", "number", "boolean"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InputField(_Strict):
    """One argument of a tool. Becomes a field of the tool's pydantic input model."""

    type: ScalarType = "string"
    description: str = ""
    required: bool = False
    default: Any = None
    enum: list[Any] | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    #: a credential (API key, token): never written anywhere (rows, cassettes, reports, logs)
    secret: bool = False


class OutputField(_Strict):
    """One field of a tool's structured output, read from the response at `from`.

    `from` is a dotted path into the parsed body: `slip.advice`, `0.q`, `flags.png`;
    an empty path means the body itself (a text body, or a whole list). For an array of
    objects, `items` declares the fields of each element, read relative to the element.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: Literal["string", "integer", "number", "boolean", "object", "array", "any"] = "string"
    from_: str | None = Field(default=None, alias="from")
    description: str = ""
    optional: bool = False
    items: dict[str, OutputField] | None = None
    item_type: Literal["string", "integer", "number", "boolean", "any"] | None = None
    max_items: int | None = None

    @model_validator(mode="after")
    def _items_only_for_arrays(self) -> OutputField:
        if (self.items or self.item_type) and self.type != "array":
            raise ValueError("items/item_type are only allowed when type = 'array'")
        return self


class Rule(_Strict):
    """A soft-failure rule: a 200 body that is really an error (first matching rule wins)."""

    path: str = ""
    equals: Any = None
    not_equals: Any = None
    contains: str | None = None
    exists: bool | None = None
    in_: list[Any] | None = Field(default=None, alias="in")
    not_in: list[Any] | None = None
    matches: str | None = None
    code: ErrorCode = ErrorCode.INVALID_RESPONSE
    message: str

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _one_condition(self) -> Rule:
        conditions = [
            name
            for name in ("equals", "not_equals", "contains", "exists", "in_", "not_in", "matches")
            if getattr(self, name) is not None
        ]
        if len(conditions) != 1:
            raise ValueError(
                "a soft-failure rule needs exactly one of equals, not_equals, contains, "
                f"exists, in, not_in, matches (got {len(conditions)})"
            )
        return self


class Fixture(_Strict):
    """A real response body for the sandbox and the tests, with where it came from."""

    kind: Literal["ok", "soft_failure", "error"] = "ok"
    status: int = 200
    content_type: str = "application/json"
    headers: dict[str, str] = Field(default_factory=dict)
    body: str
    code: ErrorCode | None = None
    source: str = Field(min_length=1)
    note: str = ""
    #: the arguments this body answers (`when = { name = "france" }`); empty: any arguments.
    #: Compared as strings, case-insensitively. A list gives values the API answers with the
    #: same body (`when = { id_or_name = ["1", "red"] }`: one resource, by id or by name).
    when: dict[str, str | int | float | bool | list[str | int | float | bool]] = Field(
        default_factory=dict
    )
    #: the API's real answer to input it does not know (a 404 body, an empty list): the
    #: sandbox serves it when no fixture's `when` matches the arguments of a request
    unknown_input: bool = False
    #: `documentation`: an example body copied from the API's description, not a response
    #: anyone received; `recorded`: a body a real call returned
    origin: Literal["recorded", "documentation"] = "recorded"
    recorded_at: str | None = None

    @model_validator(mode="after")
    def _failure_has_code(self) -> Fixture:
        if self.kind != "ok" and self.code is None:
            raise ValueError("a soft_failure or error fixture needs `code`")
        if self.kind == "error" and self.status < 400:
            raise ValueError("an error fixture needs its HTTP `status` (>= 400)")
        return self


class ToolSpec(_Strict):
    name: str
    title: str
    description: str
    method: Literal["GET", "POST"] = "GET"
    path: str
    query: dict[str, str] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    response: Literal["json", "text"] = "json"
    input: dict[str, InputField] = Field(default_factory=dict)
    output: dict[str, OutputField]
    examples: list[dict[str, Any]] = Field(default_factory=lambda: [dict[str, Any]()])
    soft_failures: list[Rule] = Field(default_factory=list)
    parser: str | None = None
    fixtures: list[Fixture] = Field(default_factory=list)
    #: response fields that echo an argument, `{ "name" = "name" }` (dotted field path ->
    #: argument): the sandbox writes the request's argument there when it serves a fixture
    echo: dict[str, str] = Field(default_factory=dict)
    #: why the tool has no body to serve (the sandbox answers it with a "no fixture" error)
    no_fixture: str | None = None

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        if not TOOL_NAME_RE.match(v):
            raise ValueError(f"tool name {v!r} must match {TOOL_NAME_RE.pattern}")
        return v

    @field_validator("path")
    @classmethod
    def _path_slash(cls, v: str) -> str:
        if not v.startswith("/") and v != "":
            raise ValueError("path must start with '/'")
        if "?" in v or "#" in v:
            raise ValueError(
                f"path {v!r} holds a query or fragment: put query parameters under `query` "
                "(e.g. query = { q = \"{q}\" })"
            )
        return v

    @model_validator(mode="after")
    def _placeholders_declared(self) -> ToolSpec:
        used = set(PLACEHOLDER_RE.findall(self.path))
        for value in [*self.query.values(), *self.headers.values()]:
            used |= set(PLACEHOLDER_RE.findall(value))
        missing = used - set(self.input)
        if missing:
            raise ValueError(f"placeholders {sorted(missing)} are not declared in `input`")
        if not self.examples:
            raise ValueError("examples must hold at least one argument set ({} for none)")
        for where, names in (
            ("echo", set(self.echo.values())),
            ("fixtures' `when`", {k for f in self.fixtures for k in f.when}),
        ):
            unknown = names - set(self.input)
            if unknown:
                raise ValueError(f"{where} names arguments not in `input`: {sorted(unknown)}")
        return self


class Politeness(_Strict):
    """How hard realprobe may hit one API (per host)."""

    max_in_flight: int = 1
    min_interval_s: float = 1.0
    jitter_s: float = 0.5
    daily_budget: int = 500


class ApiSpec(_Strict):
    id: str
    name: str
    base_url: str
    docs_url: str
    category: str
    https: bool
    in_public_apis: bool = True
    accept_json: bool = True
    #: a base URL on a link-local or cloud metadata address (169.254.0.0/16, fe80::/10,
    #: metadata.google.internal, ...) is refused unless this is set: such addresses can hand
    #: out the credentials of the machine realprobe runs on
    allow_link_local: bool = False
    description: str = ""
    politeness: Politeness = Field(default_factory=Politeness)
    notes: list[str] = Field(default_factory=list)
    tools: list[ToolSpec]

    @field_validator("id")
    @classmethod
    def _valid_id(cls, v: str) -> str:
        if not API_ID_RE.match(v):
            raise ValueError(f"api id {v!r} must match {API_ID_RE.pattern}")
        return v

    @field_validator("base_url")
    @classmethod
    def _valid_base(cls, v: str) -> str:
        if not re.match(r"^https?://[^/\s]+(/[^\s]*)?$", v):
            raise ValueError(f"base_url {v!r} must be an absolute http(s) URL")
        if "?" in v or "#" in v:
            raise ValueError(f"base_url {v!r} holds a query or fragment: put it under `query`")
        return v.rstrip("/")

    @model_validator(mode="after")
    def _no_metadata_address(self) -> ApiSpec:
        if is_metadata_url(self.base_url) and not self.allow_link_local:
            raise ValueError(
                f"base_url {self.base_url!r} is a link-local or cloud metadata address; "
                "set allow_link_local = true on this API if it is really meant"
            )
        return self


class CatalogFile(_Strict):
    """A catalogue file holds one or more APIs under `apis`."""

    apis: list[ApiSpec]
