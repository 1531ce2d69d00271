"""Proxy mode: the sandbox forwards `/<api-id>/<path>` to an upstream and puts the profile's
faults, latency and toxics on top of the real answer.

Upstream `live` is each API's real base URL; a URL (tests, a second sandbox) replaces the
origin, and a literal `{api}` in it is replaced by the API id. The call goes through the one
client factory (`replay.client.HttpClient`), so its deadline, size cap and redirect policy
hold. Calls that reach a live upstream are held to the catalogue's politeness per host (at
most `max_in_flight` in flight, starts `min_interval_s` apart; a request waits for its turn)
and to each API's `daily_budget` per UTC day (past it: 429 with Retry-After, nothing sent),
counted in the probes' store when one is given, so live probes and the proxy share it.
Faults that need no upstream body (a 500, a reset, a hang) never reach the upstream.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from realprobe.adapters.http import Fetched, FetchFailure
from realprobe.adapters.spec import Politeness
from realprobe.clock import Clock, RealClock
from realprobe.errors import ErrorCode
from realprobe.replay.client import ClientConfig, HttpClient
from realprobe.replay.transports import live_transport
from realprobe.simulator.routes import Body
from realprobe.store import Store

LIVE = "live"
#: response headers not passed on (the sandbox frames the body itself, already decoded)
DROPPED = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding",
     "content-type"}
)
FORWARDED_REQUEST_HEADERS = ("accept", "accept-language")
#: a request waits at most this long for its politeness turn, then gets a 429
MAX_POLITE_WAIT_S = 30.0


class HeldBack(Exception):
    def __init__(self, why: str, retry_after_s: float) -> None:
        super().__init__(why)
        self.why = why
        self.retry_after_s = retry_after_s


@dataclass
class _Gate:
    policy: Politeness
    next_start: float = float("-inf")
    day: str = ""
    used: int = 0
    slots: asyncio.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self.slots = asyncio.Semaphore(max(1, self.policy.max_in_flight))


#: counts one call against (day, api)'s budget of `limit`; False when it is spent
Ledger = Callable[[str, str, int], bool]


def store_ledger(db: str | Path) -> Ledger:
    """The probes' daily budget ledger in the SQLite store (target `live`): the proxy and
    live probe runs share one budget per API and day, across processes."""
    store: list[Store] = []

    def take(day: str, api: str, limit: int) -> bool:
        if not store:
            store.append(Store(db))
        return store[0].budget_take(day, api, "live", limit)

    return take


class PoliteGates:
    """Per-API start spacing, in-flight limit and daily budget, on an injectable clock. The
    budget is counted in `ledger` when given (the store), else by this process."""

    def __init__(
        self, policies: Mapping[str, Politeness], clock: Clock, ledger: Ledger | None = None
    ) -> None:
        self.policies = dict(policies)
        self.clock = clock
        self.ledger = ledger
        self._gates: dict[str, _Gate] = {}

    def _gate(self, api: str) -> _Gate | None:
        if api not in self.policies:
            return None
        gate = self._gates.get(api)
        if gate is None:
            gate = self._gates[api] = _Gate(self.policies[api])
        return gate

    def _day(self) -> str:
        return dt.datetime.fromtimestamp(self.clock.wall(), dt.UTC).strftime("%Y-%m-%d")

    def _to_midnight(self) -> float:
        now = dt.datetime.fromtimestamp(self.clock.wall(), dt.UTC)
        midnight = (now + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        return (midnight - now).total_seconds()

    async def acquire(self, api: str) -> _Gate | None:
        """Wait for this API's turn (raises HeldBack); the caller releases the gate."""
        gate = self._gate(api)
        if gate is None:
            return None
        day = self._day()
        if gate.day != day:
            gate.day, gate.used = day, 0
        spent = gate.used >= gate.policy.daily_budget
        if self.ledger is not None:
            spent = not self.ledger(day, api, gate.policy.daily_budget)
        if spent:
            raise HeldBack(
                f"daily budget of {gate.policy.daily_budget} calls to {api} used up",
                self._to_midnight(),
            )
        now = self.clock.now()
        start = max(now, gate.next_start)
        if start - now > MAX_POLITE_WAIT_S:
            raise HeldBack(f"next turn for {api} is {start - now:.0f}s away", start - now)
        gate.next_start = start + gate.policy.min_interval_s
        gate.used += 1
        if start > now:
            await self.clock.sleep(start - now)
        await gate.slots.acquire()
        return gate

    @staticmethod
    def release(gate: _Gate | None) -> None:
        if gate is not None:
            gate.slots.release()


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
        self.polite = PoliteGates(politeness or {}, self.clock, ledger)
        self.calls = 0

    def url_for(self, api: str, path: str, query: str) -> str | None:
        """The upstream URL of `/<api>/<path>?<query>` (`path` is the API's own path)."""
        q = f"?{query}" if query else ""
        if self.live:
            base = self.base_urls.get(api)
            if base is None:
                return None
            url = httpx.URL(base)
            port = f":{url.port}" if url.port else ""
            return f"{url.scheme}://{url.host}{port}{path}{q}"
        return self.target.replace("{api}", api).rstrip("/") + path + q

    async def fetch(
        self, api: str, method: str, path: str, query: str, headers: Mapping[str, str]
    ) -> Fetched:
        """One upstream call; raises FetchFailure (with its taxonomy code) or HeldBack."""
        url = self.url_for(api, path, query)
        if url is None:
            raise FetchFailure(ErrorCode.OPERATION_FAILED, f"no base URL for API {api!r}")
        sent = {k: v for k, v in headers.items() if k.lower() in FORWARDED_REQUEST_HEADERS}
        gate = await self.polite.acquire(api)
        try:
            self.calls += 1
            return await self.client.fetch(
                method, url, headers=sent or None, allow_private=not self.live
            )
        finally:
            self.polite.release(gate)

    async def aclose(self) -> None:
        await self.client.aclose()


def upstream_body(fetched: Fetched) -> Body:
    """The upstream's answer as a servable body: its bytes (decoded), status and headers."""
    ctype = fetched.headers.get("content-type", "application/octet-stream")
    headers = tuple(
        (k, v)
        for k, v in fetched.headers.items()
        if k.lower() not in DROPPED and not k.lower().startswith("x-realprobe-")
    )
    return Body("ok", fetched.status, ctype, headers, fetched.body, None)
