"""The one httpx client factory. Every call realprobe makes goes through `HttpClient.fetch`.

Policies enforced here, whatever the transport: connect/read timeouts, a hard total deadline
per call (a server dripping one byte a second cannot hold a call past it), a response size cap
counted on decoded bytes (so gzip bombs are capped too), redirects followed by hand only to
public addresses (unless the tool itself lives on a private one), and the redirect chain kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import itertools
import math
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx

from realprobe.adapters.http import Fetched, FetchFailure
from realprobe.addresses import ip_literal, is_private_host
from realprobe.clock import Clock, RealClock
from realprobe.errors import BadResponse, DeadlineExceeded, ErrorCode
from realprobe.http import phases
from realprobe.http.decoding import StreamDecoder
from realprobe.http.transports import (
    BUDGET_EXT,
    DELAY_HEADER,
    IDENTITIES,
    MISSED_HEADER,
    REQUEST_ID_EXT,
    SANDBOX_EXT,
)
from realprobe.target import Target, TargetKind
from realprobe.version import USER_AGENT

DEADLINE_EXT = "realprobe.deadline"  # absolute clock time, read by virtual-clock transports
#: a dict shared by every hop of one fetch: {"start": clock time}, and "elapsed" (what the
#: caller will report as latency) once the fetch ends. Recordings keep it so a replay on a
#: virtual clock reports exactly the latency the live call reported.
TIMING_EXT = "realprobe.timing"
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: how long past its deadline a sandbox call waits for the sandbox's word on it (see
#: `_Call.settle`): a loaded machine's late timers and queued reads change no outcome. Only
#: once the server at the sandbox URL has said it is one (`transports.IDENTITIES`): any
#: other server's callers keep their plain deadline.
SANDBOX_GRACE_S = 3.0


@dataclass(frozen=True, slots=True)
class ClientConfig:
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 10.0
    deadline_s: float = 15.0
    max_bytes: int = 5 * 1024 * 1024
    max_redirects: int = 5
    user_agent: str = USER_AGENT
    #: the live connection pool: open connections, all of them kept alive between calls (a
    #: probe sets it to its concurrency, so no call waits for a connection of the pool)
    max_connections: int = 100

    def pool_limits(self) -> httpx.Limits:
        return httpx.Limits(
            max_connections=self.max_connections, max_keepalive_connections=self.max_connections
        )


_CONNECT_FAILURES = (httpx.ConnectError, httpx.ConnectTimeout)
_AFTER_CONNECT = (
    httpx.ReadError,
    httpx.ReadTimeout,
    httpx.WriteError,
    httpx.WriteTimeout,
    httpx.RemoteProtocolError,
)


def classify_exception(exc: BaseException) -> tuple[ErrorCode, str]:
    """Map a transport-level exception to exactly one taxonomy code and a message."""
    name = type(exc).__name__
    if isinstance(exc, DeadlineExceeded | asyncio.TimeoutError | httpx.TimeoutException):
        return ErrorCode.TIMEOUT, f"{name}: {str(exc) or 'no answer before the timeout'}"
    if isinstance(exc, httpx.DecodingError):
        return ErrorCode.INVALID_RESPONSE, f"body could not be decoded ({exc})"
    if isinstance(exc, httpx.TooManyRedirects):
        return ErrorCode.OPERATION_FAILED, str(exc)
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ErrorCode.OPERATION_FAILED, f"{name}: {exc}"
    if isinstance(exc, httpx.TransportError | OSError):
        return (
            ErrorCode.NETWORK_ERROR,
            f"{name}: {str(exc) or 'connection closed or reset by the server'}",
        )
    return ErrorCode.OPERATION_FAILED, f"{name}: {exc}"


@functools.lru_cache(maxsize=1024)
def _request_url(url: str, params: tuple[tuple[str, str], ...]) -> httpx.URL:
    """A call's URL (parsed once for the same URL and parameters: probes repeat their calls;
    an httpx.URL never changes). httpx.URL(url, params=None) drops the query already in
    `url`: params are passed only if any."""
    return httpx.URL(url, params=dict(params)) if params else httpx.URL(url)


class _Call:
    """The policy state of one fetch, shared by the async and the sync client: the deadline,
    the redirect chain and its checks, the bytes received, and how failures are reported."""

    def __init__(
        self,
        config: ClientConfig,
        clock: Clock,
        method: str,
        url: str,
        params: dict[str, str] | None,
        headers: dict[str, str] | None,
        deadline: float,
        allow_private: bool,
        *,
        sync: bool = False,
    ) -> None:
        self.config = config
        self.clock = clock
        self.method = method
        try:
            self.current = _request_url(url, tuple(params.items()) if params else ())
        except TypeError:  # a value that is no cache key (a list of values)
            self.current = httpx.URL(url, params=params)
        self.headers = headers
        self.deadline = deadline
        self.allow_private = allow_private
        self.start = clock.now()
        self.redirects: list[str] = []
        self.received = 0
        self.timing: dict[str, float] = {"start": self.start}
        self.deadline_fired = False  # set by the sync client's watchdog
        #: seconds past the deadline this call may wait for its target's word (a sandbox's),
        #: granted once the sandbox at `sandbox_url` has identified itself (`graced`)
        self.grace_s = 0.0
        self.sandbox_url: str | None = None
        self.grace_granted = False  # the sync watchdog's: the grace was added to its wait
        #: the latency a sandbox's marks settled (see `settle`), not this process's lag
        self.settled: float | None = None
        self.sent: httpx.Request | None = None  # the last hop's request
        #: where the fetch is (`trace.phase`, `trace.reached`, see FetchFailure) and its phase
        #: timings, told by httpcore's trace events where the transport reports them; the
        #: sync client keeps the socket too, for the watchdog
        self.trace = phases.PhaseTrace(keep_socket=sync)
        self.sync = sync
        self.hops = 0
        self.response: httpx.Response | None = None
        #: one id for every hop of this call; the sandbox router sends it as X-Request-Id
        self.request_id = os.urandom(8).hex()

    def elapsed(self) -> float:
        return self.settled if self.settled is not None else self.clock.now() - self.start

    def graced(self) -> bool:
        """Whether this call waits its grace past the deadline: it has one and the server at
        its sandbox URL has said it is a realprobe sandbox."""
        return bool(self.grace_s) and IDENTITIES.identified(self.sandbox_url)

    def timed_out(self) -> float:
        """The latency of a call settled as a timeout: its deadline, never later (a replay
        that lets no time pass, latency none, reports what its clock says)."""
        return min(self.clock.now() - self.start, self.deadline)

    @property
    def sandbox(self) -> bool:
        """Whether the sandbox answered this call, live or in the recording replayed: its
        marks then decide the outcome (`SANDBOX_EXT`); no other answer's are read."""
        return self.sent is not None and bool(self.sent.extensions.get(SANDBOX_EXT))

    def settle(self, response: httpx.Response) -> None:
        """A sandbox call's outcome as the sandbox drew it from the seed and the request
        (`realprobe.sandbox.wire`), whatever this process's timers did: a call marked missed
        is a timeout at the deadline; an answer read after the deadline counts with the delay
        the sandbox drew for it, when it says one (else it is late). A replay of a recorded
        sandbox call settles the same way, so it reports what the live client did."""
        if not self.sandbox:
            if self.grace_s and self.elapsed() > self.deadline:  # the grace was not its own
                raise DeadlineExceeded("the answer came after the deadline")
            return
        missed = response.headers.get(MISSED_HEADER)
        if missed is not None:
            self.trace.phase, self.trace.reached, self.settled = missed, True, self.timed_out()
            raise DeadlineExceeded("the sandbox drew no answer within the deadline")
        if self.elapsed() > self.deadline:
            try:
                self.settled = float(response.headers.get(DELAY_HEADER, "")) / 1000.0
            except ValueError:
                raise DeadlineExceeded("the answer came after the deadline") from None

    def remaining(self) -> float:
        return self.deadline - self.elapsed()

    def request(self, requests: _Requests) -> httpx.Request:
        """The next hop's request, its timeouts cut to what is left of the deadline."""
        remaining = self.remaining()
        left = remaining + self.grace_s
        if left <= 0:
            raise DeadlineExceeded("deadline passed before the request was sent")
        read = min(self.config.read_timeout_s, left)
        timeout = {"connect": min(self.config.connect_timeout_s, left), "read": read,
                   "write": read, "pool": read}
        extensions = {
            "timeout": timeout,
            DEADLINE_EXT: self.start + self.deadline,
            # a first hop tells the whole deadline: what the sandbox draws for the call must
            # not depend on how long this process took to send it
            BUDGET_EXT: remaining if self.redirects else self.deadline,
            TIMING_EXT: self.timing,
            REQUEST_ID_EXT: self.request_id,
        }
        if self.hops:  # a redirect
            self.trace.hop()
        self.hops += 1
        phases.begin(extensions, self.trace, asynchronous=not self.sync)
        self.sent = requests.build(self.method, self.current, self.headers, extensions)
        return self.sent

    def phases(self) -> dict[str, Any] | None:
        """The measured phases, or None when the transport made no connection events."""
        if not self.trace.seen:
            return None
        return self.trace.phases().as_row()

    def redirected(self, response: httpx.Response) -> bool:
        """Follow a redirect if the policy allows it (True); refuse it with a FetchFailure."""
        if response.status_code not in REDIRECT_STATUSES or "location" not in response.headers:
            return False
        target = self.current.join(response.headers["location"])
        self.redirects.append(f"{response.status_code} {target}")
        if target.scheme not in ("http", "https"):
            raise _refused(f"redirect to unsupported scheme refused: {target}")
        if is_private_host(target.host) and not self.allow_private:
            raise _refused(f"redirect to a non-public address refused: {target}")
        if response.status_code == 303:
            self.method = "GET"
        self.current = target
        return True

    def needs_dns_check(self) -> bool:
        """A redirect to a host *name* (not a literal address), which the policy must resolve."""
        host = self.current.host
        return not self.allow_private and bool(host) and ip_literal(host) is None

    def check_addresses(self, addresses: Iterable[str]) -> None:
        """Refuse a redirect whose host name resolves to a non-public address."""
        for address in addresses:
            if is_private_host(address.split("%")[0]):
                raise _refused(f"redirect to a non-public address refused: {self.current.host} "
                               f"resolves to {address}")

    def reader(self, response: httpx.Response) -> _BodyReader:
        self.trace.phase = "body"
        self.trace.reached = True
        self.answer_headers = _plain(response.headers)
        return _BodyReader(self, response, self.answer_headers)

    def fetched(self, response: httpx.Response, body: bytes) -> Fetched:
        self.settle(response)
        if self.sandbox:
            self.answer_headers.pop(_DELAY, None)
        fetched = Fetched(
            status=response.status_code,
            headers=self.answer_headers,
            body=body,
            url=str(self.current),
            elapsed_s=self.elapsed(),
            redirects=self.redirects,
        )
        fetched.phases = self.phases()
        self.timing["elapsed"] = fetched.elapsed_s
        return fetched

    def too_many_redirects(self) -> FetchFailure:
        return _refused(f"more than {self.config.max_redirects} redirects")

    def failure(self, exc: Exception) -> FetchFailure:
        """Any exception of the fetch as one FetchFailure with its taxonomy code."""
        if isinstance(exc, FetchFailure):
            failure = exc
        elif isinstance(exc, BadResponse):  # the body reader's cap, a corrupt encoding
            failure = FetchFailure(exc.code, exc.message, phase="body", reached=True)
        else:
            code, message = classify_exception(exc)
            phase, reached = self.trace.phase, self.trace.reached
            if isinstance(exc, _CONNECT_FAILURES):
                phase, reached = "connect", False
            elif isinstance(exc, _AFTER_CONNECT) and phase == "connect":
                # a transport that reports no progress: the error itself says how far it got
                writing = isinstance(exc, httpx.WriteError | httpx.WriteTimeout)
                phase = "send" if writing else "headers"
                reached = True
            if self.deadline_fired or isinstance(exc, TimeoutError | DeadlineExceeded):
                code = ErrorCode.TIMEOUT
                # the phase stays out of the text: a replay must report what the recording did
                message = f"no complete answer within the {self.deadline:g}s deadline"
            if code is ErrorCode.TIMEOUT and self.settled is None and (self.sandbox
                                                                        or self.grace_s):
                self.settled = self.timed_out()  # no word within the grace
            failure = FetchFailure(code, message, phase=phase, reached=reached)
        failure.elapsed_s = failure.elapsed_s or self.elapsed()
        failure.received = failure.received or self.received
        failure.redirects = failure.redirects or self.redirects
        failure.phases = failure.phases or self.phases()
        self.timing["elapsed"] = failure.elapsed_s
        return failure


