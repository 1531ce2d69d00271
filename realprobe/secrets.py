"""The one scrubber: what counts as a secret, and how it is removed from anything written.

A secret is what a client sent as a credential, and nothing else:

- by name, exactly: the `Authorization`, `Proxy-Authorization`, `Cookie` and `Set-Cookie`
  headers and a short list of API-key headers; query parameters, form fields and JSON fields
  named exactly like a credential (`api_key`, `apikey`, `access_token`, `refresh_token`,
  `client_secret`, `password`, `token`, ...; `key` and `appid` in a query string); `code` and
  `state` in an OAuth redirect. Names are compared without case, `-`, `_` or `.`, so
  `apiKey`, `API-KEY` and `api_key` are one name, but `next_token`, `promptTokenCount`,
  `x-access-level`, `publisher` or `assertion` are data. Each list can be extended (like
  vcrpy's `filter_headers`, `filter_query_parameters`, `filter_post_data_parameters`);
- by declaration: inputs marked `secret = true` in the catalogue, and the LLM key, are
  `remember`ed in this process (memory only, never written) when they are used;
- by environment: long values of `*_KEY`, `*_TOKEN`, `*_SECRET`, ... variables.

Every such value is then removed wherever it is echoed: raw, percent-encoded (either case,
`+` for spaces), JSON-escaped and base64-encoded (standard and URL-safe, at any alignment).
Inside a JSON document only string values are touched: keys, numbers and the bytes around a
replaced value stay as they were, so the document stays valid and every other byte is kept.
Cassettes (cassettes/scrub.py), database rows (`scrub_row`), logs (`LogScrubber`) and printed
output all use this, before anything is cut short.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

from realprobe.limits import json_or_none

PLACEHOLDER = "REDACTED"
#: JSON Schema's type names: `{"type": "string"}` under a credential name describes the
#: credential (a tool's input schema), it holds none; and a credential that is one of these
#: words is a form's placeholder (Swagger UI sends "string"), never replaced where it echoes
SCHEMA_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})

#: credential headers (names compared by `flat`)
CREDENTIAL_HEADERS = frozenset({
    "authorization", "proxyauthorization", "cookie", "setcookie", "xapikey", "apikey",
    "xgoogapikey", "xauthtoken", "xaccesstoken", "xamzsecuritytoken", "ocpapimsubscriptionkey",
})
#: credential parameters and fields: query strings, form and JSON bodies, JSON responses
CREDENTIAL_FIELDS = frozenset({
    "apikey", "accesstoken", "refreshtoken", "idtoken", "clientsecret", "password", "passwd",
    "token", "authtoken", "sessiontoken", "securitytoken", "accesskey", "secretkey",
    "secretaccesskey", "privatekey", "sessionid", "signature", "clientassertion",
    "xamzsignature", "xamzcredential", "xamzsecuritytoken", "appkey",
})
#: credentials only in a query string or form body (in JSON data `key` names a key)
CREDENTIAL_QUERY_ONLY = frozenset({"key", "appid"})
#: secret only in OAuth redirects (elsewhere `code` is a country code, `state` a region)
OAUTH_WORDS = frozenset({"code", "state"})
OAUTH_HINT_PARAMS = frozenset({"redirect_uri", "client_id", "scope", "session_state", "id_token"})
OAUTH_PATH_RE = re.compile(r"(?i)(oauth|callback|authori[sz]e|redirect|signin|sign-in|login|sso)")
URL_HEADERS = ("location", "content-location", "link", "refresh")
ENV_NAME_RE = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)")

MIN_FOUND = 6  # a value found by name is removed elsewhere only from this length on
MIN_DECLARED = 4  # declared secrets (catalogue `secret = true`, the LLM key)
MIN_ENV = 12
REGISTRY_MAX = 4096

_FLAT_RE = re.compile(r"[-_.\s]")


@lru_cache(maxsize=4096)
def flat(name: str) -> str:
    """`X-Api-Key` -> xapikey; `api_key`, `apiKey` -> apikey."""
    return _FLAT_RE.sub("", name.strip().lower())


QUERY_CREDENTIALS = CREDENTIAL_FIELDS | CREDENTIAL_QUERY_ONLY
_KINDS = {"query": QUERY_CREDENTIALS, "field": CREDENTIAL_FIELDS, "header": CREDENTIAL_HEADERS}


@lru_cache(maxsize=16384)
def _listed(name: str, kind: str, extra: tuple[str, ...]) -> bool:
    f = flat(name)
    return f in _KINDS[kind] or any(f == flat(e) for e in extra)


def secret_name(name: str, extra: Iterable[str] = ()) -> bool:
    """A query parameter or form field that holds a credential (OAuth `code`/`state` aside)."""
    return _listed(name, "query", tuple(extra))


def secret_field(name: str, extra: Iterable[str] = ()) -> bool:
    """A JSON field that holds a credential (`key` and `appid` are data in JSON)."""
    return _listed(name, "field", tuple(extra))


def secret_header(name: str, extra: Iterable[str] = ()) -> bool:
    return _listed(name, "header", tuple(extra))


# -- values declared secret in this process ------------------------------------------------


class _Registry:
    """Declared secret values, newest kept; memory only."""

    def __init__(self) -> None:
        self._values: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self.version = 0

    def add(self, value: str) -> None:
        with self._lock:
            if value in self._values:
                self._values.move_to_end(value)
                return
            self._values[value] = None
            while len(self._values) > REGISTRY_MAX:
                self._values.popitem(last=False)
            self.version += 1

    def values(self) -> list[str]:
        with self._lock:
            return list(self._values)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self.version += 1


_REGISTRY = _Registry()


def remember(*values: object) -> None:
    """Declare values secret for this process: they are removed from anything written."""
    for v in values:
        if v is None or isinstance(v, bool):
            continue
        text = str(v)
        if len(text) >= MIN_DECLARED and text != PLACEHOLDER:
            _REGISTRY.add(text)


def forget_all() -> None:
    """Tests only: drop every declared value."""
    _REGISTRY.clear()


_ENV_CACHE: tuple[tuple[int, float], list[str]] | None = None
ENV_TTL_S = 1.0


def env_secrets() -> list[str]:
    """Long values of secret-named environment variables (rescanned when the environment
    grows or shrinks, and at most every second otherwise)."""
    global _ENV_CACHE
    import time

    now = time.monotonic()
    if _ENV_CACHE is not None:
        (size, at), values = _ENV_CACHE
        if size == len(os.environ) and now - at < ENV_TTL_S:
            return list(values)
    values = [
        v for k, v in os.environ.items()
        if ENV_NAME_RE.search(k) and len(v) >= MIN_ENV and not v.startswith(("/", "."))
    ]
    _ENV_CACHE = ((len(os.environ), now), values)
    return list(values)


def known_secrets() -> list[str]:
    """Declared values plus secret-looking environment values."""
    return [*_REGISTRY.values(), *env_secrets()]


# -- echoes: how one value may be reflected ------------------------------------------------


def _b64_cores(raw: bytes) -> list[str]:
    """Base64 text of `raw` at the three byte alignments, trimmed to the characters that do not
    depend on the neighbouring bytes (so an echo inside a longer base64 string is found)."""
    out: list[str] = []
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + raw).decode("ascii")
        full = 4 * ((k + len(raw)) // 3)
        core = enc[(0, 2, 3)[k]:full]
        if len(core) >= 6:
            out.append(core)
    return out


@lru_cache(maxsize=8192)
def echoes(value: str) -> tuple[str, ...]:
    """Every form in which `value` may appear in a written file, longest first."""
    raw = value.encode("utf-8")
    forms = {value, quote(value, safe=""), quote(value), quote_plus(value), quote(value, safe="/:")}
    forms |= {f.replace("%", "%25") for f in list(forms) if "%" in f}  # encoded twice
    forms |= {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), f) for f in list(forms)}
    forms.add(json.dumps(value)[1:-1])
    forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
    forms.add(value.replace("/", "\\/"))
    std = base64.b64encode(raw).decode("ascii")
    url = base64.urlsafe_b64encode(raw).decode("ascii")
    forms |= {std, std.rstrip("="), url, url.rstrip("="), quote(std, safe="")}
    for core in _b64_cores(raw):
        forms |= {core, core.replace("+", "-").replace("/", "_"), quote(core, safe="")}
    forms.discard("")
    return tuple(sorted(forms, key=len, reverse=True))


class Redactor:
    """Replaces a set of secret values, in every echo form, with the placeholder."""

    def __init__(self, values: Iterable[str], placeholder: str = PLACEHOLDER) -> None:
        forms: set[str] = set()
        for v in values:
            if v and v != placeholder and v not in SCHEMA_TYPES:
                forms.update(f for f in echoes(v) if f != placeholder and len(f) >= 4)
        ordered = sorted(forms, key=len, reverse=True)
        self.placeholder = placeholder
        self.forms = ordered
        self._text = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self._bytes = (
            re.compile(b"|".join(re.escape(f.encode("utf-8")) for f in ordered))
            if ordered else None
        )

    def __bool__(self) -> bool:
        return self._text is not None

    def text(self, s: str) -> str:
        if self._text is None or not s:
            return s
        return self._text.sub(self.placeholder, s)

    def data(self, b: bytes) -> bytes:
        if self._bytes is None or not b:
            return b
        return self._bytes.sub(self.placeholder.encode(), b)

    def count(self, s: str) -> int:
        return 0 if self._text is None else len(self._text.findall(s))


# -- JSON documents: string values only -----------------------------------------------------

_JSON_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],]|-?\d[\d.eE+-]*')
_COLON_RE = re.compile(r"\s*:")


def looks_like_json(data: bytes | str) -> bool:
    head = data.lstrip()[:1]
    return head in (b"{", b"[", "{", "[")


def _json_value(token: str) -> str | None:
    value = json_or_none(token, max_bytes=len(token))
    return value if isinstance(value, str) else None


def redact_json(
    text: str, *, redactor: Redactor | None = None,
    secret: Callable[[str], bool] | None = None, found: list[str] | None = None,
    text_fn: Callable[[str], str] | None = None, placeholder: str = PLACEHOLDER,
) -> str:
    """A JSON document with its string values scrubbed and every other byte kept: a value under
    a credential name (`secret(name)`) becomes the placeholder, other values lose known secrets
    (`redactor`, `text_fn`). Keys, literals, layout and numbers are never changed, except a
    number that is itself a known secret, which becomes the quoted placeholder (never an
    unquoted word). The text must be valid JSON (the caller checks)."""
    out: list[str] = []
    pos = 0
    key: str | None = None
    numbers = set(redactor.forms) if redactor is not None else set()
    for m in _JSON_TOKEN_RE.finditer(text):
        token = m.group(0)
        if token[0] != '"':
            if token in numbers:  # a numeric secret echoed as a number: a quoted placeholder
                out += [text[pos:m.start()], f'"{placeholder}"']
                pos = m.end()
            key = None
            continue
        if _COLON_RE.match(text, m.end()):
            key = _json_value(token)
            continue
        inner = token[1:-1]
        if key is not None and secret is not None and secret(key):
            if inner and inner != placeholder:
                value = _json_value(token)
                if found is not None and value is not None:
                    found.append(value)
                new = f'"{placeholder}"'
            else:
                new = token
        else:
            cleaned = redactor.text(inner) if redactor is not None else inner
            cleaned = text_fn(cleaned) if text_fn is not None else cleaned
            new = token if cleaned == inner else f'"{cleaned}"'
            if new is not token and _json_value(new) is None:  # a cut escape: re-escape whole
                value = _json_value(token) or ""
                value = redactor.text(value) if redactor is not None else value
                new = json.dumps(text_fn(value) if text_fn is not None else value,
                                 ensure_ascii=False)
        key = None
        if new is not token:
            out.append(text[pos:m.start()])
            out.append(new)
            pos = m.end()
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def redact_body(
    data: bytes, redactor: Redactor, *, secret: Callable[[str], bool] | None = None,
    found: list[str] | None = None, placeholder: str = PLACEHOLDER,
) -> bytes:
    """A body without known secrets: JSON documents through `redact_json` (string values
    only), anything else byte-wise."""
    clean = redact_json_body(data, redactor=redactor, secret=secret, found=found,
                             placeholder=placeholder)
    return redactor.data(data) if clean is None else clean


def redact_json_body(data: bytes, **how: Any) -> bytes | None:
    """A UTF-8 JSON document through `redact_json(text, **how)`, every other byte kept; None
    when `data` is not one."""
    try:
        text = data.decode("utf-8") if looks_like_json(data) else ""
    except UnicodeDecodeError:
        return None
    if json_or_none(text) is None:
        return None
    clean = redact_json(text, **how)
    return data if clean == text else clean.encode("utf-8")


# -- URLs, query strings, free text ---------------------------------------------------------

_PAIR_RE = re.compile(r"(?P<k>[A-Za-z0-9_.\-\[\]]+)=(?P<v>[^&\s\"'<>#;,]+)")
_JSON_PAIR_RE = re.compile(r"\"(?P<k>[A-Za-z0-9_.\-]+)\"\s*:\s*\"(?P<v>(?:[^\"\\]|\\.)*)\"")
_SCHEME_RE = re.compile(r"(?i)\b(bearer|basic|token|digest)\s+(?P<v>[A-Za-z0-9._~+/=\-]{6,})")
_USERINFO_RE = re.compile(r"(?i)\b(https?://[^\s/:@]*):(?P<v>[^\s/@]+)@")


def oauth_query(names: Iterable[str], path: str = "", *, redirect: bool = False) -> bool:
    """Do `code`/`state` here look like an OAuth redirect's?"""
    low = {n.lower() for n in names}
    if not low & OAUTH_WORDS:
        return False
    return (
        redirect
        or {"code", "state"} <= low
        or bool(low & OAUTH_HINT_PARAMS)
        or bool(OAUTH_PATH_RE.search(path))
    )


