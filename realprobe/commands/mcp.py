"""`realprobe mcp`: serve the catalogue as an MCP server over stdio or streamable HTTP."""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from realprobe.commands.common import (
    AllowedHostOpt,
    AuthTokenEnvOpt,
    CassetteOpt,
    CatalogOpt,
    FaultPlanOpt,
    FaultRateOpt,
    FlawSeedOpt,
    ModeOpt,
    ParaphraseOpt,
    PolitenessChoice,
    PromptOpt,
    SandboxOpt,
    SeedOpt,
    TimeoutOpt,
    as_flags,
    console,
    exit_if_ctrl_c,
    load_catalog,
    server_guards,
)
from realprobe.commands.help import deprecated
from realprobe.errors import RealprobeError
from realprobe.http.mode import Mode


class McpTransport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"


# settings the same for `mcp`, `mcp proxy` and `mcp replay`: the HTTP server's, the rows'
VantageOpt = Annotated[
    str | None, typer.Option("--vantage", help="Vantage label of stored rows (default: host "
                             "name).")
]
PortOpt = Annotated[int, typer.Option("--port", help="HTTP: port (0 picks a free one).")]
MaxSessionsOpt = Annotated[
    int, typer.Option("--max-sessions", help="HTTP: open sessions per client address at most "
                      "(then 503).")
]
IdleOpt = Annotated[
    float, typer.Option("--session-idle-timeout", help="HTTP: close a session idle this many "
                        "seconds.")
]


def register(app: typer.Typer) -> None:
    group = typer.Typer(rich_markup_mode=None, invoke_without_command=True,
                        add_completion=False)
    group.callback()(mcp_cmd)
    group.command("proxy", context_settings={"allow_interspersed_args": False})(proxy_cmd)
    group.command("replay")(replay_cmd)
    group.command("import", hidden=True)(import_cmd)  # `cassette import` does it now
    group.command("export", hidden=True)(export_cmd)  # `cassette export` does it now
    app.add_typer(group, name="mcp")


def mcp_cmd(
    ctx: typer.Context,
    transport: Annotated[
        McpTransport, typer.Option("--transport", help="stdio (for desktop clients) or http.")
    ] = McpTransport.STDIO,
    host: Annotated[
        str, typer.Option("--host", help="HTTP: address to listen on (loopback by default).")
    ] = "127.0.0.1",
    port: PortOpt = 8766,
    tools: Annotated[
        str | None, typer.Option("--tools", help="Serve only these tools (comma-separated).")
    ] = None,
    all_tools: Annotated[bool, typer.Option("--all", hidden=True)] = False,
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
    fault_plan: FaultPlanOpt = None,
    fault_rate: FaultRateOpt = None,
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
    vantage: VantageOpt = None,
    politeness: Annotated[
        PolitenessChoice,
        typer.Option(
            "--politeness",
            help="Live: catalog holds calls to each real API to the catalogue's rate (in "
            "flight, interval); off does not.",
        ),
    ] = PolitenessChoice.CATALOG,
    catalog: CatalogOpt = None,
    task: Annotated[
        str | None,
        typer.Option("--task", help="Score the connected agent's calls as a run of this task "
                     "(stored in --db, default the default database; `finish` ends a run)."),
    ] = None,
    prompt: PromptOpt = None,
    flaw_seed: FlawSeedOpt = 0,
    paraphrase: ParaphraseOpt = 0,
    model: Annotated[
        str, typer.Option("--model", help="With --task: the runs' model label.")
    ] = "-",
    allowed_host: AllowedHostOpt = None,
    auth_token_env: AuthTokenEnvOpt = None,
    max_sessions: MaxSessionsOpt = 100,
    session_idle_timeout: IdleOpt = 600.0,
) -> None:
    """Serve the catalogue tools over the Model Context Protocol (stdio or streamable HTTP);
    `mcp proxy` puts realprobe in front of any MCP server, `mcp replay` serves a recorded
    session.

    Live by default; --sandbox URL routes every tool to a realprobe sandbox, --mode
    record|replay uses a cassette, --mode simulate (or --profile) injects faults in process.
    In stdio mode stdout carries JSON-RPC only; messages go to stderr.
    """
    if ctx.invoked_subcommand is not None:
        return
    from realprobe.api import serve_mcp
    from realprobe.mcp.serve import log_to_stderr
    from realprobe.secrets import LogScrubber

    if tools and all_tools:
        raise RealprobeError("--tools and --all exclude each other: pick one")
    allowed, token = _guards("mcp", transport, host, allowed_host, auth_token_env)
    logging.basicConfig(level=logging.WARNING, format="realprobe mcp: %(levelname)s %(message)s")
    for handler in logging.getLogger().handlers:  # no secret reaches a log line
        handler.addFilter(LogScrubber())
    from realprobe.tasks.settings import EvalSettings

    settings = EvalSettings(
        mode=mode, sandbox=sandbox, profile=profile, cassette=cassette, seed=seed,
        fault_plan=fault_plan, fault_rate=fault_rate, prompt=prompt, flaw_seed=flaw_seed,
        paraphrase=paraphrase,
    )
    if transport is McpTransport.STDIO:
        _stdin_through_a_pipe()

    def ready(where: str, what: str) -> None:
        if where == "stdio":
            log_to_stderr(f"realprobe mcp: serving {what} over stdio (EOF or Ctrl-C stops)")
        else:
            log_to_stderr(f"realprobe mcp: serving {what} on {where}")

    with as_flags("timeout", "port", "tools"):
        serve_mcp(
            transport=transport.value, host=host, port=port, tools=tools, settings=settings,
            real_time=real_time, db=db, timeout=timeout, vantage=vantage, politeness=politeness,
            catalog=load_catalog(catalog), on_ready=ready, allowed_hosts=allowed,
            auth_token=token, max_sessions=max_sessions,
            session_idle_timeout=session_idle_timeout, task=task, model=model,
        )
    exit_if_ctrl_c(transport is McpTransport.HTTP)


