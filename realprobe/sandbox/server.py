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

HTTP parsing is h11's; the socket is ours, so hangs, drips and resets are real. The server
base (`realprobe.serving`) holds the guards every realprobe server shares: foreign Host
(421) and cross-origin requests (403) are refused, `/_admin` writes must be JSON, an optional
bearer token, header/idle timeouts (408, close) and a body limit (413).

Every API request carries a request id: the client's `X-Request-Id` when it sends a sane one,
else a fresh one; it is echoed in the response's `X-Request-Id` and kept in the journal entry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from urllib.parse import urlsplit

import h11

from realprobe.sandbox import wire
from realprobe.sandbox.admin import ADMIN, JOURNAL
from realprobe.sandbox.bodies import BodySource, Recordings
from realprobe.sandbox.journal import Journal
from realprobe.sandbox.proxy import Upstream
from realprobe.sandbox.responder import FAULT_PREFIX, Responder
from realprobe.sandbox.responder import Stats as SandboxStats
from realprobe.sandbox.runtime import Runtime
from realprobe.serving import (
    HEADER_TIMEOUT_S,
    IDLE_TIMEOUT_S,
    MAX_CONNECTIONS,
    Guard,
    H11Server,
    Limits,
    Request,
    ServerThread,
    running,
)
from realprobe.simulator.plans import FaultPlan
from realprobe.simulator.profile import Profile
from realprobe.simulator.routes import RouteTable

__all__ = ["FAULT_PREFIX", "Sandbox", "SandboxStats", "SandboxThread", "running"]


class Sandbox(H11Server):
    server_name = "sandbox"
    #: the runtime API answers even when the API paths have every connection
    reserved_paths = (ADMIN, JOURNAL, "/_health")

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
        allowed_hosts: tuple[str, ...] = (),
        auth_token: str | None = None,
        journal: Journal | None = None,
        plan: FaultPlan | None = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        """`origins` ({api id: origin of its real base URL}) lets recorded requests be
        matched; `recordings` serves their responses first; `upstream` makes this a proxy;
        `max_connections` are served at once (one client holds at most its share of them)."""
        # the sandbox router keeps each API's own Host (as a forward proxy would send it):
        # the catalogue's hosts are served names too
        api_origins = {r.origin for r in routes.routes if r.origin} | set((origins or {}).values())
        api_hosts = tuple(sorted(urlsplit(o).netloc for o in api_origins))
        guard = Guard(host, (*allowed_hosts, *api_hosts), auth_token,
                      json_paths=(ADMIN, JOURNAL))
        super().__init__(host, port, guard=guard,
                         limits=Limits(header_timeout_s, idle_timeout_s, max_connections))
        self.routes = routes
        self.latency_scale = latency_scale
        self.stats = SandboxStats()
        self.runtime = Runtime(profile, seed, plan)
        self.journal = journal or Journal()
        self.upstream = upstream
        self.responder = Responder(
            routes,
            self.runtime,
            self.journal,
            BodySource(origins or {}, recordings),
            upstream=upstream,
            admin=admin,
            stats=self.stats,
            latency_scale=latency_scale,
        )

    @property
    def profile(self) -> Profile | None:
        return self.runtime.profile

    async def stop(self) -> None:
        await super().stop()
        if self.upstream is not None:
            await self.upstream.aclose()

    async def handle(
        self,
        conn: h11.Connection,
        request: Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        answer = await self.responder.answer(
            request.method, request.target, request.body, request.headers
        )
        if answer.entry is None:  # control paths: no toxics, no journal
            return await wire.send(
                conn, answer.plan, answer.active, reader, writer,
                self.journal.detached(), self.runtime.rng, 0.0,
            )
        return await wire.send(
            conn, answer.plan, answer.active, reader, writer, answer.entry,
            self.runtime.rng, self.latency_scale, wire.budget_of(request.headers),
        )


#: a Sandbox on its own event loop in a background thread (tests, demo, benchmarks)
SandboxThread = ServerThread
