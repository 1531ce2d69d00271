"""No function in the package runs over 60 body lines without a stated reason.

Body lines: from the first statement after the docstring to the function's last line (nested
functions count toward the function that holds them, and are measured on their own too).
A long function is split into named steps, or listed in ALLOWED with a one-line reason; an
entry that no longer names a long function fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import realprobe

MAX_BODY_LINES = 60
PACKAGE = Path(realprobe.__file__).parent

#: "module.path:qualname" -> why it may stay long (one line)
ALLOWED: dict[str, str] = {
}


def body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the end of the function."""
    body = fn.body
    first = body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        body = body[1:]
    if not body:
        return 0
    end = fn.end_lineno if fn.end_lineno is not None else body[-1].lineno
    return end - body[0].lineno + 1


def functions(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(qualname, body lines) of every function and method, nested ones included."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                yield name, body_lines(child)
                yield from walk(child, name + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, prefix + child.name + ".")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def over_limit(found: list[tuple[str, int]], module: str,
               limit: int = MAX_BODY_LINES) -> dict[str, int]:
    """"module:qualname" -> body lines, for each of `found` (qualname, body lines) over
    `limit`."""
    return {f"{module}:{name}": n for name, n in found if n > limit}


def long_functions(source: str, module: str, limit: int = MAX_BODY_LINES) -> dict[str, int]:
    """"module:qualname" -> body lines, for each function of `source` over `limit`."""
    return over_limit(list(functions(ast.parse(source))), module, limit)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_functions() -> tuple[dict[str, int], set[str]]:
    """(long functions of the package with their body lines, every qualified name)."""
    long: dict[str, int] = {}
    names: set[str] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        found = list(functions(ast.parse(path.read_text(encoding="utf-8"))))  # parsed once
        names.update(f"{module}:{name}" for name, _ in found)
        long.update(over_limit(found, module))
    return long, names


def check(long: dict[str, int], names: set[str], allowed: dict[str, str]) -> list[str]:
    """One line per problem: a long function not allowed, an allowance for a function that
    no longer exists or is no longer long, an allowance without a reason."""
    problems = [
        f"{name}: {n} body lines (over {MAX_BODY_LINES}); split it into named steps, "
        "or add it to ALLOWED with the reason"
        for name, n in sorted(long.items())
        if name not in allowed
    ]
    for name, reason in sorted(allowed.items()):
        if name not in names:
            problems.append(f"ALLOWED names {name}, which no longer exists: remove the entry")
        elif name not in long:
            problems.append(f"ALLOWED names {name}, which is no longer long: remove the entry")
        if not reason.strip() or "\n" in reason:
            problems.append(f"ALLOWED {name}: give a one-line reason")
    return problems


def test_no_unexplained_long_function() -> None:
    long, names = package_functions()
    problems = check(long, names, ALLOWED)
    assert not problems, "\n".join(problems)


# -- the measure and the check themselves ------------------------------------------------------


def _function(name: str, body: int, *, docstring: bool = False, indent: str = "") -> str:
    doc = f'{indent}    """Say what it does.\n{indent}\n{indent}    Over two lines."""\n'
    lines = "".join(f"{indent}    x{i} = {i}\n" for i in range(body))
    return f"{indent}def {name}():\n" + (doc if docstring else "") + lines


def test_body_lines_start_after_the_docstring() -> None:
    tree = ast.parse(_function("f", 5, docstring=True))
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert body_lines(fn) == 5
    only_doc = ast.parse('def g():\n    """Nothing else."""\n').body[0]
    assert isinstance(only_doc, ast.FunctionDef) and body_lines(only_doc) == 0


def test_a_planted_long_function_is_found() -> None:
    source = _function("short", 60, docstring=True) + _function("planted", 61, docstring=True)
    assert long_functions(source, "pkg.mod") == {"pkg.mod:planted": 61}
    problems = check(long_functions(source, "pkg.mod"), {"pkg.mod:planted"}, {})
    assert len(problems) == 1 and "pkg.mod:planted: 61 body lines" in problems[0]


def test_methods_nested_and_async_functions_are_measured() -> None:
    source = (
        "class Runner:\n"
        + _function("run", 70, indent="    ").replace("def run", "async def run")
        + "def outer():\n"
        + textwrap.indent(_function("inner", 62), "    ")
    )
    found = long_functions(source, "m")
    assert found["m:Runner.run"] == 70
    assert found["m:outer.<locals>.inner"] == 62
    assert found["m:outer"] == 63  # the nested function's lines are the outer one's body


def test_an_allowed_long_function_passes_with_its_reason() -> None:
    long = {"m:f": 80}
    assert check(long, {"m:f"}, {"m:f": "a table of 80 cases reads best in one place"}) == []
    assert check(long, {"m:f"}, {"m:f": " "}) == ["ALLOWED m:f: give a one-line reason"]


@pytest.mark.parametrize(
    ("names", "why"),
    [({"m:other"}, "no longer exists"), ({"m:gone", "m:other"}, "is no longer long")],
)
def test_stale_allowances_fail(names: set[str], why: str) -> None:
    problems = check({}, names, {"m:gone": "being split"})
    assert problems == [f"ALLOWED names m:gone, which {why}: remove the entry"]

