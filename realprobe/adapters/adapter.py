"""Calling a tool: validate, fetch through the injected Fetcher, classify, parse, check.

Every path ends in a ToolResult; an API failure never raises out of `call_tool`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from realprobe.adapters.http import Fetched, Fetcher, FetchFailure, SyncFetcher
from realprobe.adapters.tool import Tool
from realprobe.addresses import is_private_url
from realprobe.errors import BadResponse, CallFailed, ErrorCode, code_for_status
from realprobe.limits import json_or_none
from realprobe.ranges import checked
from realprobe.result import ToolError, ToolResult, answered
from realprobe.retry_after import retry_after_of
from realprobe.secrets import clip, remember, scrub_text

RATE_LIMIT_HEADER_PREFIXES = (
    "x-ratelimit",
    "x-rate-limit",
    "ratelimit",
    "x-rate-reset",
    "retry-after",
)


def format_validation_error(exc: ValidationError) -> str:
    msgs = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        msgs.append(f"{where}: {err['msg']}")
    return "; ".join(msgs)


def _rate_headers(headers: dict[str, str]) -> dict[str, str]:
    names = tuple(headers)
    rate = _RATE_NAMES.get(names)
    if rate is None:  # an API answers with the same names: picked once per set of names
        if len(_RATE_NAMES) >= 1024:
            _RATE_NAMES.clear()
        rate = _RATE_NAMES[names] = tuple(
            k for k in names if k.lower().startswith(RATE_LIMIT_HEADER_PREFIXES))
    return {k: headers[k] for k in rate} if rate else {}


_RATE_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}


def _error(tool: Tool, code: ErrorCode, message: str, *, http_status: int | None = None,
           retry_after_s: float | None = None, phase: str | None = None,
           reached: bool | None = None, infrastructure: str | None = None,
           **kw: Any) -> ToolResult:
    return ToolResult(
        tool=tool.name,
        ok=False,
        error=ToolError(
            code=code,
            message=scrub_text(message),  # before anything cuts it (the `detail` column)
            http_status=http_status,
            retry_after_s=retry_after_s,
            phase=phase,
            reached=reached,
            infrastructure=infrastructure,
        ),
        http_status=http_status,
        **kw,
    )


#: the header a realprobe server sets on every answer it made itself (not the API's)
REALPROBE_ERROR_HEADER = "x-realprobe-error"
#: realprobe-made answers that say the sandbox's catalogue differs from the client's
CATALOGUE_MISMATCH = frozenset({"unknown-api", "unknown-route", "foreign-host"})


def _realprobe_made(tool: Tool, resp: Fetched, common: dict[str, Any]) -> ToolResult:
    """An answer the realprobe sandbox made (no API was asked): one clear error naming the
    sandbox, never the API's host, stored as an infrastructure failure."""
    label = resp.headers[REALPROBE_ERROR_HEADER][:60]
    detail = ""
    doc = json_or_none(resp.body[:4096])
    if isinstance(doc, dict):
        error, message = str(doc.get("error") or ""), str(doc.get("message") or "")
        named = error and error not in (label, message)
        detail = (f"{error}: {message}" if named and message else message or error)[:300]
    hint = ""
    if label in CATALOGUE_MISMATCH:
        hint = ("; the sandbox's catalogue differs from the client's: start it with the same "
                "--catalog (realprobe sandbox --catalog FILE)")
    code = code_for_status(resp.status) or ErrorCode.OPERATION_FAILED
    if label in CATALOGUE_MISMATCH or label == "no-fixture":
        code = ErrorCode.OPERATION_FAILED  # asking again cannot help
    retry = retry_after_of(resp.headers)
    return _error(
        tool, code,
        f"the realprobe sandbox, not {tool.api.name}, answered HTTP {resp.status} "
        f"({label}){': ' + detail if detail else ''}{hint}",
        http_status=resp.status, retry_after_s=retry, infrastructure=label, **common,
    )


def classify_response(tool: Tool, resp: Fetched) -> ToolResult:
    """Turn an HTTP response into ok data or one error code."""
    headers, status = resp.headers, resp.status
    if status < 300:  # no failure status: the body decides
        try:
            data = tool.parse(resp.body)
        except BadResponse as exc:
            return _error(tool, exc.code, exc.message, http_status=status,
                          retry_after_s=retry_after_of(headers), **_common(resp))
        return answered(
            tool.name, data, status, resp.elapsed_s * 1000.0, len(resp.body), resp.redirects,
            _rate_headers(headers), resp.phases, headers.get("x-request-id"))
    common = _common(resp)
    if REALPROBE_ERROR_HEADER in headers and status >= 400:
        return _realprobe_made(tool, resp, common)
    code = code_for_status(status) or ErrorCode.OPERATION_FAILED  # or an unfollowed 3xx
    snippet = clip(resp.body, 120).strip().replace("\n", " ")
    return _error(
        tool,
        code,
        f"HTTP {status} from {resp.url}" + (f": {snippet}" if snippet else ""),
        http_status=status,
        retry_after_s=retry_after_of(headers),  # on any status that carries it
        **common,
    )


