"""Proxy mode: the sandbox forwards `/<api-id>/<path>` to an upstream and puts the profile's
faults, latency and toxics on top of the real answer.

Upstream `live` is each API's real base URL; a URL (tests, a second sandbox) replaces the
origin, and a literal `{api}` in it is replaced by the API id: only an id of the catalogue,
so a request path never chooses the upstream's host or port. The call goes through the one
client factory (`replay.client.HttpClient`), so its deadline, size cap and redirect policy
hold. Calls that reach a live upstream are held to the catalogue's politeness per host by the
same limiter probes use (at most `max_in_flight` in flight, starts `min_interval_s` apart, an
upstream Retry-After pauses the host; a request waits for its turn up to 30 s)
and to each API's `daily_budget` per UTC day (past it: 429 with Retry-After, nothing sent),
counted in the probes' store when one is given, so live probes and the proxy share it.
Faults that need no upstream body (a 500, a reset, a hang) never reach the upstream.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import httpx

from realprobe.adapters.http import Fetched, FetchFailure
from realprobe.adapters.spec import Politeness
from realprobe.clock import Clock, RealClock, utc_day
from realprobe.errors import ErrorCode
from realprobe.hosts import HeldBack as HeldBack  # what a request held back raises
from realprobe.hosts import HostGates, HostLimiter
from realprobe.http.client import ClientConfig, HttpClient
from realprobe.http.simulate import origin_of
from realprobe.http.transports import live_transport
from realprobe.retry_after import retry_after_of
from realprobe.sandbox.bodies import keep_header
from realprobe.secrets import scrub_url
from realprobe.simulator.routes import Body
from realprobe.store import Database, Store

LIVE = "live"
FORWARDED_REQUEST_HEADERS = ("accept", "accept-language")
#: a request waits at most this long for its politeness turn, then gets a 429
MAX_POLITE_WAIT_S = 30.0


#: counts one call against (day, api)'s budget of `limit`; False when it is spent
Ledger = Callable[[str, str, int], bool]


def store_ledger(db: Database) -> Ledger:
    """The probes' daily budget ledger in the SQLite store (target `live`): the proxy and
    live probe runs share one budget per API and day, across processes."""
    store: list[Store] = []

    def take(day: str, api: str, limit: int) -> bool:
        if not store:
            store.append(db.write())
        return store[0].budget_take(day, api, "live", limit)

    return take


class PoliteGates:
    """Per-host politeness (the shared `HostLimiter`: start spacing, in-flight slots, pauses
    after Retry-After) and each API's daily budget. The budget is counted in `ledger` when
    given (the store), else by this process."""

    def __init__(
        self,
        policies: Mapping[str, Politeness],
        clock: Clock,
        ledger: Ledger | None = None,
        hosts: Mapping[str, str] | None = None,
    ) -> None:
        self.policies = dict(policies)
        self.clock = clock
        self.ledger = ledger
        self.hosts = dict(hosts or {})  # api id -> host key (APIs on one host share it)
        self.gates = HostGates(clock)
        self._used: dict[tuple[str, str], int] = {}

    def _spend(self, api: str, limit: int) -> None:
        """Count one call against the API's budget for today; HeldBack when it is spent."""
        day, to_midnight = utc_day(self.clock.wall())
        if self.ledger is not None:
            spent = not self.ledger(day, api, limit)
        else:
            used = self._used.get((day, api), 0)
            spent = used >= limit
            if not spent:
                self._used[(day, api)] = used + 1
        if spent:
            raise HeldBack(
                api, to_midnight, f"daily budget of {limit} calls to {api} used up"
            )

    async def acquire(self, api: str) -> HostLimiter | None:
        """Wait for this API's host's turn (raises HeldBack); the caller releases it."""
        policy = self.policies.get(api)
        if policy is None:
            return None
        lim = self.gates.limiter(self.hosts.get(api, api), policy)
        try:
            wait = lim.reserve(MAX_POLITE_WAIT_S)
        except HeldBack as exc:
            raise HeldBack(
                api, exc.retry_after_s, f"next turn for {api} is {exc.retry_after_s:.0f}s away"
            ) from None
        try:
            self._spend(api, policy.daily_budget)
        except HeldBack:
            lim.next_start -= policy.min_interval_s  # the turn was not used
            raise
        if wait > 0:
            await self.clock.sleep(wait)
        await lim.slots.acquire()
        return lim

    @staticmethod
    def release(lim: HostLimiter | None, fetched: Fetched | None = None) -> None:
        """Free the slot; an upstream error answer with Retry-After pauses the host."""
        if lim is None:
            return
        lim.slots.release()
        if fetched is not None and fetched.status >= 400:
            code = ErrorCode.RATE_LIMIT_ERROR if fetched.status == 429 else None
            lim.note(code, retry_after_of(fetched.headers))


