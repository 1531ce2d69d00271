"""How a request finds its recording: method + canonical URL (+ body digest when asked) by
default, or any of vcrpy's matcher names (method, scheme, host, port, path, query, body,
raw_body, headers, uri, url) plus custom callables `(incoming, recorded) -> bool`.

Canonical URL: lower-case scheme and host, default ports dropped, path re-quoted the same way
every time, query pairs sorted. Recordings made through the SandboxRouter already carry the
canonical API URL, so they replay whatever port the sandbox had.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import httpx

from realprobe.errors import RealprobeError
from realprobe.limits import json_or_none

DEFAULT_PORTS = {"http": 80, "https": 443}
MATCH_URL = ("method", "url")
PATH_SAFE = "/:@!$&'()*+,;=-._~"
MATCH_URL_BODY = ("method", "url", "body")


def canonical_url(url: str | httpx.URL) -> str:
    """A stable spelling of a URL; strings that are not absolute URLs come back unchanged."""
    return _canonical(str(url))


@functools.lru_cache(maxsize=8192)
def _canonical(url: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return url
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if not scheme or not host:
        return url
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None or DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    path = quote(unquote(parts.path) or "/", safe=PATH_SAFE)
    if parts.query:
        pairs = sorted(parse_qsl(parts.query, keep_blank_values=True))
        return f"{scheme}://{netloc}{path}?{urlencode(pairs)}"
    return f"{scheme}://{netloc}{path}"


#: fields of an LLM request that do not change the answer (client timeouts, who is asking,
#: bookkeeping); ignored when an LLM request is matched to its recording
LLM_IGNORED_FIELDS = frozenset({
    "timeout", "request_timeout", "user", "metadata", "store", "service_tier",
})


def is_llm_request(data: Any) -> bool:
    """A chat/completion request body (OpenAI-style `model` + `messages`/`input`/`prompt`,
    or Gemini's `contents`)."""
    return isinstance(data, dict) and (
        ("model" in data and any(k in data for k in ("messages", "input", "prompt")))
        or "contents" in data
    )


def _semantic(data: Any) -> Any:
    if is_llm_request(data):
        return {k: v for k, v in data.items() if k not in LLM_IGNORED_FIELDS}
    return data


def body_digest(body: bytes | None) -> str:
    """A short digest of a request body; JSON bodies are compared with sorted keys, and LLM
    requests without the fields that do not change the answer."""
    if not body:
        return ""
    parsed = json_or_none(body)
    data = body if parsed is None else json.dumps(
        _semantic(parsed), sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def json_differences(a: Any, b: Any, path: str = "", limit: int = 6) -> list[str]:
    """The JSON paths where two documents differ (at most `limit`), e.g. `messages[3].content`."""
    out: list[str] = []
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            where = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                out.append(where + (" (only recorded)" if k in b else " (only in this request)"))
            else:
                out += json_differences(a[k], b[k], where, limit - len(out))
            if len(out) >= limit:
                break
    elif isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            out += json_differences(x, y, f"{path}[{i}]", limit - len(out))
            if len(out) >= limit:
                break
        if len(a) != len(b) and len(out) < limit:
            out.append(f"{path} ({len(a)} items here, {len(b)} recorded)")
    elif a != b:
        out.append(path or "(the whole body)")
    return out[:limit]


def body_differences(body: bytes | None, recorded: bytes | None) -> list[str]:
    """How a request body differs from a recorded one, field by field when both are JSON."""
    a, b = json_or_none(body), json_or_none(recorded)  # None: empty, null or not JSON
    if (a is None and body) or (b is None and recorded):
        return [] if body == recorded else ["(the body bytes)"]
    return json_differences(_semantic(a), _semantic(b))


def match_key(method: str, url: str, body: bytes | None, match_on: tuple[str, ...]) -> str:
    key = f"{method.upper()} {canonical_url(url)}"
    if "body" in match_on and body:
        key += f" body:{body_digest(body)}"
    return key


def closest(key: str, candidates: list[str]) -> str | None:
    """The recorded key that looks most like `key` (same method and host first)."""
    if not candidates:
        return None
    method, _, rest = key.partition(" ")
    host = rest.split("/", 3)[2] if rest.count("/") >= 2 else ""
    pool = [c for c in candidates if c.startswith(method + " ") and host and host in c]
    pool = pool or candidates
    if len(pool) > 2000:
        pool = pool[:2000]
    return max(pool, key=lambda c: difflib.SequenceMatcher(None, key, c).ratio())


#: vcrpy's matcher names, in the order realprobe documents them
MATCHER_NAMES = (
    "method", "scheme", "host", "port", "path", "query", "body", "raw_body", "headers",
    "uri", "url",
)
Matcher = str | Callable[[Any, Any], Any]
_FAST = frozenset({"method", "url", "uri", "body"})


def _parts(url: str) -> tuple[str, str, int | None, str, str]:
    try:
        p = urlsplit(url)
        port = p.port
    except ValueError:
        return "", "", None, url, ""
    scheme = p.scheme.lower()
    port = port if port is not None else DEFAULT_PORTS.get(scheme)
    return scheme, (p.hostname or "").lower(), port, p.path, p.query


def _component(name: str, method: str, url: str, body: bytes | None,
               headers: Iterable[tuple[str, str]] | None) -> str:
    if name == "method":
        return method.upper()
    if name in ("uri", "url"):
        return canonical_url(url)
    if name == "body":
        return f"body:{body_digest(body)}"
    if name == "raw_body":
        return "raw:" + (hashlib.sha256(body).hexdigest()[:16] if body else "")
    if name == "headers":
        pairs = sorted((k.lower(), v) for k, v in (headers or ()))
        return "headers:" + hashlib.sha256(repr(pairs).encode()).hexdigest()[:16]
    scheme, host, port, path, query = _parts(url)
    if name == "scheme":
        return scheme
    if name == "host":
        return host
    if name == "port":
        return str(port)
    if name == "path":
        return quote(unquote(path) or "/", safe=PATH_SAFE)
    if name == "query":
        return "?" + urlencode(sorted(parse_qsl(query, keep_blank_values=True)))
    raise AssertionError(name)


@dataclass(frozen=True)
class MatchSpec:
    """Named matchers make the index key; custom callables then choose among its calls."""

    names: tuple[str, ...]
    custom: tuple[Callable[[Any, Any], Any], ...] = ()

    @classmethod
    def of(cls, match_on: Sequence[Matcher] | None) -> MatchSpec:
        names: list[str] = []
        custom: list[Callable[[Any, Any], Any]] = []
        for m in match_on or MATCH_URL_BODY:
            if callable(m):
                custom.append(m)
            elif isinstance(m, str) and m in MATCHER_NAMES:
                names.append(m)
            else:
                raise RealprobeError(
                    f"unknown matcher {m!r}: use a callable or one of {', '.join(MATCHER_NAMES)}"
                )
        return cls(tuple(names), tuple(custom))

    @property
    def uses_headers(self) -> bool:
        return "headers" in self.names

    def key(self, method: str, url: str, body: bytes | None,
            headers: Iterable[tuple[str, str]] | None = None) -> str:
        names = self.names
        if _FAST.issuperset(names) and "method" in names and ("url" in names or "uri" in names):
            return match_key(method, url, body, names)
        return " ".join(_component(n, method, url, body, headers) for n in names)

    def custom_match(self, incoming: tuple[str, str, bytes | None, list[tuple[str, str]]],
                     recorded: Any) -> bool:
        """vcrpy's convention: a matcher passes unless it returns False or raises
        AssertionError. Both sides are vcrpy `Request` objects."""
        mine = vcr_request(*incoming)
        theirs = vcr_request(recorded.method, recorded.uri, recorded.request_body,
                             recorded.request_headers)
        for fn in self.custom:
            try:
                if fn(mine, theirs) is False:
                    return False
            except AssertionError:
                return False
        return True


def vcr_request(method: str, uri: str, body: bytes | None,
                headers: Iterable[tuple[str, str]]) -> Any:
    from vcr.request import Request

    return Request(method, uri, body, dict(headers))