def _stdin_through_a_pipe() -> None:
    """When stdin is a regular file or a device (a JSON-RPC script, /dev/null), serve stdio
    from a pipe fed with it: the event loop can watch a pipe but not a file (nor would a
    client ever answer), and at the file's end the pipe closes, so the server sees EOF and
    stops."""
    import os
    import shutil
    import stat
    import sys
    import threading

    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError):  # closed, or replaced by an object without a descriptor
        return
    if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)) or os.isatty(sys.stdin.fileno()):
        return
    read_end, write_end = os.pipe()
    source = os.dup(0)
    os.dup2(read_end, 0)
    os.close(read_end)

    def copy() -> None:
        with os.fdopen(source, "rb") as src, os.fdopen(write_end, "wb") as dst:
            shutil.copyfileobj(src, dst)

    threading.Thread(target=copy, name="stdin-copy", daemon=True).start()


# -- any MCP server as a target ---------------------------------------------------------------

ProxyProfileOpt = Annotated[
    str | None,
    typer.Option("--profile", help="Fault profile: a file (from `calibrate`) or calm|published|"
                 "harsh; its mcp_errors says isError results or JSON-RPC errors."),
]
ProxyDbOpt = Annotated[
    Path | None, typer.Option("--db", help="Store every tools/call as a probe row (source mcp).")
]
ProxyTimeoutOpt = Annotated[
    float, typer.Option("--timeout", help="Seconds a call is awaited (or a hang held) at most.")
]
TransportOpt = Annotated[
    McpTransport, typer.Option("--transport", help="stdio, or http (streamable-HTTP sessions "
                               "side by side).")
]
UpstreamSessionsOpt = Annotated[
    str, typer.Option("--upstream-sessions", help="HTTP: per-client (each session its own "
                      "upstream session) or shared (one for all).")
]
FaultMethodsOpt = Annotated[
    str | None, typer.Option("--fault-methods", help="Request methods to inject faults into, "
                             "comma-separated (default tools/call and the methods the profile "
                             "names), e.g. tools/list,resources/read.")
]
HostOpt = Annotated[str, typer.Option("--host", help="HTTP: address to listen on.")]


