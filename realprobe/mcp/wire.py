"""JSON-RPC lines in and out: the proxy's two sides, whatever carries them.

A `Wire` hands over one JSON-RPC message per line of text (None at the end) and takes lines
to send. Stdio lines are relayed as they came (the proxy parses them to look, and re-encodes
only what it changes); a streamable-HTTP upstream goes through the SDK's own client
transport. A line longer than the limit arrives as `TOO_LONG`, never as its pieces.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

from realprobe.errors import RealprobeError
from realprobe.mcp.guards import TOO_LONG, Unreadable, read_message
from realprobe.mcp.serve import LineSplitter, _stdin_lines

__all__ = ["TOO_LONG", "ProcessWire", "StdioFront", "Unreadable", "Wire", "http_upstream", "parse",
           "split_command"]

#: the longest message read from a server or a client (a bigger one is refused whole)
MAX_LINE = 64 * 1024 * 1024


class Wire(Protocol):
    async def recv(self) -> str | None: ...
    async def send(self, line: str) -> None: ...


#: the SDK's loggers that write a traceback per unreadable server line or JSON body; realprobe
#: counts those and says so in one line (a row's error, the proxy's garbage count)
SDK_LOGGERS = ("mcp.client.stdio", "mcp.client.streamable_http")


def quiet_sdk() -> None:
    for name in SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def first_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The realprobe error a task group wrapped (the SDK's client runs one), else the group:
    a refusal raised inside a session is one line, not a tree of tracebacks."""
    found: BaseException | None = group.split(RealprobeError)[0]
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    return found if found is not None else group


def split_command(command: str | Sequence[str]) -> list[str]:
    """`"mcp-server-git --repository ."` or an argv list -> argv (never through a shell)."""
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise RealprobeError("no MCP server command: give one after `--`", param="command")
    return argv


class _Lines:
    """Lines out of a byte reader, through the one line splitter (oversize -> TOO_LONG)."""

    def __init__(self, reader: asyncio.StreamReader, limit: int) -> None:
        self.reader = reader
        self.split = LineSplitter(limit)
        self.ready: list[str] = []
        self.done = False

    async def next(self) -> str | None:
        while not self.ready:
            if self.done:
                return None
            data = await self.reader.read(1 << 20)
            self.ready.extend(self.split.feed(data) if data else self.split.end())
            self.done = not data
        return self.ready.pop(0).rstrip("\r\n")


class ProcessWire:
    """An MCP server started as a child process, spoken to over its stdin and stdout; its
    stderr is the proxy's."""

    def __init__(self, proc: asyncio.subprocess.Process, limit: int) -> None:
        self.proc = proc
        assert proc.stdout is not None and proc.stdin is not None
        self.lines = _Lines(proc.stdout, limit)
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

    def __init__(self, lines: Any) -> None:
        self.lines = lines
        self.out = sys.stdout.buffer

    @classmethod
    async def open(cls) -> StdioFront:
        return cls(await _stdin_lines())

    async def recv(self) -> str | None:
        try:
            return (await self.lines.__anext__()).rstrip("\r\n")
        except StopAsyncIteration:
            return None

    async def send(self, line: str) -> None:
        try:
            self.out.write(line.encode("utf-8") + b"\n")
            self.out.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the client went away; its EOF ends the session

    def close(self) -> None:
        self.lines.close()


class _SdkWire:
    """The SDK's client transport streams (SessionMessage objects) as lines."""

    def __init__(self, read: Any, write: Any) -> None:
        self.read, self.write = read, write

    async def recv(self) -> str | None:
        import anyio

        try:
            item = await self.read.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return None
        if isinstance(item, Exception):
            return f"\x00{item}"  # not JSON: the proxy counts it as garbage
        return str(item.message.model_dump_json(by_alias=True, exclude_unset=True))

    async def send(self, line: str) -> None:
        from mcp.shared.message import SessionMessage
        from mcp.types import jsonrpc_message_adapter

        try:
            msg = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            return  # the HTTP transport carries JSON-RPC only
        await self.write.send(SessionMessage(msg))


@asynccontextmanager
async def http_upstream(url: str) -> AsyncIterator[_SdkWire]:
    """A streamable-HTTP MCP server, through the SDK's client transport."""
    from mcp.client.streamable_http import streamable_http_client

    if not url.startswith(("http://", "https://")):
        raise RealprobeError(f"upstream {url!r}: expected an http(s) URL", param="upstream")
    async with streamable_http_client(url) as (read, write):
        yield _SdkWire(read, write)


def parse(line: str, max_bytes: int = MAX_LINE) -> Any:
    """The message, or an `Unreadable` for a line that is not one JSON message under the
    input limits (not JSON, too long, nested too deep, too many entries)."""
    if line[:1] == "\x00" and line != TOO_LONG:
        return Unreadable(line[1:201] or "not JSON", None, False)  # the SDK's parse failure
    try:
        return read_message(line, max_bytes)
    except Unreadable as exc:
        return exc
