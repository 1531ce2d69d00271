"""The front door for cassettes: one function behind each `realprobe cassette` verb.

Each returns what the command prints (as data); the command only parses flags and prints.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from realprobe.errors import BadArgument, RealprobeError, no_other_keywords, renamed_keyword
from realprobe.ranges import checked

if TYPE_CHECKING:
    from realprobe.adapters.catalog import Catalog
    from realprobe.cassettes.cassette import Cassette
    from realprobe.cassettes.verify import Finding
    from realprobe.result import ToolResult


def _catalog(catalog: Catalog | Sequence[str | Path] | None) -> Catalog:
    from realprobe.adapters.catalog import Catalog

    if isinstance(catalog, Catalog):
        return catalog
    return Catalog.load([Path(p) for p in catalog or ()])


def _existing(path: str | Path) -> Path:
    p = Path(path)
    if not p.exists():
        raise RealprobeError(f"no such file: {p}")
    return p


@dataclass
class Listing:
    """A cassette's interactions as rows (`inspect_cassette`)."""

    file: str
    meta: dict[str, Any]
    rows: list[dict[str, Any]]
    cassette: Cassette

    @property
    def failures(self) -> int:
        return sum(1 for c in self.cassette.calls if c.error is not None)

    @property
    def vcrpy_readable(self) -> int:
        return sum(1 for c in self.cassette.calls if c.vcrpy_representable)

    def as_json(self) -> dict[str, Any]:
        return {"file": self.file, "meta": self.meta, "interactions": self.rows}


@checked
def inspect_cassette(
    file: str | Path, catalog: Catalog | Sequence[str | Path] | None = None
) -> Listing:
    """Every interaction of a cassette: order, request, outcome, latency, size, tool."""
    from realprobe.cassettes.importers import load_any
    from realprobe.cassettes.mcp_session import tool_of
    from realprobe.cassettes.verify import ToolIndex

    cassette = load_any(_existing(file))
    index = ToolIndex(_catalog(catalog))
    rows = [
        {
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
            "tool": tool_of(c.uri) or index.tool_for(c.method, c.uri),
        }
        for c in cassette.calls
    ]
    return Listing(str(file), cassette.meta, rows, cassette)


@dataclass
class Verdict:
    """What `verify_cassette` found: one finding per call, and whether any is a problem."""

    file: str
    findings: list[Finding]
    bad: list[Finding]

    @property
    def ok(self) -> bool:
        return not self.bad

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(f.status for f in self.findings))

    def as_json(self) -> dict[str, Any]:
        return {
            "file": self.file, "ok": self.ok, "counts": self.counts,
            "findings": [f.__dict__ for f in self.findings],
        }


@checked
def verify_cassette(
    file: str | Path,
    *,
    strict: bool = False,
    catalog: Catalog | Sequence[str | Path] | None = None,
) -> Verdict:
    """Does the cassette load, do lengths agree, and does every complete 2xx response of a
    catalogue tool parse for that tool? `strict`: a 2xx body that does not parse is a
    problem too."""
    from realprobe.cassettes.importers import load_any
    from realprobe.cassettes.verify import PROBLEMS
    from realprobe.cassettes.verify import verify_cassette as verify

    findings = verify(load_any(_existing(file)), _catalog(catalog))
    bad = [f for f in findings if f.status in PROBLEMS or (strict and f.status == "parse-failed")]
    return Verdict(str(file), findings, bad)


@dataclass
class Scrubbed:
    """What `scrub_cassette` replaced, and where it wrote."""

    file: str
    counts: dict[str, int]
    total: int
    format: str
    calls: list[dict[str, Any]] | None = None  # a dry run: the places, call by call

    def as_json(self) -> dict[str, Any]:
        out = {"file": self.file, "replaced": self.counts, "total": self.total,
               "format": self.format}
        if self.calls is not None:
            out.update(dry_run=True, calls=self.calls)
        return out


def _output(old: dict[str, Any], output: str | Path | None) -> str | Path | None:
    """`output`, or its old name `out=` (with a notice); nothing else in `old`."""
    value = renamed_keyword(old, "out", "output", output)
    no_other_keywords(old, "output")
    return value  # type: ignore[no-any-return]


