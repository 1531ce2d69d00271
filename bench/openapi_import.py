"""Import time of the PokéAPI OpenAPI 3.1 description (about 100 GET operations, 225 KB of
YAML) and of the five Open-Meteo descriptions, and the number of tools produced.

    python bench/openapi_import.py [--repeat 5] [--save]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

from realprobe.adapters.openapi import ImportOptions, import_openapi

DATA = Path(__file__).parents[1] / "tests" / "data" / "openapi"
RESULTS = Path(__file__).parent / "results" / "openapi_import.json"


def measure(paths: list[Path], options: ImportOptions, repeat: int) -> dict[str, object]:
    texts = [(p.read_text(encoding="utf-8"), p.name) for p in paths]
    runs, tools, skipped = [], 0, 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        reports = [import_openapi(text, name, options) for text, name in texts]
        runs.append(time.perf_counter() - t0)
        tools = sum(r.tools for r in reports)
        skipped = sum(len(r.skipped) for r in reports)
    return {
        "documents": [p.name for p in paths],
        "bytes": sum(p.stat().st_size for p in paths),
        "tools": tools,
        "skipped_operations": skipped,
        "import_s_median": round(statistics.median(runs), 3),
        "import_s_max": round(max(runs), 3),
        "repeat": repeat,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--save", action="store_true", help=f"write {RESULTS}")
    args = parser.parse_args()
    pokeapi = measure(
        [DATA / "pokeapi__openapi.yml"],
        ImportOptions(api_id="pokeapi-v2", prefix="pokeapi"),
        args.repeat,
    )
    meteo = measure(sorted(DATA.glob("open-meteo__*.yml")), ImportOptions(prefix="om"), args.repeat)
    out = {
        "bench": "openapi_import",
        "goal": "PokéAPI import under 2 s",
        "pokeapi": pokeapi,
        "open_meteo": meteo,
        "meets_goal": pokeapi["import_s_median"] < 2.0,  # type: ignore[operator]
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
