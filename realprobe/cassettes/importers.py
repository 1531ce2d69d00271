"""Cassettes from elsewhere: vcrpy (YAML/JSON), Ruby VCR (`http_interactions`, `!binary`
base64 and gzip bodies), and HAR (what browser dev tools export).

Imported calls keep their status, headers and body bytes as stored, as vcrpy replays them
(a compressed body stays compressed under its `Content-Encoding`, which the client decodes).
The one change: a `Content-Encoding` over a body that is not encoded (HAR's decoded text, a
recording made with vcrpy's `decode_compressed_response` that kept the header) is dropped, with
its `Content-Length`, so that no client decodes the body twice.
"""

from __future__ import annotations

import base64
import binascii
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

from realprobe.cassettes import mcp_session
from realprobe.cassettes.cassette import (
    Call,
    Cassette,
    CassetteError,
    Failure,
    call_from,
    decoded,
    fingerprint,
    from_json_data,
    is_yaml_path,
    parse_text,
    save_cassette,
)
from realprobe.cassettes.journal import (
    journal_path,
    journal_running,
    pid_alive,
    read_journal,
    rebuild,
    recover_stale,
)
from realprobe.cassettes.matching import MATCH_URL, MATCH_URL_BODY
from realprobe.errors import RealprobeError
from realprobe.limits import load_json_text, read_bounded
from realprobe.ranges import checked


def from_data(
    data: Any, label: str, *, substitute: dict[str, str] | None = None
) -> Cassette:
    """Plain data from a cassette file to a Cassette, whatever tool wrote it. Whatever the
    file holds, the outcome is a Cassette or a one-line CassetteError, never another error."""
    try:
        return _from_data(data, label, substitute=substitute)
    except CassetteError:
        raise
    except RecursionError:
        raise CassetteError(f"{label}: nested too deeply to read") from None
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError,
            UnicodeError, binascii.Error) as exc:
        first = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise CassetteError(f"{label}: malformed cassette ({first})") from None


def _from_data(
    data: Any, label: str, *, substitute: dict[str, str] | None = None
) -> Cassette:
    if isinstance(data, list) and data and isinstance(data[0], dict) and "request" in data[0]:
        raise CassetteError(
            f"{label}: a pre-1.0 vcrpy cassette (a bare list); re-record it or migrate it with "
            "vcrpy's migration script first"
        )
    if not isinstance(data, dict):
        raise CassetteError(
            f"{label}: not a cassette (expected a mapping, got {type(data).__name__})"
        )
    read = next((fmt.read for fmt in DOCUMENT_FORMATS if fmt.detect(data)), None)
    if read is None:
        keys = ", ".join(sorted(map(str, data))[:6]) or "nothing"
        raise CassetteError(
            f"{label}: not a cassette: expected `interactions` (vcrpy/realprobe), "
            f"`http_interactions` (Ruby VCR), `log.entries` (HAR) or JSON lines of an MCP "
            f"session; found {keys}"
        )
    cassette = read(data, label)
    unroute_sandbox(cassette)
    if substitute:
        substitute_urls(cassette, substitute)
    return cassette


def from_vcrpy(data: dict[str, Any], label: str) -> Cassette:
    """vcrpy's `interactions`, realprobe's own section included when there is one."""
    cassette = from_json_data(data, label)
    # another tool's interactions (read now, or imported earlier and written as read)
    foreign = "realprobe" not in data or "imported_from" in cassette.meta
    for call in cassette.calls if foreign else ():
        unchanged = call.origin is not None and call.origin[0] == fingerprint(call)
        normalise_body(call)
        if unchanged:  # still written back exactly as read
            assert call.origin is not None
            call.origin = (fingerprint(call), call.origin[1])
    if "realprobe" not in data:
        lost = bool(cassette.meta.pop("lost_section", False))
        cassette.meta.setdefault("match_on", list(MATCH_URL_BODY if lost else MATCH_URL))
        if lost:
            _warn_lost_section(label, len(cassette.calls))
    return cassette


def substitute_urls(cassette: Cassette, substitute: Mapping[str, str]) -> None:
    """Rewrite request URLs and the URL-bearing response headers (Location...) alike."""
    for call in cassette.calls:
        for old, new in substitute.items():
            call.uri = call.uri.replace(old, new)
            call.headers = [
                (k, v.replace(old, new) if k.lower() in URL_HEADERS else v)
                for k, v in call.headers
            ]


URL_HEADERS = ("location", "content-location", "link", "refresh")
LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")
_WARNED: set[str] = set()


def _warn_lost_section(label: str, n: int) -> None:
    if label in _WARNED:
        return
    _WARNED.add(label)
    warnings.warn(
        f"{label}: its `realprobe` section is gone (re-saved by vcrpy?): recorded exceptions "
        f"and cassette settings are lost; replaying the {n} interaction(s) that remain",
        UserWarning,
        stacklevel=3,
    )


