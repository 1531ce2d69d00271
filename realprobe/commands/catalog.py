"""`realprobe catalog`: list the tools, import OpenAPI descriptions, record fixtures, and read
the public-apis list."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from realprobe.commands.common import (
    CatalogOpt,
    JsonOpt,
    console,
    err_console,
    load_catalog,
    plain_line,
    print_json_large,
    printed_json,
)
from realprobe.commands.help import QuickHelpGroup
from realprobe.errors import RealprobeError

app = typer.Typer(
    help="List the tool definitions; import OpenAPI descriptions; read the public-apis list.",
    no_args_is_help=False,
    cls=QuickHelpGroup,
    rich_markup_mode=None,
)

if TYPE_CHECKING:
    from realprobe.adapters import Tool
    from realprobe.adapters.openapi import ImportReport
    from realprobe.adapters.public_apis import CandidateList


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="catalog")


@app.callback(invoke_without_command=True)
def catalog_cmd(
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
    if ctx.invoked_subcommand is not None:
        return
    cat = load_catalog(catalog)
    formats = ("full", "mcp", "openai", "openai-strict", "openai-responses")
    if fmt not in formats:
        raise RealprobeError(f"--format {fmt!r}: choose {', '.join(formats)}")
    if as_json or fmt != "full":  # the other formats are JSON by nature: always printed so
        from realprobe.adapters.exports import openai_responses

        form: Callable[[Tool], Any] = {
            "mcp": lambda t: t.mcp_definition(), "openai": lambda t: t.openai_definition(),
            "openai-strict": lambda t: t.openai_definition(strict=True),
            "openai-responses": openai_responses,
        }.get(fmt, lambda t: t.catalog_entry())
        defs = [form(t) for t in cat]
        print_json_large({"tools": defs} if fmt == "mcp" else defs)
        return
    from realprobe.commands.tables import Column, fit_table

    table = fit_table(
        [Column("tool", "name"), Column("title", drop=3), Column("api", "name", drop=2),
         Column("category", drop=4), Column("https", drop=5), Column("args", drop=1)],
        title=f"{len(cat)} tools over {len(cat.apis)} APIs",
    )
    for t in cat:
        table.add_row(
            t.name,
            t.spec.title,
            t.api_id,
            t.api.category,
            "yes" if t.api.https else "no",
            ", ".join(t.spec.input) or "-",
        )
    console.print(table)


# -- import-openapi ----------------------------------------------------------------------------


@app.command("import-openapi")
def import_openapi_cmd(
    spec: Annotated[
        list[str], typer.Argument(help="OpenAPI 3.0/3.1 or Swagger 2.0 file or URL (YAML/JSON).")
    ],
    output: Annotated[
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
        str | None, typer.Option("--base-url", help="Server URL to use instead of the spec's.",
                                 rich_help_panel="Options")
    ] = None,
    category: Annotated[str, typer.Option(help="Category of the imported APIs.")] = "Imported",
    as_json: JsonOpt = False,
) -> None:
    """Turn an OpenAPI description into a catalogue file (one tool per GET operation).

    The file is what --catalog merges. Prints one line per operation skipped (and why) or read
    with warnings. Replaces the output file if it exists."""
    from realprobe.adapters.openapi.catalog_file import NothingImported
    from realprobe.api_catalog import import_openapi

    try:
        result = import_openapi(
            spec, output, api_id=api_id, prefix=prefix, select=select or (),
            include_auth=include_auth, base_url=base_url, category=category,
        )
    except NothingImported as exc:
        for r in exc.reports:
            _print_notes(r)
        raise
    if printed_json(as_json, {"output": str(output),
                              "reports": [r.as_json() for r in result.reports],
                              "clashes": result.clashes}):
        return
    for r in result.reports:
        _print_notes(r)
        plain_line(
            f"{r.origin}: OpenAPI {r.version} {r.title!r}: {r.tools} tools"
            + (f", {len(r.skipped)} operations skipped" if r.skipped else "")
            + (f", {r.not_selected} not selected" if r.not_selected else "")
        )
    for line in result.clashes:
        plain_line(f"note: {line}", err=True)
    plain_line(f"wrote {result.tools} tools over {len(result.apis)} APIs to {output}; "
                  f"use it with --catalog {output}")


def _print_notes(r: ImportReport) -> None:
    """Each skipped operation and warning, in the command line's terms (`--include-auth`), on
    stderr one line each (never wrapped)."""
    def flags(text: str) -> str:
        return text.replace("include_auth", "--include-auth")

    for n in r.skipped:
        plain_line(f"skipped {n.operation}: {flags(n.text)}", err=True)
    for n in r.warnings:
        plain_line(f"warning {n.operation}: {flags(n.text)}", err=True)


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
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of into FILE.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Call each tool once and store the real body as a fixture (source and time).

    Uses the tool's first example, one call at a time with the catalogue's interval per host.
    A tool that answers no body is marked so; the sandbox then answers it with "no fixture"."""
    from realprobe.api_catalog import record_fixtures
    from realprobe.commands.progress import LineProgress

    lines = None if as_json else LineProgress(
        lambda line: err_console.print(line, highlight=False))
    done = record_fixtures(
        file, tools=tools, sandbox=sandbox, upstream=upstream, interval=interval,
        timeout=timeout, output=output, progress=lines,
        on_plan=None if lines is None else lines.plan,
    )
    results, target = done.outcomes, done.output
    if printed_json(as_json, done):
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
    from realprobe.api_catalog import public_apis

    found = public_apis(file, no_auth=no_auth, https=https, cors=cors, category=category,
                        uncovered=uncovered, catalog=catalog or ())
    if not printed_json(as_json, {
        "source": found.source,
        "summary": found.summary,
        "candidates": [
            {**c.model_dump(), "status": c.status, "next_step": c.next_step}
            for c in found.candidates
        ],
    }):
        _print_candidates(found)


def _print_candidates(found: CandidateList) -> None:
    """The candidates as a table, then what each status means for the next step."""
    from realprobe.commands.tables import Column, fit_table

    table = fit_table(
        [Column("api", "name"), Column("category", drop=3), Column("auth", "name", drop=4),
         Column("https", drop=6), Column("cors", drop=5), Column("status"),
         Column("description", drop=2)],
        title=f"{len(found.candidates)} public APIs ({found.source})",
    )
    for c in found.candidates:
        status = f"covered ({c.covered_by})" if c.covered_by else c.status
        table.add_row(c.name, c.category, c.auth, "yes" if c.https else "no", c.cors, status,
                      c.description[:60])  # fmt: skip
    console.print(table)
    by_status = found.summary["by_status"]
    assert isinstance(by_status, dict)
    console.print(
        f"{by_status.get('covered', 0)} covered by the catalogue; "
        f"{by_status.get('no key', 0)} profilable without a key once they have tools "
        "(import their OpenAPI description with `realprobe catalog import-openapi`, or write "
        "a catalogue entry); "
        f"{by_status.get('needs key', 0) + by_status.get('needs OAuth', 0)} need a key or "
        "OAuth (--include-auth)."
    )
