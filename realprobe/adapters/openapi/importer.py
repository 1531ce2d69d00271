"""An OpenAPI document to catalogue APIs: one tool per selected safe operation.

Pure: text in, catalogue mappings and a report out (the command fetches URLs and writes files).
Same document and options in, same catalogue out, byte for byte.
"""

from __future__ import annotations

import fnmatch
import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import jsonschema
from pydantic import ValidationError

from realprobe.adapters.bounded import load_json
from realprobe.adapters.openapi.document import HTTP_METHODS, Document, OpenApiError, RefError
from realprobe.adapters.openapi.params import Param, SkipOperation, collect, read_parameter
from realprobe.adapters.openapi.schemas import (
    Notes,
    clean_text,
    output_fields,
    soft_failure_rules,
)
from realprobe.adapters.schema_json import example_problem
from realprobe.adapters.spec import API_ID_RE, ApiSpec, ToolSpec
from realprobe.adapters.tool import BadResponse, Tool, _rule_matches
from realprobe.errors import ErrorCode, code_for_status

SAFE_METHODS = ("get",)
MAX_FIXTURE_BYTES = 256 * 1024


@dataclass(frozen=True)
class ImportOptions:
    api_id: str | None = None
    prefix: str | None = None
    select: tuple[str, ...] = ()
    include_auth: bool = False
    base_url: str | None = None
    category: str = "Imported"
    in_public_apis: bool = False


@dataclass
class OperationNote:
    operation: str  # "GET /path"
    text: str


@dataclass
class ImportReport:
    origin: str
    title: str
    version: str  # the document's OpenAPI version
    apis: list[dict[str, Any]] = field(default_factory=list)
    tools: int = 0
    skipped: list[OperationNote] = field(default_factory=list)
    warnings: list[OperationNote] = field(default_factory=list)
    not_selected: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.origin,
            "title": self.title,
            "openapi": self.version,
            "tools": self.tools,
            "apis": [a["id"] for a in self.apis],
            "not_selected": self.not_selected,
            "skipped": [{"operation": n.operation, "reason": n.text} for n in self.skipped],
            "warnings": [{"operation": n.operation, "warning": n.text} for n in self.warnings],
        }


def slug(text: str, limit: int = 41) -> str:
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    s = re.sub(r"[^a-z0-9]+", "-", plain.lower()).strip("-")[:limit].strip("-")
    return s or "api"


def import_openapi(text: str, origin: str, options: ImportOptions | None = None,
                   url: str | None = None) -> ImportReport:  # fmt: skip
    """Parse and import one document. Raises OpenApiError when nothing can be read at all."""
    from realprobe.adapters.openapi.document import parse_text

    doc = Document(parse_text(text, origin), origin, url=url)
    return import_document(doc, options or ImportOptions())


def import_document(doc: Document, options: ImportOptions) -> ImportReport:
    api_id = options.api_id or slug(doc.title)
    if not API_ID_RE.match(api_id):
        raise OpenApiError(f"api_id {api_id!r} must match {API_ID_RE.pattern}", param="api_id")
    prefix = options.prefix if options.prefix is not None else api_id.replace("-", "_")
    if prefix and not re.match(r"^[a-zA-Z0-9_-]{0,40}$", prefix):
        raise OpenApiError(
            f"prefix {prefix!r}: letters, digits, _ and - only, at most 40", param="prefix"
        )
    report = ImportReport(doc.origin, doc.title, doc.version)
    groups: dict[str, list[dict[str, Any]]] = {}
    names: set[str] = set()
    for path, path_item in doc.raw["paths"].items():
        if not isinstance(path, str) or not isinstance(path_item, dict):
            continue
        if "$ref" in path_item:
            try:
                path_item, _ = doc.deref(path_item)
            except RefError as exc:
                report.skipped.append(OperationNote(f"* {path}", str(exc)))
                continue
            if not isinstance(path_item, dict):
                continue
        for method in HTTP_METHODS:
            op = path_item.get(method)
            if not isinstance(op, dict):
                continue
            key = f"{method.upper()} {path}"
            if not _selected(op, path, options.select):
                report.not_selected += 1
                continue
            if method not in SAFE_METHODS:
                report.skipped.append(OperationNote(key, f"{method.upper()} is not a safe method"))
                continue
            notes = Notes()
            try:
                base, tool = _operation(doc, path, path_item, op, options, prefix, names, notes)
            except SkipOperation as exc:
                report.skipped.append(OperationNote(key, str(exc)))
                continue
            except (RefError, RecursionError) as exc:
                msg = str(exc) if isinstance(exc, RefError) else "schema nested too deeply"
                report.skipped.append(OperationNote(key, msg))
                continue
            except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
                # a shape no reading above expected: skip this operation, keep the others
                text = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                report.skipped.append(OperationNote(key, f"could not be read ({text})"))
                continue
            names.add(tool["name"])
            groups.setdefault(base, []).append(tool)
            if notes.lines:
                report.warnings.append(OperationNote(key, "; ".join(notes.lines)))
    report.apis = _apis(doc, api_id, groups, options)
    report.tools = sum(len(a["tools"]) for a in report.apis)
    return report


