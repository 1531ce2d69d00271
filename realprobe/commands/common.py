"""Options and helpers shared by the command modules.

Kept light: importing a command module must not import httpx, numpy or rich, so that
`realprobe <verb> --help` starts fast. The library is imported inside the command bodies.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import re
import sys
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from realprobe.commands.completion import complete_profile
from realprobe.errors import NoDatabase, RealprobeError
from realprobe.http.mode import Mode

if TYPE_CHECKING:
    from rich.console import Console

    from realprobe.adapters.catalog import Catalog


class _LazyConsole:
    """A rich Console made on first use (rich.console costs ~0.1 s to import)."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Any = None

    def _real(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr)
            # in a log file or a pipe, a line is printed whole rather than cut at 80 columns
            self._console.soft_wrap = not self._console.is_terminal
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real(), name)

    def print(self, *objects: Any, **kw: Any) -> None:
        """Everything printed goes through the one scrubber first (text and table cells)."""
        self._real().print(*(scrub_printed(o) for o in objects), **kw)

    def __enter__(self) -> Any:  # rich's Live and Progress enter their console
        return self._real().__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._real().__exit__(*exc)


def scrub_printed(obj: Any) -> Any:
    """A string or a table (`tables.FitTable`: its cells, title and caption) with its secrets
    out, before any cell is wrapped or cut."""
    from realprobe.commands.tables import FitTable
    from realprobe.secrets import scrub_text

    if isinstance(obj, str):
        return scrub_text(obj)
    if isinstance(obj, FitTable):
        obj.rows = [[scrub_text(c) for c in row] for row in obj.rows]
        obj.title, obj.caption = (t and scrub_text(t) for t in (obj.title, obj.caption))
    return obj


console = cast("Console", _LazyConsole(stderr=False))
err_console = cast("Console", _LazyConsole(stderr=True))


@contextmanager
def wrapped_prose() -> Iterator[None]:
    """Prose wrapped between words at the console's width (80 columns, or $COLUMNS) even in a
    pipe or a log, for output meant to be read rather than parsed (the demo)."""
    real = cast("_LazyConsole", console)._real()
    before = real.soft_wrap
    real.soft_wrap = False
    try:
        yield
    finally:
        real.soft_wrap = before


def plain_line(text: str, err: bool = False) -> None:
    """One line as it is, on stdout or stderr (scrubbed; no markup, no wrapping, so no rich
    to import for it)."""
    (sys.stderr if err else sys.stdout).write(scrub_printed(text) + "\n")

CatalogOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalog",
        help="Extra catalogue file (TOML/YAML/JSON) or shipped family (openmeteo, pokeapi), "
        "merged with the built-in one. Repeatable.",
    ),
]
DbOpt = Annotated[
    Path | None, typer.Option("--db", help="SQLite file (default: $REALPROBE_DB or the data dir).")
]
SandboxOpt = Annotated[
    str | None,
    typer.Option("--sandbox", help="Route every tool to a realprobe sandbox at this URL."),
]
ProfileOpt = Annotated[
    str | None,
    typer.Option(
        "--profile",
        help="Fault profile (a file, or calm|published|harsh); without --sandbox, the calls are "
        "simulated in process under it.",
        autocompletion=complete_profile,
    ),
]
PromptOpt = Annotated[
    str | None,
    typer.Option(
        "--prompt",
        help="baseline, cot, optimal, flawed:<type>[@<severity>] or flawed:all[@<severity>] "
        "(comma-separated list ok; severity = percent of steps affected, e.g. "
        "flawed:missing_steps@30). Default: optimal for the reference agent, baseline for "
        "the others.",
    ),
]
FlawSeedOpt = Annotated[
    int, typer.Option("--flaw-seed", help="Seeds the flawed workflows (0: the stored variants).")
]
ParaphraseOpt = Annotated[
    int,
    typer.Option(
        "--paraphrase",
        help="Paraphrase level of the task text: 0 as written, 1 synonyms, 2 synonyms + "
        "reordered clauses + a distractor sentence (success criteria unchanged).",
    ),
]


def _mode(value: str | Mode) -> Mode:
    """`--mode` read by the library's one parser (any case, the library's message)."""
    try:
        return Mode.parse(value)
    except RealprobeError as exc:
        raise RealprobeError(str(exc), param="mode") from None


