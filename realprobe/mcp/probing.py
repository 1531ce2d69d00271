"""Probing any MCP server's tools into the same `probes` table as the HTTP tools.

The calls file (JSON or TOML, read under the input limits) maps a tool name to its
arguments, or to a list of argument sets cycled over the rounds. Each call is made through
the official SDK client (a command on stdio, or a streamable-HTTP URL) one at a time, at
least `interval_s` apart (a server is one host: one call in flight, spaced), and stored as a
row with tool = the MCP tool name, api = the server's name from `initialize`, target kind
`live`. `stats`, `calibrate`, `drift`, `report`, the exporter and alerts read them unchanged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any

from realprobe.errors import ErrorCode, RealprobeError
from realprobe.limits import read_document
from realprobe.mcp.proxy import failed, tool_result
from realprobe.mcp.wire import first_error, split_command
from realprobe.result import ToolResult

if TYPE_CHECKING:
    from realprobe.store import Database


#: request methods a calls file may name beside tools (the row's tool is the method), with
#: the arguments each needs; they are called through the SDK client's own verbs
PROBED_METHODS: dict[str, tuple[str, ...]] = {
    "tools/list": (), "resources/list": (), "resources/templates/list": (),
    "prompts/list": (), "resources/read": ("uri",), "prompts/get": ("name",),
}


def _method_call(client: Any, method: str, args: dict[str, Any]) -> Any:
    """The SDK client's call of one request method (PROBED_METHODS), not yet awaited."""
    if method == "resources/read":
        return client.read_resource(str(args["uri"]))
    if method == "prompts/get":
        return client.get_prompt(str(args["name"]), args.get("arguments"))
    return {"tools/list": client.list_tools, "resources/list": client.list_resources,
            "resources/templates/list": client.list_resource_templates,
            "prompts/list": client.list_prompts}[method]()


def check_methods(calls: dict[str, list[dict[str, Any]]]) -> None:
    """Each request method a calls file names is one realprobe probes, with its arguments."""
    for name, sets in calls.items():
        if "/" not in name:
            continue
        needed = PROBED_METHODS.get(name)
        if needed is None:
            raise RealprobeError(f"calls file: {name!r} is not a method realprobe probes; "
                                 f"use a tool name or one of {', '.join(PROBED_METHODS)}",
                                 param="mcp_calls")
        for args in sets:
            missing = [k for k in needed if k not in args]
            if missing:
                raise RealprobeError(f"calls file: {name} needs {', '.join(missing)}",
                                     param="mcp_calls")


