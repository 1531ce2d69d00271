"""What every benchmark does at its end: print its numbers, with the machine's load average
before and after (on shared cores other work shows up directly in timings), and only when
the benchmark was run with "--save" write them to bench/results/."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def emit(out: dict[str, Any], save: bool, path: Path, load_before: float | None = None) -> None:
    if load_before is not None:
        out["load_average_1m"] = [load_before, load_average()]
    print(json.dumps(out, indent=2))
    if save:
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(out, indent=2) + "\n")


def bench_args(doc: str | None, **ints: int) -> argparse.Namespace:
    """The usual command line: one integer option per keyword (`--name N`, its default the
    value) and `--save`."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    for name, default in ints.items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    ap.add_argument("--save", action="store_true", help="write bench/results/")
    return ap.parse_args()
