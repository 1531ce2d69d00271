"""JSON-RPC lines in and out: the proxy's two sides, whatever carries them.

A `Wire` hands over one JSON-RPC message per line of text (None at the end) and takes lines
to send. Stdio lines are relayed as they came (the proxy parses them to look, and re-encodes
only what it changes); a streamable-HTTP upstream goes through the SDK's own client
transport. A line longer than the limit arrives as `TOO_LONG`, never as its pieces.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import httpx2
import mcp_types as types

from realprobe.errors import RealprobeError
from realprobe.mcp.guards import PARSE_ERROR, TOO_LONG, Unreadable, read_message
from realprobe.mcp.serve import STDIN_LINE_LIMIT, Lines

#: the longest message read from a server or a client (a bigger one is refused whole)
MAX_LINE = 64 * 1024 * 1024


class Wire(Protocol):
    async def recv(self) -> str | None: ...
    async def send(self, line: str) -> None: ...


#: the SDK's loggers that write a traceback per unreadable server line or JSON body; realprobe
#: counts those and says so in one line (a row's error, the proxy's garbage count)
SDK_LOGGERS = ("mcp.client.stdio", "mcp.client.streamable_http")


def first_error(group: BaseExceptionGroup[Any], server: str) -> BaseException:
    """The one error a task group wrapped (the SDK's client runs one): a refusal raised
    inside a session, or the server that could not be reached or started (`server` names
    it), is one line, not a tree of tracebacks."""
    from realprobe.errors import Unavailable

    found: BaseException | None = group.split(RealprobeError)[0]
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    if found is not None:
        return found
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    if isinstance(leaf, _connection_errors()):
        return Unavailable(f"cannot talk to the MCP server {server} "
                           f"({type(leaf).__name__}: {str(leaf)[:200]})")
    return group


def _connection_errors() -> tuple[type[BaseException], ...]:
    """How a connection to a server ends before or during the handshake: the network, the
    SDK's closed streams (anyio's), the SDK's own `Connection closed`."""
    import anyio
    from mcp import MCPError

    return (OSError, httpx2.HTTPError, anyio.EndOfStream, anyio.ClosedResourceError,
            anyio.BrokenResourceError, MCPError)


def split_command(command: str | Sequence[str]) -> list[str]:
    """`"mcp-server-git --repository ."` or an argv list -> argv (never through a shell)."""
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise RealprobeError("no MCP server command: give one after `--`", param="command")
    return argv


class ProcessWire:
    """An MCP server started as a child process, spoken to over its stdin and stdout; its
    stderr is the proxy's."""

    def __init__(self, proc: asyncio.subprocess.Process, limit: int) -> None:
        self.proc = proc
        assert proc.stdout is not None and proc.stdin is not None
        self.lines = Lines(proc.stdout, limit=limit)
        self.stdin = proc.stdin

    @classmethod
    async def start(
        cls, argv: Sequence[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
        limit: int = MAX_LINE,
    ) -> ProcessWire:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=sys.stderr, env={**os.environ, **(env or {})}, cwd=cwd,
            )
        except OSError as exc:
            raise RealprobeError(f"cannot start the MCP server {argv[0]!r}: {exc}") from exc
        return cls(proc, limit)

    async def recv(self) -> str | None:
        return await self.lines.next()

    async def send(self, line: str) -> None:
        if self.stdin.is_closing():
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            self.stdin.write(line.encode("utf-8") + b"\n")
            await self.stdin.drain()

    async def exit_code(self, wait_s: float = 2.0) -> int | None:
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(self.proc.wait(), wait_s)
        return None

    async def close(self) -> None:
        """Close its stdin (the MCP way to stop a stdio server), then terminate, then kill."""
        if self.proc.returncode is not None:
            return
        with contextlib.suppress(Exception):
            self.stdin.close()
        if await self.exit_code(2.0) is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            if await self.exit_code(2.0) is None:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()


class StdioFront:
    """The client side over the proxy's own stdin and stdout (stdout carries JSON-RPC only)."""

    def __init__(self, lines: Lines) -> None:
        self.lines = lines
        self.out = sys.stdout.buffer

    async def recv(self) -> str | None:
        return await self.lines.next()

    async def send(self, line: str) -> None:
        try:
            self.out.write(line.encode("utf-8") + b"\n")
            self.out.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the client went away; its EOF ends the session

    def close(self) -> None:
        self.lines.close()


class SdkWire:
    """The SDK's client transport streams (SessionMessage objects) as lines."""

    def __init__(self, read: Any, write: Any) -> None:
        self.read, self.write = read, write

    async def recv(self) -> str | None:
        import anyio

        try:
            item = await self.read.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return None
        if isinstance(item, Exception):
            return f"\x00{item}"  # not JSON: the proxy counts it as garbage
        return str(item.message.model_dump_json(by_alias=True, exclude_unset=True))

    async def send(self, line: str, metadata: Any = None) -> None:
        from mcp.shared.message import SessionMessage
        from mcp.types import jsonrpc_message_adapter

        try:
            msg = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            return  # the HTTP transport carries JSON-RPC only
        await self.write.send(SessionMessage(msg, metadata=metadata))