def _decode_component(text: str) -> str:
    if "%" not in text and "+" not in text:
        return text  # what unquote_plus would give back
    from urllib.parse import unquote_plus

    return unquote_plus(text)


_QUERY_SEP = re.compile(r"([&;])")


def scrub_query(
    query: str, *, path: str = "", redirect: bool = False, extra: Iterable[str] = (),
    found: list[str] | None = None, placeholder: str = PLACEHOLDER,
) -> str:
    """Secret parameters of a query (or form body) replaced in place; other bytes kept as is."""
    if not query or "=" not in query:
        return query
    parts = _QUERY_SEP.split(query)
    names = [_decode_component(p.partition("=")[0]) for p in parts[::2]]
    oauth = oauth_query(names, path, redirect=redirect)
    extra = tuple(extra)
    changed = False
    for i in range(0, len(parts), 2):
        k, eq, v = parts[i].partition("=")
        name = names[i // 2]
        if not eq or not v or v == placeholder:
            continue
        if secret_name(name, extra) or (oauth and name.lower() in OAUTH_WORDS):
            if found is not None:
                found.append(_decode_component(v))
                found.append(v)
            parts[i] = f"{k}={placeholder}"
            changed = True
    return "".join(parts) if changed else query


def scrub_url(
    url: str, *, redirect: bool = False, extra: Iterable[str] = (),
    found: list[str] | None = None, placeholder: str = PLACEHOLDER,
) -> str:
    """Secret query parameters (and OAuth `code`/`state`), fragment ones and userinfo replaced."""
    if "?" not in url and "@" not in url and "#" not in url:
        return url
    if "@" not in url and "#" not in url and url.isprintable() and url[0] != " ":
        # the common case, a plain URL with a query, without parsing it: when nothing in the
        # query is secret the URL comes back as is, exactly as below (the part before `?`
        # holds the path, so it finds an OAuth path wherever the parsed path would)
        base, _, query = url.partition("?")
        if scrub_query(query, path=base, redirect=redirect, extra=extra,
                       placeholder=placeholder) == query:
            return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return scrub_text(url, found=found, placeholder=placeholder)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        if colon and password and password != placeholder:
            if found is not None:
                found.append(_decode_component(password))
            netloc = f"{user}:{placeholder}@{host}"
    query = scrub_query(
        parts.query, path=parts.path, redirect=redirect, extra=extra, found=found,
        placeholder=placeholder,
    )
    fragment = scrub_query(  # implicit-grant redirects carry tokens in the fragment
        parts.fragment, path=parts.path, redirect=redirect, extra=extra, found=found,
        placeholder=placeholder,
    )
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def scrub_text(
    text: str, *, found: list[str] | None = None, redactor: Redactor | None = None,
    placeholder: str = PLACEHOLDER,
) -> str:
    """Free text (an error message, a log line, a final answer): `name=value` and
    `"name": "value"` pairs with secret names, `Bearer ...` credentials, URL passwords, then
    every known secret value in any echo form."""
    if not text:
        return text
    sink: list[str] = []
    oauth = oauth_query(
        (m.group("k") for m in _PAIR_RE.finditer(text)), text, redirect=False
    ) if ("code=" in text or "state=" in text) else False

    def pair(m: re.Match[str]) -> str:
        k, v = m.group("k"), m.group("v")
        if v == placeholder or not (secret_name(k) or (oauth and k.lower() in OAUTH_WORDS)):
            return m.group(0)
        sink.append(_decode_component(v))
        sink.append(v)
        return f"{k}={placeholder}"

    def json_pair(m: re.Match[str]) -> str:
        k, v = m.group("k"), m.group("v")
        if not v or v == placeholder or not secret_field(k):
            return m.group(0)
        sink.append(v)
        return m.group(0).replace(f'"{v}"', f'"{placeholder}"')

    def scheme(m: re.Match[str]) -> str:
        v = m.group("v")
        if v == placeholder:
            return m.group(0)
        sink.append(v)
        return m.group(0).replace(v, placeholder)

    out = _PAIR_RE.sub(pair, text) if "=" in text else text
    out = _JSON_PAIR_RE.sub(json_pair, out) if '"' in out else out
    out = _SCHEME_RE.sub(scheme, out)
    out = _USERINFO_RE.sub(lambda m: m.group(0).replace(":" + m.group("v"), ":" + placeholder)
                           if m.group("v") != placeholder else m.group(0), out)
    if found is not None:
        found.extend(sink)
    values = [s for s in sink if len(s) >= MIN_FOUND]
    if values:
        out = Redactor(values, placeholder).text(out)
    if redactor is None:
        redactor = default_redactor()
    return redactor.text(out)


SNIPPET_WINDOW = 4096  # bytes scrubbed before a snippet is cut from their start


def clip(text: str | bytes, limit: int) -> str:
    """At most `limit` characters of `text`, scrubbed before they are cut, so no secret is
    ever cut in half (half a key is not recognised by anything after the cut)."""
    if isinstance(text, bytes):
        text = text[: SNIPPET_WINDOW + limit].decode("utf-8", "replace")
    clean = scrub_text(text[: SNIPPET_WINDOW + limit])
    return clean[:limit]


_DEFAULT: tuple[tuple[int, frozenset[str]], Redactor] | None = None
_DEFAULT_LOCK = threading.Lock()


def default_redactor() -> Redactor:
    """A Redactor for the declared values and the environment's secrets (cached)."""
    global _DEFAULT
    env = frozenset(env_secrets())
    key = (_REGISTRY.version, env)
    with _DEFAULT_LOCK:
        if _DEFAULT is None or _DEFAULT[0] != key:
            _DEFAULT = (key, Redactor([*_REGISTRY.values(), *env]))
        return _DEFAULT[1]


# -- structured data and database rows ----------------------------------------------------


def scrub_data(
    obj: Any, *, redactor: Redactor | None = None, names: Iterable[str] = (),
    inside: bool = False, literals: Iterable[str] = (), found: list[str] | None = None,
) -> Any:
    """JSON-like data: values under secret names replaced (all leaves of a container under
    one; a JSON schema under one keeps its keywords, see `is_schema`), every other string
    scrubbed as text, and each of `literals` (values a user named secret) replaced wherever
    it appears in a string; the values replaced for their names are added to `found` (to
    take their echoes out elsewhere, see `Scrubber`). Walked with a stack of its own, so
    data nested as deep as the input limits allow never ends in a RecursionError."""
    walk = _Walk(redactor if redactor is not None else default_redactor(), tuple(names),
                 tuple(v for v in literals if v))
    walk.found = found
    root: list[Any] = [None]
    walk.stack.append((obj, inside, root, 0, 0))
    while walk.stack:
        value, hidden, into, key, walk.depth = walk.stack.pop()
        # past any depth parsed input may have (a cycle in built data): nothing kept
        into[key] = PLACEHOLDER if walk.depth > MAX_WALK_DEPTH else walk.node(value, hidden)
    return root[0]


#: levels `scrub_data` walks down (twice the input limits' nesting); deeper is replaced
MAX_WALK_DEPTH = 1000


class Scrubber:
    """Scrubs the messages of one exchange (an MCP session) as `scrub_data` does, and also
    every echo of a value found under a credential name in any message: a key the client
    sent in its arguments, repeated in the server's answer or an error text. A message that
    gives up a new value is scrubbed again with it, so its own echoes go too."""

    def __init__(self, names: Iterable[str] = (), literals: Iterable[str] = ()) -> None:
        self.names = tuple(names)
        self.literals = tuple(v for v in literals if v)
        self.found: set[str] = set()
        self._red: Redactor | None = None
        self._key: tuple[int, int] | None = None

    def redactor(self) -> Redactor:
        """The declared and environment secrets and the values found so far (cached)."""
        key = (_REGISTRY.version, len(self.found))
        if self._red is None or key != self._key:
            self._red = Redactor([*known_secrets(), *sorted(self.found)])
            self._key = key
        return self._red

    def data(self, obj: Any) -> Any:
        sink: list[str] = []
        out = scrub_data(obj, redactor=self.redactor(), names=self.names,
                         literals=self.literals, found=sink)
        new = set(sink) - self.found - SCHEMA_TYPES
        if not new:
            return out
        self.found |= new
        return scrub_data(obj, redactor=self.redactor(), names=self.names,
                          literals=self.literals)

    def all(self, objs: Iterable[Any]) -> list[Any]:
        """A whole recording: every value found anywhere in it, then each message without
        any of their echoes (an echo before its value was sent included)."""
        items = list(objs)
        for obj in items:
            sink: list[str] = []
            scrub_data(obj, redactor=Redactor(()), names=self.names, found=sink)
            self.found |= set(sink) - SCHEMA_TYPES
        return [scrub_data(obj, redactor=self.redactor(), names=self.names,
                           literals=self.literals) for obj in items]


class _Walk:
    """One `scrub_data` walk: each container is made empty in the source's order and filled
    as its children come off the stack."""

    def __init__(self, red: Redactor, extra: tuple[str, ...], literals: tuple[str, ...]) -> None:
        self.red, self.extra, self.literals = red, extra, literals
        self.stack: list[tuple[Any, bool, Any, Any, int]] = []
        self.depth = 0  # of the node being walked
        self.found: list[str] | None = None

    def _later(self, value: Any, hidden: bool, into: Any, key: Any) -> None:
        into[key] = None  # the place, in order
        self.stack.append((value, hidden, into, key, self.depth + 1))

    def node(self, obj: Any, inside: bool) -> Any:
        out = self._node(obj, inside)
        if self.literals and isinstance(out, str):
            for value in self.literals:
                out = out.replace(value, PLACEHOLDER)
        return out

    def _node(self, obj: Any, inside: bool) -> Any:
        if isinstance(obj, Mapping):
            out: dict[Any, Any] = {}
            if inside and is_schema(obj):
                for k, v in obj.items():
                    self._schema_keyword(out, k, v)
                return out
            for k, v in obj.items():
                hidden = inside or (isinstance(k, str) and secret_field(k, self.extra))
                self._later(v, hidden, out, k)
            return out
        if isinstance(obj, list | tuple):
            items: list[Any] = [None] * len(obj)
            for i, v in enumerate(obj):
                if _after_secret_flag(obj, i, self.extra):
                    self._found(v)
                    items[i] = PLACEHOLDER
                else:
                    self._later(v, inside, items, i)
            return items
        if inside and isinstance(obj, str) and obj not in ("", PLACEHOLDER):
            self._found(obj)
            return PLACEHOLDER  # numbers and literals under a credential name stay as they are
        if isinstance(obj, str):
            if obj[:1] in ("{", "["):
                return scrub_json_text(obj, self.red)
            return scrub_text(obj, redactor=self.red)
        return obj

    def _found(self, value: str) -> None:
        if self.found is not None and len(value) >= MIN_FOUND:
            self.found.append(value)

    def _schema_keyword(self, out: dict[Any, Any], k: Any, v: Any) -> None:
        """One keyword of a credential's schema: its keywords and structure kept, so a replay
        serves a valid schema; every value it may carry (`default`, `const`, `enum`,
        `examples`, any word that is no schema keyword) replaced, as under any credential
        name."""
        if k in _SCHEMA_WORDS:
            self._later(v, False, out, k)
        elif k in _SCHEMA_LISTS and isinstance(v, list):
            schemas: list[Any] = [None] * len(v)
            out[k] = schemas
            for i, sub in enumerate(v):
                self._later(sub, True, schemas, i)
        elif k in _SCHEMA_MAPS and isinstance(v, Mapping):
            named: dict[Any, Any] = {}
            out[k] = named
            for name, sub in v.items():
                self._later(sub, True, named, name)
        else:  # one schema (`items`, `not`, ...) or a value
            self._later(v, True, out, k)


#: schema keywords whose values are names, patterns or prose (kept, prose scrubbed as text)
_SCHEMA_WORDS = frozenset({
    "type", "format", "pattern", "title", "description", "$ref", "$id", "$schema", "$comment",
    "required", "contentEncoding", "contentMediaType", "minLength", "maxLength", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
    "uniqueItems", "minProperties", "maxProperties", "nullable", "deprecated", "readOnly",
    "writeOnly",
})
#: keywords holding a list of schemas, or a map of names to schemas (one schema, `items` or
#: `not`, is walked as what it is: a schema, or a value under the credential's name)
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions",
                          "dependentSchemas"})