def _selected(op: dict[str, Any], path: str, select: tuple[str, ...]) -> bool:
    if not select:
        return True
    op_id = str(op.get("operationId") or "")
    tags = [str(t) for t in op.get("tags") or []]
    for pattern in select:
        if pattern.startswith("tag:"):
            if pattern[4:] in tags:
                return True
        elif pattern.startswith("/"):
            if fnmatch.fnmatchcase(path, pattern):
                return True
        elif fnmatch.fnmatchcase(op_id, pattern) or pattern in tags:
            return True
    return False


# -- one operation ------------------------------------------------------------------------------


def _operation(
    doc: Document,
    path: str,
    path_item: dict[str, Any],
    op: dict[str, Any],
    options: ImportOptions,
    prefix: str,
    names: set[str],
    notes: Notes,
) -> tuple[str, dict[str, Any]]:
    """One operation as (base URL, tool mapping); SkipOperation says why it cannot be one."""
    base = _base_url(doc, path_item, op, options)
    params = _inputs(doc, path_item, op, options, notes)
    tool_path, params = _bind_path(path, params, notes)
    name = _tool_name(prefix, op, path, names)
    title = clean_text(op.get("summary"), 80) or _humanize(name)
    response, outputs, rules, fixtures = _responses(doc, op, notes, title)
    tool = _tool_mapping(
        name, title, _description(op, title, outputs), tool_path, params, response, outputs,
        rules,
    )
    return base, _checked_tool(tool, base, fixtures, notes)


def _base_url(
    doc: Document, path_item: dict[str, Any], op: dict[str, Any], options: ImportOptions
) -> str:
    """The options' base URL, else the first absolute server URL the operation or the
    document declares."""
    bases = (
        [options.base_url.rstrip("/")]
        if options.base_url
        else doc.server_urls(op.get("servers"), path_item.get("servers"))
    )
    bases = [b for b in bases if re.match(r"^https?://[^/\s]+(/[^\s]*)?$", b)]
    if not bases:
        raise SkipOperation("no absolute server URL (declare `servers` or give a base_url)")
    return bases[0]


def _inputs(
    doc: Document,
    path_item: dict[str, Any],
    op: dict[str, Any],
    options: ImportOptions,
    notes: Notes,
) -> list[Param]:
    """The operation's parameters that become inputs, then its credentials."""
    taken: set[str] = set()
    params: list[Param] = []
    for raw_param in collect(doc, path_item, op, notes):
        param = read_parameter(doc, raw_param, notes, taken, options.include_auth)
        if param is not None:
            params.append(param)
    return params + _security(doc, op, options, taken, notes)


