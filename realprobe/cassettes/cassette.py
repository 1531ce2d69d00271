"""The cassette: every call a run made, in order, with its outcome and timing.

On disk it is a vcrpy version-1 cassette (`interactions`, `version: 1`), so plain vcrpy replays
every complete HTTP response (redirect hops and binary bodies included), plus a `realprobe`
section for what vcrpy cannot hold:

```
{"version": 1,
 "interactions": [{"request": {...},
                   "response": {..., "realprobe": {"seq": 0, "elapsed_ms": 12.3, ...}}}],
 "realprobe": {"format": "realprobe-cassette", "format_version": 1, "meta": {...},
               "beyond_vcrpy": [{"seq": 1, "request": {...}, "response": {...} | null,
                                 "complete": false, "error": {"type": "ReadTimeout", ...}}]}}
```

`seq` gives the one recorded order across both lists; the per-call timing sits inside the
response, which vcrpy keeps when it re-saves a cassette. Status, headers and body bytes are
kept as recorded (a gzip body stays gzip under its `Content-Encoding`).

Binary bodies, in vcrpy's own forms: YAML holds them as `!!binary`, exactly, as vcrpy does.
vcrpy's JSON has no form for bytes (vcrpy refuses to write them), so in JSON realprobe writes
what vcrpy can serve and keeps the exact recording beside it, in the response's `realprobe`
section: a compressed body whose content is text is written decoded, without its
`Content-Encoding` (what vcrpy's `decode_compressed_response` writes), with the recorded
headers and bytes under `recorded`; a binary request body is written as Latin-1 text with its
bytes under `request_body_base64`. realprobe replays the recorded bytes, vcrpy the decoded
text. Any other binary response body is written with `\\udcXX` escapes for its undecodable
bytes: realprobe reads it back exactly and vcrpy loads the cassette, but only the YAML form
lets vcrpy serve such a body.

An interaction read from a file and not changed is written back exactly as it was read, so
adding to a cassette (`new_episodes`) leaves the old interactions as they were. JSON by
default; `.yaml`/`.yml` paths are YAML, read with a safe loader only. Writes are atomic (temp
file, then rename). Adding to a plain vcrpy file appends the new interactions as text, so
every byte of it stays (vcrpy's layout included).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from realprobe.errors import RealprobeError
from realprobe.http.decoding import decode_whole
from realprobe.limits import InputTooLarge, bounded_loader, check_size, json_or_none, load_json_text
from realprobe.outputs import OutputError, write_output
from realprobe.ranges import checked

FORMAT = "realprobe-cassette"
FORMAT_VERSION = 1
VCR_VERSION = 1
#: the header key of an MCP session file, and its format version (`mcp_session` reads it)
MCP_SESSION_KEY = "realprobe_mcp_cassette"
MCP_SESSION_VERSION = 1
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
#: the most a stored compressed body is decoded to (a bomb stops there)
MAX_DECODED = 50 * 1024 * 1024


class CassetteError(RealprobeError):
    """The cassette is missing, unreadable, or not a format realprobe knows."""


Model = TypeVar("Model", bound=BaseModel)


def validated(model: type[Model], raw: Any, where: str, sep: str = ": ") -> Model:
    """`raw` checked by `model` (a cassette's on-disk shape); its first problem is one
    CassetteError line naming the field (`<where><sep><field>: <problem>`)."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "line"
        raise CassetteError(f"{where}{sep}{field}: {first['msg']}") from None


@dataclass(slots=True)
class Failure:
    """How a call ended without a complete response."""

    type: str  # httpx exception class name ("ReadTimeout"), or "CancelledError", "OSError"...
    message: str
    phase: str  # connect | write | read (before headers) | body (after headers) | pool | other
    bytes_before: int = 0  # body bytes the client had received when it failed


@dataclass(slots=True)
class Call:
    seq: int
    method: str
    uri: str
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    request_body: bytes | None = None
    status: int | None = None  # None: no response headers ever arrived
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    complete: bool = True  # the body was read to its end
    error: Failure | None = None
    # timings, seconds; None when unknown (imported cassettes)
    t_s: float | None = None  # since the cassette's first call
    offset_s: float | None = None  # the client started the fetch -> this request left
    ttfb_s: float | None = None  # request left -> response headers
    elapsed_s: float | None = None  # request left -> body end, close or failure
    end_s: float | None = None  # latency the client reported (last hop of a fetch)
    budget_s: float | None = None  # time the client allowed this request (timeout/deadline)
    #: realprobe's sandbox answered it: a replay gives the client its deadline marks to read
    sandbox: bool = False
    chunk_sizes: list[int] | None = None  # body chunk boundaries as received, when several
    recorded_at: str | None = None
    #: a request body vcrpy stored as a mapping (aiohttp's `json=`/`data=`): written back as
    #: that mapping while `request_body` still holds its encoding
    request_body_data: Any = field(default=None, repr=False, compare=False)
    #: the interaction as read from a file, and what the call looked like then: written back
    #: as read while the call is unchanged
    origin: tuple[tuple[Any, ...], dict[str, Any]] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def outcome(self) -> str:
        if self.error is not None:
            return f"{self.error.type} ({self.error.phase})"
        if not self.complete:
            return f"{self.status} (body read in part)"
        return str(self.status)

    def header(self, name: str) -> str | None:
        low = name.lower()
        for k, v in self.headers:
            if k.lower() == low:
                return v
        return None

    @property
    def vcrpy_representable(self) -> bool:
        """A whole response vcrpy can serve: complete, or a redirect hop closed unread."""
        if self.error is not None or self.status is None:
            return False
        return self.complete or (
            self.status in REDIRECT_CODES and not self.body and self.header("location") is not None
        )


@dataclass
class Cassette:
    calls: list[Call]
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    #: an MCP session's messages as recorded, both ways (its calls are the requests and
    #: answers among them); None for an HTTP cassette
    records: list[dict[str, Any]] | None = None

    @property
    def match_on(self) -> tuple[str, ...]:
        return tuple(self.meta.get("match_on") or ("method", "url"))

    def label(self) -> str:
        return str(self.path) if self.path else "<in memory>"


# -- on-disk shapes (validated with pydantic at the boundary) ------------------------------


class _Timing(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)
    seq: int
    t_ms: float | None = None
    offset_ms: float | None = None
    ttfb_ms: float | None = None
    elapsed_ms: float | None = None
    end_ms: float | None = None
    budget_ms: float | None = None
    sandbox: bool = False
    chunks: list[int] | None = None
    recorded_at: str | None = None
    complete: bool = True
    recorded: dict[str, Any] | None = None  # JSON: the exact headers and body (see above)
    request_body_base64: str | None = None  # JSON: the exact binary request body


class _Error(BaseModel):
    type: str
    message: str = ""
    phase: str = "other"
    bytes_before: int = 0


class _Extra(_Timing):
    request: dict[str, Any]
    response: dict[str, Any] | None = None
    complete: bool = True
    error: _Error | None = None


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore")
    format: str = FORMAT
    format_version: int = Field(FORMAT_VERSION, ge=1)
    meta: dict[str, Any] = Field(default_factory=dict)
    beyond_vcrpy: list[_Extra] = Field(default_factory=list)


# -- bodies and headers ------------------------------------------------------------------


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def body_to_json(data: bytes) -> dict[str, str]:
    """vcrpy's `{"string": ...}`; undecodable bytes as `\\udcXX` escapes (read back exactly)."""
    return {"string": data.decode("utf-8", "surrogateescape")}


def body_from_json(raw: Any, where: str) -> bytes:
    """vcrpy `{"string": ...}`, Ruby VCR `{"encoding", "string" | "base64_string"}`, or bare."""
    if raw is None:
        return b""
    if isinstance(raw, bytes):
        return raw
    if isinstance(raw, str):
        return raw.encode("utf-8")
    if isinstance(raw, dict):
        if raw.get("base64_string") is not None:
            try:
                text = "".join(str(raw["base64_string"]).split())
                return base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise CassetteError(f"{where}: base64 body does not decode ({exc})") from exc
        value = raw.get("string")
        if value is None:
            return b""
        if isinstance(value, bytes):
            return value
        if isinstance(value, str):
            return value.encode("utf-8", "surrogateescape")
    raise CassetteError(f"{where}: body is neither text nor a body mapping ({type(raw).__name__})")


def mapping_body(data: Any, headers: list[tuple[str, str]]) -> bytes:
    """The bytes aiohttp sends for a body vcrpy stored as a mapping: a form for a form
    content type, JSON otherwise."""
    ctype = next((v for k, v in headers if k.lower() == "content-type"), "")
    if "x-www-form-urlencoded" in ctype.lower():
        from urllib.parse import urlencode

        return urlencode(data, doseq=True).encode("utf-8")
    return json.dumps(data).encode("utf-8")


def _as_mapping(call: Call) -> Any:
    """A mapping body as a mapping again: as read while unchanged, or (after a scrub) the
    JSON it now holds; None when it is no longer a JSON object."""
    if call.request_body == mapping_body(call.request_body_data, call.request_headers):
        return call.request_body_data
    data = json_or_none(call.request_body)
    return data if isinstance(data, dict) and data else None


def _is_mapping_body(raw: Any) -> bool:
    return isinstance(raw, dict) and not {"string", "base64_string", "encoding"} & set(raw)


def headers_to_json(headers: list[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k, v in headers:
        out.setdefault(k, []).append(v)
    return out


def headers_from_json(raw: Any, where: str) -> list[tuple[str, str]]:
    if raw is None:
        return []
    if isinstance(raw, list):  # HAR style [{"name", "value"}], or [[k, v]] / [[k, [v, ...]]]
        out = []
        for item in raw:
            if isinstance(item, dict) and "name" in item:
                name, value = item["name"], item.get("value", "")
                out.append((_header_text(name, where), _header_text(value, where)))
            elif isinstance(item, list | tuple) and len(item) == 2:
                values = item[1] if isinstance(item[1], list) else [item[1]]  # old vcrpy
                out.extend((_header_text(item[0], where), _header_text(v, where))
                           for v in values)
            else:
                raise CassetteError(f"{where}: a header is not {{name, value}} or [name, value]")
        return out
    if not isinstance(raw, dict):
        raise CassetteError(f"{where}: headers must be a mapping, got {type(raw).__name__}")
    pairs: list[tuple[str, str]] = []
    for k, values in raw.items():
        name = k if type(k) is str else str(k)
        if type(values) is not list:
            values = [values]
        for v in values:
            pairs.append((name, v if type(v) is str else _header_text(v, where)))
    return pairs


def _header_text(value: Any, where: str = "headers") -> str:
    """A header name or value: text, bytes or a number; anything nested is an error (and is
    never turned into text, which for aliased YAML lists could take gigabytes)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise CassetteError(f"{where}: a header value is a {type(value).__name__}, not text")


# -- realprobe JSON <-> calls ------------------------------------------------------------


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 4)


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def _timing_json(call: Call) -> dict[str, Any]:
    out: dict[str, Any] = {"seq": call.seq}
    for name, value in (
        ("t_ms", call.t_s), ("offset_ms", call.offset_s), ("ttfb_ms", call.ttfb_s),
        ("elapsed_ms", call.elapsed_s), ("end_ms", call.end_s), ("budget_ms", call.budget_s),
    ):
        if value is not None and value != float("inf"):
            out[name] = _ms(value)
    if call.sandbox:
        out["sandbox"] = True
    if call.chunk_sizes and len(call.chunk_sizes) > 1:
        out["chunks"] = call.chunk_sizes
    if call.recorded_at:
        out["recorded_at"] = call.recorded_at
    if not call.complete and call.error is None:
        out["complete"] = False
    return out


def request_json(call: Call, *, binary: bool = False) -> dict[str, Any]:
    """`binary`: a non-UTF-8 body stays bytes (YAML writes `!!binary`); otherwise it goes
    to `body_base64` and `body` is null."""
    body: Any = None
    extra: dict[str, str] = {}
    if call.request_body_data is not None:
        body = _as_mapping(call)
    if body is None and call.request_body:
        if _is_text(call.request_body):
            body = call.request_body.decode("utf-8")
        elif binary:
            body = call.request_body
        else:
            extra["body_base64"] = base64.b64encode(call.request_body).decode("ascii")
    return {
        "method": call.method,
        "uri": call.uri,
        "body": body,
        "headers": headers_to_json(call.request_headers),
        **extra,
    }


def response_json(call: Call, *, binary: bool = False) -> dict[str, Any]:
    """`binary`: a non-UTF-8 body stays bytes (YAML); otherwise a base64 string (realprobe's
    own sections; interactions use `vcrpy_interaction`)."""
    body: dict[str, Any]
    if _is_text(call.body):
        body = {"string": call.body.decode("utf-8")}
    elif binary:
        body = {"string": call.body}
    else:
        body = {"base64_string": base64.b64encode(call.body).decode("ascii")}
    return {
        "status": {"code": call.status, "message": call.reason},
        "headers": headers_to_json(call.headers),
        "body": body,
    }


def decoded(body: bytes, encoding: str | None) -> bytes | None:
    """A stored body's content under its `Content-Encoding`; None when it is not encoded, or
    does not decode (corrupt, truncated, over MAX_DECODED, an encoding realprobe lacks)."""
    if not body or (encoding or "").strip().lower() in ("", "identity"):
        return None
    return decode_whole(body, encoding, MAX_DECODED)


def _decoded_text(call: Call) -> bytes | None:
    """A compressed body's content when it is text (what vcrpy's JSON can hold), else None."""
    plain = decoded(call.body, call.header("content-encoding"))
    return plain if plain is not None and _is_text(plain) else None


def vcrpy_interaction(call: Call, *, binary: bool = False) -> dict[str, Any]:
    """One interaction as vcrpy loads and replays it: `binary` bodies as bytes (YAML), else
    as vcrpy's JSON serializer can hold them (see the module docstring), with the exact
    recording kept in the `realprobe` section when that differs."""
    timing = _timing_json(call)
    request = request_json(call, binary=binary)
    if request.pop("body_base64", None) is not None:
        assert call.request_body is not None
        request["body"] = call.request_body.decode("latin-1")
        timing["request_body_base64"] = base64.b64encode(call.request_body).decode("ascii")
    response = response_json(call, binary=True)
    if not binary and not _is_text(call.body):
        plain = _decoded_text(call)
        if plain is not None:
            timing["recorded"] = {
                "headers": response["headers"],
                "body_base64": base64.b64encode(call.body).decode("ascii"),
            }
            response["headers"] = headers_to_json([
                (k, str(len(plain)) if k.lower() == "content-length" else v)
                for k, v in call.headers
                if k.lower() not in ("content-encoding", "transfer-encoding")
            ])
            response["body"] = {"string": plain.decode("utf-8")}
        else:
            response["body"] = body_to_json(call.body)
    response["realprobe"] = timing
    return {"request": request, "response": response}


def call_record(call: Call, *, binary: bool = False) -> dict[str, Any]:
    """One call whole, as a `beyond_vcrpy` entry (also a journal line)."""
    extra = _timing_json(call)
    extra["request"] = request_json(call, binary=binary)
    extra["response"] = response_json(call, binary=binary) if call.status is not None else None
    extra["complete"] = call.complete
    if call.error is not None:
        e = call.error
        extra["error"] = {
            "type": e.type, "message": e.message, "phase": e.phase,
            "bytes_before": e.bytes_before,
        }
    return extra


def call_from_record(data: Any, where: str) -> Call:
    """One call whole from a `beyond_vcrpy` entry or a journal line."""
    extra = data if isinstance(data, _Extra) else validated(_Extra, data, where)
    call = call_from(extra.seq, extra.request, extra.response, where, extra)
    if extra.error is not None:
        e = extra.error
        call.error = Failure(e.type, e.message, e.phase, e.bytes_before)
    return call


def to_json_data(cassette: Cassette, *, binary: bool = False) -> dict[str, Any]:
    """`binary`: non-UTF-8 bodies as bytes (for YAML's `!!binary`), else in the forms vcrpy's
    JSON can load (see the module docstring). Unchanged calls read from a file are written
    back as read."""
    interactions: list[dict[str, Any]] = []
    extras: list[dict[str, Any]] = []
    for call in sorted(cassette.calls, key=lambda c: c.seq):
        if call.origin is not None and call.origin[0] == fingerprint(call) and (
            binary or not _holds_bytes(call.origin[1])
        ):
            interactions.append(call.origin[1])
        elif call.vcrpy_representable:
            interactions.append(vcrpy_interaction(call, binary=binary))
        else:
            extras.append(call_record(call, binary=binary))
    return {
        "version": VCR_VERSION,
        "interactions": interactions,
        "realprobe": {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "meta": cassette.meta,
            "beyond_vcrpy": extras,
        },
    }


def _holds_bytes(item: Any) -> bool:
    """Whether read data holds bytes (YAML `!!binary`), which JSON has no form for."""
    if isinstance(item, bytes):
        return True
    if isinstance(item, dict):
        return any(_holds_bytes(v) for v in item.values())
    if isinstance(item, list):
        return any(_holds_bytes(v) for v in item)
    return False


def fingerprint(call: Call) -> tuple[Any, ...]:
    """What a call carries that a file holds (to tell whether it changed since it was read)."""
    return (
        call.seq, call.method, call.uri, tuple(call.request_headers), call.request_body,
        call.status, call.reason, tuple(call.headers), call.body, call.complete,
        call.error is None, call.t_s, call.elapsed_s, call.ttfb_s,
    )


def status_code(code: Any, where: str) -> int:
    """A recorded HTTP status: an integer (or integer text) from 100 to 999."""
    if isinstance(code, str) and code.strip().isdigit() and len(code.strip()) <= 3:
        code = int(code)
    if isinstance(code, bool) or not isinstance(code, int):
        raise CassetteError(f"{where}: response status {code!r:.40} is not a number")
    if not 100 <= code <= 999:
        raise CassetteError(f"{where}: response status {code} is not an HTTP status")
    return code


def call_from(
    seq: int, req: Any, resp: Any, where: str, timing: _Timing | None = None
) -> Call:
    if not isinstance(req, dict) or "uri" not in req or "method" not in req:
        raise CassetteError(f"{where}: request needs `method` and `uri`")
    if not isinstance(req["method"], str) or not isinstance(req["uri"], str):
        raise CassetteError(f"{where}: request `method` and `uri` must be strings")
    req_body: bytes | None
    if req.get("body_base64"):
        req_body = base64.b64decode(str(req["body_base64"]))
    else:
        raw_body = req.get("body")
        req_body = None if raw_body in (None, "") or _is_mapping_body(raw_body) else (
            body_from_json(raw_body, where))
        if req_body == b"":
            req_body = None
    call = Call(
        seq=seq,
        method=str(req["method"]).upper(),
        uri=str(req["uri"]),
        request_headers=headers_from_json(req.get("headers"), where),
        request_body=req_body,
    )
    if _is_mapping_body(req.get("body")) and req["body"]:
        call.request_body_data = req["body"]
        call.request_body = mapping_body(req["body"], call.request_headers)
    if resp is not None:
        if not isinstance(resp, dict):
            raise CassetteError(f"{where}: response must be a mapping")
        status = resp.get("status")
        if isinstance(status, dict):
            code, reason = status.get("code"), status.get("message") or ""
        elif "status_code" in resp:  # very old vcrpy httpx cassettes
            code, reason = resp["status_code"], ""
        else:
            code, reason = status, ""
        call.status = status_code(code, where)
        call.reason = str(reason)
        call.headers = headers_from_json(resp.get("headers"), where)
        raw = resp["body"] if "body" in resp else resp.get("content")
        call.body = body_from_json(raw, where)
    if timing is not None:
        call.t_s = _s(timing.t_ms)
        call.offset_s = _s(timing.offset_ms)
        call.ttfb_s = _s(timing.ttfb_ms)
        call.elapsed_s = _s(timing.elapsed_ms)
        call.end_s = _s(timing.end_ms)
        call.budget_s = _s(timing.budget_ms)
        call.sandbox = timing.sandbox
        call.chunk_sizes = timing.chunks
        call.recorded_at = timing.recorded_at
        call.complete = timing.complete
    return call


def from_json_data(data: dict[str, Any], label: str) -> Cassette:
    """A vcrpy cassette, with or without realprobe's section."""
    version = data.get("version", VCR_VERSION)
    if version != VCR_VERSION:
        raise CassetteError(
            f"{label}: vcrpy cassette version {version!r}; realprobe reads version {VCR_VERSION}"
        )
    raw_section = data.get("realprobe")
    section = _read_section(raw_section, label)
    calls = _interaction_calls(data.get("interactions"), label)
    calls += _beyond_vcrpy_calls(section, label)
    calls = _in_recorded_order(calls, label)
    meta = dict(section.meta)
    if raw_section is None:
        meta.setdefault("source", "vcrpy")
        if any(c.recorded_at is not None or c.elapsed_s is not None for c in calls):
            meta["lost_section"] = True  # timings survive inside the responses
    return Cassette(calls, meta)


def _read_section(raw_section: Any, label: str) -> _Section:
    """realprobe's section, checked (empty when the cassette is plain vcrpy)."""
    if raw_section is None:
        return _Section.model_validate({})
    if not isinstance(raw_section, dict):
        raise CassetteError(f"{label}: the `realprobe` section must be a mapping")
    fv = raw_section.get("format_version", FORMAT_VERSION)
    if isinstance(fv, int) and fv > FORMAT_VERSION:
        raise CassetteError(
            f"{label}: cassette format version {fv} is newer than this realprobe reads "
            f"({FORMAT_VERSION}); upgrade realprobe to replay it"
        )
    return validated(_Section, raw_section, f"{label}: realprobe", ".")


def _interaction_calls(interactions: Any, label: str) -> list[Call]:
    """vcrpy's interactions as calls, with the timing realprobe keeps inside each response
    (or, from older cassettes, beside it)."""
    if not isinstance(interactions, list):
        raise CassetteError(f"{label}: `interactions` must be a list")
    calls: list[Call] = []
    for i, item in enumerate(interactions):
        where = f"{label}: interactions[{i}]"
        if not isinstance(item, dict):
            raise CassetteError(f"{where} is not a mapping")
        timing = None
        resp = item.get("response")
        raw_timing = item.get("realprobe")
        if isinstance(resp, dict) and isinstance(resp.get("realprobe"), dict):
            raw_timing = resp["realprobe"]
        if isinstance(raw_timing, dict):
            timing = validated(_Timing, raw_timing, f"{where}.realprobe", ".")
        seq = timing.seq if timing is not None else i
        call = call_from(seq, item.get("request"), resp, where, timing)
        if timing is not None:
            _exact_recording(call, timing, where)
        if _vcrpy_loads(item):
            call.origin = (fingerprint(call), item)
        calls.append(call)
    return calls


def _vcrpy_loads(item: dict[str, Any]) -> bool:
    """Whether plain vcrpy loads this interaction as it stands (older realprobe files wrote
    `base64_string`/`body_base64`, which are rewritten in vcrpy's forms when saved again)."""
    req, resp = item.get("request"), item.get("response")
    if not isinstance(req, dict) or "body_base64" in req or not isinstance(resp, dict):
        return False
    body = resp.get("body")
    return isinstance(body, dict) and "string" in body


def _exact_recording(call: Call, timing: _Timing, where: str) -> None:
    """The recorded headers and bytes a JSON cassette keeps beside vcrpy's decoded form."""
    try:
        if timing.request_body_base64:
            call.request_body = base64.b64decode(timing.request_body_base64, validate=True)
        if timing.recorded is not None:
            call.headers = headers_from_json(timing.recorded.get("headers"), where)
            call.body = base64.b64decode(str(timing.recorded.get("body_base64", "")),
                                         validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CassetteError(f"{where}.realprobe: base64 body does not decode ({exc})") from exc


def _beyond_vcrpy_calls(section: _Section, label: str) -> list[Call]:
    """The calls vcrpy cannot hold: incomplete responses and failures."""
    return [call_from_record(extra, f"{label}: realprobe.beyond_vcrpy[{j}]")
            for j, extra in enumerate(section.beyond_vcrpy)]


def _in_recorded_order(calls: list[Call], label: str) -> list[Call]:
    """The calls by `seq`; two calls with one `seq` make the order ambiguous (an error)."""
    calls.sort(key=lambda c: c.seq)
    seqs = [c.seq for c in calls]
    if len(set(seqs)) != len(seqs):
        raise CassetteError(f"{label}: two calls share one `seq`; the recorded order is ambiguous")
    return calls


# -- files -------------------------------------------------------------------------------


class _SafeLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe YAML, plus Ruby's `!binary` tag (base64 bytes) found in Ruby VCR cassettes and
    the Python 2 text and tuple tags of old vcrpy cassettes (read as text and lists; no
    other Python tag)."""


def _ruby_binary(loader: yaml.SafeLoader, node: yaml.Node) -> bytes:
    text = loader.construct_scalar(node)  # type: ignore[arg-type]
    try:
        return base64.b64decode("".join(str(text).split()), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a !binary value is not valid base64") from None


def _text(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return str(loader.construct_scalar(node))  # type: ignore[arg-type]


_SafeLoader.add_constructor("!binary", _ruby_binary)
def _tuple(loader: yaml.SafeLoader, node: yaml.Node) -> list[Any]:
    return list(loader.construct_sequence(node))  # type: ignore[arg-type]


for _tag in ("python/unicode", "python/str"):  # text in cassettes vcrpy wrote under Python 2
    _SafeLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _text)
_SafeLoader.add_constructor("tag:yaml.org,2002:python/tuple", _tuple)  # a list of plain data


def yaml_text(data: Any) -> str:
    """Plain data as the YAML realprobe writes (safe, in order, unicode as is)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, width=100)


def is_yaml_path(path: Path) -> bool:
    return path.suffix.lower() in (".yaml", ".yml")


def parse_text(raw: bytes, label: str, *, yaml_hint: bool) -> Any:
    """Bytes of a cassette file to plain data, with one-line errors for the usual breakages."""
    check_size(raw, label)
    stripped = raw.lstrip()
    if not stripped:
        raise CassetteError(f"{label}: the file is empty")
    first = stripped[:1]
    if first == b"{" or (first == b"[" and not yaml_hint):
        try:
            return load_json_text(raw, label, max_bytes=len(raw))  # size checked above
        except RealprobeError as exc:
            raise CassetteError(str(exc)) from exc
    try:
        return yaml.load(raw, Loader=bounded_loader(_SafeLoader))  # safe, aliases bounded
    except InputTooLarge as exc:
        raise CassetteError(f"{label}: {exc}") from exc
    except RecursionError as exc:
        raise CassetteError(f"{label}: YAML nested too deeply to read") from exc
    except (ValueError, TypeError) as exc:  # a tag's value that does not convert
        raise CassetteError(f"{label}: not valid YAML: {exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise CassetteError(f"{label}: not valid YAML{where}: {problem}") from exc


def dump_bytes(cassette: Cassette, *, as_yaml: bool) -> bytes:
    if cassette.records is not None:  # an MCP session: a header line, then a record a line
        meta = {k: v for k, v in cassette.meta.items() if k not in ("source", "match_on")}
        lines = [{MCP_SESSION_KEY: MCP_SESSION_VERSION, "meta": meta}, *cassette.records]
        return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode("utf-8")
    data = to_json_data(cassette, binary=as_yaml)
    if as_yaml:
        return yaml_text(data).encode("utf-8")
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    return text.encode("utf-8", "backslashreplace")  # a lone surrogate: its JSON escape


@checked
def save_cassette(
    cassette: Cassette, path: str | Path | None = None, *, payload: bytes | None = None
) -> Path:
    """Write through the one output writer (atomic, fsync'd, never through a link).
    `payload`: these bytes instead of the cassette's own rendering (an append)."""
    p = Path(path) if path is not None else cassette.path
    if p is None:
        raise CassetteError("no path to write the cassette to")
    if payload is None:
        payload = dump_bytes(cassette, as_yaml=is_yaml_path(p))
    try:
        write_output(p, payload, make_parents=True)
    except OutputError as exc:
        raise CassetteError(f"cannot write the cassette: {exc}") from exc
    cassette.path = p
    return p


# -- appending to a file another tool wrote ------------------------------------------------

_YAML_TAIL = re.compile(r"(?m)^version: 1[ \t]*\r?\n?\Z")
_JSON_TAILS = (  # the end of the interactions list: the last key, or before `version`
    re.compile(r"\r?\n([ \t]*)\][ \t]*\r?\n\}[ \t]*\r?\n?\Z"),
    re.compile(r"\r?\n([ \t]*)\][ \t]*,[ \t]*\r?\n[ \t]*\"version\"[ \t]*:[ \t]*1[ \t]*\r?\n"
               r"\}[ \t]*\r?\n?\Z"),
)
_JSON_ITEM = re.compile(r'"interactions"[ \t]*:[ \t]*\[[ \t]*\r?\n([ \t]*)\{')


def appended_bytes(path: Path, base: Cassette, new_calls: list[Call]) -> bytes | None:
    """The file at `path` (a plain vcrpy cassette, read into `base`) with `new_calls` appended
    as text, so every byte already there stays; None when that cannot be done safely (the
    caller then writes the whole cassette)."""
    if base.meta.get("source") != "vcrpy" or not new_calls:
        return None
    if any(c.origin is None or c.origin[0] != fingerprint(c) for c in base.calls):
        return None
    if not all(c.vcrpy_representable for c in new_calls):
        return None
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    as_yaml = is_yaml_path(path)
    items = to_json_data(Cassette(new_calls, {}), binary=as_yaml)["interactions"]
    for item in items:  # the file stays plain vcrpy: no realprobe keys in it
        item["response"].pop("realprobe", None)
    spliced = _splice_yaml(text, items) if as_yaml else _splice_json(text, items)
    if spliced is None:
        return None
    try:  # the result must read as the old interactions followed by the new ones
        before = parse_text(raw, str(path), yaml_hint=as_yaml)["interactions"]
        after = parse_text(spliced, str(path), yaml_hint=as_yaml)
        expected = before + items
    except (CassetteError, KeyError, TypeError, ValueError):
        return None
    if not isinstance(after, dict) or after.get("interactions") != expected:
        return None
    return spliced


def _newline(text: str) -> str:
    """The file's line ending (a file written on Windows ends its lines in CRLF)."""
    return "\r\n" if "\r\n" in text[:200] else "\n"


def _splice_yaml(text: str, items: list[dict[str, Any]]) -> bytes | None:
    m = _YAML_TAIL.search(text)
    nl = _newline(text)
    if not text.startswith("interactions:" + nl) or m is None or "\nrealprobe:" in text:
        return None
    block = yaml_text(items).replace("\n", nl)
    return (text[: m.start()] + block + text[m.start():]).encode("utf-8")


def _splice_json(text: str, items: list[dict[str, Any]]) -> bytes | None:
    first = _JSON_ITEM.search(text)
    tail = next((m for m in (r.search(text) for r in _JSON_TAILS) if m is not None), None)
    if tail is None or first is None or '"realprobe"' in text:
        return None
    indent = first.group(1)
    unit = len(indent) - len(tail.group(1))
    if unit <= 0:
        return None
    nl = _newline(text)
    rendered = [
        nl.join(indent + line for line in json.dumps(item, indent=unit).splitlines())
        for item in items
    ]
    return (text[: tail.start()] + "," + nl + ("," + nl).join(rendered)
            + text[tail.start():]).encode()
