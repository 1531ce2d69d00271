"""The sandbox: a real HTTP/1.1 server on loopback serving every catalogue API from its
fixture bodies, with faults drawn from a Profile and acted out on the socket.

URLs: `/<api-id>/<original path>`; `/_moved/...` after the api id serves the same tool (the
target of the `redirect_ok` variant); a `/_fault/<variant>/` prefix forces one variant for
every request under it (tests, demos; an unknown variant gets a 400 naming the known ones).
`GET /_health` answers `{"ok": true}`; `GET /_routes` lists what is served; `/_admin` and
`/_journal` are the runtime API (admin.py).

What is answered is decided in responder.py (bodies from recordings, fixtures chosen by
argument, or a proxied upstream: bodies.py, proxy.py); how it is written, with toxics on
top, in wire.py.

HTTP parsing is h11's; the socket is ours, so hangs, drips and resets are real. Malformed
requests get a 400 and the connection is closed; a request that trickles in slower than the
header timeout gets a 408; an idle kept-alive connection is closed after the idle timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator, Mapping

import h11

from realprobe.sandbox import wire
from realprobe.sandbox.bodies import BodySource, Recordings
from realprobe.sandbox.journal import Journal
from realprobe.sandbox.proxy import Upstream
from realprobe.sandbox.responder import FAULT_PREFIX, Responder
from realprobe.sandbox.responder import Stats as SandboxStats
from realprobe.sandbox.runtime import Runtime
from realprobe.simulator.faults import FaultModel
from realprobe.simulator.plans import FaultPlan
from realprobe.simulator.profile import Profile
from realprobe.simulator.routes import RouteTable

HANG_LIMIT_S = wire.HANG_LIMIT_S
DRIP_INTERVAL_S = wire.DRIP_INTERVAL_S
MAX_REQUEST_BODY = 1024 * 1024
#: a request's line, headers and body must all arrive within this many seconds of its first
#: byte (slowloris clients that trickle headers are answered 408 and dropped)
HEADER_TIMEOUT_S = 10.0
#: a kept-alive connection with no new request for this long is closed
IDLE_TIMEOUT_S = 30.0
__all__ = ["FAULT_PREFIX", "Sandbox", "SandboxStats", "SandboxThread", "running"]


class Sandbox:
    def __init__(
        self,
        routes: RouteTable,
        profile: Profile,
        *,
        seed: int | str = 0,
        latency_scale: float = 1.0,
        host: str = "127.0.0.1",
        port: int = 0,
        origins: Mapping[str, str] | None = None,
        recordings: Recordings | None = None,
        upstream: Upstream | None = None,
        admin: bool = True,
        header_timeout_s: float = HEADER_TIMEOUT_S,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        plan: FaultPlan | None = None,
    ) -> None:
        """`origins` ({api id: origin of its real base URL}) lets recorded requests be
        matched; `recordings` serves their responses first; `upstream` makes this a proxy."""
        self.header_timeout_s = header_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.routes = routes
        self.latency_scale = latency_scale
        self.host = host
        self.port = port
        self.stats = SandboxStats()
        self.runtime = Runtime(profile, seed, plan)
        self.journal = Journal()
        self.upstream = upstream
        self.responder = Responder(
            routes,
            self.runtime,
            self.journal,
            BodySource(origins or {}, recordings),
            upstream=upstream,
            admin=admin,
            stats=self.stats,
        )
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    @property
    def profile(self) -> Profile | None:
        return self.runtime.profile

    @property
    def model(self) -> FaultModel:
        return self.runtime.model

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        async with self._server:
            await self._server.serve_forever()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._conns):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None
        if self.upstream is not None:
            await self.upstream.aclose()

    # -- connection handling -------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                try:
                    read = await self._read_request(conn, reader)
                except h11.RemoteProtocolError as exc:  # garbage, oversized headers, ...
                    await _refuse(writer, exc.error_status_hint, f"bad request: {exc}")
                    return
                except TimeoutError:
                    if conn.their_state is h11.SEND_BODY or _started(conn):
                        await _refuse(writer, 408, "request not received in time")
                    return
                if read is None:
                    return
                request, body = read
                if not request.target.startswith(b"/"):  # `OPTIONS *`, `GET foo`, absolute-form
                    await _refuse(writer, 400, "request target must be a path starting with /")
                    return
                keep = await self._handle(conn, request, body, reader, writer)
                if not keep or conn.our_state is not h11.DONE:
                    return
                try:
                    conn.start_next_cycle()
                except h11.ProtocolError:
                    return
        except (ConnectionError, asyncio.CancelledError, h11.ProtocolError, TimeoutError):
            pass
        except Exception as exc:  # never a traceback and a dead connection: a 500, then close
            with contextlib.suppress(Exception):
                await _refuse(writer, 500, f"sandbox error: {type(exc).__name__}")
        finally:
            self._conns.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader
    ) -> tuple[h11.Request, bytes] | None:
        """The next request and its body, or None when the client closed. TimeoutError when
        no request began within the idle timeout, or one began and did not complete within the
        header timeout (both measured on the loop's clock, not reset by trickled bytes)."""
        request: h11.Request | None = None
        body = bytearray()
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                if deadline is None and (_started(conn) or request is not None):
                    deadline = loop.time() + self.header_timeout_s
                limit = self.idle_timeout_s if deadline is None else deadline - loop.time()
                if limit <= 0:
                    raise TimeoutError
                async with asyncio.timeout(limit):
                    data = await reader.read(65536)
                if deadline is None and data:
                    deadline = loop.time() + self.header_timeout_s
                conn.receive_data(data)
                if not data and conn.their_state is not h11.DONE and request is None:
                    return None
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                if len(body) + len(event.data) > MAX_REQUEST_BODY:
                    return None  # no API here takes bodies that large: drop the connection
                body.extend(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return None if request is None else (request, bytes(body))
            elif isinstance(event, h11.ConnectionClosed):
                return None

    async def _handle(
        self,
        conn: h11.Connection,
        request: h11.Request,
        body: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.headers}
        answer = await self.responder.answer(
            request.method.decode(), request.target.decode("latin-1"), body, headers
        )
        if answer.entry is None:  # control paths: no toxics, no journal
            return await wire.send(
                conn, answer.plan, answer.active, reader, writer,
                self.journal.detached(), self.runtime.rng, 0.0,
            )
        return await wire.send(
            conn, answer.plan, answer.active, reader, writer, answer.entry,
            self.runtime.rng, self.latency_scale,
        )


def _started(conn: h11.Connection) -> bool:
    """Bytes of a request are buffered but it is not complete yet."""
    return bool(conn.trailing_data[0])


async def _refuse(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    """A plain-text error written by hand (h11's state may be ERROR), then close."""
    from http import HTTPStatus

    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Error"
    body = (text.replace("\r", " ").replace("\n", " ")[:200] + "\n").encode("utf-8", "replace")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\nServer: realprobe-sandbox\r\n\r\n"
    )
    writer.write(head.encode("latin-1") + body)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer.drain(), 2)
    writer.close()


class SandboxThread:
    """Run a Sandbox on its own event loop in a background thread (tests, demo, benchmarks)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="realprobe-sandbox", daemon=True)
        self._ready = threading.Event()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self.sandbox.start())
        self._ready.set()
        self._loop.run_forever()

    def start(self) -> str:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("sandbox did not start within 10 s")
        return self.sandbox.url

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self.sandbox.stop(), self._loop)
        with contextlib.suppress(Exception):
            fut.result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running(sandbox: Sandbox) -> Iterator[str]:
    thread = SandboxThread(sandbox)
    try:
        yield thread.start()
    finally:
        thread.stop()