def _common(resp: Fetched) -> dict[str, Any]:
    """What every result of an answered call reports, ok or not."""
    return {
        "latency_ms": resp.elapsed_s * 1000.0,
        "bytes": len(resp.body),
        "redirects": resp.redirects,
        "rate_limit_headers": _rate_headers(resp.headers),
        "phases": resp.phases,
        "request_id": resp.headers.get("x-request-id"),
    }


@dataclass(slots=True)
class _Request:
    """A call's request, built once per tool and arguments (shared: never changed)."""

    method: str
    url: str
    params: dict[str, str]
    headers: dict[str, str]
    allow_private: bool


#: argument types whose values, equal, fill a request alike (`-0.0 == 0.0` but prints
#: apart, so floats are left out; the type is part of the key, keeping True apart from 1)
_KEYABLE = frozenset({str, int, bool, type(None)})
#: requests prepared per tool, at most this many (a probe repeats its calls)
PREPARED_PER_TOOL = 256


def _prepare(tool: Tool, args: dict[str, Any] | None) -> _Request | ToolResult:
    """The request to send, or the INVALID_INPUT result when the arguments fail the schema.
    Validation is pure: a request built for the same arguments is reused."""
    if tool.secret_inputs:
        remember(*tool.secret_values(args))  # declared secrets: never written anywhere
    args = args or {}
    key: tuple[Any, ...] = ()
    for name, value in args.items():  # (a loop: cheaper than C helpers whose code went cold)
        kind = type(value)
        if kind not in _KEYABLE:
            break
        key += (name, kind, value)
    keyed = len(key) == 3 * len(args)
    req = tool.prepared.get(key) if keyed else None
    if req is not None:
        return req  # type: ignore[no-any-return]
    try:
        valid = tool.validate_args(args)
        method, url, params = tool.build_request(valid)
    except ValidationError as exc:
        return _error(tool, ErrorCode.INVALID_INPUT, format_validation_error(exc))
    except ValueError as exc:
        return _error(tool, ErrorCode.INVALID_INPUT, str(exc))
    req = _Request(
        method, url, params, tool.request_headers(valid), is_private_url(tool.api.base_url)
    )
    if keyed:
        if len(tool.prepared) >= PREPARED_PER_TOOL:
            tool.prepared.clear()
        tool.prepared[key] = req
    return req


def _failed(tool: Tool, exc: Exception) -> ToolResult:
    if isinstance(exc, FetchFailure):
        return _error(
            tool,
            exc.code,
            exc.message,
            latency_ms=exc.elapsed_s * 1000.0,
            redirects=exc.redirects,
            bytes=exc.received,
            phase=exc.phase,
            reached=exc.reached,
            phases=exc.phases,
        )
    if isinstance(exc, CallFailed):
        return _error(tool, exc.code, exc.message)
    if isinstance(exc, RecursionError | MemoryError):
        return _error(tool, ErrorCode.INVALID_RESPONSE, f"body could not be read ({exc})")
    # never a crash: anything unforeseen is OPERATION_FAILED
    return _error(tool, ErrorCode.OPERATION_FAILED, f"{type(exc).__name__}: {exc}")


@checked
async def call_tool(
    tool: Tool,
    args: dict[str, Any] | None,
    fetcher: Fetcher,
    *,
    timeout_s: float | None = None,
) -> ToolResult:
    """Call one tool. Bad arguments give INVALID_INPUT and nothing is sent."""
    try:
        req = _prepare(tool, args)
        if not isinstance(req, _Request):  # (a pydantic class's isinstance costs more)
            return req
        resp = await fetcher.fetch(req.method, req.url, params=req.params, headers=req.headers,
                                   timeout_s=timeout_s, allow_private=req.allow_private)
        return classify_response(tool, resp)
    except Exception as exc:  # never a crash, whatever the server sent
        return _failed(tool, exc)


@checked
def call_tool_sync(
    tool: Tool,
    args: dict[str, Any] | None,
    fetcher: SyncFetcher,
    *,
    timeout_s: float | None = None,
) -> ToolResult:
    """`call_tool` for synchronous code, over `replay.modes.make_sync_client`."""
    try:
        req = _prepare(tool, args)
        if not isinstance(req, _Request):  # (a pydantic class's isinstance costs more)
            return req
        resp = fetcher.fetch(req.method, req.url, params=req.params, headers=req.headers,
                             timeout_s=timeout_s, allow_private=req.allow_private)
        return classify_response(tool, resp)
    except Exception as exc:  # never a crash, whatever the server sent
        return _failed(tool, exc)