def _ready(what: str) -> Callable[[str], None]:
    from realprobe.mcp.serve import log_to_stderr

    def ready(where: str) -> None:
        stop = "EOF or Ctrl-C stops" if where == "stdio" else "Ctrl-C stops"
        log_to_stderr(f"realprobe mcp: serving {what} on {where} ({stop})")

    return ready


def _guards(what: str, transport: McpTransport, host: str, allowed_host: list[str] | None,
            auth_token_env: str | None) -> tuple[tuple[str, ...], str | None]:
    """Over HTTP, the guards of every realprobe server (`server_guards`: the warning off
    loopback, the allowed hosts, the token); stdio has none to set."""
    if transport is not McpTransport.HTTP:
        if allowed_host or auth_token_env:
            raise RealprobeError("--allowed-host and --auth-token-env apply to --transport http",
                                 param=("allowed_host", "auth_token_env"))
        return (), None
    return server_guards(what, host, allowed_host, auth_token_env)


def _shown(command: list[str] | None, upstream: str | None) -> str:
    """The server as the banner names it, through the one scrubber (a password or token in
    the URL, the value after `--api-key`, are masked)."""
    from realprobe.secrets import scrub_data

    return " ".join(scrub_data(list(command or []))) or str(scrub_data(str(upstream)))


def _ended(summary: object) -> None:
    from realprobe.mcp.proxy import ProxySummary, upstream_error
    from realprobe.mcp.serve import log_to_stderr

    assert isinstance(summary, ProxySummary)
    runs = summary.run_ids or ([summary.run_id] if summary.run_id else [])
    log_to_stderr(f"realprobe mcp: {summary.calls} tool call(s), {summary.injected} injected"
                  + (f", {summary.sessions} session(s)" if summary.sessions else "")
                  + (f", rows in run {', '.join(runs)}" if runs else ""))
    err = upstream_error(summary)
    if err is not None:
        raise err
    exit_if_ctrl_c(summary.interrupted)


def proxy_cmd(
    command: Annotated[
        list[str] | None, typer.Argument(help="The MCP server's command, after `--`.")
    ] = None,
    upstream: Annotated[
        str | None, typer.Option("--upstream", help="A streamable-HTTP MCP server URL instead.")
    ] = None,
    profile: ProxyProfileOpt = None,
    fault_plan: FaultPlanOpt = None,
    fault_rate: FaultRateOpt = None,
    seed: SeedOpt = 0,
    record: Annotated[
        Path | None, typer.Option("--record", help="Write the session to this MCP cassette.")
    ] = None,
    db: ProxyDbOpt = None,
    timeout: ProxyTimeoutOpt = 60.0,
    max_message_bytes: Annotated[
        int, typer.Option("--max-message-bytes", help="Refuse a server message over this size.")
    ] = 16 * 1024 * 1024,
    vantage: VantageOpt = None,
    transport: TransportOpt = McpTransport.STDIO,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8767,
    upstream_sessions: UpstreamSessionsOpt = "per-client",
    max_sessions: MaxSessionsOpt = 100,
    session_idle_timeout: IdleOpt = 600.0,
    fault_methods: FaultMethodsOpt = None,
    allowed_host: AllowedHostOpt = None,
    auth_token_env: AuthTokenEnvOpt = None,
) -> None:
    """Put realprobe in front of any MCP server: relay every message both ways, inject
    calibrated faults per request (tools/call by default; --fault-methods), record the session,
    store each call as a probe row.

    realprobe mcp proxy --profile calm --fault-rate 0.1 --seed 7 --db p.db -- mcp-server-time
    """
    from realprobe.api_mcp import mcp_proxy

    allowed, token = _guards("mcp proxy", transport, host, allowed_host, auth_token_env)
    with as_flags("command", "upstream", "fault_rate", "timeout", "max_message_bytes",
                  "upstream_sessions", "max_sessions", "session_idle_timeout", "record",
                  "fault_methods"):
        summary = mcp_proxy(
            command or None, upstream=upstream, profile=profile, fault_plan=fault_plan,
            fault_rate=fault_rate, seed=seed, record=record, db=db, timeout=timeout,
            max_message_bytes=max_message_bytes, vantage=vantage, transport=transport.value,
            host=host, port=port, upstream_sessions=upstream_sessions,
            max_sessions=max_sessions, session_idle_timeout=session_idle_timeout,
            fault_methods=fault_methods, allowed_hosts=allowed, auth_token=token,
            on_ready=_ready("a proxy of " + _shown(command, upstream)),
        )
    _ended(summary)