@checked
def scrub_cassette(
    file: str | Path,
    *,
    output: str | Path | None = None,
    secrets: Sequence[str] = (),
    headers: Sequence[str] = (),
    params: Sequence[str] = (),
    catalog: Catalog | Sequence[str | Path] | None = None,
    dry_run: bool = False,
    **old: Any,
) -> Scrubbed:
    """Remove credentials (what recording removes, plus `secrets`, `headers`, `params`) from
    a cassette, in place (a Ruby VCR or HAR file stays one) or into `output` (`out=` is its
    old name). `dry_run`: report the places call by call and write nothing."""
    from realprobe.cassettes.exporters import save_as_source
    from realprobe.cassettes.importers import load_any
    from realprobe.cassettes.scrub import ScrubConfig, declared_secret_finder
    from realprobe.cassettes.scrub import scrub_cassette as scrub
    from realprobe.outputs import check_output

    output = _output(old, output)
    src = _existing(file)
    dest = Path(output) if output is not None else None
    cassette = load_any(src)
    cfg = ScrubConfig(
        secrets=tuple(secrets), extra_headers=tuple(headers), extra_params=tuple(params)
    )
    if cassette.records is not None:  # an MCP session: its messages, as recording scrubs them
        return _scrub_session(cassette, cfg, src, dest, dry_run)
    if dry_run:
        from realprobe.cassettes.scrub import scrub_preview

        preview, calls = scrub_preview(cassette, cfg, finder=declared_secret_finder(
            _catalog(catalog)))
        return Scrubbed(str(src), dict(preview.counts), preview.total, "dry run", calls)
    check_output(dest or src, replace=True)
    report = scrub(cassette, cfg, finder=declared_secret_finder(_catalog(catalog)))
    written, target = save_as_source(cassette, src, dest), dest or src
    return Scrubbed(str(target), dict(report.counts), report.total, written)


def _scrub_session(cassette: Cassette, cfg: Any, src: Path, dest: Path | None,
                   dry_run: bool) -> Scrubbed:
    from realprobe.cassettes.exporters import save_as_source
    from realprobe.cassettes.mcp_session import scrub_records
    from realprobe.outputs import check_output

    if not dry_run:
        check_output(dest or src, replace=True)
    n = scrub_records(cassette, cfg.secrets, cfg.extra_params + cfg.extra_headers)
    counts = {"mcp messages": n} if n else {}
    if dry_run:
        return Scrubbed(str(src), counts, n, "dry run", [])
    written = save_as_source(cassette, src, dest)
    return Scrubbed(str(dest or src), counts, n, written)


@dataclass
class Imported:
    """What `import_cassette` wrote."""

    file: str
    source: Any
    interactions: int
    failures: int
    unresolved_urls: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@checked
def import_cassette(
    file: str | Path,
    output: str | Path | None = None,
    *,
    substitute: Mapping[str, str] | None = None,
    scrub: bool = True,
    **old: Any,
) -> Imported:
    """Any cassette `load_any` reads (vcrpy YAML/JSON, Ruby VCR, HAR; an MCP session or
    another recorder's MCP transcript) as a realprobe cassette at `output` (an MCP session
    file for an MCP session; replaced if it exists; `out=` is its old name). `substitute`
    replaces placeholders in request URLs."""
    from realprobe.cassettes.exporters import save_as_source
    from realprobe.cassettes.importers import load_any, substitute_urls
    from realprobe.cassettes.mcp_session import scrub_records
    from realprobe.cassettes.scrub import declared_secret_finder, scrub_cassette
    from realprobe.outputs import check_output

    out = _output(old, output)
    if out is None:
        raise BadArgument("output", "output: give the cassette to write")
    src = _existing(file)
    for placeholder in substitute or {}:
        if not placeholder:
            raise BadArgument("substitute", "substitute: an empty placeholder replaces nothing")
    check_output(Path(out), replace=True)
    cassette = load_any(src)
    substitute_urls(cassette, substitute or {})
    cassette.meta["imported_from"] = src.name
    unresolved = sorted({c.uri.split("/")[0] for c in cassette.calls if "://" not in c.uri})
    if scrub and cassette.records is not None:
        scrub_records(cassette)
    elif scrub:
        scrub_cassette(cassette, finder=declared_secret_finder(_catalog(None)))
    save_as_source(cassette, src, Path(out))
    target = Path(out)
    failures = sum(1 for c in cassette.calls if c.error is not None)
    return Imported(str(target), cassette.meta.get("source"), len(cassette.calls), failures,
                    unresolved)


