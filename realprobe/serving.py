"""The one HTTP server base: every server realprobe runs (the sandbox with its `/_admin` and
`/_journal`, the exporter, MCP over HTTP) holds the same guards.

- **Host**: a request whose `Host` names anything but a loopback name, the bound address or
  an `--allowed-host` is refused with 421 (DNS rebinding: a web page whose name now points
  at 127.0.0.1 sends its own name).
- **Origin**: a request from a foreign `Origin` (another site's page, `null`) is refused
  with 403, whatever its method or content type (a `text/plain` POST needs no preflight).
- **JSON writes**: a write (POST, PUT, PATCH, DELETE) to a JSON endpoint with a body must
  say `Content-Type: application/json` (415 otherwise), so a plain HTML form cannot send it.
- **Token**: with `--auth-token-env VAR`, every request needs `Authorization: Bearer <token>`
  (401), compared in constant time; the token is read from the environment only.
- **Limits**: a request's line, headers and body must arrive within `header_timeout_s` of
  its first byte (408, then closed); a kept-alive connection idle for `idle_timeout_s` is
  closed; a body over `max_body` bytes is refused (413); at most `max_connections` are
  served at once and `max_buffered` request bytes held across them (503 past either).
  Servers run on one event loop, so a half-sent request holds a socket, never a thread.
- **Fair share**: one client (its peer address, never a forwarding header, which anyone can
  write) holds at most `client_share` of the connections; past its share or past the cap a
  connection may still ask a control path (`reserved_paths`, the sandbox's `/_admin`) on one
  of `reserved` more slots (a few per client; its request must come within the header
  timeout, and it is the connection's only one), so the runtime API answers while the API
  paths are saturated.
- **Off loopback**: one warning line, worded the same by every server, when bound to an
  address other machines can reach.

The asyncio/h11 server here (`H11Server`) is the base of the sandbox and the exporter; MCP
over HTTP runs the SDK's ASGI app on uvicorn and applies the same `Guard` as middleware.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import socket
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import urlsplit

import h11

from realprobe.errors import RealprobeError

#: a request's line, headers and body must all arrive within this many seconds of its first
#: byte (slowloris clients that trickle headers are answered 408 and dropped)
HEADER_TIMEOUT_S = 10.0
#: a kept-alive connection with no new request for this long is closed
IDLE_TIMEOUT_S = 30.0
#: the largest request body any realprobe server reads
MAX_BODY = 1024 * 1024
#: connections served at once (more are answered 503 and closed)
MAX_CONNECTIONS = 1024
#: request body bytes being read, summed across all connections
MAX_BUFFERED = 64 * 1024 * 1024
#: the share of `max_connections` one peer address may hold
CLIENT_SHARE = 0.75
#: connections past the cap (or past a client's share) kept for control paths only
RESERVED_CONNECTIONS = 16
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")
WILDCARD_BINDS = ("0.0.0.0", "::", "")
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: the response header naming why realprobe itself (not an API) answered
ERROR_HEADER = "X-Realprobe-Error"
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    host = host.strip().lower()
    return host in LOOPBACK_NAMES or host.startswith("127.")


def _name_of(host_header: str) -> str:
    """The host name of a `Host` value or an allowed-host entry, lower case, no port."""
    value = host_header.strip().lower()
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    if value.count(":") > 1:  # a bare IPv6 address
        return f"[{value}]"
    return value.split(":", 1)[0]


def off_loopback_warning(what: str, host: str, *, token: bool) -> str | None:
    """The one warning line for a server bound where other machines can reach it."""
    if is_loopback(host):
        return None
    guard = (
        "a bearer token is required" if token
        else "anyone who can reach it can use it; pass --auth-token-env VAR to require a token"
    )
    return (
        f"warning: the {what} listens on {host or '0.0.0.0'}, not loopback: {guard} "
        "(Host and Origin checks still hold; --allowed-host adds a name)"
    )


def token_from_env(var: str) -> str:
    """The bearer token from the environment variable `var` (never from the command line,
    where other users of the machine could read it)."""
    value = os.environ.get(var, "")
    if not value.strip():
        raise RealprobeError(
            f"auth_token_env {var}: the environment variable is unset or empty; "
            f"export {var}=<a long random token> first",
            param="auth_token_env",
        )
    if len(value) < MIN_TOKEN_CHARS:
        raise RealprobeError(
            f"auth_token_env {var}: the token is {len(value)} characters; use at least "
            f"{MIN_TOKEN_CHARS}",
            param="auth_token_env",
        )
    from realprobe.secrets import remember

    remember(value)  # never in a log line, a row or a cassette
    return value


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is refused before any handler sees it."""

    status: int
    label: str  # the X-Realprobe-Error value
    message: str

    def body(self) -> bytes:
        return json.dumps({"error": self.message, "refused": self.label}).encode()

    def headers(self) -> list[tuple[str, str]]:
        out = [("Content-Type", "application/json"), (ERROR_HEADER, self.label)]
        if self.status == 401:
            out.append(("WWW-Authenticate", 'Bearer realm="realprobe"'))
        return out