def is_schema(obj: Mapping[Any, Any]) -> bool:
    """A JSON Schema (a tool's input schema for a credential): a `type` naming schema types,
    or a reference or a combination of schemas."""
    kind = obj.get("type")
    if isinstance(kind, str):
        return kind in SCHEMA_TYPES
    if isinstance(kind, list):
        return bool(kind) and all(isinstance(k, str) and k in SCHEMA_TYPES for k in kind)
    return kind is None and any(k in obj for k in ("$ref", "anyOf", "oneOf", "allOf"))


def _after_secret_flag(items: list[Any] | tuple[Any, ...], i: int, extra: tuple[str, ...]) -> bool:
    """Item `i` of a command line is the value of a credential flag before it (`--api-key
    VALUE`, `-token VALUE`): the two-token form of `--api-key=VALUE`."""
    flag = items[i - 1] if i > 0 else None
    return (isinstance(flag, str) and flag.startswith("-") and "=" not in flag
            and isinstance(items[i], str) and not items[i].startswith("-")
            and secret_name(flag.lstrip("-"), extra))


def scrub_json_text(text: str, redactor: Redactor | None = None) -> str:
    """A string that may hold JSON: its string values scrubbed in place when it parses (every
    other byte kept), as text otherwise."""
    if not isinstance(json_or_none(text), dict | list):
        return scrub_text(text, redactor=redactor)
    red = redactor if redactor is not None else default_redactor()
    return redact_json(
        text, secret=secret_field,
        text_fn=lambda v: scrub_text(v, redactor=red),
    )


