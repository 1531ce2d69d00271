"""The shape of the package, now and at an earlier commit: lines of product code, commands
and options, public names, room-level import cycles, and how many test imports reach past the
front door.

    python bench/kernel_numbers.py                 # this checkout
    python bench/kernel_numbers.py --before REV    # also REV (from git), side by side
    python bench/kernel_numbers.py --save         # also bench/results/kernel_numbers.json

Commands and options are counted by loading each tree's own `realprobe` command in a
subprocess (same interpreter and dependencies), so the two columns are measured alike.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from io import BytesIO
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

COUNT_CLI = r"""
import json, typer
import realprobe
from realprobe.cli import app
cmd = typer.main.get_command(app)
def walk(c, ctx):
    if hasattr(c, "list_commands"):  # a group (typer may carry its own copy of click)
        for name in c.list_commands(ctx):
            yield from walk(c.get_command(ctx, name), ctx)
    else:
        yield c
ctx = cmd.make_context("realprobe", [], resilient_parsing=True)
leaves = list(walk(cmd, ctx))
opts = sum(1 for c in leaves for p in c.params
           if getattr(p, "param_type_name", "") == "option" and not getattr(p, "hidden", False)
           and p.name not in ("help",))
print(json.dumps({"commands": len(leaves), "options": opts,
                  "public_names": len(realprobe.__all__)}))
"""


def module_name(root: Path, path: Path) -> str:
    """Dotted name; a package keeps its `__init__` so that it stays in its own room."""
    return ".".join(path.relative_to(root).with_suffix("").parts)


def room(module: str) -> str:
    """A module's room: a folder under realprobe/, `front` for the front door and the command
    line (they sit on top), `kernel` for the other modules at the package root."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    if top in ("__init__", "api", "cli", "commands", "demo", "__main__") or top.startswith("api_"):
        return "front"
    if top == "clients":
        return "clients"
    return "kernel" if len(parts) == 2 else top


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name:
        for candidate in (name, name + ".__init__"):
            if candidate in modules:
                return candidate
        name = name.rpartition(".")[0]
    return None


def imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.startswith("realprobe")}


def room_cycles(tree: Path) -> list[list[str]]:
    pkg = tree / "realprobe"
    modules = {module_name(tree, p): p for p in pkg.rglob("*.py")}
    edges: dict[str, set[str]] = defaultdict(set)
    for mod, path in modules.items():
        for name in imports(path):
            target = resolve(name, modules)
            # the front door and the CLI sit on top: their rooms are leaves of the graph
            if target and room(target) != room(mod) and room(target) != "front":
                edges[room(mod)].add(room(target))
    # strongly connected components of more than one room (Tarjan)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def test_imports(tree: Path) -> dict[str, int]:
    statements = 0
    internal: set[str] = set()
    files = 0
    for path in (tree / "tests").glob("*.py"):
        hit = False
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            mods: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                mods = [node.module]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            for m in mods:
                if m.startswith("realprobe."):
                    statements += 1
                    internal.add(m)
                    hit = True
        files += hit
    return {"statements": statements, "modules": len(internal), "files": files}


def measure(tree: Path) -> dict[str, object]:
    lines = sum(len(p.read_text(encoding="utf-8").splitlines())
                for p in (tree / "realprobe").rglob("*.py"))
    cli = subprocess.run(
        [sys.executable, "-c", COUNT_CLI], cwd=tree, capture_output=True, text=True,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, timeout=120, check=True,
    )
    return {
        "product_lines": lines,
        "modules": sum(1 for _ in (tree / "realprobe").rglob("*.py")),
        **json.loads(cli.stdout.strip().splitlines()[-1]),
        "room_cycles": room_cycles(tree),
        "test_imports_of_internals": test_imports(tree),
    }


def extract(rev: str, into: Path) -> Path:
    data = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True,
                          check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="a git revision to measure beside this checkout")
    ap.add_argument("--save", action="store_true", help="write bench/results/kernel_numbers.json")
    args = ap.parse_args()
    result: dict[str, object] = {"now": measure(ROOT)}
    if args.before:
        with tempfile.TemporaryDirectory() as tmp:
            result["before"] = {"rev": args.before, **measure(extract(args.before, Path(tmp)))}
    print(json.dumps(result, indent=2))
    if args.save:
        out = HERE / "results" / "kernel_numbers.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