@asynccontextmanager
async def http_upstream(url: str, limit: int = STDIN_LINE_LIMIT) -> AsyncIterator[SdkWire]:
    """A streamable-HTTP MCP server, through the SDK's client transport, every answer read
    within `limit` bytes."""
    if not url.startswith(("http://", "https://")):
        raise RealprobeError(f"upstream {url!r}: expected an http(s) URL", param="upstream")
    async with http_client_transport(url, limit) as (read, write):
        yield SdkWire(read, write)


class AnswerTooLarge(httpx2.StreamError):
    """A server's answer over the message limit (the SDK answers its request with a parse
    error, -32700, which a row records as INVALID_RESPONSE)."""


class _BoundedBody(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, limit: int) -> None:
        self.inner, self.limit = inner, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.limit:
                raise AnswerTooLarge(f"the answer is over the {self.limit}-byte message limit")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _BoundedTransport(httpx2.AsyncBaseTransport):
    """httpx2's transport with each answer body read at most `limit` bytes (an SSE stream is
    bounded per event by the SDK's own `max_sse_event_size`)."""

    def __init__(self, limit: int) -> None:
        self.inner, self.limit = httpx2.AsyncHTTPTransport(), limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if "text/event-stream" not in response.headers.get("content-type", ""):
            response.stream = _BoundedBody(response.stream, self.limit)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def http_client_transport(url: str, limit: int = STDIN_LINE_LIMIT) -> AsyncIterator[Any]:
    """The SDK's streamable-HTTP client transport (with its own timeouts: 30 s, 300 s to
    read a stream) whose answers cost at most `limit` bytes of memory: a JSON body whole, an
    SSE event each; an answer over it fails its request, never the session."""
    from mcp.client.streamable_http import streamable_http_client

    client = httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=300.0),
                                transport=_BoundedTransport(limit))
    async with client, streamable_http_client(url, http_client=client,
                                              max_sse_event_size=limit) as streams:
        yield streams


@asynccontextmanager
async def stdio_client_transport(argv: Sequence[str], limit: int = STDIN_LINE_LIMIT,
                                 ) -> AsyncIterator[Any]:
    """A server command on stdio as the SDK's client transport, its lines read through the
    one line splitter: a line over `limit` (or over the input limits) answers the request
    it names, else the oldest waiting, with a parse error (-32700), and is never held whole;
    other unreadable lines are skipped."""
    import anyio
    from mcp.shared.message import SessionMessage
    from mcp.types import jsonrpc_message_adapter
    from pydantic import ValidationError

    wire = await ProcessWire.start(argv, limit=limit)
    inbox_w, inbox_r = anyio.create_memory_object_stream[Any](0)
    outbox_w, outbox_r = anyio.create_memory_object_stream[Any](0)
    waiting: list[Any] = []  # ids of the requests sent and not answered yet

    def refused(why: Unreadable) -> Any:
        rid = why.rid if why.rid in waiting else waiting[0]
        waiting.remove(rid)
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=rid, error=types.ErrorData(
            code=PARSE_ERROR, message=f"the answer is over the message limits ({why})")))

    async def read() -> None:
        async with inbox_w:
            while (line := await wire.recv()) is not None:
                try:
                    msg = jsonrpc_message_adapter.validate_python(read_message(line, limit),
                                                                  by_name=False)
                except Unreadable as why:
                    if why.over_limit and waiting:
                        await inbox_w.send(refused(why))
                    continue
                except ValidationError:
                    continue
                if isinstance(msg, types.JSONRPCResponse | types.JSONRPCError):
                    with contextlib.suppress(ValueError):
                        waiting.remove(msg.id)
                await inbox_w.send(SessionMessage(msg))

    async def write() -> None:
        async with outbox_r:
            async for item in outbox_r:
                if isinstance(item.message, types.JSONRPCRequest):
                    waiting.append(item.message.id)
                await wire.send(item.message.model_dump_json(by_alias=True, exclude_unset=True))

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            tasks.start_soon(write)
            try:
                yield inbox_r, outbox_w
            finally:
                tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await wire.close()


def parse(line: str, max_bytes: int = MAX_LINE) -> Any:
    """The message, or an `Unreadable` for a line that is not one JSON message under the
    input limits (not JSON, too long, nested too deep, too many entries)."""
    if line[:1] == "\x00" and line != TOO_LONG:
        return Unreadable(line[1:201] or "not JSON", None, False)  # the SDK's parse failure
    try:
        return read_message(line, max_bytes)
    except Unreadable as exc:
        return exc
