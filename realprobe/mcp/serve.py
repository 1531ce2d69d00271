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
import socket
import stat
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from typing import Any, cast

from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings

from realprobe.errors import RealprobeError
from realprobe.mcp.guards import (
    CLIENTS_AT_CAP,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_S,
    TOO_LONG,
    CheckedLines,
    GuardedApp,
    SessionsPerClient,
    guarded_h11,
)
from realprobe.mcp.service import McpService
from realprobe.serving import HEADER_TIMEOUT_S, IDLE_TIMEOUT_S, MAX_BODY, Guard

MCP_PATH = "/mcp"
#: longest JSON-RPC line read from stdin (the SDK caps HTTP bodies at 4 MiB)
STDIN_LINE_LIMIT = 16 * 1024 * 1024


class LineSplitter:
    """Bytes in, JSON-RPC lines out. A line over `limit` bytes becomes one TOO_LONG (answered
    with one parse error) and the rest of it, up to its newline, is dropped: its tail never
    runs as a call of its own. At most `limit` bytes are buffered."""

    def __init__(self, limit: int = STDIN_LINE_LIMIT) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.dropping = False

    def feed(self, data: bytes) -> list[str]:
        self.buf += data
        out: list[str] = []
        while True:
            nl = self.buf.find(b"\n")
            if nl < 0:
                if len(self.buf) > self.limit:
                    if not self.dropping:
                        out.append(TOO_LONG)
                    self.dropping = True
                    self.buf.clear()
                return out
            line = bytes(self.buf[: nl + 1])
            del self.buf[: nl + 1]
            if self.dropping:  # the end of a line already answered as too long
                self.dropping = False
            elif len(line) > self.limit:
                out.append(TOO_LONG)
            else:
                out.append(line.decode("utf-8", "replace"))

    def end(self) -> list[str]:
        """What is left at EOF: a last line without a newline."""
        rest, self.buf = bytes(self.buf), bytearray()
        return [] if self.dropping or not rest else [rest.decode("utf-8", "replace")]


class Lines:
    """JSON-RPC lines (without their line ends) out of a byte source, through the one line
    splitter, None at the end: a stream `reader` (a child's stdout; stdin as a pipe, a
    socket or a terminal), read on the event loop so a signal can cancel the read, or else
    stdin in a worker thread (a regular file, /dev/null) when the loop cannot watch it. The
    SDK's default stdin reader runs in a thread that nothing can interrupt, so SIGTERM would
    wait for the client's next line; this one ends on EOF or cancellation."""

    def __init__(self, reader: asyncio.StreamReader | None,
                 transport: asyncio.BaseTransport | None = None,
                 limit: int = STDIN_LINE_LIMIT) -> None:
        self.reader = reader
        self.transport = transport
        self.split = LineSplitter(limit)
        self.ready: list[str] = []
        self.done = False

    async def next(self) -> str | None:
        while not self.ready:
            if self.done:
                return None
            data = await self._read()
            self.ready.extend(self.split.feed(data) if data else self.split.end())
            self.done = not data
        return self.ready.pop(0).rstrip("\r\n")

    async def _read(self) -> bytes:
        if self.reader is not None:
            return await self.reader.read(1 << 20)
        import anyio

        return await anyio.to_thread.run_sync(_read_stdin, abandon_on_cancel=True)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _read_stdin() -> bytes:
    try:
        return os.read(sys.stdin.fileno(), 1 << 20)
    except OSError:
        return b""


def _loop_can_watch(fd: int) -> bool:
    """epoll takes pipes, sockets and terminals; not regular files or /dev/null (EPERM)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


async def stdin_lines() -> Lines:
    if not _loop_can_watch(sys.stdin.fileno()):
        return Lines(None)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STDIN_LINE_LIMIT)
    pipe = os.fdopen(os.dup(sys.stdin.fileno()), "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
    except (OSError, ValueError):  # a regular file: read in a worker thread
        pipe.close()
        return Lines(None)
    return Lines(reader, transport)


async def serve_stdio(
    service: McpService, *, on_ready: Callable[[str], None] | None = None
) -> None:
    async with service:
        lines = await stdin_lines()
        checked = CheckedLines(lines)
        try:
            if on_ready is not None:
                on_ready("stdio")
            async with stdio_server(stdin=cast(Any, checked)) as (read, write):
                checked.reply = write  # malformed lines are answered with JSON-RPC errors
                await service.server.run(
                    read, write, service.server.create_initialization_options()
                )
        finally:
            lines.close()


def bind(host: str, port: int) -> socket.socket:
    """Bind before serving, so a busy port is a clean one-line error (uvicorn would
    sys.exit)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # accepted connections inherit it; without it each SSE answer waited ~40 ms
        # (Nagle against delayed ACK), measured in bench/mcp_overhead.py
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError as exc:
        sock.close()
        raise RealprobeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                             param="port") from exc
    return sock


