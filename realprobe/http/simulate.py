"""The simulate transport: every catalogue tool served in process from its real fixture bodies,
with outcomes drawn from a Profile by the seeded fault model. No sockets. The fixture is
chosen by the request's arguments exactly as the sandbox chooses it (`simulator.fixtures`),
so `agify_age name=michael` is answered about michael in both.

On the default virtual clock nothing sleeps: latencies advance the clock, and a hang or a
drip past the call's deadline raises httpx.ReadTimeout at the moment it would have fired.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import AsyncIterator, Mapping

import httpx

from realprobe.adapters.catalog import Catalog
from realprobe.clock import Clock, VirtualClock
from realprobe.http.client import DEADLINE_EXT
from realprobe.http.transports import origin_of
from realprobe.simulator.faults import FaultModel, Injection, Outcome
from realprobe.simulator.fixtures import choose_fixture, request_arguments
from realprobe.simulator.plans import FaultPlan
from realprobe.simulator.profile import Profile
from realprobe.simulator.render import (
    BODY_VARIANTS,
    MOVED_PREFIX,
    Plan,
    choose_variant,
    render,
)
from realprobe.simulator.routes import Body, Route, RouteTable


def _when_pairs(
    when: Mapping[str, str | int | float | bool | list[str | int | float | bool]],
) -> tuple[tuple[str, str], ...]:
    """`when` as string pairs; a listed key appears once per value (any of them matches)."""
    return tuple(
        (k, str(x)) for k, v in when.items() for x in (v if isinstance(v, list) else [v])
    )


def routes_from_catalog(catalog: Catalog) -> RouteTable:
    routes = []
    for tool in catalog:
        base_path = httpx.URL(tool.api.base_url).path.rstrip("/")
        bodies = [
            Body(
                kind=f.kind,
                status=f.status,
                content_type=f.content_type,
                headers=tuple(f.headers.items()),
                body=f.body.encode("utf-8"),
                code=f.code,
                when=_when_pairs(f.when),
                unknown_input=f.unknown_input,
            )
            for f in tool.spec.fixtures
        ]
        routes.append(
            Route(
                api_id=tool.api_id,
                tool=tool.name,
                method=tool.spec.method,
                path=base_path + tool.spec.path,
                response=tool.spec.response,
                bodies=bodies,
                query=dict(tool.spec.query),
                echo=tuple(tool.spec.echo.items()),
                examples=tuple(
                    tuple((k, str(v)) for k, v in ex.items()) for ex in tool.spec.examples
                ),
                origin=origin_of(tool.api.base_url),
                parse=tool.parse,
            )
        )
    return RouteTable(routes)


def origins_of(catalog: Catalog) -> dict[str, str]:
    """{origin: api_id} for routing canonical URLs."""
    return {origin_of(api.base_url): api.id for api in catalog.apis.values()}


#: each catalogue's routes and origins, built once: every task run of a batch makes its own
#: transport over the same catalogue (the tables are only read once built)
_ROUTING: weakref.WeakKeyDictionary[Catalog, tuple[int, RouteTable, dict[str, str]]] = (
    weakref.WeakKeyDictionary()
)


def _routing_of(catalog: Catalog) -> tuple[RouteTable, dict[str, str]]:
    known = _ROUTING.get(catalog)
    if known is not None and known[0] == len(catalog.tools):
        return known[1], known[2]
    routes, origins = routes_from_catalog(catalog), origins_of(catalog)
    _ROUTING[catalog] = (len(catalog.tools), routes, origins)
    return routes, origins


class _FailingStream(httpx.AsyncByteStream):
    def __init__(self, head: bytes, exc: Exception) -> None:
        self.head = head
        self.exc = exc

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.head:
            yield self.head
        raise self.exc


class SimulateTransport(httpx.AsyncBaseTransport):
    def __init__(
        self,
        catalog: Catalog,
        profile: Profile,
        *,
        seed: int | str = 0,
        clock: Clock | None = None,
        real_time: bool = False,
        plan: FaultPlan | None = None,
    ) -> None:
        self.routes, self.origins = _routing_of(catalog)
        self.model = FaultModel(profile, seed, plan)
        #: the last body each tool answered (what a `stale` fault repeats)
        self.earlier: dict[str, bytes] = {}
        self.clock: Clock = clock or VirtualClock()
        self.real_time = real_time
        self.calls = 0

    def _find(self, request: httpx.Request) -> tuple[Route | None, str]:
        url = request.url
        port = f":{url.port}" if url.port else ""
        api = self.origins.get(f"{url.scheme}://{url.host}{port}")
        path = url.path
        if path.startswith(MOVED_PREFIX + "/"):
            path = path[len(MOVED_PREFIX) :]
        if api is None:
            return None, path
        return self.routes.match(api, request.method, path), path

    async def _wait(self, seconds: float) -> None:
        if self.real_time:
            await asyncio.sleep(seconds)
        if self.clock.virtual:
            await self.clock.sleep(seconds)

    def _budget(self, request: httpx.Request) -> float:
        """Seconds left before this request's read timeout or the call's deadline fires."""
        timeout = request.extensions.get("timeout", {})
        read = timeout.get("read")
        budget = math.inf if read is None else float(read)
        deadline = request.extensions.get(DEADLINE_EXT)
        if deadline is not None:
            budget = min(budget, float(deadline) - self.clock.now())
        return max(0.0, budget)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        route, path = self._find(request)
        if route is None:
            return httpx.Response(
                404, headers={"Content-Type": "text/plain"}, content=b"Not Found", request=request
            )
        outcome = self.model.draw(route.tool, self.clock.wall())
        ok = self._body_for(route, outcome, path, request.url.query.decode("latin-1"))
        plan = render(route, outcome, path=path, now_wall=self.clock.wall(), ok=ok,
                      earlier=self.earlier.get(route.tool))  # fmt: skip
        if outcome.code is None and plan.variant != "no_fixture" and not outcome.implicit:
            plan.variant, plan.code = "ok", None  # an unknown-input 404 is the API's answer
        if plan.code is None and plan.status == 200:
            self.earlier[route.tool] = plan.body
        if outcome.injected and self.model.ledger:
            self.model.ledger[-1].note = plan.note
        return await self.play(plan, request)

    @property
    def ledger(self) -> list[Injection]:
        """Every fault injected so far (evaluators read it; the agent never sees it)."""
        return self.model.ledger

    @staticmethod
    def _body_for(route: Route, outcome: Outcome, path: str, query: str) -> Body | None:
        """The fixture for the request's arguments (as the sandbox chooses it), when the
        drawn variant is built from a success body."""
        variant = outcome.variant or (
            "ok" if outcome.code is None else choose_variant(route, outcome)[0]
        )
        if variant not in BODY_VARIANTS:
            return None
        chosen = choose_fixture(route, request_arguments(route, path, query), outcome.pick)
        return chosen.body if chosen is not None else None

    async def play(self, plan: Plan, request: httpx.Request) -> httpx.Response:
        budget = self._budget(request)
        if plan.action == "hang" or plan.delay_s > budget:
            await self._wait(budget)
            raise httpx.ReadTimeout("simulated: no answer before the timeout", request=request)
        await self._wait(plan.delay_s)
        if plan.action == "reset":
            raise httpx.ReadError("simulated: connection reset by peer", request=request)
        headers = list(plan.headers)
        if plan.action == "drip":
            # one byte a second: the call's deadline fires long before the body ends
            seconds = float(len(plan.body))
            left = self._budget(request)
            if seconds > left:
                await self._wait(left)
                raise httpx.ReadTimeout(
                    "simulated: body still dripping at the deadline", request=request
                )
            await self._wait(seconds)
        if plan.action in ("reset_mid_body", "truncated"):
            head = plan.body[: len(plan.body) // 2]
            exc: Exception
            if plan.action == "truncated":
                exc = httpx.RemoteProtocolError(
                    "simulated: peer closed connection without sending complete message body",
                    request=request,
                )
            else:
                exc = httpx.ReadError("simulated: connection reset mid-body", request=request)
            headers.append(("Content-Length", str(len(plan.body))))
            return httpx.Response(
                plan.status, headers=headers, stream=_FailingStream(head, exc), request=request
            )
        # a raw stream, so the client decodes (and caps) compressed bodies itself
        return httpx.Response(
            plan.status, headers=headers, stream=httpx.ByteStream(plan.body), request=request
        )
