"""The one httpx client factory. Every call realprobe makes goes through `HttpClient.fetch`.

Policies enforced here, whatever the transport: connect/read timeouts, a hard total deadline
per call (a server dripping one byte a second cannot hold a call past it), a response size cap
counted on decoded bytes (so gzip bombs are capped too), redirects followed by hand only to
public addresses (unless the tool itself lives on a private one), and the redirect chain kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import zlib
from dataclasses import dataclass
from typing import Any

import httpx

from realprobe import USER_AGENT
from realprobe.adapters.http import Fetched, FetchFailure
from realprobe.clock import Clock, RealClock
from realprobe.errors import ErrorCode

DEADLINE_EXT = "realprobe.deadline"  # absolute clock time, read by virtual-clock transports
#: a dict shared by every hop of one fetch: {"start": clock time}, and "elapsed" (what the
#: caller will report as latency) once the fetch ends. Recordings keep it so a replay on a
#: virtual clock reports exactly the latency the live call reported.
TIMING_EXT = "realprobe.timing"
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True, slots=True)
class ClientConfig:
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 10.0
    deadline_s: float = 15.0
    max_bytes: int = 5 * 1024 * 1024
    max_redirects: int = 5
    user_agent: str = USER_AGENT


class DeadlineExceeded(Exception):
    pass


def is_private_host(host: str) -> bool:
    """Loopback, private, link-local or otherwise non-global literal addresses, and localhost."""
    h = host.strip("[]").lower()
    if h == "localhost" or h.endswith((".localhost", ".local", ".internal")):
        return True
    try:
        return not ipaddress.ip_address(h).is_global
    except ValueError:
        return False


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


class HttpClient:
    """Implements the adapters' Fetcher protocol on top of one httpx.AsyncClient."""

    def __init__(
        self,
        transport: httpx.AsyncBaseTransport,
        *,
        clock: Clock | None = None,
        config: ClientConfig | None = None,
    ) -> None:
        self.config = config or ClientConfig()
        self.clock: Clock = clock or RealClock()
        self.transport = transport
        self._client = httpx.AsyncClient(
            transport=transport,
            follow_redirects=False,
            headers={"User-Agent": self.config.user_agent, "Accept-Encoding": "gzip, deflate"},
            timeout=httpx.Timeout(
                self.config.read_timeout_s, connect=self.config.connect_timeout_s
            ),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

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
        deadline = timeout_s if timeout_s is not None else self.config.deadline_s
        start = self.clock.now()
        redirects: list[str] = []
        received = [0]
        timing: dict[str, float] = {"start": start}
        try:
            # On a virtual clock the simulated and replayed transports raise timeouts
            # themselves; nothing here may wait for real.
            guard = contextlib.nullcontext() if self.clock.virtual else asyncio.timeout(deadline)
            async with guard:
                fetched = await self._follow(
                    method, url, params, headers, start, deadline, allow_private,
                    redirects, received, timing,
                )
            timing["elapsed"] = fetched.elapsed_s
            return fetched
        except FetchFailure as exc:
            exc.elapsed_s = exc.elapsed_s or self.clock.now() - start
            exc.received = exc.received or received[0]
            exc.redirects = exc.redirects or redirects
            timing["elapsed"] = exc.elapsed_s
            raise
        except Exception as exc:
            code, message = classify_exception(exc)
            if code is ErrorCode.TIMEOUT and isinstance(exc, TimeoutError | DeadlineExceeded):
                message = f"no complete answer within the {deadline:g}s deadline"
            elapsed = self.clock.now() - start
            timing["elapsed"] = elapsed
            raise FetchFailure(code, message, elapsed, redirects, received[0]) from exc

    async def _follow(
        self,
        method: str,
        url: str,
        params: dict[str, str] | None,
        headers: dict[str, str] | None,
        start: float,
        deadline: float,
        allow_private: bool,
        redirects: list[str],
        received: list[int],
        timing: dict[str, float] | None = None,
    ) -> Fetched:
        current = httpx.URL(url, params=params or None)
        for _hop in range(self.config.max_redirects + 1):
            remaining = deadline - (self.clock.now() - start)
            if remaining <= 0:
                raise DeadlineExceeded("deadline passed before the request was sent")
            timeout = httpx.Timeout(
                min(self.config.read_timeout_s, remaining),
                connect=min(self.config.connect_timeout_s, remaining),
            )
            request = self._client.build_request(method, current, headers=headers, timeout=timeout)
            request.extensions[DEADLINE_EXT] = start + deadline
            if timing is not None:
                request.extensions[TIMING_EXT] = timing
            response = await self._client.send(request, stream=True)
            try:
                if response.status_code in REDIRECT_STATUSES and "location" in response.headers:
                    target = current.join(response.headers["location"])
                    redirects.append(f"{response.status_code} {target}")
                    if target.scheme not in ("http", "https"):
                        raise FetchFailure(
                            ErrorCode.OPERATION_FAILED,
                            f"redirect to unsupported scheme refused: {target}",
                            self.clock.now() - start,
                            redirects,
                        )
                    if is_private_host(target.host) and not allow_private:
                        raise FetchFailure(
                            ErrorCode.OPERATION_FAILED,
                            f"redirect to a non-public address refused: {target}",
                            self.clock.now() - start,
                            redirects,
                        )
                    if response.status_code == 303:
                        method = "GET"
                    current = target
                    continue
                body = await self._read_capped(response, received)
            finally:
                await response.aclose()
            return Fetched(
                status=response.status_code,
                headers={k.lower(): v for k, v in response.headers.items()},
                body=body,
                url=str(current),
                elapsed_s=self.clock.now() - start,
                redirects=redirects,
            )
        raise FetchFailure(
            ErrorCode.OPERATION_FAILED,
            f"more than {self.config.max_redirects} redirects",
            self.clock.now() - start,
            redirects,
        )

    async def _read_capped(self, response: httpx.Response, received: list[int]) -> bytes:
        """Read the body, decoding gzip/deflate ourselves in bounded steps, so a bomb is
        stopped after at most `max_bytes` of output, never fully inflated in memory."""
        cap = self.config.max_bytes
        declared = response.headers.get("content-length")
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if declared and declared.isdigit() and int(declared) > cap and encoding == "identity":
            raise FetchFailure(
                ErrorCode.INVALID_RESPONSE,
                f"body of {int(declared)} bytes is over the {cap}-byte cap",
            )
        decoder = _decoder(encoding)
        out = bytearray()

        def take(data: bytes) -> None:
            out.extend(data)
            received[0] = len(out)
            if len(out) > cap:
                raise FetchFailure(
                    ErrorCode.INVALID_RESPONSE,
                    f"body over the {cap}-byte cap (counted after decompression)",
                )

        if response.is_stream_consumed:
            # a transport built the response from bytes and httpx already decoded it
            take(response.content)
            return bytes(out)
        async for raw in response.aiter_raw():
            if decoder is None:
                take(raw)
                continue
            data = raw
            while data:
                try:
                    chunk = decoder.decompress(data, cap + 1 - len(out))
                except zlib.error as exc:
                    raise FetchFailure(
                        ErrorCode.INVALID_RESPONSE, f"{encoding} body is corrupt ({exc})"
                    ) from exc
                take(chunk)
                data = decoder.unconsumed_tail
        if decoder is not None:
            take(decoder.flush())
        return bytes(out)


def _decoder(encoding: str) -> Any:
    if encoding in ("identity", ""):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise FetchFailure(ErrorCode.INVALID_RESPONSE, f"unsupported content-encoding {encoding!r}")