def _bind_path(path: str, params: list[Param], notes: Notes) -> tuple[str, list[Param]]:
    """The tool's path with placeholders renamed to input names; path parameters that the
    path does not hold are left out (noted)."""
    tool_path = path if path.startswith("/") else "/" + path
    by_wire = {(p.location, p.wire): p for p in params}
    for placeholder in re.findall(r"\{([^}]*)\}", tool_path):
        found = by_wire.get(("path", placeholder))
        if found is None:
            raise SkipOperation(f"path placeholder {{{placeholder}}} has no parameter")
        tool_path = tool_path.replace("{" + placeholder + "}", "{" + found.name + "}")
    if "?" in tool_path or "#" in tool_path:
        raise SkipOperation("path holds a query or fragment")
    for p in params:
        if p.location == "path" and "{" + p.name + "}" not in tool_path:
            notes.add(f"path parameter {p.wire!r} is not in the path; left out")
    return tool_path, [p for p in params if p.location != "path" or "{" + p.name + "}" in tool_path]


def _description(op: dict[str, Any], title: str, outputs: dict[str, Any]) -> str:
    """The operation's description (or summary, or title), then what it returns."""
    description = clean_text(op.get("description")) or clean_text(op.get("summary"))
    returns = ", ".join(list(outputs)[:12]) + (", …" if len(outputs) > 12 else "")
    description = (description or title).rstrip(".") + "."
    if returns:
        description += f" Returns: {returns}."
    return description


def _tool_mapping(
    name: str,
    title: str,
    description: str,
    tool_path: str,
    params: list[Param],
    response: str,
    outputs: dict[str, Any],
    rules: list[dict[str, Any]],
) -> dict[str, Any]:
    """The catalogue mapping of a GET tool, in the catalogue's key order."""
    tool: dict[str, Any] = {
        "name": name,
        "title": title,
        "description": description,
        "method": "GET",
        "path": tool_path,
    }
    query = {p.wire: "{" + p.name + "}" for p in params if p.location == "query"}
    headers = {p.wire: p.field.pop("_header", "{" + p.name + "}")
               for p in params if p.location == "header"}  # fmt: skip
    if query:
        tool["query"] = query
    if headers:
        tool["headers"] = headers
    if response == "text":
        tool["response"] = "text"
    tool["input"] = {p.name: p.field for p in params}
    tool["output"] = outputs
    tool["examples"] = _examples(params)
    if rules:
        tool["soft_failures"] = rules
    return tool


def _checked_tool(
    tool: dict[str, Any], base: str, fixtures: list[dict[str, Any]], notes: Notes
) -> dict[str, Any]:
    """The mapping as a valid tool: examples that pass its inputs, fixtures that fit its
    output (or a note that one must be recorded)."""
    try:
        spec = ToolSpec.model_validate({**tool, "fixtures": []})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise SkipOperation(f"not a valid tool at {loc}: {err['msg']}") from None
    tool["examples"] = _valid_examples(spec, notes)
    api = ApiSpec(id="probe", name="probe", base_url=base, docs_url=base, category="x",
                  https=base.startswith("https"), tools=[])  # fmt: skip
    try:
        tool_obj = Tool(api, ToolSpec.model_validate(tool))
    except (ValueError, ValidationError) as exc:
        raise SkipOperation(f"not a valid tool: {str(exc).splitlines()[0]}") from None
    good = _valid_fixtures(tool_obj, fixtures, notes)
    if good:
        tool["fixtures"] = good
    else:
        tool["no_fixture"] = "no response example in the description; record one"
    return tool


def _tool_name(prefix: str, op: dict[str, Any], path: str, names: set[str]) -> str:
    op_id = op.get("operationId")
    if isinstance(op_id, str) and op_id.strip():
        core = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", op_id.strip())
    else:
        parts = []
        for seg in path.strip("/").split("/"):
            if not seg or re.fullmatch(r"api|v\d+(\.\d+)*", seg, re.I):
                continue
            m = re.fullmatch(r"\{(.+)\}", seg)
            parts.append(f"by_{m.group(1)}" if m else seg)
        core = re.sub(r"[^a-zA-Z0-9]+", "_", "_".join(parts)) or "root"
    core = re.sub(r"[^a-zA-Z0-9_-]+", "_", core).strip("_-").lower() or "op"
    if prefix and not core.startswith(prefix.lower() + "_") and core != prefix.lower():
        core = f"{prefix}_{core}"
    name = core[:64]
    n = 2
    while name in names:
        suffix = f"_{n}"
        name = core[: 64 - len(suffix)] + suffix
        n += 1
    return name


