"""Cassettes back into the formats they came from, so scrubbing a Ruby VCR or HAR file in
place keeps it a Ruby VCR or HAR file (bodies and headers as they were read: a Ruby VCR gzip
body stays gzip under its `Content-Encoding`; HAR content is written decoded, as HAR holds
it)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from realprobe.cassettes.cassette import (
    Call,
    Cassette,
    decoded,
    headers_to_json,
    is_yaml_path,
    save_cassette,
    yaml_text,
)


def _ruby_body(data: bytes | None) -> dict[str, str]:
    data = data or b""
    try:
        return {"encoding": "UTF-8", "string": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"encoding": "ASCII-8BIT", "base64_string": base64.b64encode(data).decode()}


def _har_content(call: Call) -> bytes:
    """HAR holds a response's content decoded (its headers still name the encoding)."""
    plain = decoded(call.body, call.header("content-encoding"))
    return call.body if plain is None else plain


def _http_date(iso: str | None) -> str | None:
    if not iso:
        return None
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return format_datetime(when.astimezone(UTC), usegmt=True)


def to_ruby_vcr(cassette: Cassette) -> dict[str, Any]:
    items = []
    for call in sorted(cassette.calls, key=lambda c: c.seq):
        item: dict[str, Any] = {
            "request": {
                "method": call.method.lower(),
                "uri": call.uri,
                "body": _ruby_body(call.request_body),
                "headers": headers_to_json(call.request_headers),
            },
            "response": {
                "status": {"code": call.status or 0, "message": call.reason},
                "headers": headers_to_json(call.headers),
                "body": _ruby_body(call.body),
            },
        }
        stamp = _http_date(call.recorded_at)
        if stamp:
            item["recorded_at"] = stamp
        items.append(item)
    return {
        "http_interactions": items,
        "recorded_with": str(cassette.meta.get("recorded_with") or "VCR"),
    }


def _har_headers(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in pairs]


def _har_entry(call: Call) -> dict[str, Any]:
    query = urlsplit(call.uri).query
    request: dict[str, Any] = {
        "method": call.method,
        "url": call.uri,
        "httpVersion": "HTTP/1.1",
        "headers": _har_headers(call.request_headers),
        "queryString": [{"name": k, "value": v}
                        for k, v in parse_qsl(query, keep_blank_values=True)],
        "cookies": [],
        "headersSize": -1,
        "bodySize": len(call.request_body or b""),
    }
    if call.request_body:
        mime = next((v for k, v in call.request_headers if k.lower() == "content-type"), "")
        request["postData"] = {"mimeType": mime,
                               "text": call.request_body.decode("utf-8", "replace")}
    body = _har_content(call)
    content: dict[str, Any] = {"size": len(body), "mimeType": call.header("content-type") or ""}
    if len(body) != len(call.body):
        content["compression"] = len(body) - len(call.body)
    try:
        content["text"] = body.decode("utf-8")
    except UnicodeDecodeError:
        content["text"] = base64.b64encode(body).decode()
        content["encoding"] = "base64"
    response: dict[str, Any] = {
        "status": call.status or 0,
        "statusText": call.reason,
        "httpVersion": "HTTP/1.1",
        "headers": _har_headers(call.headers),
        "cookies": [],
        "content": content,
        "redirectURL": call.header("location") or "",
        "headersSize": -1,
        "bodySize": len(call.body),
    }
    if call.error is not None:
        response["_error"] = f"{call.error.type}: {call.error.message}"
    total = (call.elapsed_s or 0.0) * 1000.0
    wait = (call.ttfb_s if call.ttfb_s is not None else call.elapsed_s or 0.0) * 1000.0
    entry: dict[str, Any] = {
        "startedDateTime": call.recorded_at or datetime.now(UTC).isoformat(),
        "time": round(total, 3),
        "request": request,
        "response": response,
        "cache": {},
        "timings": {"send": 0, "wait": round(wait, 3),
                    "receive": round(max(0.0, total - wait), 3)},
    }
    return entry


def to_har(cassette: Cassette) -> dict[str, Any]:
    creator = str(cassette.meta.get("recorded_with") or "realprobe")
    return {"log": {
        "version": "1.2",
        "creator": {"name": creator, "version": ""},
        "entries": [_har_entry(c) for c in sorted(cassette.calls, key=lambda c: c.seq)],
    }}


#: what an HTTP cassette exports to (an MCP session's formats are in `realprobe.mcp.interop`)
HTTP_FORMATS = ("realprobe", "ruby-vcr", "har")


def write_as(cassette: Cassette, path: Path, fmt: str) -> None:
    """Write an HTTP cassette to `path` in `fmt` (HTTP_FORMATS; realprobe's is YAML or JSON
    by the file's suffix, a Ruby VCR YAML file is one by its suffix too)."""
    if fmt == "realprobe":
        save_cassette(cassette, path)
        return
    data = to_ruby_vcr(cassette) if fmt == "ruby-vcr" else to_har(cassette)
    if fmt == "ruby-vcr" and is_yaml_path(path):
        payload = ("---\n" + yaml_text(data)).encode("utf-8")
    else:
        payload = (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    save_cassette(cassette, path, payload=payload)


def save_as_source(cassette: Cassette, path: Path, dest: Path | None = None) -> str:
    """Write back to `path` in the format the cassette was read from (Ruby VCR, HAR), else
    realprobe's; or to `dest` as a realprobe cassette. An MCP session (or transcript) is
    written as a realprobe MCP session file either way. Returns the format written."""
    source = str(cassette.meta.get("source") or "")
    if cassette.records is not None:
        save_cassette(cassette, dest or path)
        return "mcp-session"
    if (dest is not None and dest.resolve() != path.resolve()) or source not in HTTP_FORMATS:
        source = "realprobe"
    write_as(cassette, dest or path, source)
    return source
