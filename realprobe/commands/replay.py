"""`realprobe cassette ...`: inspect, verify, scrub, import, and record/replay a round of
every tool (the shipped cassettes are made with `record-round`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from realprobe.commands.common import (
    CatalogOpt,
    JsonOpt,
    SeedOpt,
    console,
    err_console,
    load_catalog,
    parse_kv,
    printed_json,
)
from realprobe.commands.help import QuickHelpGroup

cassette_app = typer.Typer(
    name="cassette",
    cls=QuickHelpGroup,
    rich_markup_mode=None,
    help="Cassettes (HTTP and MCP sessions): inspect, verify, scrub, import, recover, record "
    "a round.",
    no_args_is_help=True,
)

FileArg = Annotated[Path, typer.Argument(
    help="Cassette file: realprobe, vcrpy, Ruby VCR, HAR, or an MCP session or transcript.")]
ReplayLatencyOpt = Annotated[
    str | None,
    typer.Option(
        "--replay-latency",
        help="Replay timing: none, real, scaled:X or virtual (default virtual: recorded "
        "latencies on a virtual clock, nothing waits).",
    ),
]
OnExhaustedOpt = Annotated[
    str | None,
    typer.Option(
        "--on-exhausted",
        help="When identical requests outrun their recordings: error, repeat-last or cycle.",
    ),
]

if TYPE_CHECKING:
    from realprobe.adapters import ToolResult
    from realprobe.adapters.catalog import Catalog
    from realprobe.cassettes.cassette import Cassette
    from realprobe.commands.tables import FitTable


def register(app: typer.Typer) -> None:
    app.add_typer(cassette_app, name="cassette")


# -- inspect -----------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


@cassette_app.command("inspect")
def inspect_cmd(
    file: FileArg,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A table of the interactions: order, request, outcome, latency, size, tool."""
    from realprobe.api_cassettes import inspect_cassette
    from realprobe.commands.tables import Column, fit_table

    listing = inspect_cassette(file, catalog)
    cassette, rows = listing.cassette, listing.rows
    if printed_json(as_json, listing):
        return
    failures, vcr = listing.failures, listing.vcrpy_readable
    meta = cassette.meta
    source = ", ".join(
        f"{k}={meta[k]}" for k in ("source", "profile", "seed", "recorded_at", "recorded_with")
        if meta.get(k) is not None
    )
    table = fit_table(
        [Column("#", "num"), Column("request"), Column("outcome", "name", drop=3),
         Column("ms", "num", drop=2), Column("bytes", "num", drop=1), Column("tool", "name")],
        title=f"{file}: {len(cassette.calls)} calls, {failures} ended in an exception, "
              f"{vcr} readable by vcrpy",
    )
    for r, c in zip(rows, cassette.calls, strict=True):
        outcome = r["outcome"]
        style = "green" if c.error is None and c.status and c.status < 400 else "red"
        table.add_row(
            str(r["seq"]), f"{r['method']} {r['url']}", f"[{style}]{outcome}[/{style}]",
            _ms(c.end_s if c.end_s is not None else c.elapsed_s), str(r["bytes"]),
            r["tool"] or "-",
        )
    console.print(table)
    if source:
        console.print(f"source: {source}")


# -- verify ------------------------------------------------------------------------------


