"""The front door: `import realprobe` names, lazy and typed; every example of docs/api.md runs
offline as written; the CLI is a thin, lazily loaded mirror of it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import realprobe

ROOT = Path(__file__).resolve().parent.parent
API_DOC = ROOT / "docs" / "api.md"

HEAVY = ("numpy", "scipy", "matplotlib", "mcp", "openai", "httpx", "pydantic", "sqlite_utils")


def _code_blocks(path: Path) -> list[tuple[int, str]]:
    text = path.read_text(encoding="utf-8")
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        out.append((text[: m.start()].count("\n") + 1, m.group(1)))
    return out


def _imported_after(code: str) -> list[str]:
    probe = (
        f"import sys\n{code}\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    res = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert res.returncode == 0, res.stderr
    return list(json.loads(res.stdout.strip().splitlines()[-1].replace("'", '"')))


def test_every_front_door_name_resolves() -> None:
    for name in realprobe.__all__:
        assert getattr(realprobe, name) is not None, name
    assert set(realprobe.__all__) <= set(dir(realprobe))
    with pytest.raises(AttributeError):
        _ = realprobe.no_such_name  # type: ignore[attr-defined]


def test_front_door_names_are_the_real_objects() -> None:
    from realprobe import RealprobeError, call_tool, stats

    assert realprobe.call_tool is call_tool
    assert realprobe.stats is stats
    assert realprobe.RealprobeError is RealprobeError
    assert issubclass(realprobe.CatalogError, realprobe.RealprobeError)
    assert issubclass(realprobe.CassetteError, realprobe.RealprobeError)


def test_import_realprobe_is_cheap() -> None:
    assert _imported_after("import realprobe") == []


def test_api_module_is_cheap_until_used() -> None:
    assert _imported_after("import realprobe.api, realprobe.demo") == []


@pytest.mark.parametrize(
    "args",
    [["--help"], ["probe", "--help"], ["report", "--help"], ["cassette", "inspect", "--help"],
     ["mcp", "--help"], ["run", "--help"], ["demo", "--help"], ["stats", "--help"],
     ["catalog", "--help"], ["catalog", "import-openapi", "--help"], ["schedule", "--help"]],
    ids=lambda a: " ".join(a),
)
def test_help_imports_no_heavy_library(args: list[str]) -> None:
    code = (
        "import sys\n"
        f"sys.argv = ['realprobe', *{args!r}]\n"
        "from realprobe.cli import app\n"
        "try:\n    app()\nexcept SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert res.returncode == 0, res.stderr
    assert "Usage:" in res.stdout
    imported = set(json.loads(res.stdout.strip().splitlines()[-1].replace("'", '"')))
    # a sub-command under a group whose own options have defaults (catalog) makes typer
    # coerce those defaults with pydantic; everything heavier stays out everywhere
    allowed = {"pydantic"} if args[0] == "catalog" and len(args) > 2 else set()
    assert imported <= allowed, imported


def test_top_level_help_loads_only_the_command_line_itself() -> None:
    """`realprobe --help` lists the verbs from a table: of realprobe it loads the package, the
    CLI module and the two command modules that build the group, not the errors, the shared
    command helpers or any verb's module."""
    code = (
        "import sys, contextlib, io\n"
        "sys.argv = ['realprobe', '--help']\n"
        "from realprobe.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main()\n    except SystemExit:\n        pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('realprobe')))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert res.returncode == 0, res.stderr
    loaded = set(json.loads(res.stdout.strip().splitlines()[-1].replace("'", '"')))
    assert loaded == {"realprobe", "realprobe.version", "realprobe.cli", "realprobe.commands",
                      "realprobe.commands.checks", "realprobe.commands.help"}


def test_the_static_verb_list_matches_the_commands() -> None:
    import typer
    from cli_runner import COMMANDS, app

    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    for name, (_, short) in COMMANDS.items():
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        assert cmd.get_short_help_str(limit=1000) == short, name


def test_library_errors_do_not_name_flags() -> None:
    with pytest.raises(realprobe.RealprobeError) as exc:
        realprobe.plan_tasks(["name_insights"], repeat=0)
    assert "--" not in str(exc.value) and "repeat" in str(exc.value)
    with pytest.raises(realprobe.RealprobeError, match="mode 'simulat'"):
        realprobe.options(mode="simulat")
    with pytest.raises(realprobe.RealprobeError, match="needs cassette"):
        realprobe.options(mode="replay")
    with pytest.raises(realprobe.RealprobeError, match="politeness"):
        realprobe.probe(["advice_random"], target=realprobe.options(), politeness="off")


BLOCKS = _code_blocks(API_DOC)


def test_api_doc_has_examples() -> None:
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("block", BLOCKS, ids=[f"api.md:{line}" for line, _ in BLOCKS])
def test_api_doc_example_runs(
    block: tuple[int, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback_only: None
) -> None:
    line, code = block
    if code.startswith("# not run:"):
        compile(code, f"{API_DOC}:{line}", "exec")  # still valid Python
        return
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REALPROBE_DB", str(tmp_path / "default.db"))
    exec(compile(code, f"{API_DOC}:{line}", "exec"), {"__name__": "__api_doc__"})
