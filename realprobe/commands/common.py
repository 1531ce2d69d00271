"""Options and helpers shared by the command modules."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from realprobe.adapters.catalog import Catalog
from realprobe.errors import RealprobeError
from realprobe.replay.modes import Mode, TransportOptions

console = Console()
err_console = Console(stderr=True)

CatalogOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalog",
        help="Extra catalogue file (TOML/YAML/JSON) or shipped family (openmeteo, pokeapi), "
        "merged with the built-in one. Repeatable.",
    ),
]
SandboxOpt = Annotated[
    str | None,
    typer.Option("--sandbox", help="Route every tool to a realprobe sandbox at this URL."),
]
SimulateOpt = Annotated[
    str | None,
    typer.Option(
        "--simulate", help="Simulate in process under this profile (file or calm|published|harsh)."
    ),
]
ModeOpt = Annotated[Mode, typer.Option("--mode", help="live, record, replay or simulate.")]
CassetteOpt = Annotated[
    Path | None, typer.Option("--cassette", help="Cassette file for --mode record|replay.")
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for the fault model.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
TimeoutOpt = Annotated[
    float | None, typer.Option("--timeout", help="Total deadline per call, in seconds.")
]


def load_catalog(extra: list[Path] | None) -> Catalog:
    return Catalog.load(extra or [])


def transport_options(
    mode: Mode = Mode.LIVE,
    sandbox: str | None = None,
    simulate: str | None = None,
    cassette: Path | None = None,
    seed: int = 0,
) -> TransportOptions:
    if sandbox is not None:
        check_loopback_hint(sandbox)
    return TransportOptions(
        mode=mode, sandbox=sandbox, profile=simulate, seed=seed, cassette=cassette
    ).normalised()


def check_loopback_hint(url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise RealprobeError(f"--sandbox {url!r}: expected a URL like http://127.0.0.1:8765")


def print_json(obj: Any) -> None:
    """JSON on stdout, secrets scrubbed (output is often redirected into files)."""
    from realprobe.secrets import scrub_strings

    sys.stdout.write(json.dumps(scrub_strings(obj), indent=2, default=str) + "\n")


def print_json_large(obj: Any) -> None:
    """`print_json` for big listings (hundreds of tool definitions): the same indented JSON,
    encoded in Rust instead of by the standard library's pure-Python indenting encoder."""
    import pydantic_core

    sys.stdout.write(pydantic_core.to_json(obj, indent=2, fallback=str).decode("utf-8") + "\n")


def parse_kv(pairs: list[str] | None) -> dict[str, Any]:
    """`k=v` pairs as strings; the tool's input model coerces "5" or "true" where it may."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RealprobeError(f"--arg {pair!r}: expected key=value")
        out[key] = value
    return out