def load_calls(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """tool name (or a request method of PROBED_METHODS) -> argument sets (at least one
    each)."""
    p = Path(path)
    raw = read_document(p, "calls file")
    if not isinstance(raw, dict) or not raw:
        raise RealprobeError(f"calls file {p}: expected a table of tool name -> arguments",
                             param="mcp_calls")
    out: dict[str, list[dict[str, Any]]] = {}
    for tool, args in raw.items():
        sets = args if isinstance(args, list) else [args]
        if not sets or not all(isinstance(a, dict) for a in sets):
            raise RealprobeError(
                f"calls file {p}: {tool!r} needs an object of arguments or a list of them",
                param="mcp_calls")
        out[str(tool)] = sets
    check_methods(out)
    return out


def client_for(command: str | Sequence[str] | None, url: str | None) -> Any:
    """An SDK client for a command on stdio (the environment passed on) or an HTTP URL, each
    answer read within the message limit (an answer over it is a call's INVALID_RESPONSE)."""
    from mcp import Client

    from realprobe.mcp.wire import SDK_LOGGERS, http_client_transport, stdio_client_transport

    for name in SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    if (command is None) == (url is None):
        raise RealprobeError("give the MCP server as a command or a URL (exactly one)",
                             param="mcp_server")
    if url is not None:
        if not url.startswith(("http://", "https://")):
            raise RealprobeError(f"MCP URL {url!r}: expected http(s)://...", param="mcp_url")
        return Client(http_client_transport(url))
    return Client(stdio_client_transport(split_command(command)))  # type: ignore[arg-type]


async def call_once(client: Any, tool: str, args: dict[str, Any], timeout_s: float) -> ToolResult:
    """One call through the SDK client as a ToolResult (never raises for the server's
    failures)."""
    from mcp import MCPError

    t0 = time.perf_counter()
    try:
        call = _method_call(client, tool, args) if tool in PROBED_METHODS else \
            client.call_tool(tool, args)
        r = await asyncio.wait_for(call, timeout_s)
    except MCPError as exc:
        ms = (time.perf_counter() - t0) * 1000
        err = getattr(exc, "error", None)
        return tool_result(tool, {"error": {"code": getattr(err, "code", None),
                                            "message": str(exc)}}, ms, 0)
    except TimeoutError:
        return failed(tool, ErrorCode.TIMEOUT, f"no answer within {timeout_s:g} s",
                      (time.perf_counter() - t0) * 1000)
    except Exception as exc:  # the connection broke: the server died or went away
        return failed(tool, ErrorCode.NETWORK_ERROR, f"{type(exc).__name__}: {exc}",
                      (time.perf_counter() - t0) * 1000)
    ms = (time.perf_counter() - t0) * 1000
    body = r.model_dump(by_alias=True, exclude_none=True, mode="json")
    return tool_result(tool, {"result": body}, ms, len(json.dumps(body)))


async def probe_server(
    calls: dict[str, list[dict[str, Any]]], *, command: str | Sequence[str] | None = None,
    url: str | None = None, rounds: int = 1, db: Database, timeout_s: float = 10.0,
    vantage: str | None = None, interval_s: float = 0.0, on_call: Any = None,
    schedule_id: str | None = None,
) -> Any:
    """Probe every tool (and request method) of `calls` `rounds` times; one row per call in
    `db`."""
    from realprobe.mcp.rows import new_run_id
    from realprobe.store import RUN_DONE, RUN_FAILED, default_vantage, iso_utc, probe_row
    from realprobe.target import Target
    from realprobe.version import __version__

    check_methods(calls)
    vantage = vantage or default_vantage()
    run_id = new_run_id().replace("mcp-", "mcp-probe-", 1)
    results: dict[str, list[ToolResult]] = {t: [] for t in calls}
    store = db.write()
    start = time.time()
    status = RUN_FAILED
    api = "mcp"
    opened = False  # the run's row is written once the server has listed its tools
    try:
        async with client_for(command, url) as client:
            api = str(getattr(client.server_info, "name", "") or "mcp")
            listed = {t.name for t in (await client.list_tools()).tools}
            unknown = sorted(set(calls) - listed - set(PROBED_METHODS))
            if unknown:
                raise RealprobeError(
                    f"the server {api!r} has no tool {', '.join(unknown)}; it lists "
                    f"{', '.join(sorted(listed)) or 'none'}", param="mcp_calls")
            store.start_run({
                "id": run_id, "started_at": iso_utc(start), "started_ts": start,
                "vantage": vantage, "mode": "live", "target": f"mcp:{api}",
                "target_kind": "live", "source": "probe", "tools": sorted(calls),
                "rounds": rounds, "n_calls": 0, "version": __version__,
                "schedule_id": schedule_id,
            })  # fmt: skip
            opened = True
            last = 0.0
            for rnd in range(rounds):
                for tool, sets in calls.items():
                    args = sets[rnd % len(sets)]
                    await asyncio.sleep(max(0.0, last + interval_s - time.monotonic()))
                    last = time.monotonic()
                    wall = time.time()
                    result = await call_once(client, tool, args, timeout_s)
                    row = probe_row(result, run_id=run_id, tool=tool, api=api, round_no=rnd,
                                    started_wall=wall, timeout_s=timeout_s, vantage=vantage,
                                    args=args, source="probe", target=Target.live())
                    store.insert_probe(row)
                    results[tool].append(result)
                    if on_call is not None:
                        on_call(row, result)
            status = RUN_DONE
    except BaseExceptionGroup as group:
        where = url if url is not None else " ".join(split_command(command or "?"))
        raise first_error(group, where) from None
    finally:
        n = [r for rs in results.values() for r in rs]
        ok = sum(r.ok for r in n)
        end = time.time()
        if opened:
            store.finish_run(run_id, {"status": status, "ended_at": iso_utc(end),
                                      "ended_ts": end, "n_calls": len(n), "n_ok": ok,
                                      "n_error": len(n) - ok})
        store.close()
    return _summary(run_id, status, api, vantage, rounds, start, end, results)


def _summary(run_id: str, status: str, api: str, vantage: str, rounds: int, start: float,
             end: float, results: dict[str, list[ToolResult]]) -> Any:
    from realprobe.probes.runner import RunSummary, ToolSummary
    from realprobe.store import iso_utc

    every = [r for rs in results.values() for r in rs]
    ok = sum(r.ok for r in every)
    tools = [ToolSummary(
        tool=t, api=api, n=len(rs), ok=sum(r.ok for r in rs),
        errors=dict(Counter(r.code.value for r in rs if r.code is not None)),
        median_latency_ms=median([r.latency_ms for r in rs if r.ok]) if any(
            r.ok for r in rs) else None) for t, rs in results.items()]
    return RunSummary(
        run_id=run_id, status=status, mode="live", target=f"mcp:{api}", vantage=vantage,
        started_at=iso_utc(start), ended_at=iso_utc(end), duration_s=round(end - start, 3),
        rounds=rounds, n_calls=len(every), n_ok=ok, n_error=len(every) - ok, n_skipped=0,
        excluded=False, tools=tools)
