"""`realprobe cassette ...`: inspect, verify, scrub, import, and record/replay a round of
every tool (the shipped cassettes are made with `record-round`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from realprobe.commands.common import (
    CatalogOpt,
    JsonOpt,
    QuickHelpGroup,
    SeedOpt,
    console,
    err_console,
    load_catalog,
    print_json,
)
from realprobe.errors import RealprobeError

cassette_app = typer.Typer(
    name="cassette",
    cls=QuickHelpGroup,
    rich_markup_mode=None,
    help="Cassettes: inspect, verify, scrub, import (vcrpy, Ruby VCR, HAR), record a round.",
    no_args_is_help=True,
)

FileArg = Annotated[Path, typer.Argument(help="Cassette file (realprobe, vcrpy, Ruby VCR or HAR).")]
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
    from realprobe.cassettes.importers import load_cassette
    from realprobe.cassettes.verify import ToolIndex
    from realprobe.commands.tables import Column, fit_table

    cassette = load_cassette(file)
    index = ToolIndex(load_catalog(catalog))
    rows: list[dict[str, Any]] = []
    for c in cassette.calls:
        rows.append({
            "seq": c.seq,
            "method": c.method,
            "url": c.uri,
            "outcome": c.outcome,
            "status": c.status,
            "error": None if c.error is None else c.error.type,
            "phase": None if c.error is None else c.error.phase,
            "latency_ms": None if c.elapsed_s is None else round(c.elapsed_s * 1000, 3),
            "client_latency_ms": None if c.end_s is None else round(c.end_s * 1000, 3),
            "bytes": len(c.body),
            "tool": index.tool_for(c.method, c.uri),
        })
    if as_json:
        print_json({"file": str(file), "meta": cassette.meta, "interactions": rows})
        return
    failures = sum(1 for c in cassette.calls if c.error is not None)
    vcr = sum(1 for c in cassette.calls if c.vcrpy_representable)
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
    from realprobe.cassettes.importers import load_cassette
    from realprobe.cassettes.verify import PROBLEMS, verify_cassette
    from realprobe.commands.tables import Column, fit_table

    cassette = load_cassette(file)
    findings = verify_cassette(cassette, load_catalog(catalog))
    bad = [f for f in findings if f.status in PROBLEMS or (strict and f.status == "parse-failed")]
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.status] = counts.get(f.status, 0) + 1
    if as_json:
        print_json({
            "file": str(file), "ok": not bad, "counts": counts,
            "findings": [f.__dict__ for f in findings],
        })
    else:
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


@cassette_app.command("scrub")
def scrub_cmd(
    file: FileArg,
    out: Annotated[
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
    as_json: JsonOpt = False,
) -> None:
    """Replace credentials (auth headers, cookies, secret-named query parameters, form and
    JSON fields, OAuth codes, catalogue inputs declared `secret`, and every echo of their
    values, raw, percent-encoded or base64) with REDACTED: what recording removes."""
    from realprobe.cassettes.importers import load_cassette, save_cassette
    from realprobe.cassettes.scrub import ScrubConfig, declared_secret_finder, scrub_cassette
    from realprobe.outputs import check_output

    check_output(out or file, replace=True)
    cassette = load_cassette(file)
    cfg = ScrubConfig(
        secrets=tuple(secret or ()), extra_headers=tuple(header or ()),
        extra_params=tuple(param or ()),
    )
    report = scrub_cassette(
        cassette, cfg, finder=declared_secret_finder(load_catalog(catalog))
    )
    if out is None or out.resolve() == file.resolve():
        from realprobe.cassettes.exporters import save_as_source

        target = file
        written = save_as_source(cassette, file)  # a Ruby VCR or HAR file stays one
    else:
        target = save_cassette(cassette, out)
        written = "realprobe"
    if as_json:
        print_json({"file": str(target), "replaced": dict(report.counts), "total": report.total,
                    "format": written})
        return
    detail = ", ".join(f"{v} {k}" for k, v in sorted(report.counts.items())) or "nothing to remove"
    console.print(f"scrubbed {target}: {detail}")


@cassette_app.command("recover")
def recover_cmd(file: FileArg, as_json: JsonOpt = False) -> None:
    """Rebuild a cassette whose record run was killed, from its `.journal` side file (opening
    the cassette does this too)."""
    from realprobe.cassettes.importers import recover_cassette

    cassette = recover_cassette(file)
    if as_json:
        print_json({"file": str(file), "interactions": len(cassette.calls)})
        return
    console.print(f"recovered {len(cassette.calls)} calls into {file}")


# -- import ------------------------------------------------------------------------------


def _parse_subs(pairs: list[str] | None) -> dict[str, str]:
    subs: dict[str, str] = {}
    for pair in pairs or []:
        old, sep, new = pair.partition("=")
        if not sep or not old:
            raise RealprobeError(f"--substitute {pair!r}: expected OLD=NEW, e.g. '<API-URL>=https://x'")
        subs[old] = new
    return subs


@cassette_app.command("import")
def import_cmd(
    file: FileArg,
    out: Annotated[
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
    """Convert a vcrpy (YAML/JSON), Ruby VCR or HAR cassette into a realprobe cassette."""
    from realprobe.cassettes.cassette import is_yaml_path, parse_text, save_cassette
    from realprobe.cassettes.importers import from_data
    from realprobe.cassettes.limits import read_bounded
    from realprobe.cassettes.scrub import declared_secret_finder, scrub_cassette

    if not file.exists():
        raise RealprobeError(f"no such file: {file}")
    from realprobe.outputs import check_output

    check_output(out, replace=True)
    data = parse_text(read_bounded(file), str(file), yaml_hint=is_yaml_path(file))
    cassette = from_data(data, str(file), substitute=_parse_subs(substitute))
    cassette.meta["imported_from"] = file.name
    unresolved = sorted({c.uri.split("/")[0] for c in cassette.calls if "://" not in c.uri})
    if scrub:
        scrub_cassette(cassette, finder=declared_secret_finder(load_catalog(None)))
    target = save_cassette(cassette, out)
    failures = sum(1 for c in cassette.calls if c.error is not None)
    if as_json:
        print_json({
            "file": str(target), "source": cassette.meta.get("source"),
            "interactions": len(cassette.calls), "failures": failures,
            "unresolved_urls": unresolved,
        })
        return
    console.print(
        f"imported {len(cassette.calls)} interactions ({cassette.meta.get('source')}) "
        f"from {file} into {target}"
    )
    if unresolved:
        err_console.print(
            f"[yellow]warning:[/yellow] request URLs start with {', '.join(unresolved)}, "
            "not a URL; give --substitute PLACEHOLDER=https://host to make them replayable"
        )


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
    out: Annotated[Path, typer.Option("--output", "-o", help="Cassette to write.")] = Path(
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
    from realprobe.outputs import check_output
    from realprobe.sandbox.rounds import record_round

    check_output(out, replace=True)
    cat = load_catalog(None)
    with console.status(f"calling {len(cat)} tools through the sandbox (profile {profile})"):
        results = record_round(cat, out, profile=profile, seed=seed, timeout=timeout,
                               sandbox_url=sandbox)
    if as_json:
        print_json([r.model_dump(mode="json") for r in results])
        return
    console.print(f"recorded {len(results)} calls into {out} (sandbox, profile {profile}, "
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
    from rich.progress import Progress

    from realprobe.sandbox.rounds import replay_round

    cat = load_catalog(None)
    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task("replaying", total=len(cat))
        cassette, results = replay_round(
            cat, file, replay_latency=replay_latency, on_exhausted=on_exhausted,
            on_call=lambda _: bar.advance(task),
        )
    if as_json:
        print_json([r.model_dump(mode="json") for r in results])
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