ModeOpt = Annotated[
    Mode, typer.Option("--mode", parser=_mode, help="live, record, replay or simulate.")
]
CassetteOpt = Annotated[
    Path | None, typer.Option("--cassette", help="Cassette file for --mode record|replay.")
]
RecordModeOpt = Annotated[
    str | None,
    typer.Option(
        "--record-mode",
        help="With --cassette: none (replay only), once (record if the cassette is missing), "
        "new_episodes (record what it lacks, keep the rest) or all (re-record).",
    ),
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for the fault model.")]
FaultPlanOpt = Annotated[
    str | None,
    typer.Option("--fault-plan", help="Faults at chosen calls: a plan file (.toml/.json) or a "
                 "built-in (toolmaze-explicit-transient, ...-permanent, toolmaze-implicit-...)."),
]
FaultRateOpt = Annotated[
    float | None,
    typer.Option("--fault-rate", help="Every tool fails this share of calls (0-1), error mix "
                 "and bursts kept."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
ExplainOpt = Annotated[
    bool, typer.Option("--explain", help="Every note in full, one line per tool (by default "
                       "notes are grouped and counted).")
]
TimeoutOpt = Annotated[
    float | None, typer.Option("--timeout", help="Total deadline per call, in seconds.")
]
# the guards every realprobe server shares (sandbox, exporter, MCP over HTTP)
AllowedHostOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-host",
        help="Another Host (and Origin) name clients may use, e.g. box.example.org or "
        "myhost:8766 (loopback names always pass; '*' turns the check off). Repeatable.",
    ),
]
AuthTokenEnvOpt = Annotated[
    str | None,
    typer.Option(
        "--auth-token-env",
        help="Require 'Authorization: Bearer <token>', the token read from this environment "
        "variable.",
    ),
]


def server_guards(
    what: str, host: str, allowed_host: list[str] | None, auth_token_env: str | None
) -> tuple[tuple[str, ...], str | None]:
    """(allowed hosts, token) for a server; prints the one off-loopback warning line."""
    from realprobe.serving import Guard, off_loopback_warning, token_from_env

    token = token_from_env(auth_token_env) if auth_token_env else None
    allowed = tuple(allowed_host or ())
    Guard(host, allowed)  # a URL given as a host name is a one-line error before binding
    warning = off_loopback_warning(what, host, token=token is not None)
    if warning is not None:
        err_console.print(f"realprobe {what}: {warning}", markup=False, highlight=False,
                          soft_wrap=True)  # one line, whatever the terminal's width
    return allowed, token


class PolitenessChoice(StrEnum):
    """`--politeness`, the same on every command that calls APIs."""

    CATALOG = "catalog"
    OFF = "off"


def load_catalog(extra: list[Path] | None) -> Catalog:
    from realprobe.adapters.catalog import Catalog

    return Catalog.load(extra or [])


def print_json(obj: Any) -> None:
    """JSON on stdout, secrets scrubbed (output is often redirected into files)."""
    from realprobe.secrets import scrub_strings

    sys.stdout.write(json.dumps(scrub_strings(obj), indent=2, default=str) + "\n")


def printed_json(as_json: bool, obj: Any) -> bool:
    """The `--json` tail of every command: with `as_json`, `obj` printed as JSON (its own
    `as_json()` view, a pydantic model's JSON dump, or plain data) and True, so the command
    skips its human output."""
    if as_json and hasattr(obj, "as_json"):
        print_json(obj.as_json())
    elif as_json:
        print_json(obj.model_dump(mode="json") if hasattr(obj, "model_dump") else obj)
    return as_json


def print_json_large(obj: Any) -> None:
    """`print_json` for big listings (hundreds of tool definitions): the same indented JSON,
    encoded in Rust instead of by the standard library's pure-Python indenting encoder."""
    import pydantic_core

    sys.stdout.write(pydantic_core.to_json(obj, indent=2, fallback=str).decode("utf-8") + "\n")


def parse_kv(pairs: list[str] | None, flag: str = "--arg", form: str = "key=value"
             ) -> dict[str, Any]:
    """`k=v` pairs given to `flag` as strings (a tool's input model coerces "5" or "true"
    where it may)."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RealprobeError(f"{flag} {pair!r}: expected {form}")
        out[key] = value
    return out


def flag_for(param: str, flags: Collection[str] = ()) -> str:
    """How the command line spells a Python parameter: `--name-with-dashes` (every flag is
    its keyword, a test holds them to it), or `--item` when the command's repeatable flag
    fills `items`."""
    flag = "--" + param.replace("_", "-")
    return flag[:-1] if flag not in flags and flag[:-1] in flags else flag


def cli_message(exc: RealprobeError, flags: Collection[str] = ()) -> str:
    """The error's message with each parameter it names (`exc.params`) spelled as its flag:
    `repeat must be ...` becomes `--repeat must be ...`, `kinds=all` becomes `--kinds all`."""
    text = str(exc)
    if not exc.params:
        return text
    # whole words only, and not inside a path, a dotted name or a quoted value
    pattern = (
        r"(?<![\w\-/\\.'\"])(" + "|".join(map(re.escape, exc.params)) + r")"
        r"(?:(=)|(?![\w\-/\\'\"]|\.\w))"
    )
    return re.sub(
        pattern, lambda m: flag_for(m.group(1), flags) + (" " if m.group(2) else ""), text
    )


def in_cli_terms(exc: RealprobeError, flags: Collection[str] = ()) -> RealprobeError:
    """The same exception, its message rewritten by `cli_message` (for the one-line print)."""
    if isinstance(exc, NoDatabase) and not exc.advised:
        exc.args = (f"{exc}; run `realprobe probe` first or pass --db FILE",)
        exc.advised = True
    if exc.params:
        exc.args = (cli_message(exc, flags),)
        exc.params = ()
    return exc


def exit_if_ctrl_c(stopped: bool = True) -> None:
    """Exit 130, like every verb, when Ctrl-C (SIGINT) stopped the command (`stopped`: it
    stopped on a signal at all); SIGTERM is a clean stop."""
    import signal

    from realprobe.probes.session import last_signal

    if stopped and last_signal() == signal.SIGINT:
        raise typer.Exit(130)


@contextmanager
def as_flags(*params: str) -> Iterator[None]:
    """A library error that names none of its parameters is taken to name these (whichever
    its message holds): `repeat must be at least 1` prints as `--repeat must be ...`."""
    try:
        yield
    except RealprobeError as exc:
        if not exc.params:
            exc.params = params
        raise


def one_shot() -> None:
    """Set up the process of a one-shot analysis command (`stats`, `report`, `calibrate`,
    `drift`), before numpy loads:

    - no garbage collection walks what lives to the end anyway: what is loaded at this point,
      and everything at exit, when the interpreter's last collection over every object
      (pydantic's schemas, numpy's and typer's modules) cost about 15 ms of a `stats`; and
      the young objects are collected after 5,000 allocations instead of 700 (20-25 ms of
      a `stats` in all);
    - no pydantic plugin is looked for (the results are realprobe's own models; the search
      reads every installed package's entry points);
    - BLAS on one thread (unless the environment says otherwise): the statistics' linear
      algebra is tiny, and OpenBLAS' thread pool cost 70-140 ms of CPU per command, its
      threads spinning on a busy machine; and then, when numpy was not loaded before, the
      statistics need not set it with threadpoolctl (5 ms to load and search the libraries);
    - on Linux (glibc), freed blocks stay with the process instead of going back to the
      kernel at once. By default glibc maps every block over 128 kB afresh and trims the
      heap's top as soon as it is free, so each temporary array of a tool's rows was
      page-faulted in again: 50-80 ms of the statistics' CPU at a million rows. Blocks up to
      32 MB now come from the heap, which keeps up to 256 MB free at its top; the command's
      exit returns it all. Not for long-running processes (the exporter, a schedule).

    Only in the `realprobe` program's own process (`commands.OWN_PROCESS`): a `main()` called
    inside a test or a notebook leaves that process as it was."""
    from realprobe import commands

    if not commands.OWN_PROCESS:
        return
    fresh = "numpy" not in sys.modules
    blas = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    for var in blas:
        os.environ.setdefault(var, "1")
    if fresh and all(os.environ[var] == "1" for var in blas):
        from realprobe.probes.numeric import single_blas_from_the_start

        single_blas_from_the_start()
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "1")
    gc.freeze()  # the modules loaded so far live to the end: no collection walks them again
    gc.set_threshold(5000, *gc.get_threshold()[1:])  # the young walked 7 times less often
    atexit.unregister(gc.freeze)  # (registered once, however often a process sets up)
    atexit.register(gc.freeze)  # nor the one at exit (the process' memory goes back whole)
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library's own (musl's does nothing)
    except (OSError, AttributeError):
        return
    mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD
    mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
