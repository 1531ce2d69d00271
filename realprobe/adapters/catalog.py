"""Loading the catalogue: built-in API files plus user files, merged and validated."""

from __future__ import annotations

import difflib
import functools
import tomllib
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from realprobe.adapters.spec import ApiSpec, CatalogFile
from realprobe.adapters.tool import Tool
from realprobe.errors import RealprobeError
from realprobe.limits import InputTooLarge, read_document


class CatalogError(RealprobeError):
    pass


def read_catalog_file(path: str | Path) -> Any:
    """A catalogue file's raw content (before validation)."""
    path = Path(path)
    if path.suffix not in (".toml", ".yaml", ".yml", ".json"):
        raise CatalogError(f"{path}: unknown catalogue format (use .toml, .yaml or .json)")
    try:
        return read_document(path, "catalogue file")
    except InputTooLarge:
        raise
    except RealprobeError as exc:  # unreadable or not parseable: a catalogue error
        raise CatalogError(str(exc)) from None


def _describe(raw: Any, loc: tuple[Any, ...]) -> str:
    """'api "x", tool "y", field output.text' from a validation error location."""
    parts: list[str] = []
    cur = raw
    rest: list[str] = []
    for i, key in enumerate(loc):
        if isinstance(cur, dict):
            cur = cur.get(key) if isinstance(key, str) else None
            if key in ("apis", "tools") and isinstance(cur, list) and i + 1 < len(loc):
                idx = loc[i + 1]
                item = cur[idx] if isinstance(idx, int) and idx < len(cur) else None
                label = (
                    item.get("id" if key == "apis" else "name") if isinstance(item, dict) else None
                )
                parts.append(f"{key[:-1]} {label!r}" if label else f"{key[:-1]} #{idx}")
                rest = []
                continue
        elif isinstance(cur, list) and isinstance(key, int):
            cur = cur[key] if key < len(cur) else None
            if parts and parts[-1].startswith(("api", "tool")) and not rest:
                continue
        else:
            cur = None
        rest.append(str(key))
    if rest:
        parts.append("field " + ".".join(rest))
    return ", ".join(parts) or "top level"


def parse_catalog(raw: Any, origin: str) -> list[ApiSpec]:
    """Validate one file's content (a single API, or `apis = [...]`)."""
    if not isinstance(raw, dict):
        raise CatalogError(f"{origin}: expected a table/mapping at top level")
    try:
        if "apis" in raw:
            return CatalogFile.model_validate(raw).apis
        return [ApiSpec.model_validate(raw)]
    except ValidationError as exc:
        err = exc.errors()[0]
        where = _describe(raw, tuple(err["loc"]))
        label = raw.get("id")
        prefix = (
            f"api {label!r}, "
            if label and "apis" not in raw and not where.startswith("api")
            else ""
        )
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise CatalogError(f"{origin}: {prefix}{where}: {err['msg']}{more}") from exc


def family_names() -> list[str]:
    """Optional catalogue files shipped with realprobe (`--catalog pokeapi`)."""
    folder = resources.files("realprobe.adapters") / "families"
    return sorted(e.name[:-5] for e in folder.iterdir() if e.name.endswith(".json"))


def family_file(name: str) -> Path | None:
    if name not in family_names():
        return None
    return Path(str(resources.files("realprobe.adapters") / "families" / f"{name}.json"))


@functools.cache
def _family_specs(name: str) -> tuple[ApiSpec, ...]:
    path = family_file(name)
    assert path is not None
    try:
        # shipped and tested: validated straight from the JSON text (fast for 100+ tools)
        return tuple(CatalogFile.model_validate_json(path.read_bytes()).apis)
    except ValidationError:
        return tuple(parse_catalog(read_catalog_file(path), f"family {name}"))


def load_file(path: str | Path) -> list[ApiSpec]:
    """A catalogue file, or a shipped family by name when no such file exists."""
    p = Path(path)
    if not p.exists():
        if family_file(str(path)) is not None:
            return list(_family_specs(str(path)))
        if p.suffix == "" and "/" not in str(path):
            raise CatalogError(
                f"{path}: no such catalogue file or family (families: "
                f"{', '.join(family_names()) or 'none'})"
            )
    return parse_catalog(read_catalog_file(p), str(p))


def builtin_specs() -> list[ApiSpec]:
    return list(_builtin_specs())


@functools.cache
def _builtin_specs() -> tuple[ApiSpec, ...]:
    """Read once per process (the models are not changed after loading)."""
    folder = resources.files("realprobe.adapters") / "catalog"
    specs: list[ApiSpec] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            raw = tomllib.loads(entry.read_text(encoding="utf-8"))
            specs.extend(parse_catalog(raw, f"built-in {entry.name}"))
    return tuple(specs)


class Catalog:
    """All tools by name, and their APIs by id."""

    def __init__(self, apis: Iterable[ApiSpec]) -> None:
        self.apis: dict[str, ApiSpec] = {}
        self.tools: dict[str, Tool] = {}
        for api in apis:
            if api.id in self.apis:
                # a later file overrides an API of the same id (user catalogue wins)
                for spec in self.apis[api.id].tools:
                    self.tools.pop(spec.name, None)
            self.apis[api.id] = api
            for spec in api.tools:
                if spec.name in self.tools and self.tools[spec.name].api_id != api.id:
                    other = self.tools[spec.name].api_id
                    raise CatalogError(
                        f"api {api.id!r}: tool {spec.name!r} already defined by api {other!r}"
                    )
                try:
                    self.tools[spec.name] = Tool(api, spec)
                except ValueError as exc:
                    raise CatalogError(f"api {api.id!r}, {exc}") from exc

    @classmethod
    def load(cls, extra: Iterable[str | Path] = ()) -> Catalog:
        specs = builtin_specs()
        for path in extra:
            specs.extend(load_file(path))
        return cls(specs)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools.values())

    def __len__(self) -> int:
        return len(self.tools)

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def get(self, name: str) -> Tool:
        try:
            return self.tools[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self.tools), n=3, cutoff=0.5)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise RealprobeError(
                f"unknown tool {name!r}.{hint} (`realprobe catalog` lists all tools)"
            ) from None

    def select(self, names: str | None) -> list[Tool]:
        """Tools named in a comma-separated list, or all of them for None / 'all'."""
        if not names or names == "all":
            return list(self)
        return [self.get(n.strip()) for n in names.split(",") if n.strip()]


@functools.cache
def default_catalog() -> Catalog:
    return Catalog.load()