@cassette_app.command("verify")
def verify_cmd(
    file: FileArg,
    strict: Annotated[
        bool,
        typer.Option("--strict", help="Also fail when a 2xx body does not parse for its tool."),
    ] = False,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a cassette: it loads (schema, decodes), lengths agree, and every complete 2xx
    response of a catalogue tool parses for that tool."""
    from realprobe.api_cassettes import verify_cassette
    from realprobe.commands.tables import Column, fit_table

    result = verify_cassette(file, strict=strict, catalog=catalog)
    findings, bad, counts = result.findings, result.bad, result.counts
    if not printed_json(as_json, result):
        table = fit_table(
            [Column("#", "num"), Column("tool", "name"), Column("status", "name"),
             Column("detail")],
            title=f"verify {file}",
        )
        for f in findings:
            if f.status != "ok":
                style = "red" if f in bad else "yellow"
                table.add_row(str(f.seq), f.tool or "-", f"[{style}]{f.status}[/{style}]",
                              f.detail[:160])
        if table.rows:
            console.print(table)
        summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        verdict = "[red]problems found[/red]" if bad else "[green]ok[/green]"
        console.print(f"{verdict}: {len(findings)} calls ({summary})")
    if bad:
        raise typer.Exit(1)


# -- scrub -------------------------------------------------------------------------------


@cassette_app.command("scrub", short_help="Replace credentials and every echo of their "
                      "values with REDACTED (what recording removes); --dry-run shows where.")
def scrub_cmd(
    file: FileArg,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of in place.")
    ] = None,
    secret: Annotated[
        list[str] | None,
        typer.Option("--secret", help="A literal value to remove wherever it appears. Repeatable."),
    ] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", help="Another header to scrub. Repeatable.")
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", help="Another query parameter to scrub. Repeatable."),
    ] = None,
    catalog: CatalogOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be replaced; write nothing.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Replace credentials (auth and cookie headers, query parameters, form and JSON fields
    named exactly like a credential, OAuth codes, catalogue inputs declared `secret`, and every
    echo of their values, raw, percent-encoded or base64) with REDACTED: what recording
    removes. Nothing else is touched. `--dry-run` shows the places and writes nothing."""
    from realprobe.api_cassettes import scrub_cassette

    report = scrub_cassette(
        file, output=output, secrets=secret or (), headers=header or (), params=param or (),
        catalog=catalog, dry_run=dry_run,
    )
    target = report.file
    if printed_json(as_json, report):
        return
    for change in report.calls or ():
        console.print(f"#{change['seq']} {change['request']}: {', '.join(change['where'])}",
                      markup=False, highlight=False)
    detail = ", ".join(f"{v} {k}" for k, v in sorted(report.counts.items())) or "nothing to remove"
    if dry_run:
        console.print(f"would scrub {target}: {detail} (dry run, nothing written)")
        return
    console.print(f"scrubbed {target}: {detail}")


@cassette_app.command("recover")
def recover_cmd(cassette: FileArg, as_json: JsonOpt = False) -> None:
    """Rebuild a cassette whose record run was killed, from its `.journal` side file (opening
    the cassette does this too), or an MCP session without its torn last line."""
    from realprobe.cassettes.importers import recover_cassette

    recovered = recover_cassette(cassette)
    if printed_json(as_json, {"file": str(cassette), "interactions": len(recovered.calls)}):
        return
    console.print(f"recovered {len(recovered.calls)} calls into {cassette}")


# -- import ------------------------------------------------------------------------------


@cassette_app.command("import")
def import_cmd(
    file: FileArg,
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="Where to write the realprobe cassette (an existing file is replaced).",
        ),
    ],
    substitute: Annotated[
        list[str] | None,
        typer.Option(
            "--substitute",
            help="OLD=NEW replaced in request URLs (placeholders such as <API-URL>). Repeatable.",
        ),
    ] = None,
    scrub: Annotated[
        bool, typer.Option("--scrub/--no-scrub", help="Scrub secrets on the way in.")
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """Convert a vcrpy (YAML/JSON), Ruby VCR or HAR cassette into a realprobe cassette, or an
    MCP transcript (mcp-tape and the like) into an MCP session cassette."""
    from realprobe.api_cassettes import import_cassette

    subs = parse_kv(substitute, "--substitute", "OLD=NEW, e.g. '<API-URL>=https://x'")
    done = import_cassette(file, output, substitute=subs, scrub=scrub)
    unresolved = done.unresolved_urls
    if printed_json(as_json, done):
        return
    console.print(
        f"imported {done.interactions} interactions ({done.source}) from {file} into {done.file}"
    )
    if unresolved:
        err_console.print(
            f"[yellow]warning:[/yellow] request URLs start with {', '.join(unresolved)}, "
            "not a URL; give --substitute PLACEHOLDER=https://host to make them replayable"
        )


# -- export ------------------------------------------------------------------------------


@cassette_app.command("export")
def export_cmd(
    file: FileArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="The file to write (replaced).")],
    format: Annotated[
        str | None,
        typer.Option("--format", help="HTTP: realprobe, ruby-vcr or har (default by -o's "
                     "suffix); MCP session: mcp-cassette (default) or mcp-recorder."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a cassette in another tool's format: an HTTP cassette as realprobe, Ruby VCR or
    HAR; an MCP session as mcp-cassette's or mcp-recorder's JSON, so that tool replays it."""
    from realprobe.api_cassettes import export_cassette

    done = export_cassette(file, output, format=format)
    if printed_json(as_json, done):
        return
    noun = "messages" if done.format.startswith("mcp-") else "interactions"
    console.print(f"{done.items} {noun} -> {done.file} ({done.format})")


# -- a round of every tool ---------------------------------------------------------------


def round_table(cat: Catalog, results: list[ToolResult]) -> FitTable:
    """The same table for a recorded round and its replay (no title: that differs)."""
    from realprobe.commands.tables import Column, fit_table

    table = fit_table([
        Column("tool", "name"), Column("result", "name"), Column("HTTP", "num", drop=3),
        Column("ms", "num", drop=2), Column("what came back", drop=1),
    ])
    for t, r in zip(cat, results, strict=True):
        res = "[green]ok[/green]" if r.ok else f"[red]{r.code.value if r.code else '?'}[/red]"
        table.add_row(
            t.name, res, str(r.http_status or "-"), f"{r.latency_ms:.0f}", r.summary()[:60]
        )
    return table


@cassette_app.command("record-round")
def record_round_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="Cassette to write.")] = Path(
        "cassettes/sandbox-published-round.json"
    ),
    profile: Annotated[str, typer.Option(help="Sandbox fault profile.")] = "published",
    seed: SeedOpt = 0,
    timeout: Annotated[float, typer.Option(help="Deadline per call, seconds.")] = 2.0,
    sandbox: Annotated[
        str | None,
        typer.Option("--sandbox", help="Use a running sandbox (its own profile) instead."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Start the sandbox on loopback, call every tool once, record it all into a cassette
    (an existing file at --output is replaced; a link is refused)."""
    from realprobe.api_cassettes import record_round

    cat = load_catalog(None)
    with console.status(f"calling {len(cat)} tools through the sandbox (profile {profile})"):
        results = record_round(output, profile=profile, seed=seed, timeout=timeout,
                               sandbox=sandbox, catalog=cat)
    if printed_json(as_json, [r.model_dump(mode="json") for r in results]):
        return
    console.print(f"recorded {len(results)} calls into {output} (sandbox, profile {profile}, "
                  f"seed {seed})")
    console.print(round_table(cat, results))


@cassette_app.command("replay-round")
def replay_round_cmd(
    file: Annotated[
        Path | None,
        typer.Argument(help="A cassette made by record-round (default: the shipped one)."),
    ] = None,
    replay_latency: ReplayLatencyOpt = None,
    on_exhausted: OnExhaustedOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Replay a recorded round offline: the same table as when it was recorded."""
    from realprobe.api_cassettes import replay_round
    from realprobe.commands.progress import Eta, Item, bar_wanted, progress_bar

    cat = load_catalog(None)
    eta = Eta([Item(t.name) for t in cat])  # one call after another, in catalogue order

    def one_more(result: ToolResult) -> None:
        eta.advance(result.tool, result.latency_ms / 1000)
        bar.advance(task)

    with progress_bar(console=err_console, transient=True,
                      disable=not bar_wanted(as_json)) as bar:
        task = bar.add_task("replaying", total=len(cat), eta=eta)
        cassette, results = replay_round(
            file, replay_latency=replay_latency, on_exhausted=on_exhausted, catalog=cat,
            on_call=one_more,
        )
    if printed_json(as_json, [r.model_dump(mode="json") for r in results]):
        return
    console.print(f"replayed {len(results)} calls from {file or 'the shipped round'} "
                  f"({_describe(cassette)})")
    console.print(round_table(cat, results))


def _describe(cassette: Cassette) -> str:
    meta = cassette.meta
    parts = [str(meta.get("source", "?"))]
    for k in ("profile", "seed", "date"):
        if meta.get(k) is not None:
            parts.append(f"{k} {meta[k]}")
    return ", ".join(parts)
