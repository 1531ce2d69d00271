"""The front door for any MCP server as a target: proxy it with faults, replay a recorded
session, import other recorders' transcripts, probe its tools into the probe database.

Every keyword is the flag of the command with dashes for underscores (`--fault-rate` is
`fault_rate=`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from realprobe.errors import RealprobeError
from realprobe.ranges import checked

if TYPE_CHECKING:
    from realprobe.mcp.proxy import ProxySummary
    from realprobe.probes.runner import RunSummary
    from realprobe.store import Database


def _options(profile: Any, fault_plan: Any, fault_rate: float | None, seed: int,
             record: str | Path | None, db: str | Path | Database | None, timeout: float,
             max_message_bytes: int, vantage: str | None, replayed: str | None = None,
             record_folder: bool = False, methods: str | Sequence[str] | None = None) -> Any:
    from realprobe.clients import check_fault_rate, check_seed
    from realprobe.mcp.proxy import ProxyOptions, fault_methods
    from realprobe.store import open_db

    check_fault_rate(fault_rate)
    if max_message_bytes < 1024:
        raise RealprobeError("max_message_bytes: at least 1024", param="max_message_bytes")
    check_seed(seed)
    opts = ProxyOptions(profile=profile, fault_plan=fault_plan, fault_rate=fault_rate,
                        seed=seed, record=Path(record) if record else None,
                        db=open_db(db) if db else None, timeout_s=timeout,
                        max_message_bytes=max_message_bytes, vantage=vantage, replayed=replayed,
                        fault_methods=fault_methods(methods))
    opts.fault_model()  # a bad profile or plan is refused before anything starts
    if opts.db is not None:  # so is a database or a cassette that cannot be written
        opts.db.write().close()
    if opts.record is not None:
        from realprobe.outputs import OutputError, check_output

        # over HTTP `record` is a folder: one cassette per client session, by session id
        target = opts.record / "session.jsonl" if record_folder else opts.record
        if record_folder and (opts.record.is_file() or opts.record.is_symlink()):
            raise RealprobeError(f"record {opts.record}: over HTTP it names a folder (one "
                                 "cassette per session); this is a file", param="record")
        try:
            check_output(target, replace=True, make_parents=True)
        except OutputError as exc:
            raise RealprobeError(str(exc), param="record") from exc
    return opts


@checked
def mcp_proxy(
    command: str | Sequence[str] | None = None,
    *,
    upstream: str | None = None,
    profile: Any = None,
    fault_plan: Any = None,
    fault_rate: float | None = None,
    seed: int = 0,
    record: str | Path | None = None,
    db: str | Path | Database | None = None,
    timeout: float = 60.0,
    max_message_bytes: int = 16 * 1024 * 1024,
    vantage: str | None = None,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8767,
    upstream_sessions: str = "per-client",
    max_sessions: int = 100,
    session_idle_timeout: float = 600.0,
    fault_methods: str | Sequence[str] | None = None,
    allowed_hosts: Sequence[str] = (),
    auth_token: str | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> ProxySummary:
    """Serve MCP on stdin/stdout (`transport="http"`: streamable-HTTP sessions side by side
    on `host:port/mcp`, each with its own upstream session, or one `shared` by all, at most
    `max_sessions` per client address, each closed after `session_idle_timeout` s idle) in
    front of the server `command` starts (or the streamable-HTTP server at `upstream`),
    relaying every message; faults from `profile` / `fault_plan` / `fault_rate` (seeded by
    `seed`) are injected per request of `fault_methods` (default tools/call, and the methods
    the profile names), a named profile's latency is acted out; `record` writes the session
    cassette (over HTTP: a folder of them, `<session id>.jsonl`), `db` a probe row per call;
    `on_ready(where)` once it serves. Over HTTP the server guard holds as for `serve_mcp`
    (Host/Origin checks widened by `allowed_hosts`; `auth_token`: every request needs it as
    a bearer token)."""
    from realprobe.mcp.proxy import serve
    from realprobe.mcp.wire import split_command

    if (command is None or not command) == (upstream is None):
        raise RealprobeError("give the MCP server to start (after `--`) or an upstream URL, "
                             "exactly one", param="upstream")
    argv = split_command(command) if command else None
    if upstream is not None and not upstream.startswith(("http://", "https://")):
        raise RealprobeError(f"upstream {upstream!r}: expected an http(s) URL", param="upstream")
    http = _http(transport, host, port)
    limits = _limits(upstream_sessions, max_sessions, session_idle_timeout, allowed_hosts,
                     auth_token)
    opts = _options(profile, fault_plan, fault_rate, seed, record, db, timeout,
                    max_message_bytes, vantage, record_folder=http is not None,
                    methods=fault_methods)
    if http is not None and argv is not None:
        import shutil

        if shutil.which(argv[0]) is None:
            raise RealprobeError(f"cannot start the MCP server {argv[0]!r}: no such program",
                                 param="command")
    return _run(lambda: serve(opts, command=argv, url=upstream, on_ready=on_ready, http=http,
                              upstream_sessions=upstream_sessions, limits=limits))


def _http(transport: str, host: str, port: int) -> tuple[str, int] | None:
    if transport not in ("stdio", "http"):
        raise RealprobeError(f"transport {transport!r}: stdio or http", param="transport")
    return (host, port) if transport == "http" else None


def _limits(upstream_sessions: str, max_sessions: int, idle_s: float,
            allowed_hosts: Sequence[str] = (), auth_token: str | None = None) -> Any:
    from realprobe.mcp.sessions import UPSTREAM_SESSIONS, SessionLimits

    if upstream_sessions not in UPSTREAM_SESSIONS:
        raise RealprobeError(f"upstream_sessions {upstream_sessions!r}: per-client or shared",
                             param="upstream_sessions")
    return SessionLimits(per_client=max_sessions, idle_s=idle_s,
                         allowed_hosts=tuple(allowed_hosts), auth_token=auth_token)


def _run(main: Callable[[], Any]) -> Any:
    """Run `main()`; SIGINT/SIGTERM cancel it (noted, so the command can tell Ctrl-C)."""
    from realprobe.probes.session import on_signals

    async def go() -> Any:
        task = asyncio.ensure_future(main())
        with on_signals(task.cancel):
            return await task

    try:
        return asyncio.run(go())
    except asyncio.CancelledError:
        raise RealprobeError("interrupted before the session started") from None


@checked
def mcp_replay(
    cassette: str | Path,
    *,
    on_exhausted: str = "error",
    replay_latency: str = "none",
    profile: Any = None,
    fault_plan: Any = None,
    fault_rate: float | None = None,
    seed: int = 0,
    db: str | Path | Database | None = None,
    timeout: float = 60.0,
    vantage: str | None = None,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8767,
    max_sessions: int = 100,
    session_idle_timeout: float = 600.0,
    fault_methods: str | Sequence[str] | None = None,
    allowed_hosts: Sequence[str] = (),
    auth_token: str | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> ProxySummary:
    """Serve a recorded MCP session on stdin/stdout (or over HTTP, each client session a
    replay of its own from the start) with the server gone: each request gets its recorded
    answer, in order (`on_exhausted`: error, repeat-last or cycle, as for HTTP cassettes;
    `replay_latency`: none, real or scaled:X); faults, rows and the HTTP guard as for the
    proxy."""
    from realprobe.cassettes.core import EXHAUSTION_POLICIES, LatencyPolicy
    from realprobe.mcp.proxy import serve
    from realprobe.mcp.session_cassette import CassetteUpstream

    if on_exhausted not in EXHAUSTION_POLICIES:
        raise RealprobeError(f"on_exhausted {on_exhausted!r}: choose one of "
                             f"{', '.join(EXHAUSTION_POLICIES)}", param="on_exhausted")
    LatencyPolicy.parse(replay_latency)
    path = Path(cassette)
    http = _http(transport, host, port)
    opts = _options(profile, fault_plan, fault_rate, seed, None, db, timeout, 16 * 1024 * 1024,
                    vantage, replayed=str(path), methods=fault_methods)

    limits = _limits("per-client", max_sessions, session_idle_timeout, allowed_hosts,
                     auth_token)

    def replayed() -> CassetteUpstream:
        return CassetteUpstream(path, on_exhausted=on_exhausted, latency=replay_latency,
                                server_only=opts.injects)

    async def main() -> Any:
        return await serve(opts, cassette=replayed, on_ready=on_ready, http=http,
                           limits=limits)

    return _run(main)


@checked
def mcp_export(session: str | Path, output: str | Path, *, format: str = "mcp-cassette") -> int:
    """`export_cassette(session, output, format=format)` under its old MCP name (mcp-cassette
    or mcp-recorder, their published schemas); returns the messages written."""
    from realprobe.api_cassettes import export_cassette

    return export_cassette(session, output, format=format).items


@checked
def mcp_import(source: str | Path, output: str | Path) -> int:
    """`import_cassette(source, output)` (which converts MCP transcripts as it converts every
    cassette format) under its old MCP name; returns the messages kept."""
    from realprobe.api_cassettes import import_cassette
    from realprobe.cassettes.importers import load_any

    import_cassette(source, output)
    return len(load_any(output).records or ())


@checked
def probe_mcp(
    mcp_calls: str | Path | dict[str, Any],
    *,
    mcp_server: str | Sequence[str] | None = None,
    mcp_url: str | None = None,
    rounds: int = 1,
    db: str | Path | Database | None = None,
    timeout: float = 10.0,
    vantage: str | None = None,
    mcp_interval: float | None = None,
    on_call: Callable[[dict[str, Any], Any], None] | None = None,
) -> RunSummary:
    """Probe the tools of an MCP server (`mcp_server`: a command, or `mcp_url`) with the
    arguments of `mcp_calls` (a JSON/TOML file or a dict: tool -> arguments or a list of
    them), `rounds` times, one call in flight and `mcp_interval` seconds apart (default 0
    on stdio, 1 s over HTTP); one probe row per call in `db`."""
    from realprobe.mcp.probing import load_calls, probe_server
    from realprobe.store import open_db

    calls = load_calls(mcp_calls) if not isinstance(mcp_calls, dict) else {
        k: v if isinstance(v, list) else [v] for k, v in mcp_calls.items()}
    interval = mcp_interval if mcp_interval is not None else (1.0 if mcp_url else 0.0)
    if interval < 0:
        raise RealprobeError("mcp_interval: seconds >= 0", param="mcp_interval")
    return asyncio.run(probe_server(
        calls, command=mcp_server, url=mcp_url, rounds=rounds,
        db=open_db(db), timeout_s=timeout, vantage=vantage,
        interval_s=interval, on_call=on_call))


@checked
def schedule_mcp(
    mcp_calls: str | Path | dict[str, Any],
    *,
    mcp_server: str | Sequence[str] | None = None,
    mcp_url: str | None = None,
    every: str | float | None = None,
    cron: str | None = None,
    max_runs: int | None = None,
    jitter: float = 0.0,
    rounds: int = 1,
    db: str | Path | Database | None = None,
    timeout: float = 10.0,
    vantage: str | None = None,
    mcp_interval: float | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    on_call: Callable[[dict[str, Any], Any], None] | None = None,
) -> Any:
    """`probe_mcp` rounds on a schedule (`every` or `cron`, as `schedule`): rounds never
    overlap, a failing round is logged and the schedule goes on; SIGINT/SIGTERM stop it."""
    from realprobe.mcp.probing import load_calls, probe_server
    from realprobe.probes.scheduler import ProbeSchedule, make_trigger
    from realprobe.probes.session import on_signals
    from realprobe.store import open_db

    calls = load_calls(mcp_calls) if not isinstance(mcp_calls, dict) else {
        k: v if isinstance(v, list) else [v] for k, v in mcp_calls.items()}
    every_text = f"{every}s" if isinstance(every, int | float) else every
    trigger, interval_s = make_trigger(every_text, cron, jitter_s=jitter)
    path = open_db(db)
    gap = mcp_interval if mcp_interval is not None else (1.0 if mcp_url else 0.0)

    async def go() -> Any:
        with path.write() as store:
            async def one_round(number: int, stop: asyncio.Event) -> Any:
                return await probe_server(
                    calls, command=mcp_server, url=mcp_url, rounds=rounds, db=path,
                    timeout_s=timeout, vantage=vantage, interval_s=gap, on_call=on_call,
                    schedule_id=sched.schedule_id)

            sched = ProbeSchedule(trigger, one_round, store, interval_s=interval_s,
                                  max_runs=max_runs, on_event=on_event)
            with on_signals(lambda: sched.stop("signal")):
                return await sched.run()

    return asyncio.run(go())


@checked
def evaluate(
    agent: Any,
    tasks: Any = None,
    *,
    mcp_server: str | Sequence[str] | None = None,
    mcp_url: str | None = None,
    profile: Any = None,
    fault_plan: Any = None,
    fault_rate: float | None = None,
    repeat: int = 1,
    db: str | Path | Database | None = None,
    seed: int | None = None,
    name: str = "custom",
    model: str = "-",
    timeout: float = 10.0,
    **options: Any,
) -> Any:
    """Run `agent` (an async callable `agent(prompt, toolbox) -> answer`) on `tasks`, score
    every run and store it in `db`.

    With `mcp_server` (a command) or `mcp_url`, the toolbox is that MCP server behind
    `realprobe mcp proxy` (faults from `profile` / `fault_plan` / `fault_rate`, each run
    seeded from its task, `seed` and repeat), `tasks` are MCP tasks (a JSON/TOML file, or
    dicts/`McpTask`s with a prompt and a `check` callable or an `expect` on the answer and
    the calls; `agent` may be "workflow" to follow each task's workflow) and a list of
    `McpRun` comes back. Without,
    it is the catalogue task evaluation (`settings`, `target`, and the settings as keywords:
    `prompt`, `seed`, `profile`, `fault_rate`, ... as in `realprobe.tasks.evaluate.evaluate`),
    returning a TaskBatchResult."""
    if mcp_server is None and mcp_url is None:
        from realprobe.tasks.evaluate import evaluate as evaluate_catalogue

        given = {"profile": profile, "fault_plan": fault_plan, "fault_rate": fault_rate,
                 "seed": seed}
        fields = {k: v for k, v in given.items() if v is not None}
        return evaluate_catalogue(agent, tasks, repeat=repeat, db=db, name=name, model=model,
                                  **fields, **options)
    from realprobe.mcp.evaluation import evaluate_mcp
    from realprobe.store import open_db

    if options:
        raise RealprobeError(f"not for an MCP server: {', '.join(sorted(options))}",
                             param=sorted(options)[0])
    if tasks is None:
        raise RealprobeError("tasks: give the MCP tasks (a file or a list)", param="tasks")
    return asyncio.run(evaluate_mcp(
        agent, tasks, mcp_server=mcp_server, mcp_url=mcp_url, profile=profile,
        fault_plan=fault_plan, fault_rate=fault_rate, seed=seed or 0, repeat=repeat,
        db=open_db(db) if db else None, name=name, model=model, timeout_s=timeout))