def _humanize(name: str) -> str:
    return re.sub(r"[_-]+", " ", name).strip().capitalize()


def _security(
    doc: Document, op: dict[str, Any], options: ImportOptions, taken: set[str], notes: Notes
) -> list[Param]:
    """Credential inputs, or SkipOperation when a key is needed and not asked for."""
    reqs = op["security"] if "security" in op else doc.raw.get("security")
    if not isinstance(reqs, list) or not reqs or any(r == {} for r in reqs):
        return []
    schemes = _schemes(doc)
    described = []
    for req in reqs:
        if not isinstance(req, dict):
            continue
        parts = [schemes.get(n, {"type": "unknown", "name": n}) for n in req]
        described.append(" + ".join(_scheme_label(s) for s in parts))
        if not options.include_auth:
            continue
        params = [_credential(s, taken) for s in parts]
        if all(p is not None for p in params):
            notes.add("credentials are inputs marked secret: " + described[-1])
            return [p for p in params if p is not None]
    if not options.include_auth:
        raise SkipOperation(f"needs credentials ({' or '.join(described)}); include_auth keeps it")
    raise SkipOperation(f"credentials not supported ({' or '.join(described)})")


def _schemes(doc: Document) -> dict[str, dict[str, Any]]:
    if doc.version == "2.0":
        raw = doc.raw.get("securityDefinitions")
    else:
        comps = doc.raw.get("components")
        raw = comps.get("securitySchemes") if isinstance(comps, dict) else None
    out: dict[str, dict[str, Any]] = {}
    for name, s in (raw or {}).items() if isinstance(raw, dict) else []:
        try:
            s, _ = doc.deref(s)
        except RefError:
            continue
        if isinstance(s, dict):
            out[name] = s
    return out


def _scheme_label(s: dict[str, Any]) -> str:
    kind = s.get("type")
    if kind == "apiKey":
        return f"API key {s.get('name')!r} in {s.get('in')}"
    if kind == "http":
        return f"HTTP {s.get('scheme')} auth"
    if kind in ("basic",):
        return "HTTP basic auth"
    if kind in ("oauth2", "openIdConnect"):
        return "OAuth"
    return f"scheme {s.get('name') or kind!r}"


def _credential(s: dict[str, Any], taken: set[str]) -> Param | None:
    kind = s.get("type")
    base = {"type": "string", "required": True, "secret": True}
    if kind == "apiKey" and s.get("in") in ("query", "header") and isinstance(s.get("name"), str):
        name = _ident(s["name"], taken)
        desc = f"API key (sent as {s['in']} {s['name']!r})"
        return Param(name, s["name"], s["in"], {**base, "description": desc}, derived="YOUR_KEY")
    scheme = str(s.get("scheme") or "").lower()
    if (kind == "http" and scheme == "bearer") or kind in ("oauth2", "openIdConnect"):
        name = _ident("access_token", taken)
        desc = "Bearer token (sent as Authorization: Bearer …)"
        field = {**base, "description": desc, "_header": "Bearer {" + name + "}"}
        return Param(name, "Authorization", "header", field, derived="YOUR_TOKEN")
    return None


def _ident(wire: str, taken: set[str]) -> str:
    from realprobe.adapters.openapi.schemas import identifier

    name = identifier(wire, taken)
    taken.add(name)
    return name


def _examples(params: list[Param]) -> list[dict[str, Any]]:
    """The required arguments filled (documented values first), then a set with every
    documented example, when that adds something."""
    first: dict[str, Any] = {}
    for p in params:
        if p.field.get("required"):
            first[p.name] = p.example if p.example is not None else p.derived
    full = dict(first)
    for p in params:
        if p.example is not None:
            full[p.name] = p.example
    return [first, full] if full != first else [first]