def _refused(message: str) -> FetchFailure:
    """A redirect realprobe's own policy refuses, after the server answered."""
    return FetchFailure(ErrorCode.OPERATION_FAILED, message, phase="policy", reached=True)


class _BodyReader:
    """Reads a body under the size cap, decoding gzip/deflate itself in bounded steps, so a
    bomb is stopped after at most `max_bytes` of output, never fully inflated in memory."""

    def __init__(self, call: _Call, response: httpx.Response, headers: dict[str, str]) -> None:
        self.call = call
        self.cap = call.config.max_bytes
        declared = headers.get("content-length")
        encoding = headers.get("content-encoding", "identity")
        # a transport that built its response from bytes: httpx has already decoded it
        self.predecoded = response.is_stream_consumed
        self.decoder = StreamDecoder("identity" if self.predecoded else encoding, self.cap)
        if declared and declared.isdigit() and int(declared) > self.cap and self.decoder.identity:
            raise FetchFailure(
                ErrorCode.INVALID_RESPONSE,
                f"body of {int(declared)} bytes is over the {self.cap}-byte cap",
                phase="body",
                reached=True,
            )
        self.out = bytearray()
        if self.predecoded:
            self._take(self.decoder.feed(response.content))

    def _take(self, data: bytes) -> None:
        self.out.extend(data)
        self.call.received = len(self.out)

    def feed(self, raw: bytes) -> None:
        self._take(self.decoder.feed(raw))

    def body(self) -> bytes:
        self._take(self.decoder.flush())
        return bytes(self.out)


