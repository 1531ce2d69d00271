"""Per-call phase timings (DNS, connect, TLS, time to first byte, transfer) and TLS facts.

httpx passes a `trace` callback down to httpcore, which reports `connect_tcp`, `start_tls`,
`send_request_headers`, `receive_response_headers` and `receive_response_body` events. DNS
is not an httpcore event (the network backend resolves inside `connect_tcp`), so live
transports get a network backend that resolves first, on the clock, and then connects to
the address it found: the DNS time is then real, not inferred.

Phases are measured on `time.perf_counter` from the start of the fetch. A reused
keep-alive connection has no DNS, connect or TLS phase (0), and no certificate is read.
The certificate's expiry and issuer are read from the TLS object of a new connection.
"""

from __future__ import annotations

import contextlib
import contextvars
import socket
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import anyio
import httpcore

from realprobe.addresses import ip_literal

#: the fetch whose connection is being made (set around each request; contextvars follow
#: the request both in a thread and in an asyncio task)
_CURRENT: contextvars.ContextVar[PhaseTrace | None] = contextvars.ContextVar(
    "realprobe_phase_trace", default=None
)


@dataclass(slots=True)
class Phases:
    """Milliseconds per phase; `new_connection` False means a reused connection."""

    dns_ms: float = 0.0
    connect_ms: float = 0.0
    tls_ms: float = 0.0
    ttfb_ms: float = 0.0
    transfer_ms: float = 0.0
    new_connection: bool = False
    tls_expires_ts: float | None = None
    tls_issuer: str | None = None

    def as_row(self) -> dict[str, Any]:
        # built field by field: `dataclasses.asdict` deep-copies and costs more than the
        # rest of the row (this runs once per call)
        return {
            "dns_ms": self.dns_ms,
            "connect_ms": self.connect_ms,
            "tls_ms": self.tls_ms,
            "ttfb_ms": self.ttfb_ms,
            "transfer_ms": self.transfer_ms,
            "new_connection": self.new_connection,
            "tls_expires_ts": self.tls_expires_ts,
            "tls_issuer": self.tls_issuer,
        }


#: the httpcore trace events a fetch times or moves on, by name without the module prefix:
#: (slot in `PhaseTrace.marks` or -1, the phase it moves the fetch into or None)
_TIMED = {
    "connect_tcp.started": (0, "connect"),
    "connect_tcp.complete": (1, None),
    "start_tls.started": (2, "connect"),
    "start_tls.complete": (3, None),
    "send_request_headers.started": (4, "send"),
    "receive_response_headers.complete": (5, None),
    "connect_unix_socket.started": (-1, "connect"),
    "receive_response_headers.started": (-1, "headers"),
    "receive_response_body.started": (-1, "body"),
}
#: the same by full event name ("connection.connect_tcp.started", "http11.…", "http2.…"),
#: so that an event costs one dict lookup and no string work
_EVENTS = {
    f"{module}.{event}": action
    for module in ("connection", "http11", "http2", "http_proxy", "socks_proxy")
    for event, action in _TIMED.items()
}
_NONE = (-1, None)
_SLOTS = 6  # connect start/end, TLS start/end, request sent, first response byte


