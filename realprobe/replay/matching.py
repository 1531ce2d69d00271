"""How a request finds its recording: method + canonical URL (+ body digest when asked).

Canonical URL: lower-case scheme and host, default ports dropped, path re-quoted the same way
every time, query pairs sorted. Recordings made through the SandboxRouter already carry the
canonical API URL, so they replay whatever port the sandbox had.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import hashlib
import json
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import httpx

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


def body_digest(body: bytes | None) -> str:
    """A short digest of a request body; JSON bodies are compared with sorted keys."""
    if not body:
        return ""
    data = body
    with contextlib.suppress(ValueError, UnicodeDecodeError):
        data = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()[:16]


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
