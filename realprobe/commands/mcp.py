"""`realprobe mcp`: serve the catalogue as an MCP server over stdio or streamable HTTP."""

from __future__ import annotations

import asyncio
import logging
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from realprobe.commands.common import (
    CassetteOpt,
    CatalogOpt,
    ModeOpt,
    SandboxOpt,
    SeedOpt,
    TimeoutOpt,
    check_loopback_hint,
    load_catalog,
)
from realprobe.errors import RealprobeError
from realprobe.replay.modes import Mode, TransportOptions


class McpTransport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp_cmd)


def build_transport_options(
    mode: Mode,
    sandbox: str | None,
    profile: str | None,
    cassette: Path | None,
    seed: int,
    real_time: bool,
) -> TransportOptions:
    if sandbox is not None:
        check_loopback_hint(sandbox)
    if profile is not None:
        if mode not in (Mode.LIVE, Mode.SIMULATE):
            raise RealprobeError(f"--profile applies to --mode simulate, not --mode {mode.value}")
        if sandbox is not None:
            raise RealprobeError(
                "--profile and --sandbox exclude each other: the sandbox has its own profile "
                "(`realprobe sandbox --profile ...`)"
            )
        mode = Mode.SIMULATE
    if mode is Mode.SIMULATE and sandbox is not None:
        raise RealprobeError("--mode simulate runs in process: drop --sandbox")
    if cassette is not None and mode not in (Mode.RECORD, Mode.REPLAY):
        raise RealprobeError("--cassette needs --mode record or --mode replay")
    if real_time and mode is not Mode.SIMULATE:
        raise RealprobeError("--real-time applies to --mode simulate only")
    return TransportOptions(
        mode=mode, sandbox=sandbox, profile=profile, seed=seed, cassette=cassette,
        real_time=real_time,
    ).normalised()


def mcp_cmd(
    transport: Annotated[
        McpTransport, typer.Option("--transport", help="stdio (for desktop clients) or http.")
    ] = McpTransport.STDIO,
    host: Annotated[
        str, typer.Option("--host", help="HTTP: address to listen on (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="HTTP: port (0 picks a free one).")] = 8766,
    tools: Annotated[
        str | None, typer.Option("--tools", help="Serve only these tools (comma-separated).")
    ] = None,
    all_tools: Annotated[
        bool, typer.Option("--all", help="Serve every catalogue tool (the default).")
    ] = False,
    mode: ModeOpt = Mode.LIVE,
    sandbox: SandboxOpt = None,
    cassette: CassetteOpt = None,
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile",
            help="Fault profile for --mode simulate: a file, or calm|published|harsh.",
        ),
    ] = None,
    seed: SeedOpt = 0,
    real_time: Annotated[
        bool,
        typer.Option(
            "--real-time",
            help="Simulate: wait the simulated latencies for real (default: instant).",
        ),
    ] = False,
    db: Annotated[
        Path | None,
        typer.Option("--db", help="Store every served call as a probe row (source=mcp) here."),
    ] = None,
    timeout: TimeoutOpt = None,
    vantage: Annotated[
        str | None,
        typer.Option("--vantage", help="Vantage label for stored rows (default: host name)."),
    ] = None,
    politeness: Annotated[
        bool,
        typer.Option(
            "--politeness/--no-politeness",
            help="Live: hold calls to each real API to the catalogue's rate (in flight, interval).",
        ),
    ] = True,
    catalog: CatalogOpt = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="HTTP: another Host (and Origin) name clients may use, e.g. mcp.example.org "
            "or myhost:8766 (loopback names always pass; '*' turns the check off). Repeatable.",
        ),
    ] = None,
    auth_token_env: Annotated[
        str | None,
        typer.Option(
            "--auth-token-env",
            help="HTTP: require 'Authorization: Bearer <token>', the token read from this "
            "environment variable.",
        ),
    ] = None,
    max_sessions: Annotated[
        int, typer.Option("--max-sessions", help="HTTP: open sessions at most (then 503).")
    ] = 100,
    session_idle_timeout: Annotated[
        float,
        typer.Option(
            "--session-idle-timeout", help="HTTP: close a session idle this many seconds."
        ),
    ] = 600.0,
) -> None:
    """Serve the catalogue tools over the Model Context Protocol (stdio or streamable HTTP).

    Live by default; --sandbox URL routes every tool to a realprobe sandbox, --mode
    record|replay uses a cassette, --mode simulate (or --profile) injects faults in process.
    In stdio mode stdout carries JSON-RPC only; messages go to stderr.
    """
    from realprobe.mcp.guards import check_session_limits, token_from_env
    from realprobe.mcp.serve import log_to_stderr, run_until_signal, serve_http, serve_stdio
    from realprobe.mcp.service import McpService, ServiceOptions, describe_target
    from realprobe.secrets import LogScrubber

    if tools and all_tools:
        raise RealprobeError("--tools and --all exclude each other: pick one")
    if timeout is not None and timeout <= 0:
        raise RealprobeError(f"--timeout {timeout:g}: must be a positive number of seconds")
    if not 0 <= port <= 65535:
        raise RealprobeError(f"--port {port}: must be between 0 and 65535")
    check_session_limits(max_sessions, session_idle_timeout)
    token = token_from_env(auth_token_env) if auth_token_env else None
    logging.basicConfig(level=logging.WARNING, format="realprobe mcp: %(levelname)s %(message)s")
    for handler in logging.getLogger().handlers:  # no secret reaches a log line
        handler.addFilter(LogScrubber())
    cat = load_catalog(catalog)
    opts = build_transport_options(mode, sandbox, profile, cassette, seed, real_time)
    service = McpService(
        cat,
        ServiceOptions(
            transport=opts, tools=tools, timeout_s=timeout,
            db=str(db) if db is not None else None, vantage=vantage, polite=politeness,
        ),
    )
    what = f"{len(service.tools)} tools, target {describe_target(service.transport_options)}"
    if transport is McpTransport.STDIO:
        run_until_signal(
            lambda: serve_stdio(
                service,
                on_ready=lambda _: log_to_stderr(
                    f"realprobe mcp: serving {what} over stdio (EOF or Ctrl-C stops)"
                ),
            )
        )
        return
    if host not in ("127.0.0.1", "localhost", "::1") and token is None:
        log_to_stderr(
            f"realprobe mcp: warning: listening on {host}, not loopback, and no token is "
            "required; pass --auth-token-env VAR"
        )
    try:
        asyncio.run(
            serve_http(
                service, host, port,
                on_ready=lambda url: log_to_stderr(f"realprobe mcp: serving {what} on {url}"),
                allowed_hosts=tuple(allowed_host or ()),
                auth_token=token,
                max_sessions=max_sessions,
                session_idle_s=session_idle_timeout,
            )
        )
    except OSError as exc:
        raise RealprobeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    except KeyboardInterrupt:
        pass
