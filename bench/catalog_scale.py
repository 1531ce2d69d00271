"""The catalogue at a few hundred tools: the built-in tools, the shipped families (PokéAPI,
Open-Meteo) and two more imports of the PokéAPI description under other names, 300+ tools.

Measures, in process: loading the catalogue; `realprobe catalog --json --format mcp` and
`--format openai` (load + render + JSON); MCP `tools/list` over the SDK's in-process client
(and the server's start); plus the same `catalog` command as a fresh process (interpreter
start-up included). Checks the definitions are valid while at it.

    python bench/catalog_scale.py [--repeat 5] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pydantic_core
import typer
from mcp import Client
from mcp.types import ListToolsResult
from typer.testing import CliRunner

from realprobe.adapters.catalog import Catalog
from realprobe.adapters.openapi import ImportOptions, catalog_text, import_openapi
from realprobe.cli import app
from realprobe.clients import TransportOptions
from realprobe.mcp import McpService, ServiceOptions

DATA = Path(__file__).parents[1] / "tests" / "data" / "openapi"
RESULTS = Path(__file__).parent / "results" / "catalog_scale.json"
GOAL_S = 0.5


def extra_files(folder: Path) -> list[str]:
    """Two more copies of the PokéAPI family under other ids and prefixes (300+ tools)."""
    text = (DATA / "pokeapi__openapi.yml").read_text(encoding="utf-8")
    out = []
    for i in (2, 3):
        report = import_openapi(
            text, "pokeapi", ImportOptions(api_id=f"pokemirror{i}", prefix=f"pm{i}")
        )
        path = folder / f"pokemirror{i}.json"
        path.write_text(catalog_text(report.apis, ".json"), encoding="utf-8")
        out.append(str(path))
    return out


def timed(fn: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    runs, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        runs.append(time.perf_counter() - t0)
    return runs, result


def stats(runs: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(runs), 4), "max_s": round(max(runs), 4)}


async def tools_list(cat: Catalog, repeat: int) -> tuple[float, list[float], list[Any]]:
    t0 = time.perf_counter()
    service = McpService(
        cat, ServiceOptions(transport=TransportOptions(sandbox="http://127.0.0.1:9"))
    )
    async with service, Client(service.server) as client:
        start = time.perf_counter() - t0
        runs, listed = [], None
        for _ in range(repeat):
            t1 = time.perf_counter()
            listed = await client.list_tools()
            runs.append(time.perf_counter() - t1)
        assert listed is not None
        return start, runs, list(listed.tools)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--save", action="store_true", help=f"write {RESULTS}")
    args = parser.parse_args()
    runner = CliRunner()
    with tempfile.TemporaryDirectory() as tmp:
        files = ["pokeapi", "openmeteo", *extra_files(Path(tmp))]
        load_runs, cat = timed(lambda: Catalog.load(files), args.repeat)
        n = len(cat)
        flags = [x for f in files for x in ("--catalog", f)]

        def listing(fmt: str) -> Any:
            res = runner.invoke(app, ["catalog", *flags, "--json", "--format", fmt])
            assert res.exit_code == 0, res.output
            return json.loads(res.stdout)

        def work() -> bytes:
            cat = Catalog.load(files)
            return pydantic_core.to_json({"tools": [t.mcp_definition() for t in cat]}, indent=2)

        work_runs, _ = timed(work, args.repeat)
        cli_runs, _ = timed(lambda: typer.main.get_command(app), args.repeat)
        mcp_runs, mcp_json = timed(lambda: listing("mcp"), args.repeat)
        openai_runs, openai_json = timed(lambda: listing("openai"), args.repeat)
        start_s, list_runs, listed = asyncio.run(tools_list(cat, args.repeat))
        service = McpService(cat, ServiceOptions(transport=TransportOptions(profile="calm")))
        encode_runs, _ = timed(
            lambda: ListToolsResult(tools=service.definitions).model_dump_json(
                by_alias=True, exclude_none=True
            ),
            args.repeat,
        )
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "realprobe.cli", "catalog", *flags, "--json", "--format", "mcp"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        process_s = time.perf_counter() - t0
        assert proc.returncode == 0, proc.stderr
    names = [t["name"] for t in mcp_json["tools"]]
    assert len(names) == len(set(names)) == n == len(openai_json) == len(listed)
    for t in mcp_json["tools"]:
        jsonschema.Draft202012Validator.check_schema(t["inputSchema"])
        jsonschema.Draft202012Validator.check_schema(t["outputSchema"])
    for f in openai_json:
        jsonschema.Draft202012Validator.check_schema(f["function"]["parameters"])
    out = {
        "bench": "catalog_scale",
        "goal": f"catalog --json --format mcp and MCP tools/list under {GOAL_S} s at 300 tools",
        "tools": n,
        "apis": len(cat.apis),
        "catalog_load": stats(load_runs),
        "catalog_json_mcp_in_process": stats(mcp_runs),
        "of_which_load_render_encode": stats(work_runs),
        "of_which_cli_parser_build": stats(cli_runs),
        "catalog_json_openai_in_process": stats(openai_runs),
        "mcp_json_bytes": len(json.dumps(mcp_json)),
        "mcp_server_start_s": round(start_s, 4),
        "mcp_tools_list": stats(list_runs),
        "of_which_server_builds_and_encodes_the_answer": stats(encode_runs),
        "catalog_json_mcp_fresh_process_s": round(process_s, 3),
        "meets_goal": statistics.median(mcp_runs) < GOAL_S
        and statistics.median(list_runs) < GOAL_S,
        "repeat": args.repeat,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 1),
        },
    }
    print(json.dumps(out, indent=2))
    if args.save:
        RESULTS.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
