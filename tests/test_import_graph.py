"""The `realprobe` package's import graph has no cycle, lazy imports inside functions included
(a cycle hidden by a function-level import is still a cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import realprobe

ROOT = Path(realprobe.__file__).parent


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """`a.b.c` to the longest known module prefix (`from a.b import c` may name a function)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(mod: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    package = mod if is_pkg else mod.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                up = parts[: len(parts) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for name in names:
            if not name.startswith("realprobe"):
                continue
            target = _resolve(name, modules)
            # a package's __init__ re-exporting its own modules is not a cycle of its modules
            if target and target != mod and not (is_pkg and target.startswith(mod + ".")):
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(edges, WHITE)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = GREY
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if colour.get(nxt, BLACK) == GREY:
                return [*stack[stack.index(nxt):], nxt]
            if colour.get(nxt) == WHITE:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        colour[node] = BLACK
        return None

    for node in sorted(edges):
        if colour[node] == WHITE:
            found = visit(node)
            if found:
                return found
    return None


def test_the_checker_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a"}}) is None


def test_the_graph_sees_lazy_imports() -> None:
    edges = graph()
    assert "realprobe.cassettes.core" in edges["realprobe.cassettes.recording"]
    assert len(edges) > 40


#: edges still closing a cycle that another change removes (the demo driving the CLI through
#: typer); each must still exist, so the list shrinks as they go
ALLOWED: set[tuple[str, str]] = {("realprobe.commands.foundation", "realprobe.cli")}


def test_no_import_cycle_in_realprobe() -> None:
    edges = graph()
    for a, b in ALLOWED:
        if b not in edges.get(a, set()):
            continue  # gone: nothing to allow any more
        edges[a].discard(b)
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_cycle_in_cassettes() -> None:
    edges = {
        m: {t for t in ts if t.startswith("realprobe.cassettes")}
        for m, ts in graph().items() if m.startswith("realprobe.cassettes")
    }
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


#: the rooms from the bottom up; a room imports only rooms below it (and itself)
KERNEL = {
    "errors", "clock", "target", "result", "store", "outputs", "secrets", "addresses", "hosts",
    "dbfacts", "data", "version", "retry_after", "limits", "serving", "ranges", "chunks",
}
LAYERS: list[set[str]] = [
    {"kernel"},
    {"adapters", "history"},  # history: importers of monitor histories, over the kernel alone
    {"simulator"},
    {"http"},
    {"cassettes"},
    {"clients"},
    {"sandbox", "probes"},
    {"tasks"},
    {"mcp", "monitor", "report"},
    {"front"},
    {"cli"},
]


def room_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("api", "__init__") or parts[1].startswith("api_"):
        return "front"
    if parts[1] in KERNEL:
        return "kernel"
    if parts[1] in ("cli", "commands", "demo", "__main__"):
        return "cli"
    return parts[1]


def level(room: str) -> int:
    for i, rooms in enumerate(LAYERS):
        if room in rooms:
            return i
    raise AssertionError(f"room {room!r} is not in the layer table: add it where it belongs")


def test_rooms_import_only_rooms_below_them() -> None:
    wrong = sorted(
        f"{m} ({room_of(m)}) imports {t} ({room_of(t)})"
        for m, ts in graph().items()
        for t in ts
        if room_of(m) != room_of(t) and level(room_of(t)) >= level(room_of(m))
    )
    assert not wrong, "\n".join(wrong)


def test_the_room_check_sees_an_upward_import() -> None:
    assert level(room_of("realprobe.store")) < level(room_of("realprobe.adapters.tool"))
    assert level(room_of("realprobe.commands.probes")) > level(room_of("realprobe.api"))
    assert room_of("realprobe.api_catalog") == "front"