@asynccontextmanager
async def listening(app: Any, host: str, sock: socket.socket,
                    on_ready: Callable[[str], None] | None,
                    **options: Any) -> AsyncIterator[asyncio.Future[None]]:
    """Every MCP server over HTTP: `app` on uvicorn on `sock`, bound to `host` (with the
    header timeout, and the keep-alive limit of the server base) until the block ends, which
    gets the serving task; `on_ready(url)` once it listens."""
    import uvicorn

    class Server(uvicorn.Server):
        # uvicorn re-raises a captured SIGTERM after serving, which would end the process
        # before the sessions are closed and recordings written; their owners stop it.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    options.setdefault("http", guarded_h11(HEADER_TIMEOUT_S))
    # forwarding headers (X-Forwarded-For, Forwarded) count only from the proxies named in
    # uvicorn's own FORWARDED_ALLOW_IPS, so the per-client session cap counts the real peer
    # (uvicorn's default trusts them from loopback: one client rotating them took them all)
    trusted = os.environ.get("FORWARDED_ALLOW_IPS", "").strip()
    server = Server(uvicorn.Config(
        app, proxy_headers=bool(trusted), forwarded_allow_ips=trusted or None,
        log_level="warning", timeout_keep_alive=int(IDLE_TIMEOUT_S), **options))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        while not server.started and not task.done():
            await asyncio.sleep(0.02)
        if server.started and on_ready is not None:
            shown = f"[{host}]" if ":" in host else host
            on_ready(f"http://{shown}:{sock.getsockname()[1]}{MCP_PATH}")
        yield task
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 5)
        sock.close()


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
    header_timeout_s: float = HEADER_TIMEOUT_S,
) -> None:
    """The server base's guard holds whatever `host` is (Host/Origin widened by
    `allowed_hosts`; with `auth_token` every request needs `Authorization: Bearer <token>`);
    a connection with no request under way after `header_timeout_s` is closed; each client
    address holds at most `max_sessions` open sessions (the server `CLIENTS_AT_CAP` times
    that in all), each closed after `session_idle_s` without a request. Serves until
    SIGINT/SIGTERM, then closes the service."""
    from realprobe.probes.session import on_signals

    guard = Guard(host, allowed_hosts, auth_token, json_paths=(MCP_PATH,),
                  max_body=4 * MAX_BODY)
    sock = bind(host, port)
    app = service.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        # the Host/Origin checks are the guard's (one home for every realprobe server)
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_sessions=max_sessions * CLIENTS_AT_CAP,
        session_idle_timeout=session_idle_s,
    )
    sessions = SessionsPerClient(max_sessions, idle_s=session_idle_s)
    stopped = asyncio.Event()
    with on_signals(stopped.set):
        async with service, listening(GuardedApp(app, guard, sessions), host, sock, on_ready,
                                      lifespan="on", timeout_graceful_shutdown=3,
                                      http=guarded_h11(header_timeout_s)) as served:
            stop: asyncio.Future[Any] = asyncio.ensure_future(stopped.wait())
            await asyncio.wait({served, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            if served.done():
                served.result()  # uvicorn's own failure, not a stop


def run_until_signal(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """asyncio.run(main()) where SIGINT/SIGTERM cancel the main task (cleanups still run)."""
    from realprobe.probes.session import on_signals

    async def runner() -> None:
        task = asyncio.ensure_future(main())

        def stop() -> None:
            task.cancel()

        with on_signals(stop):
            try:
                await task
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise

    asyncio.run(runner())


def log_to_stderr(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
