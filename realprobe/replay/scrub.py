"""Secrets out before anything is written, in requests and in responses.

Two passes. By name: credential-like headers (Authorization, Cookie, Set-Cookie, X-Api-Key,
...), key/token/secret-like query parameters and JSON fields get a placeholder. Every value
removed that way, plus long secrets found in the environment (`*_KEY`, `*_TOKEN`, ...), is then
replaced wherever else it appears: a token echoed back in a response header or body goes too.

Replay scrubs each incoming request's query and JSON body by name the same way before matching,
so scrubbed recordings still match.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from realprobe.replay.cassette import Call, Cassette

PLACEHOLDER = "REDACTED"
HEADER_WORDS = (
    "authorization", "cookie", "api-key", "apikey", "api_key", "token", "secret",
    "password", "session", "signature", "x-auth", "x-amz-security",
)
PARAM_RE = re.compile(
    r"(?i)(^|[_\-.])(key|api[_-]?key|apikey|token|access[_-]?token|auth|secret|"
    r"client[_-]?secret|password|passwd|pwd|signature|sig|session|sessionid|appid|"
    r"credentials?)$"
)
FIELD_RE = re.compile(
    r"(?i)^(api[_-]?key|apikey|x[_-]api[_-]key|access[_-]?token|refresh[_-]?token|id[_-]?token|"
    r"auth[_-]?token|session[_-]?token|bearer[_-]?token|token|secret|client[_-]?secret|"
    r"password|passwd|authorization|private[_-]?key|secret[_-]?key)$"
)
#: every FIELD_RE name contains one of these, so a body without them needs no JSON parse
_FIELD_WORDS = (b"key", b"token", b"secret", b"passw", b"authorization", b"\\u")
ENV_NAME_RE = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)")
URL_HEADERS = ("location", "content-location", "link", "refresh")
MIN_LITERAL = 6
MIN_ENV_SECRET = 12


@dataclass(frozen=True)
class ScrubConfig:
    enabled: bool = True
    placeholder: str = PLACEHOLDER
    secrets: tuple[str, ...] = ()  # literal values to remove wherever they appear
    from_environment: bool = True  # also remove values of *_KEY/*_TOKEN/... env variables
    extra_headers: tuple[str, ...] = ()
    extra_params: tuple[str, ...] = ()


@dataclass
class ScrubReport:
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def secret_header(name: str, cfg: ScrubConfig) -> bool:
    low = name.lower()
    return any(w in low for w in HEADER_WORDS) or low in (h.lower() for h in cfg.extra_headers)


def secret_param(name: str, cfg: ScrubConfig) -> bool:
    return bool(PARAM_RE.search(name)) or name.lower() in (p.lower() for p in cfg.extra_params)


def _header_literals(name: str, value: str) -> list[str]:
    out = [value]
    low = name.lower()
    if low in ("authorization", "proxy-authorization") and " " in value:
        out.append(value.split(" ", 1)[1])
    if "cookie" in low:
        first = value.split(";")[0] if low == "set-cookie" else value
        for part in first.split(";"):
            _, eq, v = part.strip().partition("=")
            if eq:
                out.append(v)
    return out


def scrub_url(url: str, cfg: ScrubConfig, found: list[str] | None = None) -> str:
    """Key/token/secret-like query parameters replaced; userinfo passwords too."""
    if "?" not in url and "@" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        if colon and password:
            if found is not None:
                found.append(password)
            netloc = f"{user}:{cfg.placeholder}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        changed = False
        new_pairs = []
        for k, v in pairs:
            if v and v != cfg.placeholder and secret_param(k, cfg):
                if found is not None:
                    found.append(v)
                new_pairs.append((k, cfg.placeholder))
                changed = True
            else:
                new_pairs.append((k, v))
        if changed:
            query = urlencode(new_pairs)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _scrub_json(obj: Any, cfg: ScrubConfig, found: list[str]) -> tuple[Any, bool]:
    if isinstance(obj, dict):
        changed = False
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if (
                FIELD_RE.match(str(k))
                and isinstance(v, str | int | float)
                and not isinstance(v, bool)
                and str(v)
                and v != cfg.placeholder
            ):
                found.append(str(v))
                out[k] = cfg.placeholder
                changed = True
                continue
            new, ch = _scrub_json(v, cfg, found)
            out[k] = new
            changed = changed or ch
        return out, changed
    if isinstance(obj, list):
        changed = False
        items = []
        for v in obj:
            new, ch = _scrub_json(v, cfg, found)
            items.append(new)
            changed = changed or ch
        return items, changed
    return obj, False


def scrub_json_body(body: bytes, cfg: ScrubConfig, found: list[str] | None = None) -> bytes:
    """Secret-named JSON fields replaced; bodies that are not JSON come back unchanged."""
    if not body or body.lstrip()[:1] not in (b"{", b"["):
        return body
    low = body.lower()
    if not any(w in low for w in _FIELD_WORDS):
        return body  # no key FIELD_RE could match (nor an escaped one): skip the parse
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body
    sink: list[str] = []
    new, changed = _scrub_json(data, cfg, sink)
    if found is not None:
        found.extend(sink)
    if not changed:
        return body
    return json.dumps(new, ensure_ascii=False).encode("utf-8")


def env_secrets() -> list[str]:
    """Values of secret-named environment variables (`*_KEY`, `*_TOKEN`, ...)."""
    return _env_secrets()


def _env_secrets() -> list[str]:
    return [
        v for k, v in os.environ.items()
        if ENV_NAME_RE.search(k) and len(v) >= MIN_ENV_SECRET and not v.startswith(("/", "."))
    ]


def _scrub_headers(
    headers: list[tuple[str, str]], cfg: ScrubConfig, found: list[str], report: ScrubReport
) -> list[tuple[str, str]]:
    out = []
    for k, v in headers:
        if v and v != cfg.placeholder and secret_header(k, cfg):
            found.extend(_header_literals(k, v))
            out.append((k, cfg.placeholder))
            report.counts[f"header {k.lower()}"] += 1
        else:
            out.append((k, v))
    return out


def _replace_literals(
    call: Call, literals: list[str], cfg: ScrubConfig, report: ScrubReport
) -> None:
    ph = cfg.placeholder
    for lit in literals:
        if lit in call.uri:
            call.uri = call.uri.replace(lit, ph)
            report.counts["echoed value"] += 1
        for attr in ("request_headers", "headers"):
            pairs: list[tuple[str, str]] = getattr(call, attr)
            if any(lit in v for _, v in pairs):
                setattr(call, attr, [(k, v.replace(lit, ph)) for k, v in pairs])
                report.counts["echoed value"] += 1
        raw = lit.encode("utf-8")
        if call.body and raw in call.body:
            call.body = call.body.replace(raw, ph.encode())
            report.counts["echoed value"] += 1
        if call.request_body and raw in call.request_body:
            call.request_body = call.request_body.replace(raw, ph.encode())
            report.counts["echoed value"] += 1
        if call.error is not None and lit in call.error.message:
            call.error.message = call.error.message.replace(lit, ph)


def _fix_length(call: Call, before: int) -> None:
    if len(call.body) == before or not call.complete:
        return
    call.headers = [
        (k, str(len(call.body)) if k.lower() == "content-length" else v) for k, v in call.headers
    ]


def scrub_cassette(cassette: Cassette, cfg: ScrubConfig | None = None) -> ScrubReport:
    """Scrub every call in place; returns what was replaced, by kind."""
    cfg = cfg or ScrubConfig()
    report = ScrubReport()
    if not cfg.enabled:
        return report
    found: list[str] = list(cfg.secrets)
    if cfg.from_environment:
        found.extend(_env_secrets())
    sizes = {id(c): len(c.body) for c in cassette.calls}
    for call in cassette.calls:
        call.request_headers = _scrub_headers(call.request_headers, cfg, found, report)
        call.headers = _scrub_headers(call.headers, cfg, found, report)
        call.headers = [
            (k, scrub_url(v, cfg, found) if k.lower() in URL_HEADERS else v)
            for k, v in call.headers
        ]
        before = len(found)
        call.uri = scrub_url(call.uri, cfg, found)
        if len(found) > before:
            report.counts["query parameter"] += len(found) - before
        if call.request_body:
            before = len(found)
            call.request_body = scrub_json_body(call.request_body, cfg, found)
            report.counts["request JSON field"] += len(found) - before
        if call.body and call.complete:
            before = len(found)
            call.body = scrub_json_body(call.body, cfg, found)
            report.counts["response JSON field"] += len(found) - before
    literals = sorted(
        {s for s in found if len(s) >= MIN_LITERAL and s != cfg.placeholder}, key=len, reverse=True
    )
    if literals:
        for call in cassette.calls:
            _replace_literals(call, literals, cfg, report)
    for call in cassette.calls:
        _fix_length(call, sizes[id(call)])
    report.counts = Counter({k: v for k, v in report.counts.items() if v})
    cassette.meta["scrubbed"] = True
    if cfg.extra_params or cfg.extra_headers:  # replay scrubs incoming requests the same way
        cassette.meta["scrub_extra"] = {
            "params": sorted(set(cassette.meta.get("scrub_extra", {}).get("params", []))
                             | set(cfg.extra_params)),
            "headers": sorted(set(cassette.meta.get("scrub_extra", {}).get("headers", []))
                              | set(cfg.extra_headers)),
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
    return scrub_url(url, cfg), scrub_json_body(body, cfg) if body else body
