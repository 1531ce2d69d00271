"""A loopback server that misbehaves on purpose, one path per hostile case, and a catalogue
whose tools call each path. Runs in its own thread so sync and async clients can use it."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

DEEP = b"[" * 200_000
HUGE_INT = b'{"fact": "x", "n": 1' + b"0" * 100_000 + b"}"
HUGE_FLOAT = b'{"fact": "x", "n": 1e999}'
NAN = b'{"fact": "x", "n": NaN}'
HUGE_STRING = b'{"fact": "' + b"a" * 400_000 + b'"}'
JSON_AS_TEXT = b"[" * 400_000
GARBAGE = b"\x00\xff\xfe garbage \r\n\r\n\x07 not http at all\r\n"

#: path -> (what is sent, how). "slow" cases drip forever; a client must give up on its own.
JSON_CASES = {
    "deep": DEEP,
    "huge_int": HUGE_INT,
    "huge_float": HUGE_FLOAT,
    "nan": NAN,
    "huge_string": HUGE_STRING,
    "deep_object": b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
}
TEXT_CASES = {"json_as_text": JSON_AS_TEXT, "json_object_as_text": b'{"fact": "hi"}'}
SLOW_CASES = ("slow_headers", "slow_body", "silent", "garbage")
#: every case, and the error code a call must end in
EXPECTED = {
    **dict.fromkeys(JSON_CASES, "INVALID_RESPONSE"),
    **dict.fromkeys(TEXT_CASES, "INVALID_RESPONSE"),
    "slow_headers": "TIMEOUT",
    "slow_body": "TIMEOUT",
    "silent": "TIMEOUT",
    "garbage": "NETWORK_ERROR",
}
DRIP_S = 0.2


def _response(body: bytes, content_type: str = "application/json") -> bytes:
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while await _answer(reader, writer):
            pass
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """Answer one request; True when the connection stays open for the next one."""
    line = await reader.readline()
    if not line:
        return False
    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
        pass
    parts = line.decode("latin-1").split()
    # the first segment names the case (`/deep/_admin/profile` is `deep` too)
    case = parts[1].strip("/").split("?")[0].split("/")[0] if len(parts) > 1 else ""
    if case in JSON_CASES:
        writer.write(_response(JSON_CASES[case]))
    elif case in TEXT_CASES:
        writer.write(_response(TEXT_CASES[case], "text/plain"))
    elif case == "garbage":
        writer.write(GARBAGE)
    elif case == "slow_headers":
        writer.write(b"HTTP/1.1 200 OK\r\n")
        while True:
            await writer.drain()
            writer.write(b"X-Drip: a\r\n")
            await asyncio.sleep(DRIP_S)
    elif case == "slow_body":
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        while True:
            await writer.drain()
            writer.write(b"[")
            await asyncio.sleep(DRIP_S)
    elif case == "silent":
        await reader.read()  # accept, then never answer (also stalls a TLS handshake)
    else:  # a fine answer on a kept-alive connection (the next request may drip)
        body = b'{"fact": "a fine fact"}'
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        return True
    await writer.drain()
    return False


class HostileServer:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            server = await asyncio.start_server(_handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            self._server = server
            self._ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()
        # cancel the drips still going, then close
        for task in asyncio.all_tasks(self.loop):
            task.cancel()
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()

    def __enter__(self) -> HostileServer:
        self._thread.start()
        self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self._server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def tool_name(case: str) -> str:
    return f"hostile_{case}"


def write_catalogue(path: Path, base_url: str) -> Path:
    """A user catalogue with one tool per hostile case, no politeness waits."""
    lines = [
        "[[apis]]",
        'id = "hostile"',
        'name = "Hostile"',
        f'base_url = "{base_url}"',
        'docs_url = "http://127.0.0.1/"',
        'category = "Test"',
        "https = false",
        "in_public_apis = false",
        "[apis.politeness]",
        "max_in_flight = 4",
        "min_interval_s = 0",
        "jitter_s = 0",
    ]
    for case in [*EXPECTED, "fine"]:
        text = case in TEXT_CASES
        lines += [
            "[[apis.tools]]",
            f'name = "{tool_name(case)}"',
            f'title = "Hostile {case}"',
            f'description = "Acts out {case}"',
            f'path = "/{case}"',
            f'response = "{"text" if text else "json"}"',
            "[apis.tools.output.fact]",
            *(['from = ""'] if text else []),
            'description = "a fact"',
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


@contextlib.contextmanager
def hostile(tmp_path: Path) -> Iterator[tuple[HostileServer, Path]]:
    with HostileServer() as server:
        yield server, write_catalogue(tmp_path / "hostile.toml", server.url)