class Upstream:
    def __init__(
        self,
        target: str,
        base_urls: Mapping[str, str],
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        politeness: Mapping[str, Politeness] | None = None,
        clock: Clock | None = None,
        config: ClientConfig | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        self.target = target
        self.live = target == LIVE
        self.base_urls = {k: v.rstrip("/") for k, v in base_urls.items()}
        self.clock: Clock = clock or RealClock()
        self.client = HttpClient(
            transport or live_transport(), clock=self.clock, config=config or ClientConfig()
        )
        hosts = {api: _host_of(url) for api, url in self.base_urls.items()} if self.live else {}
        self.polite = PoliteGates(politeness or {}, self.clock, ledger, hosts)
        self.calls = 0

    @property
    def shown(self) -> str:
        """The upstream as printed and served at `/_admin`: a password in it or a credential
        in its query replaced (an operator may give `https://user:pass@host/?token=...`)."""
        return scrub_url(self.target)

    def url_for(self, api: str, path: str, query: str) -> str | None:
        """The upstream URL of `/<api>/<path>?<query>` (`path` is the API's own path), or
        None. The host is the operator's: only catalogue API ids fill `{api}`, and the URL
        built must keep the scheme, host and port the operator's upstream gives that id."""
        if api not in self.base_urls or not _API_ID.fullmatch(api):
            return None
        q = f"?{query}" if query else ""
        if self.live:
            base = origin_of(self.base_urls[api])
        else:
            base = self.target.replace("{api}", api).rstrip("/")
        built = base + path + q
        try:
            same = _authority(built) == _authority(base)
        except httpx.InvalidURL:
            return None
        return built if same else None

    async def fetch(
        self, api: str, method: str, path: str, query: str, headers: Mapping[str, str]
    ) -> Fetched:
        """One upstream call; raises FetchFailure (with its taxonomy code) or HeldBack."""
        url = self.url_for(api, path, query)
        if url is None:
            raise FetchFailure(ErrorCode.OPERATION_FAILED, f"no base URL for API {api!r}")
        sent = {k: v for k, v in headers.items() if k.lower() in FORWARDED_REQUEST_HEADERS}
        gate = await self.polite.acquire(api)
        fetched: Fetched | None = None
        try:
            self.calls += 1
            fetched = await self.client.fetch(
                method, url, headers=sent or None, allow_private=not self.live
            )
            return fetched
        finally:
            self.polite.release(gate, fetched)

    async def aclose(self) -> None:
        await self.client.aclose()


#: what may fill `{api}` in an upstream URL: an API id, never a host, port or path
_API_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def _authority(url: str) -> tuple[str, str, int | None]:
    parsed = httpx.URL(url)
    return parsed.scheme, parsed.host, parsed.port


def _host_of(base_url: str) -> str:
    url = httpx.URL(base_url)
    return f"{url.host}:{url.port or (443 if url.scheme == 'https' else 80)}"


def upstream_body(fetched: Fetched) -> Body:
    """The upstream's answer as a servable body: its bytes (decoded), status and headers."""
    ctype = fetched.headers.get("content-type", "application/octet-stream")
    # the sandbox frames the body itself, already decoded
    headers = tuple((k, v) for k, v in fetched.headers.items()
                    if keep_header(k) and k.lower() != "content-encoding")
    return Body("ok", fetched.status, ctype, headers, fetched.body, None)
