"""Transports that are not recordings: the live network, and routing to the loopback sandbox."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import ssl
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from realprobe.errors import RealprobeError
from realprobe.http.phases import time_dns
from realprobe.simulator.render import FAULT_PREFIX, is_variant, known_variants

#: the request extension holding the call's id; sent as `X-Request-Id` to a sandbox only
#: (the real APIs get no extra header), which echoes it and journals it
REQUEST_ID_EXT = "realprobe_request_id"
BUDGET_EXT = "realprobe.budget"  # seconds left of the call's deadline when the request was built
#: how a request tells the sandbox the seconds it has left (never sent to a real API)
BUDGET_HEADER = "X-Realprobe-Budget"
#: the number a caller gives a call (a probe's round), so that the sandbox draws that call's
#: outcome whatever order concurrent calls arrive in
DRAW: contextvars.ContextVar[str | None] = contextvars.ContextVar("realprobe_draw", default=None)
DRAW_HEADER = "X-Realprobe-Draw"
#: a sandbox's answer to a request that told its budget: MISSED (the phase the call was in)
#: when the seed drew it to miss the deadline, sent once the budget is spent; otherwise DELAY,
#: the milliseconds the sandbox drew for the answer, so a late-scheduled client keeps it
MISSED_HEADER = "X-Realprobe-Missed"
DELAY_HEADER = "X-Realprobe-Delay-Ms"
#: set on a request the sandbox answers: by the routers when they send it there, and by a
#: replay of a call recorded that way (cassettes keep it), so the client reads the marks
#: above of exactly these answers, live or replayed, and of no other target's
SANDBOX_EXT = "realprobe.sandbox"

#: what a realprobe sandbox's own answers say in `Server`
SANDBOX_SERVER = "realprobe-sandbox"
#: how long the background question "are you a sandbox?" (`GET /_health`) may take
IDENTIFY_TIMEOUT_S = 5.0
#: sandbox URLs remembered (and asked) per process, the newest kept
IDENTIFY_MAX = 256
#: "are you a sandbox?" questions in flight at once
IDENTIFY_INFLIGHT = 8


class _Identities:
    """The sandbox URLs that said they are realprobe sandboxes, in this process. A client
    waits for a sandbox's word past its deadline (the grace) only once the server at that
    URL has identified itself: by an answer with its marks, or by its `/_health` answer,
    asked once in the background when a router first sends there. A server that never says
    so (a wrong `--sandbox URL`, a silent port) costs its callers their plain deadline.
    Both sets keep the newest `IDENTIFY_MAX` URLs; at most `IDENTIFY_INFLIGHT` questions
    are asked at once (past that, marks alone identify)."""

    def __init__(self) -> None:
        self.known: OrderedDict[str, None] = OrderedDict()
        self.asked: OrderedDict[str, None] = OrderedDict()
        self.inflight = 0
        self.lock = threading.Lock()

    @staticmethod
    def key(url: str | httpx.URL) -> str:
        return str(url).rstrip("/")

    def identified(self, url: str | httpx.URL | None) -> bool:
        return url is not None and self.key(url) in self.known

    def note(self, key: str, response: httpx.Response) -> None:
        """An answer from the sandbox at `key`: its marks identify it."""
        if key not in self.known and (
            MISSED_HEADER in response.headers or DELAY_HEADER in response.headers
            or response.headers.get("server") == SANDBOX_SERVER
        ):
            self._know(key)

    def _know(self, key: str) -> None:
        with self.lock:
            _remember(self.known, key)

    def ask(self, key: str) -> None:
        """Ask `<key>/_health` once, on a daemon thread (a silent server holds that thread,
        never a call)."""
        if key in self.known or key in self.asked:  # every call after the first
            return
        with self.lock:
            if key in self.known or key in self.asked or self.inflight >= IDENTIFY_INFLIGHT:
                return
            _remember(self.asked, key)
            self.inflight += 1
        threading.Thread(target=self._ask, args=(key,), name="realprobe-sandbox-identify",
                         daemon=True).start()

    def _ask(self, key: str) -> None:
        try:
            with httpx.Client(timeout=IDENTIFY_TIMEOUT_S, trust_env=False,
                              verify=ssl_context()) as client, \
                    client.stream("GET", key + "/_health") as answer:  # the body is not read
                said = answer.status_code == 200 and answer.headers.get("server") == SANDBOX_SERVER
        except (httpx.HTTPError, OSError, ValueError):
            said = False
        finally:
            with self.lock:
                self.inflight -= 1
        if said:
            self._know(key)


def _remember(urls: OrderedDict[str, None], key: str) -> None:
    urls[key] = None
    urls.move_to_end(key)
    while len(urls) > IDENTIFY_MAX:
        urls.popitem(last=False)


IDENTITIES = _Identities()


@functools.lru_cache(maxsize=8)
def _ssl_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    # loading the CA bundle costs tens of milliseconds: once per trust setting, not per client
    return httpx.create_ssl_context(trust_env=True)


def ssl_context() -> ssl.SSLContext:
    """The verifying TLS context (honours SSL_CERT_FILE / SSL_CERT_DIR), shared."""
    return _ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


#: the pool of a client made without a ClientConfig (a client's config sizes its own)
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=100)


def live_transport(limits: httpx.Limits | None = None) -> HostPools:
    """The real network, one connection pool per host (`limits` is each pool's); DNS is
    timed as its own phase (see `phases`)."""
    return HostPools(limits or DEFAULT_LIMITS)


def _host_pool(limits: httpx.Limits) -> httpx.AsyncHTTPTransport:
    return time_dns(httpx.AsyncHTTPTransport(verify=ssl_context(), retries=0, limits=limits))


class HostPools(httpx.AsyncBaseTransport):
    """The live network with a connection pool per origin. httpcore's pool looks through all
    of its connections for every request it places, so a single pool over a few hundred
    hosts spends more CPU on that than on the calls (quadratic in the hosts in flight)."""

    def __init__(self, limits: httpx.Limits) -> None:
        self.limits = limits
        self.pools: dict[tuple[bytes, bytes, int | None], httpx.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        key = (url.raw_scheme, url.raw_host, url.port)
        pool = self.pools.get(key)
        if pool is None:
            pool = self.pools[key] = _host_pool(self.limits)
        return await pool.handle_async_request(request)

    async def aclose(self) -> None:
        pools, self.pools = list(self.pools.values()), {}
        for pool in pools:
            await pool.aclose()


def sync_live_transport(limits: httpx.Limits | None = None) -> httpx.HTTPTransport:
    """The real network for the synchronous client; DNS timed as its own phase."""
    return time_dns(
        httpx.HTTPTransport(
            verify=ssl_context(),
            retries=0,
            limits=limits or DEFAULT_LIMITS,
        )
    )


_TARGET_CACHE = 4096
_NO_TARGET: Any = object()


def _has_host(url: str) -> bool:
    """A host and, if given, a port from 1 to 65535 (`:99999` or `http://[::1` are not URLs
    a client can connect to; they failed later, deep in the transport)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return bool(parts.hostname) and port != 0


def check_sandbox_url(url: str) -> None:
    """A sandbox is an http(s) URL; a `/_fault/<variant>/` in it must name a known variant."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")) or not _has_host(
        url
    ):
        raise RealprobeError(
            f"sandbox {url!r}: expected a URL like http://127.0.0.1:8765", param="sandbox"
        )
    marker = url.find(FAULT_PREFIX)
    if marker < 0:
        return
    variant = url[marker + len(FAULT_PREFIX) :].split("/", 1)[0].split("?", 1)[0]
    if not is_variant(variant):
        raise RealprobeError(
            f"sandbox {url!r}: unknown fault variant {variant!r}; "
            f"known variants: {known_variants()}",
            param="sandbox",
        )


def origin_of(url: str | httpx.URL) -> str:
    """`scheme://host[:port]` of a URL: what routes an API's calls to the sandbox."""
    if isinstance(url, str):
        url = httpx.URL(url)
    return f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")


class _Routes:
    """Canonical API URL <-> `<sandbox>/<api-id>/<original path>`, for both routers."""

    def __init__(self, sandbox_url: str, origins: Mapping[str, str]) -> None:
        self.sandbox = httpx.URL(sandbox_url.rstrip("/"))
        self.identity = IDENTITIES.key(sandbox_url)
        # origin ("https://api.example.com") -> api id
        self.origins = dict(origins)
        self.by_api = {api: origin for origin, api in self.origins.items()}
        self._base_path = self.sandbox.raw_path.decode().split("?")[0].rstrip("/")
        self._targets: dict[tuple[str, str, int | None, bytes], httpx.URL | None] = {}

    def target(self, url: httpx.URL) -> httpx.URL | None:
        """Where a canonical URL lives in the sandbox; None for hosts outside the catalogue.

        Probes repeat the same URLs, so targets are cached (building an httpx.URL parses it)."""
        key = (url.scheme, url.host, url.port, url.raw_path)
        hit = self._targets.get(key, _NO_TARGET)
        if hit is not _NO_TARGET:
            return hit
        api = self.origins.get(origin_of(url))
        target = None
        if api is not None:
            target = self.sandbox.copy_with(
                raw_path=(self._base_path + f"/{api}" + url.raw_path.decode()).encode()
            )
        if len(self._targets) >= _TARGET_CACHE:
            self._targets.clear()
        self._targets[key] = target
        return target

    def unroute(self, response: httpx.Response) -> httpx.Response:
        """Map a Location pointing back into the sandbox to canonical form."""
        location = response.headers.get("location")
        if location:
            response.headers["location"] = self._unroute(location)
        return response

    def _unroute(self, location: str) -> str:
        """`/<api>/path` or `<sandbox>/<api>/path` back to `<origin>/path`."""
        sandbox_origin = origin_of(self.sandbox)
        rest = location
        if rest.startswith(sandbox_origin):
            rest = rest[len(sandbox_origin) :]
        elif "://" in rest:
            return location  # somewhere else entirely: leave it for the redirect policy
        if self._base_path and rest.startswith(self._base_path + "/"):
            rest = rest[len(self._base_path) :]
        parts = rest.split("/", 2)
        if len(parts) >= 2 and parts[1] in self.by_api:
            return self.by_api[parts[1]] + "/" + (parts[2] if len(parts) > 2 else "")
        return location


@contextlib.contextmanager
def _pointed_at(request: httpx.Request, target: httpx.URL) -> Iterator[None]:
    """Swap the URL for the duration of the send instead of building a second Request
    (that costs ~40 us a call); the canonical URL is back before anyone else looks. The
    Host header stays the API's own, as a forward proxy would send it."""
    canonical = request.url
    request.url = target
    request.extensions[SANDBOX_EXT] = True
    request_id = request.extensions.get(REQUEST_ID_EXT)
    added = bool(request_id) and "x-request-id" not in request.headers
    if added:
        request.headers["X-Request-Id"] = str(request_id)
    # the sandbox answers before this (see `realprobe.sandbox.wire`): whether a call makes
    # its deadline is then decided by the seed and the request, not by a loaded machine
    budget, draw = request.extensions.get(BUDGET_EXT), DRAW.get()
    if budget is not None:
        request.headers[BUDGET_HEADER] = f"{budget:.3f}"
    if draw is not None:
        request.headers[DRAW_HEADER] = draw
    try:
        yield
    finally:
        request.url = canonical
        if added:  # recordings above this transport never see it
            del request.headers["X-Request-Id"]
        if budget is not None:
            del request.headers[BUDGET_HEADER]
        if draw is not None:
            del request.headers[DRAW_HEADER]


class SandboxRouter(_Routes, httpx.AsyncBaseTransport):
    """Sends each canonical API URL to the sandbox at `<sandbox>/<api-id>/<original path>`.

    Requests keep their canonical URLs everywhere above this transport (adapters, redirect
    policy, cassettes), so a recording made against the sandbox replays whatever port the
    sandbox had. Non-catalogue hosts (an LLM endpoint, say) go to `inner` unchanged.
    """

    def __init__(
        self,
        sandbox_url: str,
        origins: Mapping[str, str],
        inner: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(sandbox_url, origins)
        self.inner = inner or live_transport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = self.target(request.url)
        if target is None:
            return await self.inner.handle_async_request(request)
        IDENTITIES.ask(self.identity)
        with _pointed_at(request, target):
            response = await self.inner.handle_async_request(request)
        IDENTITIES.note(self.identity, response)
        return self.unroute(response)

    async def aclose(self) -> None:
        await self.inner.aclose()


class SyncSandboxRouter(_Routes, httpx.BaseTransport):
    """SandboxRouter for the synchronous client."""

    def __init__(
        self,
        sandbox_url: str,
        origins: Mapping[str, str],
        inner: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(sandbox_url, origins)
        self.inner = inner or sync_live_transport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        target = self.target(request.url)
        if target is None:
            return self.inner.handle_request(request)
        IDENTITIES.ask(self.identity)
        with _pointed_at(request, target):
            response = self.inner.handle_request(request)
        IDENTITIES.note(self.identity, response)
        return self.unroute(response)

    def close(self) -> None:
        self.inner.close()