class PhaseTrace:
    """The progress and phase timings of one fetch (every hop), from httpcore's trace events:
    one callback per event writes `perf_counter` into a preallocated slot and moves `phase`
    (connect, send, headers, body); `reached` turns True once a server accepted the
    connection. With `keep_socket` (the sync client's watchdog), `sock` is the socket, handed
    over by the live sync transport's streams (`_KeptStream`)."""

    __slots__ = ("dns_s", "keep_socket", "marks", "new_connection", "phase", "reached", "seen",
                 "sock", "tls_object")

    def __init__(self, *, keep_socket: bool = False) -> None:
        self.dns_s = 0.0
        self.reached: bool | None = None
        self.keep_socket = keep_socket
        self.hop()

    def hop(self) -> None:
        """A new request of the fetch (a redirect): DNS time adds up, the rest starts over."""
        self.marks: list[float | None] = [None] * _SLOTS
        self.seen = False  # any httpcore event at all (a transport without them has none)
        self.tls_object: Any = None
        self.new_connection = False
        self.phase = "connect"
        self.sock: socket.socket | None = None

    def sync_callback(self, name: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        self.seen = True
        slot, phase = _EVENTS.get(name, _NONE)
        if slot >= 0:
            self.marks[slot] = now
        if phase is not None:
            self.phase = phase
            if phase == "connect":
                self.new_connection = self.new_connection or slot == 0
                return
            self.reached = True
        elif slot == 1 or slot == 3:
            self.reached = True
            stream = info.get("return_value")
            if slot == 3 and stream is not None:
                self.tls_object = stream.get_extra_info("ssl_object")

    async def async_callback(self, name: str, info: dict[str, Any]) -> None:
        self.sync_callback(name, info)

    def _span(self, start: int) -> float:
        a, b = self.marks[start], self.marks[start + 1]
        return max(0.0, (b - a) * 1000.0) if a is not None and b is not None else 0.0

    def phases(self, end: float | None = None) -> Phases:
        """The phases so far; `end` (perf_counter) closes the transfer phase."""
        end = time.perf_counter() if end is None else end
        out = Phases(
            dns_ms=round(self.dns_s * 1000.0, 3),
            connect_ms=round(max(0.0, self._span(0) - self.dns_s * 1000.0), 3),
            tls_ms=round(self._span(2), 3),
            new_connection=self.new_connection,
        )
        sent, first = self.marks[4], self.marks[5]
        if sent is not None and first is not None:
            out.ttfb_ms = round(max(0.0, first - sent) * 1000.0, 3)
            out.transfer_ms = round(max(0.0, end - first) * 1000.0, 3)
        if self.tls_object is not None:
            out.tls_expires_ts, out.tls_issuer = certificate_facts(self.tls_object)
        return out


def begin(extensions: dict[str, Any], trace: PhaseTrace, *, asynchronous: bool) -> None:
    """Attach `trace` to a request's extensions and make it the current one (the DNS timing
    of the network backends below books into it)."""
    extensions["trace"] = trace.async_callback if asynchronous else trace.sync_callback
    _CURRENT.set(trace)


def certificate_facts(ssl_object: Any) -> tuple[float | None, str | None]:
    """(notAfter as epoch seconds, issuer CN/O) of the peer certificate, if it was verified."""
    try:
        cert = ssl_object.getpeercert()
    except (ValueError, AttributeError):
        return None, None
    if not cert:
        return None, None
    expires: float | None = None
    not_after = cert.get("notAfter")
    if not_after:
        with contextlib.suppress(ValueError, OverflowError):
            expires = float(ssl.cert_time_to_seconds(not_after))
    issuer = _name(cert.get("issuer", ()))
    return expires, issuer


def _name(rdns: Iterable[Any]) -> str | None:
    fields: dict[str, str] = {}
    for rdn in rdns:
        for key, value in rdn:
            fields.setdefault(key, value)
    for key in ("commonName", "organizationName"):
        if key in fields:
            return str(fields[key])[:200]
    return None


# -- DNS as its own phase: network backends that resolve first ---------------------------


def _addresses(infos: Iterable[Any]) -> list[str]:
    """The addresses of a lookup's answers, each once, in its order."""
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class TimedAsyncBackend(httpcore.AsyncNetworkBackend):
    """Resolves the host on the clock (the DNS phase), then connects to each address. The
    live transports connect over TCP only (no Unix socket), so that is all it does."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self.inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if ip_literal(host) is not None:
            return await self.inner.connect_tcp(
                host, port, timeout, local_address, socket_options
            )
        t0 = time.perf_counter()
        try:
            with anyio.fail_after(timeout):
                addresses = _addresses(
                    await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"DNS lookup of {host} timed out") from exc
        except OSError as exc:
            raise httpcore.ConnectError(f"DNS lookup of {host} failed: {exc}") from exc
        left = _after_lookup(t0, timeout)
        last: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    address, port, left, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last or httpcore.ConnectError(f"no address for {host}")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _KeptStream(httpcore.NetworkStream):
    """A sync connection's stream that hands its socket to the fetch that opens it and to each
    fetch writing on it (a reused connection reports no trace event with its stream): the
    sync client's watchdog shuts that socket down to cut a stalled call off."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self.inner = inner
        self.keep()

    def keep(self) -> None:
        trace = _CURRENT.get()
        if trace is not None and trace.keep_socket and trace.sock is None:
            sock = self.inner.get_extra_info("socket")
            if isinstance(sock, socket.socket):
                trace.sock = sock

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.keep()
        self.inner.write(buffer, timeout)

    def close(self) -> None:
        self.inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _KeptStream(self.inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class TimedSyncBackend(httpcore.NetworkBackend):
    """The synchronous twin of `TimedAsyncBackend`; its streams are `_KeptStream`s."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self.inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        if ip_literal(host) is not None:
            return _KeptStream(
                self.inner.connect_tcp(host, port, timeout, local_address, socket_options))
        t0 = time.perf_counter()
        try:
            addresses = _addresses(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            raise httpcore.ConnectError(f"DNS lookup of {host} failed: {exc}") from exc
        left = _after_lookup(t0, timeout)
        last: Exception | None = None
        for address in addresses:
            try:
                return _KeptStream(
                    self.inner.connect_tcp(address, port, left, local_address, socket_options))
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last or httpcore.ConnectError(f"no address for {host}")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


def time_dns(transport: Any) -> Any:
    """Give an httpx HTTP transport a network backend that times DNS as its own phase.
    httpx's transports take no backend, so this sets the one of the httpcore pool they hold:
    private names of both, whose versions pyproject.toml pins to the ones tested."""
    pool = transport._pool
    if isinstance(pool, httpcore.AsyncConnectionPool):
        pool._network_backend = TimedAsyncBackend(pool._network_backend)
    else:
        pool._network_backend = TimedSyncBackend(pool._network_backend)
    return transport


def _after_lookup(t0: float, timeout: float | None) -> float | None:
    """Book a lookup that began at `t0` as the call's DNS time; what is left of `timeout`
    for connecting (sync and async connects alike)."""
    spent = time.perf_counter() - t0
    trace = _CURRENT.get()
    if trace is not None:
        trace.dns_s += spent
    return None if timeout is None else max(0.001, timeout - spent)
