"""realprobe reaches its dependencies through their public API only: no module of the package
imports a private module or name of the SDKs and frameworks it builds on, nor reads a private
attribute of theirs, so an upgrade within the declared versions cannot break it unseen."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "realprobe"
#: the dependencies whose private names are fenced off
DEPENDENCIES = ("mcp", "mcp_types", "typer", "click", "httpx", "httpx2", "vcr", "uvicorn",
                "starlette", "h11", "anyio", "pydantic")
#: private attributes of those packages' objects realprobe once read; an attribute read off
#: an object carries no package in the source, so these are named one by one
KNOWN_PRIVATE = ("_server_instances", "_session_owners", "_task_group", "_lifespan_state",
                 "_run_exitfuncs")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _ours(module: str) -> bool:
    return module.split(".")[0] in DEPENDENCIES


def private_uses(source: str) -> list[str]:
    """Each private module, name or attribute of a fenced dependency the source names."""
    tree = ast.parse(source)
    found: list[str] = []
    modules: set[str] = set()  # local names bound to a fenced dependency's module
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name):
                    modules.add(alias.asname or alias.name.split(".")[0])
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append(f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module or ""):
            module = node.module or ""
            if any(_private(part) for part in module.split(".")):
                found.append(f"from {module} import ...")
            found += [f"from {module} import {a.name}" for a in node.names if _private(a.name)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and (
                node.attr in KNOWN_PRIVATE
                or (isinstance(node.value, ast.Name) and node.value.id in modules)):
            found.append(f"{ast.unparse(node)}")
    return found


def test_the_package_names_no_private_part_of_its_dependencies() -> None:
    found = {str(path.relative_to(PACKAGE.parent)): uses
             for path in sorted(PACKAGE.rglob("*.py"))
             if (uses := private_uses(path.read_text(encoding="utf-8")))}
    assert found == {}


@pytest.mark.parametrize(("source", "named"), [
    ("open_sessions = service.server.session_manager._server_instances",
     "service.server.session_manager._server_instances"),
    ("from typer._click import TyperGroup", "from typer._click import ..."),
    ("from typer import _coercion", "from typer import _coercion"),
    ("import click._compat as compat", "import click._compat"),
    ("def f():\n    import typer\n    return typer._completion_shared", "typer._completion_shared"),
    ("import atexit\natexit._run_exitfuncs()", "atexit._run_exitfuncs"),
])
def test_the_check_finds_each_form_of_private_use(source: str, named: str) -> None:
    assert private_uses(source) == [named]


def test_the_check_passes_public_names_and_realprobes_own_privates() -> None:
    source = ("import httpx\nfrom mcp.server import Server\nfrom realprobe._x import _y\n"
              "class A:\n    def f(self):\n        self._timer = httpx.Client()\n")
    assert private_uses(source) == []
