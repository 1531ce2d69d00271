"""Credentials out of a cassette before it is written, in requests and in responses.

The rules live in `realprobe.secrets` (the one scrubber); this module applies them to calls.
Two passes. By name: credential headers (Authorization, Proxy-Authorization, Cookie,
Set-Cookie, X-Api-Key, ...), query parameters, form fields and JSON fields named exactly like a
credential, OAuth `code`/`state` and URL passwords get a placeholder. Every value removed that
way, plus declared secrets (catalogue inputs marked `secret`, the LLM key), `--secret` values
and long secrets found in the environment, is then replaced wherever else it appears, in every
echo form (raw, percent-encoded, JSON-escaped, base64). In JSON bodies only string values are
touched, and every other byte stays; a compressed body is scrubbed decoded and, when a
credential was in it, compressed again the same way (untouched bodies keep their bytes).

`ScrubConfig` takes further names like vcrpy's `filter_headers`, `filter_query_parameters` and
`filter_post_data_parameters`. `cassette scrub` and recording run the same `scrub_cassette`
(`--dry-run` reports without writing).

Replay scrubs each incoming request's URL and body the same way before matching, so scrubbed
recordings still match.
"""

from __future__ import annotations

import functools
import gzip
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from realprobe.cassettes.cassette import Call, Cassette, decoded
from realprobe.secrets import (
    MIN_FOUND,
    PLACEHOLDER,
    Redactor,
    default_redactor,
    known_secrets,
    looks_like_json,
    redact_body,
    redact_json_body,
    scrub_data,
    scrub_query,
    scrub_text,
    secret_field,
    secret_header,
)
from realprobe.secrets import scrub_url as _scrub_url

#: a hook that names the secret values a call carries where no name says so (declared inputs)
SecretFinder = Callable[[Call], list[str]]


@dataclass(frozen=True)
class ScrubConfig:
    enabled: bool = True
    placeholder: str = PLACEHOLDER
    secrets: tuple[str, ...] = ()  # literal values to remove wherever they appear
    from_environment: bool = True  # also declared values and *_KEY/*_TOKEN/... env variables
    extra_headers: tuple[str, ...] = ()
    extra_params: tuple[str, ...] = ()

    def with_vcrpy_filters(
        self, filter_headers: Any = (), filter_query_parameters: Any = (),
        filter_post_data_parameters: Any = (),
    ) -> ScrubConfig:
        """More credential names, given as vcrpy's filter lists (names, or `(name,
        replacement)` pairs: realprobe's placeholder replaces the value either way)."""
        from dataclasses import replace

        return replace(
            self,
            extra_headers=self.extra_headers + _names(filter_headers),
            extra_params=self.extra_params + _names(filter_query_parameters)
            + _names(filter_post_data_parameters),
        )


def _names(values: Any) -> tuple[str, ...]:
    return tuple(str(v[0] if isinstance(v, list | tuple) else v) for v in values or ())


