"""Running the service over stdio or streamable HTTP, with a clean shutdown either way.

Stdio: stdout carries JSON-RPC only; everything else goes to stderr. The server ends when
the client closes stdin, or on SIGINT/SIGTERM. HTTP: uvicorn on the given address (loopback
by default), with DNS-rebinding protection on whatever the address (see guards.py); it ends
on SIGINT/SIGTERM.
Either way the service is closed last, so record mode writes its cassette.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, cast

from mcp.server.stdio import stdio_server

from realprobe.mcp.guards import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_S,
    TOO_LONG,
    CheckedLines,
    auth_options,
    security_settings,
)
from realprobe.mcp.service import McpService

MCP_PATH = "/mcp"
#: longest JSON-RPC line read from stdin (the SDK caps HTTP bodies at 4 MiB)
STDIN_LINE_LIMIT = 16 * 1024 * 1024


class _StdinLines:
    """stdin lines read on the event loop, so a signal can cancel the read.

    The SDK's default reads stdin in a worker thread that nothing can interrupt, so SIGTERM
    would wait for the client's next line; this reader ends on EOF or on cancellation.
    """

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.BaseTransport) -> None:
        self.reader = reader
        self.transport = transport

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self.reader.readline()
        except ValueError:  # a line over the limit: answered with a parse error
            return TOO_LONG
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")


async def _stdin_lines() -> _StdinLines | None:
    """None when stdin cannot be watched by the loop (a regular file): the SDK reads it."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STDIN_LINE_LIMIT)
    pipe = os.fdopen(os.dup(sys.stdin.fileno()), "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
    except (OSError, ValueError):
        pipe.close()
        return None
    return _StdinLines(reader, transport)


async def serve_stdio(
    service: McpService, *, on_ready: Callable[[str], None] | None = None
) -> None:
    async with service:
        lines = await _stdin_lines()
        checked = CheckedLines(lines if lines is not None else _file_lines())
        try:
            if on_ready is not None:
                on_ready("stdio")
            async with stdio_server(stdin=cast(Any, checked)) as (read, write):
                checked.reply = write  # malformed lines are answered with JSON-RPC errors
                await service.server.run(
                    read, write, service.server.create_initialization_options()
                )
        finally:
            if lines is not None:
                lines.transport.close()


async def _file_lines() -> AsyncIterator[str]:
    """stdin lines when it is a regular file (the loop cannot watch it): read in a thread."""
    import anyio

    while True:
        line = await anyio.to_thread.run_sync(sys.stdin.buffer.readline, STDIN_LINE_LIMIT + 1)
        if not line:
            return
        if len(line) > STDIN_LINE_LIMIT:
            yield TOO_LONG
            continue
        yield line.decode("utf-8", "replace")


def bind(host: str, port: int) -> socket.socket:
    """Bind before serving, so a busy port is a clean error (uvicorn would sys.exit)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # accepted connections inherit it; without it each SSE answer waited ~40 ms
        # (Nagle against delayed ACK), measured in bench/mcp_overhead.py
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        sock.close()
        raise
    return sock


async def serve_http(
    service: McpService,
    host: str,
    port: int,
    *,
    on_ready: Callable[[str], None] | None = None,
    allowed_hosts: tuple[str, ...] = (),
    auth_token: str | None = None,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_idle_s: float = DEFAULT_SESSION_IDLE_S,
) -> None:
    """Host/Origin checks hold whatever `host` is (widened by `allowed_hosts`); with
    `auth_token` every request needs `Authorization: Bearer <token>`; at most `max_sessions`
    sessions are open, each closed after `session_idle_s` without a request."""
    import uvicorn

    class Server(uvicorn.Server):
        # uvicorn re-raises a captured SIGTERM after serving, which would end the process
        # before the service is closed and a recording written; we stop it ourselves.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    sock = bind(host, port)
    shown_host = f"[{host}]" if ":" in host else host
    base = f"http://{shown_host}:{sock.getsockname()[1]}"
    app = service.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        transport_security=security_settings(host, allowed_hosts),
        max_sessions=max_sessions,
        session_idle_timeout=session_idle_s,
        **auth_options(auth_token, base + MCP_PATH),
    )
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="on",
        timeout_graceful_shutdown=3,
    )
    server = Server(config)
    loop = asyncio.get_running_loop()

    def stop(sig: int) -> None:
        from realprobe.probes.session import note_signal

        note_signal(sig)
        server.should_exit = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop, sig)
    try:
        async with service:
            task = asyncio.ensure_future(server.serve(sockets=[sock]))
            while not server.started and not task.done():
                await asyncio.sleep(0.02)
            if server.started and on_ready is not None:
                bound_port = sock.getsockname()[1]
                shown = f"[{host}]" if ":" in host else host
                on_ready(f"http://{shown}:{bound_port}{MCP_PATH}")
            await task
    finally:
        sock.close()


def run_until_signal(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """asyncio.run(main()) where SIGINT/SIGTERM cancel the main task (cleanups still run)."""

    async def runner() -> None:
        task = asyncio.ensure_future(main())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not POSIX
                loop.add_signal_handler(sig, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise

    asyncio.run(runner())


def log_to_stderr(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