_PLAIN = frozenset({float, int, bool, type(None)})


def scrub_strings(obj: Any) -> Any:
    """Printed output: every string scrubbed as text (URLs, `name=value`, declared values);
    keys are kept, so schemas and tables keep their shape."""
    if type(obj) in _PLAIN:  # most of a report: numbers (the checks below cost more)
        return obj
    if isinstance(obj, Mapping):
        return {k: scrub_strings(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [scrub_strings(v) for v in obj]
    if isinstance(obj, str):
        return scrub_text(obj)
    return obj


def scrub_row(row: Mapping[str, Any], *, keep: Iterable[str] = ("id", "run_id")) -> dict[str, Any]:
    """A database row with every secret out: JSON columns as data, text columns as text."""
    red = default_redactor()
    kept = set(keep)
    out: dict[str, Any] = {}
    for k, v in row.items():
        if k in kept or v is None or isinstance(v, bool | int | float):
            out[k] = v
        elif isinstance(v, str):
            out[k] = (scrub_json_text(v, red) if v[:1] in ("{", "[")
                      else scrub_text(v, redactor=red))
        else:
            out[k] = scrub_data(v, redactor=red)
    return out


class LogScrubber(logging.Filter):
    """A logging filter: each record's message is scrubbed before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to logging to report
            return True
        clean = scrub_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


__all__ = [
    "PLACEHOLDER",
    "LogScrubber",
    "Redactor",
    "clip",
    "default_redactor",
    "echoes",
    "known_secrets",
    "remember",
    "scrub_data",
    "scrub_query",
    "scrub_row",
    "scrub_text",
    "scrub_url",
    "secret_header",
    "secret_name",
]
