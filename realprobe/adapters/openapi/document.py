"""An OpenAPI (3.0, 3.1) or Swagger 2.0 document: parsed from YAML or JSON text, with its
`$ref`s resolved through `referencing` (cycles and dangling pointers become messages)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import yaml
from referencing import Registry, Resource
from referencing.exceptions import PointerToNowhere, Unresolvable

from realprobe.errors import RealprobeError
from realprobe.limits import InputTooLarge, bounded_loader, check_nesting, load_json_text

#: a larger description is refused before parsing (the biggest public ones are a few MB)
MAX_DOCUMENT_BYTES = 20 * 1024 * 1024
DOC_URI = "urn:realprobe:openapi"
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


class OpenApiError(RealprobeError):
    """The document as a whole cannot be imported (one line, names the document)."""


class RefError(Exception):
    """A `$ref` that cannot be followed: missing target, external file, or a cycle."""


def _yaml_loader() -> type:
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # type: ignore[no-any-return]


def parse_text(text: str, origin: str) -> dict[str, Any]:
    """The document as a mapping; JSON when it looks like JSON, else YAML."""
    size = len(text.encode("utf-8", "replace"))
    if size > MAX_DOCUMENT_BYTES:
        raise OpenApiError(
            f"{origin}: document is {size / 1e6:.1f} MB, over the "
            f"{MAX_DOCUMENT_BYTES // (1024 * 1024)} MB limit"
        )
    stripped = text.lstrip("\ufeff \t\r\n")
    raw: Any
    if stripped.startswith("{"):
        try:
            raw = load_json_text(stripped, origin, max_bytes=len(stripped))  # size checked above
        except RealprobeError as exc:
            raise OpenApiError(str(exc)) from exc
    else:
        try:
            # a safe loader (C or Python) whose aliases may not expand past the node budget
            raw = yaml.load(stripped, Loader=bounded_loader(_yaml_loader()))
        except InputTooLarge as exc:
            raise OpenApiError(f"{origin}: {exc}") from exc
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise OpenApiError(f"{origin}: not valid YAML{where}: {problem}") from exc
        except RecursionError as exc:
            raise OpenApiError(f"{origin}: YAML nested too deeply") from exc
    if not isinstance(raw, dict):
        raise OpenApiError(f"{origin}: expected a mapping at the top level, got {_kind(raw)}")
    try:
        check_nesting(raw, origin)
    except InputTooLarge as exc:
        raise OpenApiError(str(exc)) from exc
    return raw


def _kind(value: Any) -> str:
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(type(value), type(value).__name__)


@dataclass
class Document:
    """One parsed description and what is needed to read it."""

    raw: dict[str, Any]
    origin: str  # path or URL, for messages
    url: str | None = None  # where it was fetched from, to resolve relative server URLs
    version: str = field(init=False)  # "2.0", "3.0" or "3.1"
    _resolver: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        raw = self.raw
        if "swagger" in raw:
            if str(raw["swagger"]).strip() != "2.0":
                raise OpenApiError(
                    f"{self.origin}: swagger {raw['swagger']!r} is not supported (2.0 is)"
                )
            self.version = "2.0"
        elif "openapi" in raw:
            m = re.match(r"^\s*3\.(\d+)", str(raw["openapi"]))
            if not m:
                raise OpenApiError(
                    f"{self.origin}: openapi {raw['openapi']!r} is not supported (3.0 and 3.1 are)"
                )
            self.version = "3.1" if int(m.group(1)) >= 1 else "3.0"
        else:
            raise OpenApiError(
                f"{self.origin}: not an OpenAPI document (no `openapi` or `swagger` field)"
            )
        has = [k for k in ("webhooks", "components") if k in raw]
        if "paths" not in raw and self.version == "3.1" and has:
            raise OpenApiError(
                f"{self.origin}: a valid OpenAPI 3.1 document without `paths` (only "
                f"{' and '.join(has)}): it describes no operations to call, so there is "
                "nothing to import as tools"
            )
        if not isinstance(raw.get("paths"), dict):
            raise OpenApiError(f"{self.origin}: no `paths` mapping")
        registry: Registry[Any] = Registry().with_resource(DOC_URI, Resource.opaque(raw))
        self._resolver = registry.resolver(base_uri=DOC_URI)

    @property
    def info(self) -> dict[str, Any]:
        info = self.raw.get("info")
        return info if isinstance(info, dict) else {}

    @property
    def title(self) -> str:
        return str(self.info.get("title") or "API").strip()

    def lookup(self, ref: str) -> Any:
        """The target of one `$ref` (local pointers only; external files are not fetched)."""
        if not isinstance(ref, str):
            raise RefError(f"$ref must be a string, got {_kind(ref)}")
        if not ref.startswith("#"):
            raise RefError(f"external $ref {ref!r} is not followed (only local #/ pointers)")
        try:
            return self._resolver.lookup(ref).contents
        except PointerToNowhere:
            raise RefError(f"$ref {ref!r} points to nothing in the document") from None
        except (Unresolvable, ValueError, TypeError, KeyError, IndexError):
            raise RefError(f"$ref {ref!r} cannot be resolved") from None

    def deref(self, node: Any, seen: tuple[str, ...] = ()) -> tuple[Any, tuple[str, ...]]:
        """Follow `$ref` chains on one node; returns the node and the refs followed so far.
        A ref already on the path is a cycle."""
        hops = 0
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if ref in seen:
                raise RefError(f"$ref cycle: {' -> '.join([*seen[seen.index(ref) :], ref])}")
            seen = (*seen, ref)
            node = self.lookup(ref)
            hops += 1
            if hops > 64:
                raise RefError(f"$ref chain longer than 64 at {ref!r}")
        return node, seen

    # -- servers ------------------------------------------------------------------------

    def server_urls(self, *levels: Any) -> list[str]:
        """Absolute base URLs from the first level that declares servers (operation, path,
        document) or, for Swagger 2.0, from schemes, host and basePath."""
        if self.version == "2.0":
            return self._swagger_base()
        for servers in (*levels, self.raw.get("servers")):
            if isinstance(servers, list) and servers:
                out = [u for u in (self._server_url(s) for s in servers) if u]
                if out:
                    return out
        if self.url:
            parts = urlsplit(self.url)
            return [f"{parts.scheme}://{parts.netloc}"]
        return []

    def _server_url(self, server: Any) -> str | None:
        if not isinstance(server, dict) or not isinstance(server.get("url"), str):
            return None
        url = server["url"].strip()
        variables = server.get("variables") if isinstance(server.get("variables"), dict) else {}

        def fill(m: re.Match[str]) -> str:
            var = variables.get(m.group(1)) if variables else None
            default = var.get("default") if isinstance(var, dict) else None
            return str(default) if default is not None else m.group(0)

        url = re.sub(r"\{([^}]+)\}", fill, url)
        if self.url and not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", url):
            url = urljoin(self.url, url)
        return url.rstrip("/") or None

    def _swagger_base(self) -> list[str]:
        raw = self.raw
        host = raw.get("host")
        base_path = str(raw.get("basePath") or "").strip()
        if base_path and not base_path.startswith("/"):
            base_path = "/" + base_path
        schemes = [s for s in raw.get("schemes") or [] if s in ("https", "http")]
        if not isinstance(host, str) or not host:
            if not self.url:
                return []
            parts = urlsplit(self.url)
            host = parts.netloc
            schemes = schemes or [parts.scheme]
        schemes = sorted(schemes or ["https"], key=lambda s: s != "https")
        return [f"{s}://{host}{base_path}".rstrip("/") for s in schemes]