def _valid_examples(spec: ToolSpec, notes: Notes) -> list[dict[str, Any]]:
    """The examples that pass the input fields' rules (the same check a catalogue load makes)."""
    good = []
    for example in spec.examples:
        problem = example_problem(spec, example)
        if problem is not None:
            notes.add(f"example {example!r} fails the input schema ({problem[1]}); left out")
            continue
        good.append(example)
    if not good:
        raise SkipOperation("no example arguments pass the input schema")
    return good


# -- responses ----------------------------------------------------------------------------------


def _json_media(content: Any) -> tuple[str | None, dict[str, Any] | None]:
    if not isinstance(content, dict):
        return None, None
    keys = [k for k in content if isinstance(k, str)]
    for pick in (
        lambda k: k.split(";")[0].strip() == "application/json",
        lambda k: "json" in k,
        lambda k: k.startswith("text/"),
        lambda k: k in ("*/*", "application/*"),
    ):
        for k in keys:
            if pick(k) and isinstance(content[k], dict):
                return k, content[k]
    return None, None


def _success(responses: dict[str, Any]) -> tuple[str, Any] | None:
    keys = [str(k) for k in responses]
    for k in ("200", *sorted(k for k in keys if re.fullmatch(r"2\d\d", k)), "2XX", "2xx"):
        if k in keys:
            return k, responses[k]
    return None


class _Outputs(NamedTuple):
    """What a tool returns, read from the operation's responses."""

    response: str  # json | text
    outputs: dict[str, Any]  # output fields
    rules: list[dict[str, Any]]  # soft-failure rules
    fixtures: list[dict[str, Any]]  # documentation examples as fixtures


class _Media(NamedTuple):
    mtype: str
    media: dict[str, Any]  # a media type object: schema, example, examples


def _whole_body() -> dict[str, Any]:
    return {"body": {"type": "any", "from": "", "description": "The response body"}}


def _responses(doc: Document, op: dict[str, Any], notes: Notes, title: str) -> _Outputs:
    """(json|text, output fields, soft-failure rules, example fixtures)."""
    raw = op.get("responses")
    responses = {str(k): v for k, v in raw.items()} if isinstance(raw, dict) else {}
    found = _success(responses)
    if found is None:
        notes.add("no 2xx response documented; output is the whole body")
        return _Outputs("json", _whole_body(), [], [])
    status, resp = found
    success = _success_media(doc, status, resp, notes)
    if isinstance(success, _Outputs):
        return success
    mtype, media = success
    if mtype.startswith("text/") and "json" not in mtype:
        text_field = {"type": "string", "from": "", "description": "The response text"}
        return _Outputs("text", {"text": text_field}, [], [])
    where = f"response {status}"
    schema = media.get("schema")
    if schema is None:
        notes.add(f"{where} has no schema; output is the whole body")
        outputs = _whole_body()
    else:
        outputs = output_fields(doc, schema, notes, where)
    rules = soft_failure_rules(doc, schema, notes, where, title) if schema is not None else []
    label = f"{op.get('operationId') or ''}".strip()
    fixtures = _success_fixtures(doc, status, success, notes, label)
    fixtures += _error_fixtures(doc, responses, notes, label)
    return _Outputs("json", outputs, rules, fixtures)


def _success_media(doc: Document, status: str, resp: Any, notes: Notes) -> _Media | _Outputs:
    """The success response's media type and object, or the outputs when it has no body
    to read (a JSON body of any shape, or a text body)."""
    try:
        resp, _ = doc.deref(resp)
    except RefError as exc:
        raise SkipOperation(f"response {status}: {exc}") from None
    if not isinstance(resp, dict):
        return _Outputs("json", _whole_body(), [], [])
    if doc.version == "2.0":
        schema = resp.get("schema")
        media: dict[str, Any] = {"schema": schema} if schema is not None else {}
        examples = resp.get("examples")
        if isinstance(examples, dict):
            for k, v in examples.items():
                if "json" in str(k):
                    media["example"] = v
        return _Media("application/json", media)
    mtype_opt, media_opt = _json_media(resp.get("content"))
    if media_opt is None:
        notes.add(f"response {status} documents no body; output is the text body")
        return _Outputs("text", {"text": {"type": "string", "from": "", "optional": True}}, [], [])
    return _Media(mtype_opt or "application/json", media_opt)