def _sandbox_apis() -> dict[str, str]:
    """{api id: base origin} of the default catalogue (sandbox paths are /<api-id>/...)."""
    from realprobe.adapters.catalog import default_catalog
    from realprobe.http.transports import origin_of

    return {api.id: origin_of(api.base_url) for api in default_catalog().apis.values()}


def _loopback(url: str) -> SplitResult | None:
    """`url`'s parts when it points at this machine (where a sandbox listens), else None."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return parts if (parts.hostname or "") in LOOPBACK else None


def _unroute_url(url: str, apis: Mapping[str, str]) -> str:
    parts = _loopback(url)
    if parts is None:
        return url
    segs = parts.path.split("/", 2)
    if len(segs) < 2 or segs[1] not in apis:
        return url
    rest = "/" + (segs[2] if len(segs) > 2 else "")
    query = f"?{parts.query}" if parts.query else ""
    return f"{apis[segs[1]]}{rest}{query}"


def unroute_sandbox(cassette: Cassette) -> None:
    """Calls recorded through realprobe's loopback sandbox (`http://127.0.0.1:PORT/<api-id>/
    <path>`) back to the real API URLs they stand for, Location headers included."""
    if not any(_loopback(c.uri) for c in cassette.calls):
        return
    apis = _sandbox_apis()
    for call in cassette.calls:
        call.uri = _unroute_url(call.uri, apis)
        call.headers = [
            (k, _unroute_url(v, apis) if k.lower() in URL_HEADERS else v) for k, v in call.headers
        ]


# -- files and journals ----------------------------------------------------------------------


@dataclass(frozen=True)
class Format:
    """One cassette format realprobe reads (as vcrpy registers serializers): `detect` looks
    at a document (or at a JSON-lines file's first record), `read` turns it into a Cassette.
    `kind`: http, or mcp (an MCP session: `Cassette.records` holds its messages)."""

    name: str
    kind: str
    detect: Callable[[Any], bool]
    read: Callable[[Any, str], Cassette]




def _first_line_record(raw: bytes) -> dict[str, Any] | None:
    """The first record of a JSON-lines file, or None for one document (whose first line
    alone is not a JSON object, or is the whole file and no session header)."""
    head = raw.lstrip()
    end = head.find(b"\n")
    if end < 0 or head[:1] != b"{":
        return None
    try:
        first = load_json_text(head[:end], "the first line", max_bytes=len(head))
    except RealprobeError:
        return None
    if not isinstance(first, dict) or not (head[end:].strip() or mcp_session.is_session(first)):
        return None
    return first


def load_bytes(raw: bytes, label: str, *, yaml_hint: bool = False) -> Cassette:
    """A cassette file's bytes in whichever registered format they are (by content, not by
    name): a one-line CassetteError for anything else."""
    first = _first_line_record(raw)
    if first is not None:
        read = next(fmt.read for fmt in LINE_FORMATS if fmt.detect(first))
        return read(mcp_session.json_lines(raw, label), label)
    return from_data(parse_text(raw, label, yaml_hint=yaml_hint), label)


@checked
def load_any(path: str | Path, *, recover: bool = True) -> Cassette:
    """The one loader of every cassette argument: realprobe's own, vcrpy JSON/YAML, Ruby VCR,
    HAR, an MCP session or another recorder's MCP transcript, told apart by content. A
    cassette whose record run was killed is first rebuilt from its journal."""
    p = Path(path)
    if recover and journal_path(p).exists():  # the cassette a killed run added to, if any
        try:
            base = load_any(p, recover=False) if p.is_file() else None
        except CassetteError:
            base = None  # unreadable: a rebuild that adds to it is refused
        recover_stale(p, base)
    if not p.exists():
        raise CassetteError(f"no cassette at {p}: record one first")
    if p.is_dir():
        raise CassetteError(f"{p} is a directory, not a cassette file")
    cassette = load_bytes(read_bounded(p), str(p), yaml_hint=is_yaml_path(p))
    cassette.path = p
    return cassette


#: the loader's name in the public API
load_cassette = load_any


@checked
def recover_cassette(path: str | Path) -> Cassette:
    """The cassette a journal describes, written atomically; the journal is then removed (an
    MCP session, its own journal, is written again without a torn last line)."""
    p = Path(path)
    jp = journal_path(p)
    head = _first_line_record(read_bounded(p)) if not jp.exists() and p.is_file() else None
    if head is not None and mcp_session.is_session(head):
        if isinstance(head.get("pid"), int) and pid_alive(head["pid"]):
            raise CassetteError(f"{p} is still being recorded (pid {head['pid']}); nothing "
                                "to recover yet")
        session = load_any(p, recover=False)
        save_cassette(session, p)
        return session
    if not jp.exists():
        raise CassetteError(f"no journal at {jp}: nothing to recover")
    pid = journal_running(p)
    if pid is not None:
        raise CassetteError(f"{p} is still being recorded (pid {pid}); nothing to recover yet")
    header, calls = read_journal(jp)
    return rebuild(p, header, calls, load_any(p, recover=False) if header.get("base")
                   and p.exists() else None)


# -- body normalisation --------------------------------------------------------------------


def _set_header(call: Call, name: str, value: str | None) -> None:
    low = name.lower()
    kept = [(k, v) for k, v in call.headers if k.lower() != low]
    if value is not None:
        original = next((k for k, _ in call.headers if k.lower() == low), name)
        kept.append((original, value))
    call.headers = kept


def normalise_body(call: Call, *, read_by_library: bool = False) -> None:
    """Drop a `Content-Encoding` the stored body does not carry (see the module docstring);
    every other header and byte stays as recorded. `read_by_library`: recorded through
    requests, urllib3 or aiohttp, which decode while reading, so a binary body that does not
    decode was decoded too."""
    if call.status is None or not call.body:
        return
    encoding = call.header("content-encoding")
    if not encoding or encoding.strip().lower() in ("identity", ""):
        return
    if (read_by_library or _looks_plain(call.body)) and decoded(call.body, encoding) is None:
        _set_header(call, "Content-Encoding", None)
        length = call.header("content-length")
        if length is not None and length.strip() != str(len(call.body)) and call.complete:
            _set_header(call, "Content-Length", str(len(call.body)))


def _looks_plain(body: bytes) -> bool:
    if body[:2] == b"\x1f\x8b":
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# -- Ruby VCR ------------------------------------------------------------------------------


def _http_date_iso(value: Any) -> str | None:
    if not value:
        return None
    from email.utils import parsedate_to_datetime

    try:
        return parsedate_to_datetime(str(value)).isoformat()
    except (TypeError, ValueError):
        return str(value)


def from_ruby_vcr(data: dict[str, Any], label: str) -> Cassette:
    items = data.get("http_interactions")
    if not isinstance(items, list):
        raise CassetteError(f"{label}: `http_interactions` must be a list")
    calls: list[Call] = []
    for i, item in enumerate(items):
        where = f"{label}: http_interactions[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
            raise CassetteError(f"{where}: needs a `request` mapping")
        if not isinstance(item.get("response"), dict):
            raise CassetteError(f"{where}: no response recorded")
        call = call_from(i, item["request"], item["response"], where)  # vcrpy's shape, nearly
        call.recorded_at = _http_date_iso(item.get("recorded_at"))
        normalise_body(call)
        calls.append(call)
    meta = {
        "source": "ruby-vcr",
        "recorded_with": str(data.get("recorded_with") or "VCR"),
        "match_on": list(MATCH_URL),
    }
    return Cassette(calls, meta)


# -- HAR -----------------------------------------------------------------------------------


def _ms_positive(value: Any, where: str) -> float:
    """A HAR duration in ms: a finite number; -1 (HAR's "does not apply") and below count 0."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CassetteError(f"{where}: expected a number of milliseconds, got {value!r:.40}")
    return float(value) if value > 0 else 0.0


def _har_status(resp: dict[str, Any], where: str) -> int:
    status = resp.get("status", 0)
    if isinstance(status, bool) or not isinstance(status, int):
        raise CassetteError(f"{where}.response.status: {status!r:.40} is not an integer")
    if status <= 0:
        return 0  # HAR: no response (blocked, failed, cancelled)
    if not 100 <= status <= 999:
        raise CassetteError(f"{where}.response.status: {status} is not an HTTP status")
    return status


def _har_headers(raw: Any, where: str) -> list[tuple[str, str]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise CassetteError(f"{where}: headers must be a list of {{name, value}} objects")
    out = []
    for i, item in enumerate(raw):
        if not (isinstance(item, dict) and isinstance(item.get("name"), str)
                and isinstance(item.get("value", ""), str)):
            raise CassetteError(
                f"{where}: headers[{i}] must be an object with a string name and value"
            )
        if not item["name"].startswith(":"):
            out.append((item["name"], item.get("value", "")))
    return out


def _har_when(started: Any, where: str) -> datetime | None:
    if started is None:
        return None
    if not isinstance(started, str):
        raise CassetteError(f"{where}.startedDateTime: expected an ISO 8601 date, got {started!r}")
    try:
        return datetime.fromisoformat(started.replace("Z", "+00:00"))
    except ValueError:
        raise CassetteError(
            f"{where}.startedDateTime: {started!r:.60} is not an ISO 8601 date"
        ) from None


def _har_body(content: Any, where: str) -> bytes:
    if content is None:
        return b""
    if not isinstance(content, dict):
        raise CassetteError(f"{where}.response.content must be an object")
    text = content.get("text")
    if text is None:
        return b""
    if not isinstance(text, str):
        raise CassetteError(f"{where}.response.content.text must be a string")
    if content.get("encoding") == "base64":
        try:
            return base64.b64decode("".join(text.split()), validate=True)
        except (binascii.Error, ValueError):
            raise CassetteError(
                f"{where}.response.content: encoding is base64 but the text does not decode"
            ) from None
    return text.encode("utf-8", "surrogateescape")


def _har_request(entry: dict[str, Any], i: int, where: str) -> Call:
    req = entry["request"]
    if not isinstance(req.get("method"), str) or not isinstance(req.get("url"), str):
        raise CassetteError(f"{where}: request needs a string `method` and `url`")
    post = req.get("postData")
    if post is not None and not isinstance(post, dict):
        raise CassetteError(f"{where}.request.postData must be an object")
    text = (post or {}).get("text", "")
    if not isinstance(text, str):
        raise CassetteError(f"{where}.request.postData.text must be a string")
    return Call(
        seq=i,
        method=req["method"].upper(),
        uri=req["url"],
        request_headers=_har_headers(req.get("headers"), f"{where}.request"),
        request_body=text.encode("utf-8", "surrogateescape") or None,
    )


def from_har(data: dict[str, Any], label: str) -> Cassette:
    """HAR 1.2, read strictly: a field of the wrong type is a one-line error naming it."""
    entries = data["log"]["entries"]
    if not isinstance(entries, list):
        raise CassetteError(f"{label}: `log.entries` must be a list")
    calls: list[Call] = []
    t0: datetime | None = None
    for i, entry in enumerate(entries):
        where = f"{label}: log.entries[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict):
            raise CassetteError(f"{where}: needs a `request` object")
        call = _har_request(entry, i, where)
        when = _har_when(entry.get("startedDateTime"), where)
        if when is not None:
            if t0 is not None and (when.tzinfo is None) != (t0.tzinfo is None):
                raise CassetteError(
                    f"{where}.startedDateTime: {when.isoformat()} mixes dates with and "
                    "without a time zone; give every date a zone (Z or +hh:mm)"
                )
            t0 = t0 or when
            call.t_s = (when - t0).total_seconds()
            call.recorded_at = when.isoformat()
        total = _ms_positive(entry.get("time"), f"{where}.time")
        timings = entry.get("timings")
        if timings is not None and not isinstance(timings, dict):
            raise CassetteError(f"{where}.timings must be an object")
        if timings:
            call.ttfb_s = sum(
                _ms_positive(timings.get(k), f"{where}.timings.{k}")
                for k in ("blocked", "dns", "connect", "send", "wait")
            ) / 1000.0
        call.elapsed_s = total / 1000.0
        resp = entry.get("response")
        if resp is None:
            resp = {}
        if not isinstance(resp, dict):
            raise CassetteError(
                f"{where}.response must be an object, got {type(resp).__name__}"
            )
        status = _har_status(resp, where)
        if status == 0:
            message = str(resp.get("_error") or "no response in the HAR entry")
            call.error = Failure("ConnectError", message, "connect", 0)
            calls.append(call)
            continue
        call.status = status
        reason = resp.get("statusText") or ""
        call.reason = reason if isinstance(reason, str) else str(reason)
        call.headers = _har_headers(resp.get("headers"), f"{where}.response")
        call.body = _har_body(resp.get("content"), where)
        normalise_body(call)
        calls.append(call)
    creator = data["log"].get("creator") or {}
    name = creator.get("name", "unknown") if isinstance(creator, dict) else "unknown"
    meta = {"source": "har", "recorded_with": str(name), "match_on": list(MATCH_URL)}
    return Cassette(calls, meta)


# -- the registered formats ------------------------------------------------------------------


def _har(data: Any) -> bool:
    return isinstance(data.get("log"), dict) and "entries" in data["log"]


#: formats of one JSON or YAML document, tried in order
DOCUMENT_FORMATS = (
    Format("mcp-cassette", "mcp", mcp_session.is_mcp_cassette, mcp_session.from_mcp_cassette),
    Format("mcp-recorder", "mcp", mcp_session.is_mcp_recorder, mcp_session.from_mcp_recorder),
    Format("vcrpy", "http", lambda d: "interactions" in d, from_vcrpy),
    Format("ruby-vcr", "http", lambda d: "http_interactions" in d, from_ruby_vcr),
    Format("har", "http", _har, from_har),
)
#: formats of JSON lines (one record a line), tried in order on the first record
LINE_FORMATS = (
    Format("mcp-session", "mcp", mcp_session.is_session, mcp_session.session_cassette),
    Format("mcp-tape", "mcp", lambda first: True, mcp_session.transcript_cassette),
)
