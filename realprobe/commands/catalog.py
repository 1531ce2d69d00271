"""`realprobe catalog`: list the tools, import OpenAPI descriptions, record fixtures, and read
the public-apis list."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from realprobe.commands.common import (
    CatalogOpt,
    JsonOpt,
    QuickHelpGroup,
    console,
    err_console,
    print_json,
)
from realprobe.errors import RealprobeError

CATALOG_SUFFIXES = (".json", ".yaml", ".yml", ".toml")
app = typer.Typer(
    help="List the tool definitions; import OpenAPI descriptions; read the public-apis list.",
    no_args_is_help=False,
    cls=QuickHelpGroup,
    rich_markup_mode=None,
)

if TYPE_CHECKING:


    from realprobe.adapters.openapi import (
        ImportOptions,
        ImportReport,
    )



def register(parent: typer.Typer, list_cmd: Callable[..., None]) -> None:
    """Mount `catalog` with `list_cmd` as what a bare `realprobe catalog` does."""

    @app.callback(invoke_without_command=True)
    def catalog(
        ctx: typer.Context,
        catalog: CatalogOpt = None,
        fmt: Annotated[
            str, typer.Option("--format", help="full (default), mcp or openai tool definitions.")
        ] = "full",
        as_json: JsonOpt = False,
    ) -> None:
        """List the tool definitions: names, titles, APIs, and their JSON Schemas with --json.

        Sub-commands import OpenAPI descriptions, record fixtures and read the public-apis list.
        """
        if ctx.invoked_subcommand is None:
            list_cmd(catalog=catalog, fmt=fmt, as_json=as_json)

    parent.add_typer(app, name="catalog")


# -- import-openapi ----------------------------------------------------------------------------


def _fetch(url: str) -> str:
    """A description by URL, through the project's one client (size-capped, redirects
    checked; a loopback URL is allowed because the user named it)."""
    from urllib.parse import urlsplit

    from realprobe.adapters.catalog import Catalog
    from realprobe.adapters.http import FetchFailure
    from realprobe.adapters.openapi.document import MAX_DOCUMENT_BYTES
    from realprobe.replay.client import ClientConfig, is_private_host
    from realprobe.replay.modes import make_sync_client

    config = ClientConfig(max_bytes=MAX_DOCUMENT_BYTES, deadline_s=60.0, read_timeout_s=30.0)
    host = urlsplit(url).hostname or ""
    with make_sync_client(Catalog([]), config=config) as client:
        try:
            got = client.fetch(
                "GET",
                url,
                headers={"Accept": "application/json, application/yaml;q=0.9, */*;q=0.5"},
                allow_private=is_private_host(host),
            )
        except FetchFailure as exc:
            raise RealprobeError(f"{url}: cannot fetch ({exc.code.value}: {exc.message})") from exc
    if got.status != 200:
        raise RealprobeError(f"{url}: HTTP {got.status}, expected 200 with the description")
    try:
        return got.body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise RealprobeError(f"{url}: the description is not UTF-8 text") from exc


def _read_spec(spec: str) -> tuple[str, str | None]:
    from realprobe.adapters.openapi.document import MAX_DOCUMENT_BYTES

    if spec.startswith(("http://", "https://")):
        return _fetch(spec), spec
    path = Path(spec)
    try:
        size = path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise RealprobeError(
                f"{spec}: document is {size / 1e6:.1f} MB, over the "
                f"{MAX_DOCUMENT_BYTES // (1024 * 1024)} MB limit"
            )
        return path.read_text(encoding="utf-8-sig"), None
    except UnicodeDecodeError as exc:
        raise RealprobeError(f"{spec}: not UTF-8 text") from exc
    except OSError as exc:
        raise RealprobeError(f"{spec}: cannot read ({exc.strerror})") from exc


def run_import(specs: list[str], options: ImportOptions) -> list[ImportReport]:
    from realprobe.adapters.openapi import import_openapi

    reports = []
    for spec in specs:
        text, url = _read_spec(spec)
        reports.append(import_openapi(text, spec, options, url=url))
    ids = [a["id"] for r in reports for a in r.apis]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise RealprobeError(
            f"two descriptions give the same api id {dup[0]!r}; import them one at a time "
            "with --api-id"
        )
    names = [t["name"] for r in reports for a in r.apis for t in a["tools"]]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise RealprobeError(f"two descriptions give the tool name {dup[0]!r}; use --prefix")
    return reports


def _clashes(apis: list[dict[str, Any]]) -> list[str]:
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


@app.command("import-openapi")
def import_openapi_cmd(
    spec: Annotated[
        list[str], typer.Argument(help="OpenAPI 3.0/3.1 or Swagger 2.0 file or URL (YAML/JSON).")
    ],
    out: Annotated[
        Path, typer.Option("--output", "-o", help="Catalogue file to write (.json, .yaml, .toml).")
    ],
    select: Annotated[
        list[str] | None,
        typer.Option(
            "--select",
            help="Only these operations: operationId (glob), /path glob, or tag:NAME. Repeatable.",
        ),
    ] = None,
    include_auth: Annotated[
        bool,
        typer.Option(
            "--include-auth", help="Keep operations that need a key or OAuth (secret inputs)."
        ),
    ] = False,
    api_id: Annotated[
        str | None, typer.Option("--api-id", help="API id (default: from the title).")
    ] = None,
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="Tool name prefix (default: the API id).")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="Server URL to use instead of the spec's.")
    ] = None,
    category: Annotated[str, typer.Option(help="Category of the imported APIs.")] = "Imported",
    as_json: JsonOpt = False,
) -> None:
    """Turn an OpenAPI description into a catalogue file (one tool per GET operation).

    The file is what --catalog merges. Prints one line per operation skipped (and why) or read
    with warnings. Replaces the output file if it exists."""
    from realprobe.adapters.catalog import Catalog, CatalogError, parse_catalog
    from realprobe.adapters.openapi import ImportOptions, OpenApiError, catalog_text

    if api_id and len(spec) > 1:
        raise RealprobeError("--api-id needs a single SPEC (each description is one API)")
    if out.suffix not in CATALOG_SUFFIXES:
        raise RealprobeError(f"--output {out}: use a .json, .yaml or .toml file name")
    if base_url and not base_url.startswith(("http://", "https://")):
        raise RealprobeError(f"--base-url {base_url!r}: expected an absolute http(s) URL")
    options = ImportOptions(
        api_id=api_id,
        prefix=prefix,
        select=tuple(select or ()),
        include_auth=include_auth,
        base_url=base_url,
        category=category,
    )
    try:
        reports = run_import(spec, options)
    except OpenApiError as exc:
        raise RealprobeError(str(exc)) from exc
    apis = [a for r in reports for a in r.apis]
    if not apis:
        for r in reports:
            _print_notes(r)
        if select and not any(r.skipped for r in reports):
            raise RealprobeError(f"no operation matches --select {' '.join(select)}")
        raise RealprobeError("no operation could be imported; nothing written")
    text = catalog_text(apis, out.suffix)
    try:
        # what we write must load as a catalogue, tools and examples included
        Catalog(parse_catalog(json.loads(json.dumps({"apis": apis})), str(out)))
    except CatalogError as exc:
        raise RealprobeError(f"internal: the imported catalogue does not load: {exc}") from exc
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise RealprobeError(f"--output {out}: cannot write ({exc.strerror})") from exc
    clashes = _clashes(apis)
    if as_json:
        print_json({"output": str(out), "reports": [r.as_json() for r in reports],
                    "clashes": clashes})  # fmt: skip
        return
    for r in reports:
        _print_notes(r)
        console.print(
            f"{r.origin}: OpenAPI {r.version} {r.title!r}: {r.tools} tools"
            + (f", {len(r.skipped)} operations skipped" if r.skipped else "")
            + (f", {r.not_selected} not selected" if r.not_selected else ""),
            soft_wrap=True,
            highlight=False,
        )
    for line in clashes:
        _line(f"note: {line}")
    total = sum(r.tools for r in reports)
    console.print(
        f"wrote {total} tools over {len(apis)} APIs to {out}; use it with --catalog {out}",
        soft_wrap=True,
        highlight=False,
    )  # fmt: skip


def _line(text: str) -> None:
    """One line on stderr, never wrapped (so each note stays one line)."""
    err_console.print(text, markup=False, highlight=False, soft_wrap=True)


def _print_notes(r: ImportReport) -> None:
    for n in r.skipped:
        _line(f"skipped {n.operation}: {n.text}")
    for n in r.warnings:
        _line(f"warning {n.operation}: {n.text}")


# -- record-fixtures ---------------------------------------------------------------------------


@app.command("record-fixtures")
def record_fixtures_cmd(
    file: Annotated[Path, typer.Argument(help="Catalogue file to add bodies to.")],
    tools: Annotated[
        str | None, typer.Option("--tools", help="Comma-separated tool names (default: all).")
    ] = None,
    sandbox: Annotated[
        str | None, typer.Option("--sandbox", help="Call a realprobe sandbox at this URL.")
    ] = None,
    upstream: Annotated[
        str | None,
        typer.Option("--upstream", help="Call this server instead of each API's own host."),
    ] = None,
    interval: Annotated[
        float | None,
        typer.Option("--interval", help="Seconds between calls to one host (default: catalogue)."),
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Deadline per call, s.")] = 20.0,
    out: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of into FILE.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Call each tool once and store the real body as a fixture (source and time).

    Uses the tool's first example, one call at a time with the catalogue's interval per host.
    A tool that answers no body is marked so; the sandbox then answers it with "no fixture"."""
    from realprobe.adapters.catalog import parse_catalog, read_catalog_file
    from realprobe.adapters.openapi import catalog_text
    from realprobe.replay.fixture_recording import record_fixtures

    if sandbox and upstream:
        raise RealprobeError("--sandbox and --upstream exclude each other: pick one")
    for label, url in (("--sandbox", sandbox), ("--upstream", upstream)):
        if url and not url.startswith(("http://", "https://")):
            raise RealprobeError(f"{label} {url!r}: expected a URL like http://127.0.0.1:8765")
    if interval is not None and interval < 0:
        raise RealprobeError("--interval must be 0 or more")
    if timeout <= 0:
        raise RealprobeError("--timeout must be more than 0")
    target = out or file
    if target.suffix not in CATALOG_SUFFIXES:
        raise RealprobeError(f"{target}: write catalogue files as .json, .yaml or .toml")
    if not file.exists():
        raise RealprobeError(f"{file}: no such catalogue file")
    raw_file = read_catalog_file(file)
    apis = parse_catalog(raw_file, str(file))
    names = [n.strip() for n in tools.split(",") if n.strip()] if tools else None
    results = record_fixtures(
        apis,
        names,
        sandbox=sandbox,
        upstream=upstream,
        interval_s=interval,
        timeout_s=timeout,
        progress=None if as_json else lambda line: err_console.print(line, highlight=False),
    )
    raw = raw_file.get("apis", [raw_file])
    for outcome in results:
        outcome.apply(raw)
    try:
        target.write_text(catalog_text(raw, target.suffix), encoding="utf-8")
    except OSError as exc:
        raise RealprobeError(f"{target}: cannot write ({exc.strerror})") from exc
    if as_json:
        print_json({"output": str(target), "tools": [r.as_json() for r in results]})
        return
    stored = sum(r.stored for r in results)
    console.print(f"{stored}/{len(results)} tools got a recorded body; wrote {target}")