def replay_cmd(
    cassette: Annotated[Path, typer.Argument(
        help="A cassette of an MCP session (mcp proxy --record, or another recorder's "
             "transcript): whatever `cassette` reads.")],
    on_exhausted: Annotated[
        str, typer.Option("--on-exhausted",
                          help="More identical requests than recordings: error, repeat-last "
                               "or cycle.")
    ] = "error",
    replay_latency: Annotated[
        str, typer.Option("--replay-latency", "--latency",
                          help="none (answer at once), real, or scaled:X of the recorded time.")
    ] = "none",
    profile: ProxyProfileOpt = None,
    fault_plan: FaultPlanOpt = None,
    fault_rate: FaultRateOpt = None,
    seed: SeedOpt = 0,
    db: ProxyDbOpt = None,
    timeout: ProxyTimeoutOpt = 60.0,
    vantage: VantageOpt = None,
    transport: TransportOpt = McpTransport.STDIO,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8767,
    max_sessions: MaxSessionsOpt = 100,
    session_idle_timeout: IdleOpt = 600.0,
    fault_methods: FaultMethodsOpt = None,
    allowed_host: AllowedHostOpt = None,
    auth_token_env: AuthTokenEnvOpt = None,
) -> None:
    """Serve a recorded MCP session over stdio (or HTTP) with the server gone: recorded answers in
    order, matched like HTTP cassettes (faults and rows as for `mcp proxy`)."""
    from realprobe.api_mcp import mcp_replay

    allowed, token = _guards("mcp replay", transport, host, allowed_host, auth_token_env)
    with as_flags("on_exhausted", "replay_latency", "fault_rate", "timeout", "fault_methods"):
        summary = mcp_replay(
            cassette, on_exhausted=on_exhausted, replay_latency=replay_latency,
            profile=profile, fault_plan=fault_plan, fault_rate=fault_rate, seed=seed, db=db,
            timeout=timeout, vantage=vantage, transport=transport.value, host=host, port=port,
            max_sessions=max_sessions, session_idle_timeout=session_idle_timeout,
            fault_methods=fault_methods, allowed_hosts=allowed, auth_token=token,
            on_ready=_ready(f"a replay of {cassette}"),
        )
    _ended(summary)


def export_cmd(
    session: Annotated[Path, typer.Argument(help="An MCP session cassette (mcp proxy --record).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The file to write.")],
    format: Annotated[
        str, typer.Option("--format", help="mcp-cassette or mcp-recorder (their JSON files).")
    ] = "mcp-cassette",
) -> None:
    """Write an MCP session cassette in another recorder's format (the old spelling of
    `realprobe cassette export SESSION -o OUTPUT --format FORMAT`)."""
    from realprobe.api_mcp import mcp_export

    deprecated("`mcp export`", "`cassette export SESSION -o OUTPUT --format FORMAT`")
    with as_flags("format", "output"):
        kept = mcp_export(session, output, format=format)
    console.print(f"{kept} messages -> {output} ({format})")


def import_cmd(
    source: Annotated[Path, typer.Argument(help="A JSON-lines transcript (mcp-tape v1 and "
                                                "the like: direction + JSON-RPC message).")],
    output: Annotated[Path, typer.Argument(help="The MCP session cassette to write.")],
) -> None:
    """Convert another recorder's JSON-lines MCP transcript into an MCP session cassette
    (the old spelling of `realprobe cassette import SOURCE -o OUTPUT`)."""
    from realprobe.api_mcp import mcp_import

    deprecated("`mcp import`", "`cassette import SOURCE -o OUTPUT`")
    kept = mcp_import(source, output)
    console.print(f"{kept} messages -> {output}")