@dataclass
class Guard:
    """The checks every server applies to every request, before its handler runs."""

    bind_host: str = "127.0.0.1"
    allowed_hosts: Sequence[str] = ()
    token: str | None = None
    #: path prefixes whose writes must carry a JSON body (admin endpoints)
    json_paths: Sequence[str] = ()
    max_body: int = MAX_BODY
    names: frozenset[str] = field(init=False)
    any_host: bool = field(init=False)

    def __post_init__(self) -> None:
        self.any_host = "*" in self.allowed_hosts
        names = {_name_of(n) for n in LOOPBACK_NAMES}
        if self.bind_host not in WILDCARD_BINDS:
            names.add(_name_of(self.bind_host))
        for item in self.allowed_hosts:
            if "://" in item:
                raise RealprobeError(
                    f"allowed_hosts {item!r}: give a host name, not a URL", param="allowed_hosts"
                )
            if item.strip() and item != "*":
                names.add(_name_of(item))
        self.names = frozenset(names)

    def host_ok(self, host: str) -> bool:
        return self.any_host or _name_of(host) in self.names

    def origin_ok(self, origin: str) -> bool:
        parts = urlsplit(origin.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # `null`, file:, extensions
        return self.host_ok(parts.netloc)

    def check(
        self, method: str, path: str, headers: Mapping[str, str], body_len: int = 0
    ) -> Refusal | None:
        """None when the request may be handled; `headers` have lower-case names."""
        host = headers.get("host")
        if host is not None and not self.host_ok(host):
            return Refusal(421, "foreign-host", f"Host {host[:100]!r} is not served here "
                           "(loopback names, the bound address and --allowed-host are)")
        origin = headers.get("origin")
        if origin is not None and not self.origin_ok(origin):
            return Refusal(403, "cross-origin", f"requests from Origin {origin[:100]!r} "
                           "are refused")
        if self.token is not None and not self._token_ok(headers.get("authorization", "")):
            return Refusal(401, "token", "send Authorization: Bearer <token>")
        if body_len > self.max_body:
            return Refusal(413, "too-large", f"request body over {self.max_body} bytes")
        if method in WRITE_METHODS and any(path.startswith(p) for p in self.json_paths):
            ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if (body_len or ctype) and ctype != "application/json":
                return Refusal(415, "not-json", f"{method} {path} takes a JSON body: send "
                               "Content-Type: application/json")
        return None

    def _token_ok(self, value: str) -> bool:
        assert self.token is not None
        scheme, _, given = value.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode("utf-8"), self.token.encode("utf-8")
        )


