"""realprobe reaches its dependencies through their public API only: no module of the package
imports a private module or name of the SDKs and frameworks it builds on, reads a private
attribute of theirs (directly or by a string given to getattr/setattr/hasattr/delattr), or walks
the call stack into their frames, so an upgrade within the declared versions cannot break it
unseen. Where no public API can do a thing, the private name is listed in `PINNED` with the
range pyproject.toml pins its package to, and a test fails if the installed version lacks it."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "realprobe"
#: private attributes of those packages' objects realprobe once read; an attribute read off
#: an object carries no package in the source, so these are named one by one
KNOWN_PRIVATE = ("_server_instances", "_session_owners", "_task_group", "_lifespan_state",
                 "_run_exitfuncs", "_network_stream", "_content", "_body", "_auto_decompress")
#: the private names realprobe still uses because no public API does the same, each with its
#: package, the range pyproject.toml pins that package to (the versions tested), and the
#: classes whose instances carry it. Timing DNS as its own phase needs a network backend of
#: realprobe's own under httpx's transport: httpcore's `ConnectionPool(network_backend=...)`
#: is public, but httpx's transports take no backend, and a transport of realprobe's own
#: would re-implement httpx's request/response and exception mapping (private in httpx) and
#: slip past the transport methods `use_cassette` patches.
PINNED: dict[str, tuple[str, str, tuple[Callable[[], Any], ...]]] = {
    "_pool": ("httpx", ">=0.28,<0.29", (httpx.HTTPTransport, httpx.AsyncHTTPTransport)),
    "_network_backend": ("httpcore", ">=1.0.9,<1.1",
                         (httpcore.ConnectionPool, httpcore.AsyncConnectionPool)),
}
#: reading another frame's locals: how code reaches into a dependency's objects mid-call
FRAME_WALKS = ("_getframe", "f_locals", "currentframe", "getouterframes")
_BY_NAME = ("getattr", "setattr", "hasattr", "delattr")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _ours(module: str) -> bool:
    """Whether `module` belongs to a dependency: every package that is neither the standard
    library nor realprobe, direct or pulled in (httpcore, h11, anyio, multidict...)."""
    top = module.split(".")[0]
    return bool(top) and top != "realprobe" and top not in sys.stdlib_module_names


def private_uses(source: str) -> list[str]:
    """Each private module, name or attribute of a fenced dependency the source names, and
    each frame walk; the names in `PINNED` pass."""
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
        if isinstance(node, ast.Attribute):
            fenced = node.attr in KNOWN_PRIVATE or (
                isinstance(node.value, ast.Name) and node.value.id in modules)
            if node.attr in FRAME_WALKS or (
                    _private(node.attr) and node.attr not in PINNED and fenced):
                found.append(f"{ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in _BY_NAME and len(node.args) >= 2
              and isinstance(name := node.args[1], ast.Constant) and isinstance(name.value, str)
              and _private(name.value) and name.value not in PINNED):
            found.append(f"{node.func.id}({ast.unparse(node.args[0])}, {name.value!r})")
    return found


def test_the_package_names_no_private_part_of_its_dependencies() -> None:
    found = {str(path.relative_to(PACKAGE.parent)): uses
             for path in sorted(PACKAGE.rglob("*.py"))
             if (uses := private_uses(path.read_text(encoding="utf-8")))}
    assert found == {}


@pytest.mark.parametrize("name", PINNED)
def test_each_pinned_private_name_is_there_in_the_pinned_installed_version(name: str) -> None:
    package, pinned, owners = PINNED[name]
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    ranges = [re.sub(r"^[\w.-]+", "", d).replace(" ", "")
              for d in declared["project"]["dependencies"] if re.match(rf"{package}\b", d)]
    assert ranges == [pinned], f"pyproject.toml must pin {package}{pinned}"
    assert version(package) in SpecifierSet(pinned)
    for owner in owners:
        assert name in vars(owner()), f"{package} {version(package)}: {owner} has no {name}"


@pytest.mark.parametrize(("source", "named"), [
    ("open_sessions = service.server.session_manager._server_instances",
     "service.server.session_manager._server_instances"),
    ("from typer._click import TyperGroup", "from typer._click import ..."),
    ("from typer import _coercion", "from typer import _coercion"),
    ("import click._compat as compat", "import click._compat"),
    ("def f():\n    import typer\n    return typer._completion_shared", "typer._completion_shared"),
    ("import atexit\natexit._run_exitfuncs()", "atexit._run_exitfuncs"),
    ("from httpcore._sync.connection import HTTPConnection",
     "from httpcore._sync.connection import ..."),
    ("import httpcore\nhttpcore._backends.sync.SyncStream", "httpcore._backends"),
    ("from ray._private import ray_constants", "from ray._private import ..."),
    ("import numpy as np\nnp._core.umath", "np._core"),
    ("stream = getattr(owner, '_network_stream', None)", "getattr(owner, '_network_stream')"),
    ("auto = getattr(self, '_auto_decompress', True)", "getattr(self, '_auto_decompress')"),
    ("setattr(pool, '_connections', [])", "setattr(pool, '_connections')"),
    ("if hasattr(response, '_stream'): pass", "hasattr(response, '_stream')"),
    ("import sys\nframe = sys._getframe(2)", "sys._getframe"),
    ("owner = frame.f_locals.get('self')", "frame.f_locals"),
    ("import inspect\nframe = inspect.currentframe()", "inspect.currentframe"),
    ("class R(VCRHTTPResponse):\n    def f(self):\n        return self._content.read()",
     "self._content"),
])
def test_the_check_finds_each_form_of_private_use(source: str, named: str) -> None:
    assert private_uses(source) == [named]


def test_the_check_passes_public_names_pinned_names_and_realprobes_own_privates() -> None:
    source = ("import httpx\nimport httpcore\nfrom mcp.server import Server\n"
              "from realprobe._x import _y\nimport os\nos._exit(0)\nfrom . import _z\n"
              "class A:\n    def f(self):\n        self._timer = httpx.Client()\n"
              "pool = httpcore.ConnectionPool(network_backend=backend)\n"
              "stream = response.extensions['network_stream']\n"
              "auto = session.auto_decompress\n"
              "name = getattr(x, 'name', None)\nkind = getattr(x, '__name__')\n"
              "step = getattr(self, f'_{what}')\n"
              "backend = getattr(transport._pool, '_network_backend', None)\n")
    assert private_uses(source) == []