def _success_fixtures(
    doc: Document, status: str, success: _Media, notes: Notes, label: str
) -> list[dict[str, Any]]:
    """The success response's documented examples, as ok fixtures."""
    where = f"response {status}"
    code = int(status) if status.isdigit() else 200
    fixtures: list[dict[str, Any]] = []
    for ex_name, value in _media_examples(doc, success.media, notes, where):
        ex_label = f" example {ex_name!r}" if ex_name else ""
        fixtures.append(_doc_fixture(doc, value, success.mtype, code, where + ex_label, label))
    return fixtures


def _error_fixtures(
    doc: Document, responses: dict[str, Any], notes: Notes, label: str
) -> list[dict[str, Any]]:
    """The 4xx/5xx responses' documented examples, as error fixtures with their code."""
    fixtures: list[dict[str, Any]] = []
    for code_key in sorted(k for k in responses if re.fullmatch(r"[45]\d\d", k)):
        try:
            err_resp, _ = doc.deref(responses[code_key])
        except RefError:
            continue
        if not isinstance(err_resp, dict):
            continue
        if doc.version == "2.0":
            ex = err_resp.get("examples")
            err_media = {"example": next(iter(ex.values()))} if isinstance(ex, dict) and ex else {}
            err_type = "application/json"
        else:
            err_type_opt, err_media_opt = _json_media(err_resp.get("content"))
            err_media, err_type = err_media_opt or {}, err_type_opt or "application/json"
        for ex_name, value in _media_examples(doc, err_media, notes, f"response {code_key}"):
            ex_label = f" example {ex_name!r}" if ex_name else ""
            fx = _doc_fixture(
                doc, value, err_type, int(code_key), f"response {code_key}{ex_label}", label
            )
            code = code_for_status(int(code_key))
            if code is not None:
                fixtures.append({**fx, "kind": "error", "code": code.value})
    return fixtures


def _media_examples(
    doc: Document, media: dict[str, Any], notes: Notes, where: str
) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    if "example" in media:
        out.append(("", media["example"]))
    if isinstance(media.get("examples"), dict):
        for name, ex in media["examples"].items():
            try:
                ex, _ = doc.deref(ex)
            except RefError as exc:
                notes.add(f"{where} example {name!r}: {exc}")
                continue
            if isinstance(ex, dict) and "value" in ex:
                out.append((str(name), ex["value"]))
            elif isinstance(ex, dict) and "externalValue" in ex:
                notes.add(f"{where} example {name!r} is an external file; not fetched")
    if not out:
        try:
            schema, _ = doc.deref(media.get("schema") or {})
        except RefError:
            schema = None
        if isinstance(schema, dict) and isinstance(schema.get("example"), (dict, list)):
            out.append(("schema example", schema["example"]))
    return out


def _doc_fixture(
    doc: Document, value: Any, mtype: str, status: int, where: str, op_label: str
) -> dict[str, Any]:
    if isinstance(value, str) and "json" not in mtype:
        body = value
    else:
        body = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    version = doc.info.get("version")
    title = doc.title + (f" {version}" if version else "")
    where_op = f" operation {op_label}," if op_label else ","
    return {
        "status": status,
        "content_type": mtype,
        "body": body,
        "origin": "documentation",
        "source": f"documentation example from the OpenAPI description of {title}"
        f"{where_op} {where}",
        "note": "An example written in the API's description, not a recorded response.",
    }