_DELAY = DELAY_HEADER.lower()


def _grace_check(guard: asyncio.Timeout | None, call: _Call) -> asyncio.TimerHandle | None:
    """At the deadline of a call that may wait a grace, end it then unless its sandbox has
    identified itself by now (the guard was set to the deadline plus the grace)."""
    if guard is None or not call.grace_s or call.graced():
        return None
    when = guard.when()
    if when is None:
        return None

    def decide() -> None:
        if not call.graced():
            guard.reschedule(asyncio.get_running_loop().time())

    return asyncio.get_running_loop().call_at(when - call.grace_s, decide)


_NO_BODY = httpx.ByteStream(b"")


class _Requests:
    """Builds each request as an `httpx.Client` sends it: the client's headers (an
    `httpx.Client`'s defaults with realprobe's User-Agent and Accept-Encoding, in its order),
    updated with the call's, then what `httpx.Request` adds (Host; `Content-Length: 0` on a
    bodiless POST, PUT or PATCH). Those are prepared once per method, host and call headers
    (a probe repeats its calls) and copied into each request."""

    def __init__(self, config: ClientConfig) -> None:
        self.base = httpx.Headers({"Accept": "*/*", "Connection": "keep-alive",
                                   "User-Agent": config.user_agent,
                                   "Accept-Encoding": "gzip, deflate"})
        self.prepared: dict[tuple[Any, ...], httpx.Headers] = {}

    def build(self, method: str, url: httpx.URL, headers: dict[str, str] | None,
              extensions: dict[str, Any]) -> httpx.Request:
        key = (method, url.netloc, tuple(headers.items()) if headers else ())
        try:
            prepared = self.prepared.get(key)
            keep = True
        except TypeError:  # a header value that is no key
            prepared, keep = None, False
        if prepared is None:
            merged = httpx.Headers(self.base)
            merged.update(headers)
            prepared = httpx.Request(method, url, headers=merged).headers
            if keep:
                if len(self.prepared) >= 256:
                    self.prepared.clear()
                self.prepared[key] = prepared
        request = httpx.Request(method, url, headers=prepared, stream=_NO_BODY,
                                extensions=extensions)
        request.read()
        if url.userinfo:  # credentials in the URL: Basic auth, as an httpx.Client sends it
            next(httpx.BasicAuth(url.username, url.password).auth_flow(request))
        return request