@dataclass
class Exported:
    """What `export_cassette` wrote: the file, its format, and the interactions (HTTP) or
    messages (MCP) in it."""

    file: str
    format: str
    items: int

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@checked
def export_cassette(file: str | Path, output: str | Path, *,
                    format: str | None = None) -> Exported:
    """Write any cassette `load_any` reads in another tool's format: an HTTP cassette as
    `realprobe` (YAML or JSON by `output`'s suffix), `ruby-vcr` or `har` (default: `har` for a
    `.har` output, else `realprobe`); an MCP session as `mcp-cassette` (the default) or
    `mcp-recorder` (their published JSON), so that tool replays what realprobe recorded."""
    import json

    from realprobe.cassettes.exporters import HTTP_FORMATS, write_as
    from realprobe.cassettes.importers import load_any
    from realprobe.mcp.interop import EXPORT_FORMATS, session_document
    from realprobe.outputs import OutputError, check_output, write_output

    src, out = _existing(file), Path(output)
    cassette = load_any(src)
    session = cassette.records is not None
    fmt = format or ("mcp-cassette" if session else "har" if out.suffix == ".har"
                     else "realprobe")
    formats = EXPORT_FORMATS if session else HTTP_FORMATS
    if fmt not in formats:
        kind = "an MCP session" if session else "an HTTP cassette"
        raise BadArgument("format", f"format {fmt!r}: {src} is {kind}; choose one of "
                          f"{', '.join(formats)}")
    check_output(out, replace=True)
    if not session:
        write_as(cassette, out, fmt)
        return Exported(str(out), fmt, len(cassette.calls))
    doc, n = session_document(cassette.records or [], cassette.meta, fmt)
    try:
        write_output(out, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    except OutputError as exc:
        raise BadArgument("output", str(exc)) from exc
    return Exported(str(out), fmt, n)


@checked
def record_round(
    output: str | Path = "cassettes/sandbox-published-round.json",
    *,
    profile: str = "published",
    seed: int = 0,
    timeout: float = 2.0,
    sandbox: str | None = None,
    catalog: Catalog | None = None,
    **old: Any,
) -> list[ToolResult]:
    """Start the sandbox on loopback (or use a running `sandbox`), call every tool once, and
    record it all into the cassette `output` (replaced; a link is refused; `out=` is its old
    name)."""
    from realprobe.outputs import check_output
    from realprobe.sandbox.rounds import record_round as record

    out = Path(_output(old, output) or output)
    if sandbox is not None:
        from realprobe.http.transports import check_sandbox_url

        check_sandbox_url(sandbox)  # the one target check, as every other door
    check_output(out, replace=True)
    return record(_catalog(catalog), out, profile=profile, seed=seed, timeout=timeout,
                  sandbox_url=sandbox)


@checked
def replay_round(
    file: str | Path | None = None,
    *,
    replay_latency: str | None = None,
    on_exhausted: str | None = None,
    catalog: Catalog | None = None,
    on_call: Callable[[ToolResult], None] | None = None,
) -> tuple[Cassette, list[ToolResult]]:
    """Replay a recorded round offline (the shipped one by default): the cassette and every
    tool's result, in catalogue order."""
    from realprobe.sandbox.rounds import replay_round as replay

    return replay(
        _catalog(catalog), None if file is None else _existing(file),
        replay_latency=replay_latency, on_exhausted=on_exhausted, on_call=on_call,
    )
