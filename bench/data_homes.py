"""How many homes the data concepts have, now and at an earlier commit: SQLite connections
opened (read-only connectors, `ATTACH`), atomic file writers, plain file writes, statements
that insert probe rows (and how many of them sit behind the one row check), and the merge
throughput on this machine.

    python bench/data_homes.py                  # this checkout
    python bench/data_homes.py --before REV     # also REV (from git), side by side
    python bench/data_homes.py --rows 50000     # rows per merge source (default 20000)
    python bench/data_homes.py --save           # also bench/results/data_homes.json

Counting is by reading the source (`ast`), so both columns are measured alike.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"


def _calls(tree: ast.AST) -> list[tuple[str, str]]:
    """(callee's last name, first string argument) of every call."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            first = node.args[0] if node.args else None
            text = first.value if isinstance(first, ast.Constant) else ""
            out.append((name, text if isinstance(text, str) else ""))
    return out


def count(package: Path) -> dict[str, int]:
    """Homes of each concept in a source tree's `realprobe` package."""
    found = {"sqlite_connect_sites": 0, "attach_sites": 0, "atomic_writers": 0,
             "plain_file_writes": 0, "probe_insert_sites": 0, "checked_insert_sites": 0}
    for path in package.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for name, first in _calls(ast.parse(text)):
            found["sqlite_connect_sites"] += name == "connect" and "sqlite3.connect" in text
            found["attach_sites"] += "ATTACH" in first
            found["atomic_writers"] += name == "mkstemp"
            found["plain_file_writes"] += name in ("write_text", "write_bytes")
        # statements that put rows into `probes`, and those behind the row check
        sites = text.count("INTO probes") + text.count("INTO main.probes")
        found["probe_insert_sites"] += sites
        found["checked_insert_sites"] += sites if "def check_probe_row" in text else 0
    return found


def tree_at(rev: str, into: Path) -> Path:
    """The package as it was at `rev` (git archive), unpacked under `into`."""
    blob = subprocess.run(["git", "archive", rev, "realprobe"], cwd=ROOT, check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    return into / "realprobe"


def merge_rate(rows: int) -> dict[str, float]:
    """Rows per second merging one synthetic source (every row new, then again)."""
    sys.path.insert(0, str(HERE))
    from monitor_synthetic import build

    from realprobe import merge_databases as merge

    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "a.db", Path(tmp) / "out.db"
        build(src, rows, vantage="x", t_end=time.time(), seed=0)
        t = time.perf_counter()
        merge([src], out)
        first = time.perf_counter() - t
        t = time.perf_counter()
        merge([src], out)
        again = time.perf_counter() - t
    return {"rows": rows, "first_rows_per_s": round(rows / first),
            "again_rows_per_s": round(rows / again),
            "load_avg_1m": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", help="a git revision to count too")
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--save", action="store_true", help="write bench/results/data_homes.json")
    args = ap.parse_args()
    result: dict[str, object] = {"now": count(ROOT / "realprobe")}
    if args.before:
        with tempfile.TemporaryDirectory() as tmp:
            result["before"] = count(tree_at(args.before, Path(tmp)))
            result["before_rev"] = args.before
    result["merge"] = merge_rate(args.rows)
    print(json.dumps(result, indent=2))
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "data_homes.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
