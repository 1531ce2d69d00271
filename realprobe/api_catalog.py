"""The front door for the catalogue: one function behind each `realprobe catalog` verb.

Each checks its arguments (errors name the parameter) and returns what the command prints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from realprobe.errors import BadArgument
from realprobe.outputs import check_output, write_output
from realprobe.ranges import checked

if TYPE_CHECKING:
    from realprobe.adapters.openapi.catalog_file import ImportedFile
    from realprobe.adapters.public_apis import CandidateList
    from realprobe.probes.fixture_recording import FixtureOutcome


@checked
def import_openapi(
    specs: Sequence[str | Path] | str | Path,
    output: str | Path,
    *,
    api_id: str | None = None,
    prefix: str | None = None,
    select: Sequence[str] = (),
    include_auth: bool = False,
    base_url: str | None = None,
    category: str = "Imported",
) -> ImportedFile:
    """Turn OpenAPI 3.0/3.1 or Swagger 2.0 descriptions (files or http(s) URLs) into the
    catalogue file `output` (.json, .yaml or .toml; replaced if it exists), one tool per GET
    operation. Raises `NothingImported` (with every report) when no operation could be."""
    from realprobe.adapters.openapi import ImportOptions
    from realprobe.adapters.openapi.catalog_file import import_to_file

    names = [str(specs)] if isinstance(specs, str | Path) else [str(s) for s in specs]
    if not names:
        raise BadArgument("specs", "specs: name at least one OpenAPI file or URL")
    options = ImportOptions(
        api_id=api_id, prefix=prefix, select=tuple(select), include_auth=include_auth,
        base_url=base_url, category=category,
    )
    return import_to_file(names, Path(output), options, _fetch_document)


def _fetch_document(url: str) -> str:
    """`clients.fetch_document`, loaded when a description is named by URL: the one client
    (httpx, cassettes, the simulator) is not needed to read a file."""
    from realprobe.clients import fetch_document

    return fetch_document(url)


@dataclass
class RecordedFixtures:
    """What `record_fixtures` called and wrote."""

    output: str
    outcomes: list[FixtureOutcome]

    @property
    def stored(self) -> int:
        return sum(o.stored for o in self.outcomes)

    def as_json(self) -> dict[str, Any]:
        return {"output": self.output, "tools": [o.as_json() for o in self.outcomes]}


def _check_fixture_target(sandbox: str | None, upstream: str | None) -> None:
    """Where the fixtures come from (numbers are checked by `@checked`, by name)."""
    from realprobe.http.transports import check_sandbox_url

    if sandbox and upstream:
        raise BadArgument(("sandbox", "upstream"), "sandbox and upstream exclude each other")
    if sandbox is not None:
        check_sandbox_url(sandbox)


@checked
def record_fixtures(
    file: str | Path,
    *,
    tools: Sequence[str] | str | None = None,
    sandbox: str | None = None,
    upstream: str | None = None,
    interval: float | None = None,
    timeout: float = 20.0,
    output: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    on_plan: Callable[[list[tuple[str, str, float]], float], None] | None = None,
) -> RecordedFixtures:
    """Call each tool of the catalogue file `file` once (its first example; one call at a
    time, with the catalogue's interval per host) and store the real body as its fixture,
    in `file` or in `output`. A tool that answers no body is marked so. `progress` gets a
    line per call; `on_plan(calls, timeout)` first gets each call's tool, host and the host's
    interval."""
    from realprobe.adapters.catalog import parse_catalog, read_catalog_file
    from realprobe.adapters.openapi import catalog_text
    from realprobe.adapters.openapi.catalog_file import CATALOG_SUFFIXES
    from realprobe.errors import RealprobeError
    from realprobe.probes.fixture_recording import record_fixtures as record
    from realprobe.probes.fixture_recording import without_secret_values

    _check_fixture_target(sandbox, upstream)
    src = Path(file)
    target = Path(output) if output is not None else src
    if target.suffix not in CATALOG_SUFFIXES:
        raise BadArgument("output", f"{target}: write catalogue files as .json, .yaml or .toml")
    if not src.exists():
        raise RealprobeError(f"{src}: no such catalogue file")
    check_output(target, replace=True)  # before any call is made
    raw_file = read_catalog_file(src)
    apis = parse_catalog(raw_file, str(src))
    if isinstance(tools, str):
        tools = [n.strip() for n in tools.split(",") if n.strip()]
    outcomes = record(apis, list(tools) if tools else None, sandbox=sandbox, upstream=upstream,
                      interval_s=interval, timeout_s=timeout, progress=progress,
                      on_plan=on_plan)
    raw = raw_file.get("apis", [raw_file])
    for outcome in outcomes:
        outcome.apply(raw)
    if target.resolve() != src.resolve():
        without_secret_values(raw, apis)  # a copy carries no credential
    write_output(target, catalog_text(raw, target.suffix))
    return RecordedFixtures(str(target), outcomes)


@checked
def public_apis(
    file: str | Path | None = None,
    *,
    no_auth: bool = False,
    https: bool = False,
    cors: bool = False,
    category: str | None = None,
    uncovered: bool = False,
    catalog: Sequence[str | Path] = (),
) -> CandidateList:
    """The public-apis list (the copy shipped with realprobe, or `file`, a newer README) as
    candidates: which the catalogue (plus `catalog` files) covers, which can be profiled
    without a key, and which need an OpenAPI description or a key to go further."""
    from realprobe.adapters.public_apis import CandidateFilter, read_candidates

    keep = CandidateFilter(
        no_auth=no_auth, https=https, cors=cors, category=category, uncovered=uncovered
    )
    return read_candidates(
        None if file is None else Path(file),
        catalog_paths=[Path(p) for p in catalog], keep=keep,
    )