def _plain(headers: httpx.Headers) -> dict[str, str]:
    """`{name.lower(): value}` as `headers.items()` gives them (repeated names joined by
    ", "), decoded once per header."""
    encoding = headers.encoding
    out: dict[str, str] = {}
    for name, value in headers.raw:
        key, text = name.lower().decode(encoding), value.decode(encoding)
        out[key] = f"{out[key]}, {text}" if key in out else text
    return out


def _sent(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    response.request = request
    return response


_CLOSED = "Cannot send a request, as the client has been closed."


class _Client:
    """What both clients hold: their policies, clock, target and redirect resolver."""

    def __init__(self, config: ClientConfig | None, clock: Clock | None,
                 target: Target | None) -> None:
        self.config = config or ClientConfig()
        self.clock: Clock = clock or RealClock()
        #: where the calls go (the rows written from this client's calls are labelled with
        #: it); a hand-built client over an unknown transport counts as live
        self.target: Target = target or Target.live()
        self._requests = _Requests(self.config)
        self.closed = False

    @property
    def grace_s(self) -> float:
        """Seconds past a deadline this client may wait for its target's word on a call."""
        return SANDBOX_GRACE_S if self.target.kind is TargetKind.SANDBOX else 0.0

    def _start(self, method: str, url: str, params: dict[str, str] | None,
               headers: dict[str, str] | None, timeout_s: float | None, allow_private: bool,
               *, sync: bool = False) -> _Call:
        deadline = timeout_s if timeout_s is not None else self.config.deadline_s
        call = _Call(self.config, self.clock, method, url, params, headers, deadline,
                     allow_private, sync=sync)
        call.grace_s = self.grace_s
        call.sandbox_url = self.target.sandbox
        return call


class HttpClient(_Client):
    """Implements the adapters' Fetcher protocol on one httpx transport. Requests go to the
    transport itself, not through an `httpx.AsyncClient`: redirects, timeouts and headers
    are handled here anyway, and a client's cookie jar, auth flow, event hooks and log line
    cost more CPU than the rest of a loopback call (calls carry no cookies from earlier
    answers)."""

    def __init__(
        self,
        transport: httpx.AsyncBaseTransport,
        *,
        clock: Clock | None = None,
        config: ClientConfig | None = None,
        resolver: Callable[[str], Awaitable[list[str]]] | None = None,
        target: Target | None = None,
    ) -> None:
        super().__init__(config, clock, target)
        self.transport = transport
        #: resolves redirect targets' host names (live network only: the sandbox, replay and
        #: the simulator never look names up)
        self.resolver = resolver

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            await self.transport.aclose()

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def fetch(
        self,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float | None = None,
        allow_private: bool = False,
    ) -> Fetched:
        call = self._start(method, url, params, headers, timeout_s, allow_private)
        try:
            # On a virtual clock the simulated and replayed transports raise timeouts
            # themselves; nothing here may wait for real.
            guard = (None if self.clock.virtual
                     else asyncio.timeout(call.deadline + call.grace_s))
            async with guard or contextlib.nullcontext():
                check = _grace_check(guard, call)
                try:
                    return await self._follow(call)
                finally:
                    if check is not None:
                        check.cancel()
        except Exception as exc:
            raise call.failure(exc) from exc

    async def _follow(self, call: _Call) -> Fetched:
        for _hop in range(self.config.max_redirects + 1):
            if self.closed:
                raise RuntimeError(_CLOSED)
            request = call.request(self._requests)
            response = _sent(request, await self.transport.handle_async_request(request))
            try:
                if call.redirected(response):
                    if self.resolver is not None and call.needs_dns_check():
                        call.check_addresses(await self.resolver(call.current.host))
                    continue
                reader = call.reader(response)
                if not reader.predecoded:
                    async for raw in response.aiter_raw():
                        reader.feed(raw)
                body = reader.body()
            finally:
                await response.aclose()
            return call.fetched(response, body)
        raise call.too_many_redirects()


class SyncHttpClient(_Client):
    """The same policies for synchronous code, on one httpx transport.

    The total deadline stays hard without an event loop: before the response headers the
    per-request timeouts are cut to what is left of it, and once a body is streaming a shared
    watchdog thread shuts the socket down at the deadline, so a drip cannot outlast it.
    """

    def __init__(
        self,
        transport: httpx.BaseTransport,
        *,
        config: ClientConfig | None = None,
        resolver: Callable[[str], list[str]] | None = None,
        target: Target | None = None,
    ) -> None:
        super().__init__(config, None, target)
        self.transport = transport
        self.resolver = resolver

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.transport.close()

    def __enter__(self) -> SyncHttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fetch(
        self,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float | None = None,
        allow_private: bool = False,
    ) -> Fetched:
        call = self._start(method, url, params, headers, timeout_s, allow_private, sync=True)
        # one watchdog ticket for the whole fetch, armed before anything is sent: slow TLS,
        # slow headers and a slow body all end at the deadline
        call.grace_granted = call.graced()
        wait = call.deadline + (call.grace_s if call.grace_granted else 0.0)
        ticket = WATCHDOG.arm(time.monotonic() + wait, call)
        try:
            return self._follow(call)
        except Exception as exc:
            raise call.failure(exc) from exc
        finally:
            WATCHDOG.disarm(ticket)

    def _follow(self, call: _Call) -> Fetched:
        for _hop in range(self.config.max_redirects + 1):
            if self.closed:
                raise RuntimeError(_CLOSED)
            request = call.request(self._requests)
            response = _sent(request, self.transport.handle_request(request))
            call.response = response
            try:
                if call.redirected(response):
                    if self.resolver is not None and call.needs_dns_check():
                        call.check_addresses(self.resolver(call.current.host))
                    continue
                reader = call.reader(response)
                if not reader.predecoded:
                    for raw in response.iter_raw():
                        reader.feed(raw)
                body = reader.body()
            finally:
                call.response = None
                response.close()
            if call.deadline_fired:
                raise DeadlineExceeded("deadline passed while the body was read")
            return call.fetched(response, body)
        raise call.too_many_redirects()


class _Watchdog:
    """One daemon thread that shuts down the sockets of sync calls past their deadline."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, _Call] = {}
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, when: float, call: _Call) -> int:
        with self._cv:
            ticket = next(self._seq)
            self._armed[ticket] = call
            earliest = self._heap[0][0] if self._heap else math.inf
            heapq.heappush(self._heap, (when, ticket))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="realprobe-deadline-watchdog", daemon=True
                )
                self._thread.start()
            elif when < earliest:
                self._cv.notify()
        return ticket

    def disarm(self, ticket: int) -> None:
        with self._cv:
            self._armed.pop(ticket, None)

    def _run(self) -> None:
        with self._cv:
            while True:
                while self._heap and self._heap[0][1] not in self._armed:
                    heapq.heappop(self._heap)  # finished in time
                if not self._heap:
                    self._cv.wait()
                    continue
                when, ticket = self._heap[0]
                wait = when - time.monotonic()
                if wait > 0:
                    self._cv.wait(wait)
                    continue
                heapq.heappop(self._heap)
                call = self._armed[ticket]
                if not call.grace_granted and call.graced():  # identified meanwhile
                    call.grace_granted = True
                    heapq.heappush(self._heap, (when + call.grace_s, ticket))
                    continue
                del self._armed[ticket]
                call.deadline_fired = True
                _shutdown(call)


def _shutdown(call: _Call) -> None:
    """Wake a blocked connect, handshake or read: shut the call's socket down (close alone
    does not wake a thread blocked in recv)."""
    sock = call.trace.sock
    if sock is None and call.response is not None:
        stream = call.response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


WATCHDOG = _Watchdog()


async def system_resolver(host: str) -> list[str]:
    """The addresses a host name resolves to; none when it does not resolve (the connect
    that follows fails with NETWORK_ERROR on its own)."""
    return await asyncio.to_thread(sync_system_resolver, host)


def sync_system_resolver(host: str) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return []
    return sorted({str(info[4][0]) for info in infos})
