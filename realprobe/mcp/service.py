"""The MCP service: one low-level `mcp` Server over the chosen catalogue tools, one HttpClient.

The low-level Server is used (not MCPServer) because the tools are data, not Python
functions: their input and output schemas come from the catalogue as JSON Schema, and every
result is built here (structured content on success, an `isError` result with the taxonomy
code otherwise). Unknown tools are JSON-RPC errors (-32602); arguments of the wrong type are
`isError` results with INVALID_INPUT, so a model can correct itself.

The HttpClient comes from `make_client`, so live, sandbox, record, replay and simulate are
all the same code here. It is opened by `start()` and closed by `close()` (record mode writes
its cassette on close), shielded from cancellation so a shutdown never loses the cassette.
Calls that go to the real APIs wait for their turn under the catalogue's politeness
(`politeness.py`). Where calls go is the client's `Target`; with `--db`, every served call is
stored as a probe row with `source = mcp` and that target's kind, so `stats` and the other
readers keep MCP-served sandbox or simulated calls apart from live probes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
)

from realprobe.adapters import ToolResult, call_tool
from realprobe.adapters.catalog import Catalog
from realprobe.adapters.deadline import GRACE_S, DeadlineGuard
from realprobe.adapters.tool import Tool
from realprobe.clients import TransportOptions, make_client
from realprobe.clock import Clock
from realprobe.errors import RealprobeError
from realprobe.hosts import HeldBack, HostGates, held_back_result
from realprobe.http.client import ClientConfig, HttpClient
from realprobe.mcp.definitions import mcp_tool
from realprobe.mcp.rendering import ToolListCache, render_result
from realprobe.mcp.rows import RunRows, new_run_id, reached_the_api
from realprobe.store import Database, default_vantage, open_db
from realprobe.target import Target
from realprobe.tasks.settings import EvalSettings
from realprobe.version import __version__

log = logging.getLogger("realprobe.mcp")



@dataclass
class ServiceOptions:
    transport: TransportOptions = field(default_factory=TransportOptions)
    tools: str | None = None  # comma-separated names; None or "all" serves every tool
    timeout_s: float | None = None  # total deadline per call; None: the client's default
    db: str | Path | Database | None = None  # store every served call as a probe row
    vantage: str | None = None
    #: hold calls to real APIs to the catalogue's per-host politeness (live/record only)
    polite: bool = True
    #: a task id: the connected agent's calls are one scored task run (stored in `db`)
    task: str | None = None
    #: the task runs' settings (default: the transport's, baseline prompt)
    settings: EvalSettings | None = None
    model: str = "-"  # how results label the connected agent's runs


class McpService:
    """Serve `tools` over MCP. Use `async with McpService(...)` around serving."""

    def __init__(
        self,
        catalog: Catalog,
        options: ServiceOptions | None = None,
        *,
        clock: Clock | None = None,
        gates: HostGates | None = None,
    ) -> None:
        """`gates`: per-host limiters to share with probe runs or task runs in this process
        (calls to the real APIs wait for them); by default the service has its own."""
        self.catalog = catalog
        self.options = options or ServiceOptions()
        self.transport_options = self.options.transport.normalised()
        self.tools: dict[str, Tool] = {t.name: t for t in catalog.select(self.options.tools)}
        if not self.tools:
            raise RealprobeError("no tools selected: name at least one in tools", param="tools")
        self.definitions = [mcp_tool(t) for t in self.tools.values()]
        self.session: Any = None
        if self.options.task is not None:
            from realprobe.mcp.task_session import open_session

            self.session = open_session(catalog, self.options)
            self.definitions += self.session.definitions
        elif self.transport_options.fault_plan is not None:  # no task's path to bind to
            from realprobe.simulator.plans import load_plan, without_task

            without_task(load_plan(self.transport_options.fault_plan), "mcp without --task")
        timeout = self.options.timeout_s
        self.config = ClientConfig(deadline_s=timeout) if timeout else ClientConfig()
        self._clock = clock
        self._client: HttpClient | None = None
        self._shared_gates = gates
        self.gates: HostGates | None = None
        self._store: RunRows | None = None
        self.run_id = new_run_id()
        self.calls = 0
        #: replay and simulation keep time on one virtual clock, which concurrent calls would
        #: each see move by the others' latency (and time out): there, calls take turns
        self._one_at_a_time = asyncio.Lock()
        self.server: Server[Any] = Server(
            "realprobe",
            version=__version__,
            title="realprobe public-API tools",
            description="Free public web APIs as read-only tools, with timeouts, an error "
            "taxonomy, recording and fault injection in between.",
            instructions=self._instructions(),
            on_list_tools=self._on_list_tools,
            on_call_tool=self._on_call_tool,
        )
        self.server.middleware.append(ToolListCache())

    # -- lifecycle --------------------------------------------------------------------

    @property
    def client(self) -> HttpClient:
        if self._client is None:
            raise RuntimeError("McpService used before start()")
        return self._client

    async def start(self) -> None:
        """Open the HttpClient (and the database); bad options raise RealprobeError here."""
        if self._client is not None or self.session is not None:
            return  # a task session opens a client per run (and stores task runs)
        if self.options.db:
            self._store = RunRows(
                open_db(self.options.db), mode=self.transport_options.mode.value,
                target=self.target, vantage=self.vantage, timeout_s=self.deadline_s,
                tools=list(self.tools), run_id=self.run_id)
        try:
            self._client = make_client(
                self.catalog, self.transport_options, clock=self._clock, config=self.config
            )
            if self.options.polite and self.target.reaches_network:
                self.gates = self._shared_gates or HostGates(self._client.clock)
        except BaseException:
            self._close_store("failed")
            raise

    async def close(self) -> None:
        client, self._client = self._client, None
        with anyio.CancelScope(shield=True):
            try:
                if self.session is not None:
                    await self.session.close()  # a run in progress is scored as it stands
                if client is not None:
                    await client.aclose()
            finally:
                self._close_store("done")

    async def __aenter__(self) -> McpService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def target(self) -> Target:
        """Where calls go: the client's target once started, else the options'."""
        return self._client.target if self._client is not None else self.transport_options.target

    @property
    def deadline_s(self) -> float:
        return self.options.timeout_s or self.config.deadline_s

    # -- the store --------------------------------------------------------------------

    def _close_store(self, status: str) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close(status)

    @property
    def vantage(self) -> str:
        return self.options.vantage or default_vantage()

    def _record(
        self, tool: Tool, result: ToolResult, started_wall: float, args: Any,
        virtual_s: float | None,
    ) -> None:
        if self._store is not None and reached_the_api(result):
            self._store.add(result, tool=tool.name, api=tool.api_id, started_wall=started_wall,
                            args=args, target=self.target, virtual_s=virtual_s)

    # -- MCP handlers -----------------------------------------------------------------

    def _instructions(self) -> str:
        if self.session is not None:
            return str(self.session.instructions)
        return (
            f"{len(self.tools)} read-only tools over public web APIs "
            f"(target: {self.transport_options.target.describe()}). A failed call returns an "
            "error result whose text starts with an error code (TIMEOUT, NETWORK_ERROR, "
            "RATE_LIMIT_ERROR, SERVER_ERROR, INVALID_INPUT, NOT_FOUND, AUTH_ERROR, "
            "INVALID_RESPONSE, OPERATION_FAILED) and says whether a retry may help and after "
            "how long."
        )

    async def _on_list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=self.definitions)

    async def _on_call_tool(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        return await self.call(params.name, params.arguments)

    def _unknown(self, name: str) -> MCPError:
        import difflib

        close = difflib.get_close_matches(name, list(self.tools), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        served = ""
        if name in self.catalog:
            served = " (it is in the catalogue, but this server was started without it)"
        return MCPError(
            INVALID_PARAMS,
            f"Unknown tool: {name!r}{served}.{hint} tools/list gives the {len(self.tools)} tools.",
        )

    async def call(self, name: str, arguments: dict[str, Any] | None) -> CallToolResult:
        """Serve one tools/call. Never raises for API failures; unknown tools raise MCPError."""
        if self.session is not None and (name in self.tools or self.session.serves(name)):
            return await self.session.handle(name, arguments)
        tool = self.tools.get(name)
        if tool is None:
            raise self._unknown(name)
        result, reached = await self._serve(tool, arguments or {})
        if reached:
            return render_result(result, tool.api_id)
        return render_result(result, tool.api_id, wait_from="realprobe's politeness, not the API")

    async def _serve(self, tool: Tool, args: dict[str, Any]) -> tuple[ToolResult, bool]:
        """(result, whether the call reached the API at all)."""
        if self.client.clock.virtual:
            async with self._one_at_a_time:
                return await self._serve_now(tool, args)
        return await self._serve_now(tool, args)

    async def _serve_now(self, tool: Tool, args: dict[str, Any]) -> tuple[ToolResult, bool]:
        client = self.client
        # rows carry the real moment of the call; a virtual clock's place goes in virtual_s
        started_wall, started_clock = time.time(), client.clock.now()
        deadline = self.deadline_s
        reached = True
        # call_tool keeps its own deadline; this backstop only matters if a transport
        # ignores it, so that nothing is held past deadline + grace in real time.
        with DeadlineGuard(deadline, virtual=client.clock.virtual,
                           grace_s=GRACE_S + client.grace_s) as guard:
            if self.gates is None:
                result = await call_tool(tool, args, client, timeout_s=self.options.timeout_s)
            else:
                try:
                    async with self.gates.turn(tool.api, deadline) as waited:
                        started_wall, started_clock = time.time(), client.clock.now()
                        result = await call_tool(tool, args, client, timeout_s=deadline - waited)
                    self.gates.note(tool.api, result)  # Retry-After pauses the host
                except HeldBack as held:
                    reached = False
                    result = held_back_result(tool.name, held)
        if guard.expired:
            result = guard.timeout_result(tool.name)
        self.calls += 1
        if reached:
            virtual_s = started_clock if client.clock.virtual else None
            self._record(tool, result, started_wall, args, virtual_s)
        return result, reached
