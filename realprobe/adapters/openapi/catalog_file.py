"""OpenAPI descriptions (files or URLs) into one catalogue file: read, import, check that the
result loads, write, and say where it clashes with the built-in catalogue."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from realprobe.adapters.openapi.importer import (
    ImportOptions,
    ImportReport,
    catalog_text,
    import_openapi,
)
from realprobe.errors import RealprobeError
from realprobe.outputs import write_output

#: reads a description by URL (`realprobe.clients.fetch_document`)
Fetch = Callable[[str], str]

CATALOG_SUFFIXES = (".json", ".yaml", ".yml", ".toml")


class NothingImported(RealprobeError):
    """No operation of any description became a tool; the reports say why."""

    def __init__(
        self, message: str, reports: list[ImportReport], *, param: str | None = None
    ) -> None:
        super().__init__(message, param=param)
        self.reports = reports


@dataclass(frozen=True)
class ImportedFile:
    output: Path
    reports: list[ImportReport]
    apis: list[dict[str, Any]]
    clashes: list[str]  # one line per clash with the built-in catalogue

    @property
    def tools(self) -> int:
        return sum(r.tools for r in self.reports)


def import_to_file(
    specs: list[str], output: Path, options: ImportOptions, fetch: Fetch | None = None
) -> ImportedFile:
    """Import every description in `specs` (paths, or http(s) URLs read with `fetch`) into
    the catalogue file `output` (.json, .yaml or .toml), replacing it. Raises NothingImported
    when no operation could be imported (nothing is written)."""
    if options.api_id and len(specs) > 1:
        raise RealprobeError(
            "api_id needs a single SPEC (each description is one API)", param="api_id"
        )
    if output.suffix not in CATALOG_SUFFIXES:
        raise RealprobeError(
            f"output {output}: use a .json, .yaml or .toml file name", param="output"
        )
    base_url = options.base_url
    if base_url and not base_url.startswith(("http://", "https://")):
        raise RealprobeError(
            f"base_url {base_url!r}: expected an absolute http(s) URL", param="base_url"
        )
    reports = run_import(specs, options, fetch)
    apis = [a for r in reports for a in r.apis]
    if not apis:
        select = options.select
        if select and not any(r.skipped for r in reports):
            raise NothingImported(
                f"no operation matches select {' '.join(select)}", reports, param="select"
            )
        raise NothingImported("no operation could be imported; nothing written", reports)
    _write_catalog(apis, output)
    return ImportedFile(output, reports, apis, clashes(apis))


def _write_catalog(apis: list[dict[str, Any]], output: Path) -> None:
    """Write the APIs as a catalogue file, once it is known to load as one."""
    from realprobe.adapters.catalog import Catalog, CatalogError, parse_catalog

    text = catalog_text(apis, output.suffix)
    try:
        # what we write must load as a catalogue, tools and examples included
        Catalog(parse_catalog({"apis": apis}, str(output)))
    except CatalogError as exc:
        raise RealprobeError(f"internal: the imported catalogue does not load: {exc}") from exc
    write_output(output, text, make_parents=True)


def read_description(spec: str, fetch: Fetch | None = None) -> tuple[str, str | None]:
    """(text, the URL it came from or None) for a path, or an http(s) URL read by `fetch`
    (the network is not this room's: the front door passes the one client's fetch)."""
    if spec.startswith(("http://", "https://")):
        if fetch is None:
            raise RealprobeError(f"{spec}: reading a URL needs a fetch function", param="fetch")
        return fetch(spec), spec
    from realprobe.limits import read_text_input

    return read_text_input(spec, "OpenAPI description"), None


def run_import(
    specs: list[str], options: ImportOptions, fetch: Fetch | None = None
) -> list[ImportReport]:
    """One report per description; two descriptions may not give one API id or tool name."""
    reports = []
    for spec in specs:
        text, url = read_description(spec, fetch)
        reports.append(import_openapi(text, spec, options, url=url))
    ids = [a["id"] for r in reports for a in r.apis]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise RealprobeError(
            f"two descriptions give the same api id {dup[0]!r}; import them one at a time "
            "with api_id",
            param="api_id",
        )
    names = [t["name"] for r in reports for a in r.apis for t in a["tools"]]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise RealprobeError(
            f"two descriptions give the tool name {dup[0]!r}; use prefix", param="prefix"
        )
    return reports


def clashes(apis: list[dict[str, Any]]) -> list[str]:
    """One line per clash with the built-in catalogue."""
    from realprobe.adapters.catalog import builtin_specs

    builtin = builtin_specs()
    ids = {a.id for a in builtin}
    names = {t.name: a.id for a in builtin for t in a.tools}
    out = []
    for api in apis:
        if api["id"] in ids:
            out.append(
                f"api id {api['id']!r} is also a built-in API: loading this file replaces the "
                "built-in one's tools (pass --api-id to keep both)"
            )
        for tool in api["tools"]:
            other = names.get(tool["name"])
            if other and other != api["id"]:
                out.append(f"tool {tool['name']!r} is also a built-in tool of {other!r}; --prefix")
    return out


__all__ = [
    "CATALOG_SUFFIXES",
    "ImportedFile",
    "NothingImported",
    "clashes",
    "import_to_file",
    "read_description",
    "run_import",
]