# -- public-apis --------------------------------------------------------------------------------


@app.command("public-apis")
def public_apis_cmd(
    file: Annotated[
        Path | None,
        typer.Argument(help="A public-apis README.md (default: the copy shipped with realprobe)."),
    ] = None,
    no_auth: Annotated[bool, typer.Option("--no-auth", help="Only APIs that need no key.")] = False,
    https: Annotated[bool, typer.Option("--https", help="Only APIs served over HTTPS.")] = False,
    cors: Annotated[bool, typer.Option("--cors", help="Only APIs with CORS: Yes.")] = False,
    category: Annotated[
        str | None, typer.Option("--category", help="Only this category (e.g. Weather).")
    ] = None,
    uncovered: Annotated[
        bool, typer.Option("--uncovered", help="Only APIs the catalogue does not cover yet.")
    ] = False,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The public-apis list as candidates: covered, profilable without a key, or not.

    Reads the copy shipped with realprobe, or FILE (a newer public-apis README). Says which
    APIs the catalogue covers, which can be profiled without a key, and which need an OpenAPI
    description (or a key) to go further."""
    from rich.table import Table

    from realprobe.adapters import public_apis as pa
    from realprobe.commands.common import load_catalog

    if file is None:
        text, source = pa.shipped_text(), pa.SHIPPED_SOURCE
    else:
        try:
            text, source = file.read_text(encoding="utf-8"), str(file)
        except (OSError, UnicodeDecodeError) as exc:
            raise RealprobeError(f"{file}: cannot read ({exc})") from exc
    found = pa.parse(text)
    if not found:
        raise RealprobeError(f"{source}: no API tables found (is it the public-apis README?)")
    cat = load_catalog(catalog)
    found = pa.mark_covered(found, cat.apis.values())
    categories = sorted({c.category for c in found})
    if category is not None:
        match = [c for c in categories if c.lower() == category.lower()]
        if not match:
            raise RealprobeError(
                f"--category {category!r}: not in the list; categories: {', '.join(categories)}"
            )
        found = [c for c in found if c.category == match[0]]
    if no_auth:
        found = [c for c in found if not c.needs_key]
    if https:
        found = [c for c in found if c.https]
    if cors:
        found = [c for c in found if c.cors == "Yes"]
    if uncovered:
        found = [c for c in found if not c.covered_by]
    summary = pa.summary(found)
    if as_json:
        print_json({
            "source": source,
            "summary": summary,
            "candidates": [
                {**c.model_dump(), "status": c.status, "next_step": c.next_step} for c in found
            ],
        })  # fmt: skip
        return
    table = Table(title=f"{len(found)} public APIs ({source})")
    for col in ("api", "category", "auth", "https", "cors", "status", "description"):
        table.add_column(col, overflow="fold")
    for c in found:
        status = f"covered ({c.covered_by})" if c.covered_by else c.status
        table.add_row(c.name, c.category, c.auth, "yes" if c.https else "no", c.cors, status,
                      c.description[:60])  # fmt: skip
    console.print(table)
    by_status = summary["by_status"]
    assert isinstance(by_status, dict)
    console.print(
        f"{by_status.get('covered', 0)} covered by the catalogue; "
        f"{by_status.get('no key', 0)} profilable without a key once they have tools "
        "(import their OpenAPI description with `realprobe catalog import-openapi`, or write "
        "a catalogue entry); "
        f"{by_status.get('needs key', 0) + by_status.get('needs OAuth', 0)} need a key or "
        "OAuth (--include-auth)."
    )