@dataclass(frozen=True)
class Limits:
    header_timeout_s: float = HEADER_TIMEOUT_S
    idle_timeout_s: float = IDLE_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS
    max_buffered: int = MAX_BUFFERED
    client_share: float = CLIENT_SHARE
    reserved: int = RESERVED_CONNECTIONS

    @property
    def per_client(self) -> int:
        """The connections one peer address may hold."""
        return max(1, int(self.max_connections * self.client_share))

    @property
    def reserved_slots(self) -> int:
        """Connections kept for control paths: `reserved`, at most an eighth of the cap (a
        server capped at a handful of connections keeps none)."""
        return max(0, min(self.reserved, self.max_connections // 8))

    @property
    def reserved_per_client(self) -> int:
        """The reserved connections one peer address may hold."""
        return max(1, self.reserved_slots // 4) if self.reserved_slots else 0


def peer_of(writer: asyncio.StreamWriter) -> str:
    """The address a connection comes from, as the socket says (never a header)."""
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple | list) and peer:
        return str(peer[0])
    return str(peer or "")


@dataclass(slots=True)
class Request:
    method: str
    target: str  # as received: path and query
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def path(self) -> str:
        return self.target.partition("?")[0]


class H11Server:
    """An HTTP/1.1 server on one event loop: h11 parses, the guard and limits hold, and the
    subclass's `handle` writes the answer (it owns the socket, so it may misbehave on it)."""

    server_name = "realprobe"
    #: path prefixes still answered on a reserved connection (see `Limits.reserved`)
    reserved_paths: tuple[str, ...] = ()

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, *, guard: Guard | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.guard = guard or Guard(host)
        self.limits = limits or Limits()
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        #: connections held per peer address, and how many reserved slots are in use
        self.peers: Counter[str] = Counter()
        self.reserved_peers: Counter[str] = Counter()
        self.reserved_in_use = 0
        self.buffered = 0  # body bytes being read across connections (Limits.max_buffered)

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}"

    async def handle(
        self, conn: h11.Connection, request: Request,
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
    ) -> bool:
        """Answer one request; True when the connection may serve another."""
        raise NotImplementedError

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

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = peer_of(writer)
        reserved = (len(self._conns) - self.reserved_in_use >= self.limits.max_connections
                    or self.peers[peer] - self.reserved_peers[peer] >= self.limits.per_client)
        if reserved and (not self.reserved_paths
                         or self.reserved_in_use >= self.limits.reserved_slots
                         or self.reserved_peers[peer] >= self.limits.reserved_per_client):
            await refuse(writer, 503, "too many connections; try again")
            return
        self._conns.add(task)
        held = self.reserved_peers if reserved else self.peers
        held[peer] += 1
        if reserved:
            self.peers[peer] += 1
            self.reserved_in_use += 1
        try:
            await self._connection(reader, writer, reserved)
        finally:
            self._conns.discard(task)
            for counter in (self.peers, self.reserved_peers) if reserved else (self.peers,):
                counter[peer] -= 1
                if not counter[peer]:
                    del counter[peer]
            self.reserved_in_use -= reserved

    async def _connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reserved: bool
    ) -> None:
        """Serve one connection's requests (one only, and a control path, on a reserved
        slot)."""
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = h11.Connection(h11.SERVER)
        try:
            while await self._one(conn, reader, writer, reserved) and not reserved:
                try:
                    conn.start_next_cycle()
                except h11.ProtocolError:
                    return
        except (ConnectionError, asyncio.CancelledError, h11.ProtocolError, TimeoutError):
            pass
        except Exception as exc:  # never a traceback and a dead connection: a 500, then close
            with contextlib.suppress(Exception):
                await refuse(writer, 500, f"{self.server_name} error: {type(exc).__name__}")
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _one(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        reserved: bool = False,
    ) -> bool:
        """Read, check and answer one request; True when the connection continues."""
        try:
            idle = self.limits.header_timeout_s if reserved else self.limits.idle_timeout_s
            request = await self._read_request(conn, reader, idle)
        except h11.RemoteProtocolError as exc:  # garbage, oversized headers, ...
            await refuse(writer, exc.error_status_hint, f"bad request: {exc}")
            return False
        except _TooLarge:
            await refuse(writer, 413, f"request body over {self.guard.max_body} bytes")
            return False
        except _Busy:
            await refuse(writer, 503, "too many request bytes in flight; try again")
            return False
        except TimeoutError:
            if conn.their_state is h11.SEND_BODY or _started(conn):
                await refuse(writer, 408, "request not received in time")
            return False
        if request is None:
            return False
        if not request.target.startswith("/"):  # `OPTIONS *`, `GET foo`, absolute-form
            await refuse(writer, 400, "request target must be a path starting with /")
            return False
        refusal = self.guard.check(request.method, request.path, request.headers,
                                   len(request.body))
        if refusal is not None:
            await refuse(writer, refusal.status, refusal.message, refusal)
            return False
        if reserved and not any(request.path == p or request.path.startswith(p + "/")
                                for p in self.reserved_paths):
            await refuse(writer, 503, "too many connections from this client; try again")
            return False
        keep = await self.handle(conn, request, reader, writer)
        return keep and conn.our_state is h11.DONE

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, idle_s: float | None = None,
    ) -> Request | None:
        """The next request, or None when the client closed. TimeoutError when no request
        began within `idle_s` (the idle timeout), or one began and did not complete within
        the header timeout (measured on the loop's clock, not reset by trickled bytes)."""
        body = bytearray()  # its bytes count in `buffered` until the request is answered
        idle = self.limits.idle_timeout_s if idle_s is None else idle_s
        head: h11.Request | None = None
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    if deadline is None and (_started(conn) or head is not None):
                        deadline = loop.time() + self.limits.header_timeout_s
                    limit = idle if deadline is None else deadline - loop.time()
                    if limit <= 0:
                        raise TimeoutError
                    async with asyncio.timeout(limit):
                        data = await reader.read(65536)
                    if deadline is None and data:
                        deadline = loop.time() + self.limits.header_timeout_s
                    conn.receive_data(data)
                    if not data and conn.their_state is not h11.DONE and head is None:
                        return None
                elif isinstance(event, h11.Request):
                    head = event
                    if any(k == b"content-length" and v.isdigit() and int(v) > self.guard.max_body
                           for k, v in event.headers):
                        raise _TooLarge
                elif isinstance(event, h11.Data):
                    if len(body) + len(event.data) > self.guard.max_body:
                        raise _TooLarge
                    if self.buffered + len(event.data) > self.limits.max_buffered:
                        raise _Busy
                    body.extend(event.data)
                    self.buffered += len(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    return None if head is None else _request(head, bytes(body))
                elif isinstance(event, h11.ConnectionClosed):
                    return None
        finally:
            self.buffered -= len(body)


class _TooLarge(Exception):
    """A request body would pass `max_body`, or all buffered bytes `max_buffered`."""


class _Busy(Exception):
    """Every connection's unanswered request bytes together would pass `max_buffered`."""


def _request(head: h11.Request, body: bytes) -> Request:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in head.headers}
    return Request(head.method.decode("latin-1"), head.target.decode("latin-1"), headers, body)