def _valid_fixtures(
    tool_obj: Tool, fixtures: list[dict[str, Any]], notes: Notes
) -> list[dict[str, Any]]:
    """Documentation examples that a call could really return: ok bodies parse, soft
    failures are classified by the tool's rules, oversized ones are left out."""
    if not fixtures:
        return []
    messages = {r.message: r.code.value for r in tool_obj.spec.soft_failures}
    good: list[dict[str, Any]] = []
    for fx in fixtures:
        if len(fx["body"].encode()) > MAX_FIXTURE_BYTES:
            notes.add("a response example over 256 KB was left out")
            continue
        if fx.get("kind") == "error":
            good.append(fx)
            continue
        try:
            _check_body(tool_obj, fx["body"])
        except BadResponse as exc:
            if exc.message in messages:
                good.append({**fx, "kind": "soft_failure", "code": messages[exc.message]})
            else:
                notes.add(f"response example does not fit the response schema ({exc.message})")
            continue
        good.append(fx)
    return good


def _check_body(tool: Tool, body: str) -> None:
    """What `Tool.parse` checks, with the output JSON Schema instead of building the pydantic
    output model (one model per operation would dominate a large import)."""
    try:
        decoded = load_json(body.encode("utf-8")) if tool.spec.response == "json" else body.strip()
    except ValueError as exc:
        raise BadResponse(ErrorCode.INVALID_RESPONSE, f"not valid JSON ({exc})") from exc
    for rule in tool.spec.soft_failures:
        if _rule_matches(rule, decoded):
            raise BadResponse(rule.code, rule.message)
    data = tool.extract(decoded)
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(tool.output_schema).iter_errors(data)
    )
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "body"
        raise BadResponse(ErrorCode.INVALID_RESPONSE, f"output fails schema at {where}")


# -- grouping into APIs -------------------------------------------------------------------------


def _apis(
    doc: Document, api_id: str, groups: dict[str, list[dict[str, Any]]], options: ImportOptions
) -> list[dict[str, Any]]:
    info = doc.info
    docs_raw, contact_raw = doc.raw.get("externalDocs"), info.get("contact")
    docs: dict[str, Any] = docs_raw if isinstance(docs_raw, dict) else {}
    contact: dict[str, Any] = contact_raw if isinstance(contact_raw, dict) else {}
    docs_url = next(
        (u for u in (docs.get("url"), contact.get("url"))
         if isinstance(u, str) and re.match(r"^https?://\S+$", u)),
        None,
    )  # fmt: skip
    version = info.get("version")
    source = doc.url or doc.origin.replace("\\", "/").rsplit("/", 1)[-1]
    out = []
    for i, (base, tools) in enumerate(sorted(groups.items(), key=lambda kv: -len(kv[1]))):
        this_id = api_id if i == 0 else f"{api_id[:34]}-{slug(urlsplit(base).netloc, 6)}{i + 1}"
        api: dict[str, Any] = {
            "id": this_id,
            "name": doc.title,
            "base_url": base,
            "docs_url": docs_url or base,
            "category": options.category,
            "https": base.startswith("https://"),
            "in_public_apis": options.in_public_apis,
            "description": clean_text(info.get("description"), 300) or doc.title,
            "notes": [
                f"Imported by realprobe from the OpenAPI {doc.version} description "
                f"{doc.title!r}" + (f" version {version}" if version else "") + f" ({source})."
            ],
            "tools": tools,
        }
        out.append(api)
    return out


def catalog_text(apis: list[dict[str, Any]], suffix: str) -> str:
    """A catalogue file's text in the format its suffix names (.json, .yaml/.yml, .toml)."""
    import tomli_w
    import yaml

    data = {"apis": apis}
    if suffix == ".json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if suffix in (".yaml", ".yml"):
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    if suffix == ".toml":
        return tomli_w.dumps(_no_nulls(data))
    raise OpenApiError(
        f"cannot write {suffix or 'a file without suffix'}: use .json, .yaml or .toml"
    )


def _no_nulls(value: Any) -> Any:
    """TOML has no null: leave such keys out (every catalogue field with a null default)."""
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value
