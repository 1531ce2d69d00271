"""Tests go through the front door: `import realprobe` public names and the command line.

An import of an internal module (`realprobe.<room>...`) ties a test to where the code lives, so
every refactor breaks tests that should not care. Such imports are kept for tests of a room's
own invariants; the count below may only fall.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: internal import statements in tests/ today; lower it when you remove some, never raise it
CEILING = 383

#: one statement a line, as `grep -cE "^\s*(from|import) realprobe\.[a-z_]"` counts them
INTERNAL = re.compile(r"^\s*(from|import) realprobe\.[a-z_]", re.MULTILINE)


def internal_imports(folder: Path) -> dict[str, int]:
    """Internal import statements per test file under `folder` (files without any left out)."""
    counts = {}
    for path in sorted(folder.rglob("*.py")):
        n = len(INTERNAL.findall(path.read_text(encoding="utf-8", errors="replace")))
        if n:
            counts[str(path.relative_to(folder))] = n
    return counts


def test_internal_imports_in_tests_only_fall() -> None:
    counts = internal_imports(TESTS)
    total = sum(counts.values())
    most = sorted(counts.items(), key=lambda kv: -kv[1])[:5]
    worst = ", ".join(f"{name} {n}" for name, n in most)
    assert total <= CEILING, (
        f"{total} internal imports in tests (ceiling {CEILING}; most in {worst}). Use the public "
        "name (`import realprobe`, `from realprobe import X`) or the command line "
        "(`from cli_runner import invoke`); import `realprobe.<room>` only to test that room's "
        "own invariants. When you remove internal imports, lower CEILING in "
        "tests/test_front_door_imports.py to the new count."
    )


def test_the_count_sees_every_form_of_internal_import(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "test_a.py").write_text(
        "import realprobe\n"
        "from realprobe import call\n"
        "from realprobe.store import Store\n"
        "import realprobe.cli\n"
        "def f():\n"
        "    from realprobe.simulator.faults import (\n"
        "        FaultModel,\n"
        "    )\n"
        "x = 'from realprobe.store import Store'\n"
    )
    (tmp_path / "sub" / "helper.py").write_text("from realprobe.http import Mode\n")
    (tmp_path / "notes.txt").write_text("from realprobe.store import Store\n")
    assert internal_imports(tmp_path) == {"test_a.py": 3, "sub/helper.py": 1}