def _started(conn: h11.Connection) -> bool:
    """Bytes of a request are buffered but it is not complete yet."""
    return bool(conn.trailing_data[0])


#: the `X-Realprobe-Error` label of a refusal written without a `Refusal` (a client then
#: never takes a busy or confused server's answer for the API's own)
_LABELS = {400: "bad-request", 408: "request-timeout", 413: "too-large",
           431: "headers-too-large", 500: "server-error", 503: "busy"}


async def refuse(
    writer: asyncio.StreamWriter, status: int, text: str, refusal: Refusal | None = None
) -> None:
    """An error written by hand (h11's state may be ERROR), labelled as realprobe's own,
    then close."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Error"
    if refusal is not None:
        body, headers = refusal.body(), refusal.headers()
    else:
        body = (text.replace("\r", " ").replace("\n", " ")[:200] + "\n").encode("utf-8", "replace")
        headers = [("Content-Type", "text/plain; charset=utf-8"),
                   (ERROR_HEADER, _LABELS.get(status, "refused"))]
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers),
             f"Content-Length: {len(body)}", "Connection: close", "Server: realprobe"]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + body)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer.drain(), 2)
    writer.close()


async def send_simple(
    conn: h11.Connection, writer: asyncio.StreamWriter, status: int, body: bytes,
    headers: Sequence[tuple[str, str]] = (),
) -> bool:
    """A whole answer in one write; True (the connection may continue)."""
    head = [*headers, ("Content-Length", str(len(body))), ("Server", "realprobe")]
    data = conn.send(h11.Response(status_code=status, headers=head)) or b""
    data += (conn.send(h11.Data(data=body)) or b"") if body else b""
    data += conn.send(h11.EndOfMessage()) or b""
    writer.write(data)
    await writer.drain()
    return True


class ServerThread:
    """Run an H11Server on its own event loop in a background thread (tests, embedding)."""

    def __init__(self, server: H11Server, name: str | None = None) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run, name=name or f"realprobe-{server.server_name}", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.server.start())
        except BaseException as exc:  # reported by start()
            self._error = exc
            self._ready.set()
            self.loop.close()
            return
        self._ready.set()
        try:
            self.loop.run_forever()
        finally:  # an open loop left behind is a ResourceWarning at exit
            self.loop.close()

    def start(self) -> str:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("server did not start within 10 s")
        if self._error is not None:
            raise self._error
        return self.server.url

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop)
        with contextlib.suppress(Exception):
            fut.result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    def __enter__(self) -> str:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: `with running(server) as url:` the server on its own thread while the block runs
running = ServerThread
