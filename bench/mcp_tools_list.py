"""MCP `tools/list` over stdio at 137 tools: `realprobe mcp` serving the built-in tools plus
the PokéAPI and Open-Meteo families, side by side with the anchor, an SDK `MCPServer` with 137
trivial tools (`def tool_i(x: int) -> int`), in the same run.

Each server runs in its own process; one SDK client (response cache off) lists the tools
`--n` times per server, interleaved, best of `--repeats`. Also measured: the same service
with its output schemas left out (served by a small script; `realprobe mcp` keeps them, since
the specification asks clients to check structured results against them), and the payload
sizes.

    python bench/mcp_tools_list.py [--n 50] [--repeats 3] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import emit, load_average
from mcp import Client, StdioServerParameters

RESULTS = Path(__file__).resolve().parent / "results" / "mcp_tools_list.json"
FAMILIES = ["pokeapi", "openmeteo"]
TOOLS = 137

ANCHOR = '''
from mcp.server import MCPServer

server = MCPServer("anchor")
for i in range({n}):
    def tool(x: int) -> int:
        """Return x."""
        return x
    tool.__name__ = f"tool_{{i}}"
    server.add_tool(tool, name=f"tool_{{i}}")
server.run("stdio")
'''


BARE = '''
import asyncio
from realprobe.api import load_catalog
from realprobe.clients import TransportOptions
from realprobe.mcp import McpService, ServiceOptions
from realprobe.mcp.serve import serve_stdio

service = McpService(
    load_catalog({families!r}),
    ServiceOptions(transport=TransportOptions(sandbox="http://127.0.0.1:9")),
)
service.definitions = [d.model_copy(update={{"output_schema": None}}) for d in service.definitions]
asyncio.run(serve_stdio(service))
'''


def realprobe_params() -> StdioServerParameters:
    flags = [x for f in FAMILIES for x in ("--catalog", f)]
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "realprobe.cli", "mcp", *flags, "--sandbox", "http://127.0.0.1:9"],
    )


async def listing(params: StdioServerParameters, n: int) -> tuple[float, int, dict[str, Any]]:
    """(seconds for n listings, tools, the last listing as JSON data)."""
    async with Client(params, cache=None) as client:
        listed = await client.list_tools()  # warm-up
        t0 = time.perf_counter()
        for _ in range(n):
            listed = await client.list_tools()
        elapsed = time.perf_counter() - t0
    return elapsed, len(listed.tools), listed.model_dump(by_alias=True, exclude_none=True,
                                                          mode="json")


def size_kb(data: Any) -> float:
    return round(len(json.dumps(data, separators=(",", ":"))) / 1024, 1)


async def measure(n: int, repeats: int, folder: Path) -> dict[str, Any]:
    anchor = StdioServerParameters(command=sys.executable, args=[str(folder / "anchor.py")])
    bare = StdioServerParameters(command=sys.executable, args=[str(folder / "bare.py")])
    runs: dict[str, list[float]] = {"ours": [], "bare": [], "anchor": []}
    data: dict[str, dict[str, Any]] = {}
    for _ in range(repeats):
        for name, params in (("ours", realprobe_params()), ("bare", bare), ("anchor", anchor)):
            s, count, data[name] = await listing(params, n)
            assert count == TOOLS, (name, count)
            runs[name].append(s)
    best = {k: min(v) for k, v in runs.items()}
    return {
        "tools": TOOLS,
        "listings_per_run": n,
        "realprobe_ms_per_list": round(best["ours"] / n * 1000, 2),
        "realprobe_without_output_schemas_ms_per_list": round(best["bare"] / n * 1000, 2),
        "anchor_sdk_ms_per_list": round(best["anchor"] / n * 1000, 2),
        "ratio_realprobe_to_anchor": round(best["ours"] / best["anchor"], 2),
        "ratio_without_output_schemas_to_anchor": round(best["bare"] / best["anchor"], 2),
        "payload_kb": size_kb(data["ours"]),
        "payload_kb_without_output_schemas": size_kb(data["bare"]),
        "anchor_payload_kb": size_kb(data["anchor"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--save", action="store_true", help=f"write {RESULTS.name}")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "anchor.py").write_text(ANCHOR.format(n=TOOLS), encoding="utf-8")
        (folder / "bare.py").write_text(BARE.format(families=FAMILIES), encoding="utf-8")
        before = load_average()
        out = asyncio.run(measure(args.n, args.repeats, folder))
    out["goal_ratio"] = 2.0
    emit(out, args.save, RESULTS, before)


if __name__ == "__main__":
    main()
