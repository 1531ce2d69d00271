"""The sandbox: a real HTTP/1.1 server on loopback serving every catalogue API from its
fixture bodies, with faults drawn from a Profile and acted out on the socket.

URLs: `/<api-id>/<original path>`; `/_moved/...` after the api id serves the same tool (the
target of the `redirect_ok` variant); a `/_fault/<variant>/` prefix forces one variant for
every request under it (tests, demos). `GET /_health` answers `{"ok": true}`; `GET /_routes`
lists what is served.

HTTP parsing is h11's; the socket is ours, so hangs, drips and resets are real.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import h11

from realprobe.simulator.faults import FaultModel, Outcome
from realprobe.simulator.profile import Profile
from realprobe.simulator.render import MOVED_PREFIX, VARIANTS, Plan, is_variant, render
from realprobe.simulator.routes import RouteTable

FAULT_PREFIX = "/_fault/"
HANG_LIMIT_S = 300.0
DRIP_INTERVAL_S = 1.0
#: a request's line, headers and body must all arrive within this many seconds of its first
#: byte (slowloris clients that trickle headers are answered 408 and dropped)
HEADER_TIMEOUT_S = 10.0
#: a kept-alive connection with no new request for this long is closed
IDLE_TIMEOUT_S = 30.0


@dataclass
class SandboxStats:
    requests: int = 0
    faults: int = 0


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
        header_timeout_s: float = HEADER_TIMEOUT_S,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
    ) -> None:
        self.header_timeout_s = header_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.routes = routes
        self.profile = profile
        self.model = FaultModel(profile, seed)
        self.latency_scale = latency_scale
        self.host = host
        self.port = port
        self.stats = SandboxStats()
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

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
                    request = await self._read_request(conn, reader)
                except h11.RemoteProtocolError as exc:  # garbage, oversized headers, ...
                    await _refuse(writer, exc.error_status_hint, f"bad request: {exc}")
                    return
                except TimeoutError:
                    if conn.their_state is h11.SEND_BODY or _started(conn):
                        await _refuse(writer, 408, "request not received in time")
                    return
                if request is None:
                    return
                target = request.target
                if not target.startswith(b"/"):  # `OPTIONS *`, `GET foo`, absolute-form
                    await _refuse(writer, 400, "request target must be a path starting with /")
                    return
                keep = await self._handle(conn, request, reader, writer)
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
    ) -> h11.Request | None:
        """The next request, or None when the client closed. TimeoutError when no request
        began within the idle timeout, or one began and did not complete within the header
        timeout (both measured on the loop's clock, not reset by trickled bytes)."""
        request: h11.Request | None = None
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
            elif isinstance(event, h11.EndOfMessage):
                return request
            elif isinstance(event, h11.ConnectionClosed):
                return None

    async def _handle(
        self,
        conn: h11.Connection,
        request: h11.Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        target = request.target.decode("latin-1")
        path = target.split("?", 1)[0]
        method = request.method.decode()
        plan = self._plan(method, path)
        if plan.code is not None:
            self.stats.faults += 1
        if plan.delay_s > 0:
            await asyncio.sleep(plan.delay_s * self.latency_scale)
        if plan.action == "hang":
            await _wait_for_close(reader, HANG_LIMIT_S)
            return False
        if plan.action == "reset":
            _reset(writer)
            return False
        headers = [
            (k, v) for k, v in plan.headers if k.lower() not in ("content-length", "connection")
        ]
        headers.append(("Content-Length", str(len(plan.body))))
        headers.append(("Server", "realprobe-sandbox"))
        writer.write(conn.send(h11.Response(status_code=plan.status, headers=headers)) or b"")
        if plan.action in ("reset_mid_body", "truncated"):
            half = plan.body[: len(plan.body) // 2]
            writer.write(conn.send(h11.Data(data=half)) or b"")
            await writer.drain()
            if plan.action == "reset_mid_body":
                _reset(writer)
            else:
                writer.close()
            return False
        if plan.action == "drip":
            for i in range(len(plan.body)):
                writer.write(conn.send(h11.Data(data=plan.body[i : i + 1])) or b"")
                await writer.drain()
                await asyncio.sleep(DRIP_INTERVAL_S)
        elif plan.body:
            writer.write(conn.send(h11.Data(data=plan.body)) or b"")
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await writer.drain()
        return True

    # -- what to answer ------------------------------------------------------------

    def _plan(self, method: str, path: str) -> Plan:
        forced: str | None = None
        if path.startswith(FAULT_PREFIX):
            rest = path[len(FAULT_PREFIX) :]
            forced, _, tail = rest.partition("/")
            path = "/" + tail
            if not is_variant(forced):
                known = ", ".join([*VARIANTS, "fixture-<n>"])
                return _text(400, f"unknown fault variant {forced!r}; known: {known}")
        if path == "/_health":
            return _json(200, {"ok": True, "requests": self.stats.requests})
        if path == "/_routes":
            return _json(
                200,
                [
                    {"api": r.api_id, "tool": r.tool, "path": f"/{r.api_id}{r.path}"}
                    for r in self.routes.routes
                ],
            )
        self.stats.requests += 1  # API requests only; control paths are not counted
        _, api, *rest_parts = path.split("/", 2)
        original = "/" + (rest_parts[0] if rest_parts else "")
        if original.startswith(MOVED_PREFIX + "/"):
            original = original[len(MOVED_PREFIX) :]
            if forced == "redirect_ok":
                forced = "ok"  # the target of the forced redirect answers normally
        route = self.routes.match(api, method, original)
        if route is None:
            return _text(404, "Not Found")
        if forced is not None:
            outcome = Outcome(VARIANTS.get(forced), 0.0, 0)
        else:
            outcome = self.model.draw(route.tool)
        plan = render(route, outcome, path=original, now_wall=time.time(), variant=forced)
        if plan.variant == "redirect_ok":
            prefix = FAULT_PREFIX + "redirect_ok" if forced else ""
            plan.headers = [("Location", f"{prefix}/{api}{MOVED_PREFIX}{original}")]
        return plan


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


def _text(status: int, text: str) -> Plan:
    return Plan(
        "control", None, status, [("Content-Type", "text/plain; charset=utf-8")], text.encode()
    )


def _json(status: int, obj: object) -> Plan:
    return Plan(
        "control", None, status, [("Content-Type", "application/json")], json.dumps(obj).encode()
    )


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST instead of FIN, as a crashed origin or a middlebox would."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport = writer.transport
    transport.abort()


async def _wait_for_close(reader: asyncio.StreamReader, limit: float) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(reader.read(), limit)


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