@dataclass
class ScrubReport:
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _header_literals(name: str, value: str) -> list[str]:
    import base64
    import binascii

    out = [value]
    low = name.lower()
    if " " in value and low in ("authorization", "proxy-authorization"):
        scheme, _, cred = value.partition(" ")
        out.append(cred.strip())
        if scheme.lower() == "basic":
            try:
                user_pass = base64.b64decode(cred.strip(), validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                user_pass = ""
            if user_pass:
                out.append(user_pass)
                out.append(user_pass.partition(":")[2])
    if "cookie" in low:
        first = value.split(";")[0] if low == "set-cookie" else value
        for part in first.split(";"):
            _, eq, v = part.strip().partition("=")
            if eq and v:
                out.append(v.strip('"'))
    return out


def scrub_url(url: str, cfg: ScrubConfig, found: list[str] | None = None) -> str:
    """Secret query parameters (and OAuth `code`/`state`) replaced; userinfo passwords too."""
    return _scrub_url(url, extra=cfg.extra_params, found=found, placeholder=cfg.placeholder)


def scrub_json_body(body: bytes, cfg: ScrubConfig, found: list[str] | None = None) -> bytes:
    """Credential JSON fields (or form fields) replaced, every other byte kept; other bodies
    come back unchanged."""
    if not body:
        return body
    if not looks_like_json(body):
        return _scrub_form(body, cfg, found)
    clean = redact_json_body(body, secret=lambda k: secret_field(k, cfg.extra_params),
                             found=found, placeholder=cfg.placeholder)
    return body if clean is None else clean


def _scrub_form(body: bytes, cfg: ScrubConfig, found: list[str] | None) -> bytes:
    """`a=1&password=x` bodies (HTML forms, OAuth token requests)."""
    if b"=" not in body or len(body) > 1_000_000 or b"\n" in body.strip() or b" " in body:
        return body
    try:
        text = body.decode("ascii")
    except UnicodeDecodeError:
        return body
    clean = scrub_query(text, extra=cfg.extra_params, found=found, placeholder=cfg.placeholder)
    return body if clean == text else clean.encode("ascii")


def _scrub_headers(
    headers: list[tuple[str, str]], cfg: ScrubConfig, found: list[str], report: ScrubReport
) -> list[tuple[str, str]]:
    out = []
    none = Redactor(())
    for k, v in headers:
        low = k.lower()
        if v and v != cfg.placeholder and secret_header(k, cfg.extra_headers):
            found.extend(_header_literals(k, v))
            out.append((k, cfg.placeholder))
            report.counts[f"header {low}"] += 1
        elif low in ("location", "content-location"):
            before = len(found)
            new = _scrub_url(
                v, redirect=low == "location", extra=cfg.extra_params, found=found,
                placeholder=cfg.placeholder,
            )
            if len(found) > before:
                report.counts[f"header {low} parameter"] += len(found) - before
            out.append((k, new))
        elif v and ("=" in v or " " in v):
            before = len(found)
            new = scrub_text(v, found=found, redactor=none, placeholder=cfg.placeholder)
            if new != v:
                report.counts[f"header {low} parameter"] += max(1, (len(found) - before) // 2)
            out.append((k, new))
        else:
            out.append((k, v))
    return out


def _replace_literals(call: Call, red: Redactor, report: ScrubReport) -> None:
    new_uri = red.text(call.uri)
    if new_uri != call.uri:
        call.uri = new_uri
        report.counts["echoed value"] += 1
    for attr in ("request_headers", "headers"):
        pairs: list[tuple[str, str]] = getattr(call, attr)
        cleaned = [(k, red.text(v)) for k, v in pairs]
        if cleaned != pairs:
            setattr(call, attr, cleaned)
            report.counts["echoed value"] += 1
    if call.body:
        new = redact_body(call.body, red, placeholder=red.placeholder)
        if new != call.body:
            call.body = new
            report.counts["echoed value"] += 1
    if call.request_body:
        new_req = redact_body(call.request_body, red, placeholder=red.placeholder)
        if new_req != call.request_body:
            call.request_body = new_req
            report.counts["echoed value"] += 1
    if call.error is not None:
        call.error.message = red.text(call.error.message)
    call.reason = red.text(call.reason)


def _fix_length(call: Call, before: int) -> None:
    if len(call.body) == before or not call.complete:
        return
    call.headers = [
        (k, str(len(call.body)) if k.lower() == "content-length" else v) for k, v in call.headers
    ]


#: compressed bodies realprobe scrubs decoded, then compresses again the same way
ENCODERS = {
    "gzip": lambda b: gzip.compress(b, mtime=0),
    "x-gzip": lambda b: gzip.compress(b, mtime=0),
    "deflate": zlib.compress,
}


def _open_encoded(calls: list[Call]) -> dict[int, tuple[bytes, str, bytes]]:
    """Swap each complete compressed body for its decoded bytes (to be scrubbed)."""
    opened: dict[int, tuple[bytes, str, bytes]] = {}
    for call in calls:
        enc = (call.header("content-encoding") or "").strip().lower()
        if call.body and call.complete and call.error is None and enc in ENCODERS:
            plain = decoded(call.body, enc)
            if plain is not None:
                opened[id(call)] = (call.body, enc, plain)
                call.body = plain
    return opened


def _close_encoded(calls: list[Call], opened: dict[int, tuple[bytes, str, bytes]]) -> None:
    """The recorded bytes back where nothing was scrubbed; compressed again where it was."""
    for call in calls:
        entry = opened.get(id(call))
        if entry is not None:
            raw, enc, plain = entry
            call.body = raw if call.body == plain else ENCODERS[enc](call.body)


def _by_name(call: Call, cfg: ScrubConfig, found: list[str], report: ScrubReport) -> None:
    """First pass over one call: what its names say is a credential."""
    call.request_headers = _scrub_headers(call.request_headers, cfg, found, report)
    call.headers = _scrub_headers(call.headers, cfg, found, report)
    before = len(found)
    call.uri = scrub_url(call.uri, cfg, found)
    if len(found) > before:
        report.counts["query parameter"] += len(found) - before
    if call.request_body:
        before = len(found)
        call.request_body = scrub_json_body(call.request_body, cfg, found)
        report.counts["request field"] += len(found) - before
    if call.body and call.complete:
        before = len(found)
        call.body = scrub_json_body(call.body, cfg, found)
        report.counts["response field"] += len(found) - before
    if call.error is not None:
        call.error.message = scrub_text(
            call.error.message, found=found, redactor=Redactor(()), placeholder=cfg.placeholder,
        )


def scrub_cassette(
    cassette: Cassette, cfg: ScrubConfig | None = None, *, finder: SecretFinder | None = None
) -> ScrubReport:
    """Scrub every call in place; returns what was replaced, by kind.

    `finder` names further secret values per call (declared secret path inputs of the
    catalogue tool a recorded URL belongs to; see `declared_secret_finder`)."""
    cfg = cfg or ScrubConfig()
    report = ScrubReport()
    if not cfg.enabled:
        return report
    found: list[str] = list(cfg.secrets)
    if cfg.from_environment:
        found.extend(known_secrets())
    sizes = {id(c): len(c.body) for c in cassette.calls}
    opened = _open_encoded(cassette.calls)
    for call in cassette.calls:
        if finder is not None:
            declared = finder(call)
            found.extend(declared)
            report.counts["declared input"] += len(declared)
        _by_name(call, cfg, found, report)
    literals = {s for s in found if len(s) >= MIN_FOUND and s != cfg.placeholder}
    literals |= {s for s in cfg.secrets if s}
    red = Redactor(literals, cfg.placeholder)
    if red:
        for call in cassette.calls:
            _replace_literals(call, red, report)
        cassette.meta = scrub_data(cassette.meta, redactor=red)
    _close_encoded(cassette.calls, opened)
    for call in cassette.calls:
        _fix_length(call, sizes[id(call)])
    report.counts = Counter({k: v for k, v in report.counts.items() if v})
    cassette.meta["scrubbed"] = True
    if cfg.extra_params or cfg.extra_headers:  # replay scrubs incoming requests the same way
        extra = cassette.meta.get("scrub_extra", {})
        cassette.meta["scrub_extra"] = {
            "params": sorted(set(extra.get("params", [])) | set(cfg.extra_params)),
            "headers": sorted(set(extra.get("headers", [])) | set(cfg.extra_headers)),
        }
    return report


def config_for(meta: dict[str, Any]) -> ScrubConfig:
    """The scrubbing a cassette was written with, as far as matching needs it."""
    extra = meta.get("scrub_extra") or {}
    return ScrubConfig(
        extra_params=tuple(extra.get("params", ())), extra_headers=tuple(extra.get("headers", ()))
    )


def scrub_for_match(url: str, body: bytes | None, cfg: ScrubConfig) -> tuple[str, bytes | None]:
    """What an incoming request looks like after recording-time scrubbing (for matching)."""
    if not cfg.enabled:
        return url, body
    url = scrub_url(url, cfg)
    body = scrub_json_body(body, cfg) if body else body
    red = default_redactor()  # declared values and the environment's, as when recording
    if red and cfg.placeholder == PLACEHOLDER:
        url = red.text(url)
        body = red.data(body) if body else body
    return url, body


def declared_secret_finder(catalog: Any) -> SecretFinder:
    """Values of catalogue inputs marked `secret` found in recorded URLs (path segments and
    query parameters), for scrubbing cassettes recorded without that knowledge."""
    from realprobe.cassettes.secret_inputs import secret_values_in

    return functools.partial(secret_values_in, catalog)


def _changed_headers(before: list[tuple[str, str]], after: list[tuple[str, str]]) -> list[str]:
    return sorted({k.lower() for (k, v), (_, w) in zip(before, after, strict=False) if v != w})


def _changed_parts(old: Call, new: Call) -> list[str]:
    """Where scrubbing changed a call: names and places, never the values."""
    where: list[str] = []
    if old.uri != new.uri:
        where.append("url")
    where += [f"request header {h}" for h in _changed_headers(old.request_headers,
                                                                new.request_headers)]
    if old.request_body != new.request_body:
        where.append("request body")
    where += [f"response header {h}" for h in _changed_headers(old.headers, new.headers)]
    if old.body != new.body:
        where.append("response body")
    if old.error is not None and new.error is not None and old.error.message != new.error.message:
        where.append("error message")
    return where


def scrub_preview(
    cassette: Cassette, cfg: ScrubConfig | None = None, *, finder: SecretFinder | None = None
) -> tuple[ScrubReport, list[dict[str, Any]]]:
    """What `scrub_cassette` would replace, call by call (the scrubbed URL and the places),
    leaving `cassette` as it is."""
    import copy

    twin = Cassette(copy.deepcopy(cassette.calls), copy.deepcopy(cassette.meta))
    report = scrub_cassette(twin, cfg, finder=finder)
    changes = []
    for old, new in zip(cassette.calls, twin.calls, strict=True):
        where = _changed_parts(old, new)
        if where:
            changes.append({"seq": old.seq, "request": f"{new.method} {new.uri}", "where": where})
    return report, changes
