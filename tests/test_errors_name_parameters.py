"""Library errors name Python parameters, never command-line flags: the CLI adds the flags.

Every module outside `realprobe/commands` and `realprobe/cli.py` is parsed; a string (or an
f-string part) inside a `raise`, or passed to an exception's constructor, must not contain
`--flag`. The checker itself is tested on planted examples, so it cannot pass by finding
nothing.
"""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

from realprobe import BadArgument, NoDatabase, RealprobeError
from realprobe.commands.common import cli_message, in_cli_terms

PACKAGE = Path(__file__).resolve().parents[1] / "realprobe"
FLAG = re.compile(r"(?<![\w-])--[a-z]")
#: the pytest plugin's errors are for pytest users, whose options these are
EXEMPT = {"cassettes/pytest_plugin.py"}


def library_modules() -> list[Path]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("commands/") or rel == "cli.py" or rel in EXEMPT:
            continue
        out.append(path)
    return out


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def exception_names(trees: list[ast.Module]) -> set[str]:
    """Builtin exception classes and every class of the package that derives from one."""
    names = {n for n, v in vars(builtins).items()
             if isinstance(v, type) and issubclass(v, BaseException)}
    classes = [(c.name, {_base_name(b) for b in c.bases})
               for t in trees for c in ast.walk(t) if isinstance(c, ast.ClassDef)]
    grew = True
    while grew:
        grew = False
        for name, bases in classes:
            if name not in names and bases & names:
                names.add(name)
                grew = True
    return names


def flag_strings(source: str, exceptions: set[str], where: str = "<src>") -> list[str]:
    """`where:line: text` for each string inside a raise or an exception constructor call
    that names a command-line flag."""
    tree = ast.parse(source)
    found: list[str] = []
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            roots.append(node.exc)
        elif isinstance(node, ast.Call) and _base_name(node.func) in exceptions:
            roots.append(node)
    seen: set[int] = set()
    for root in roots:
        for sub in ast.walk(root):
            if (isinstance(sub, ast.Constant) and isinstance(sub.value, str)
                    and id(sub) not in seen and FLAG.search(sub.value)):
                seen.add(id(sub))
                found.append(f"{where}:{sub.lineno}: {sub.value!r}")
    return found


def test_no_library_error_names_a_cli_flag() -> None:
    paths = library_modules()
    assert len(paths) > 50
    sources = {p: p.read_text(encoding="utf-8") for p in paths}
    exceptions = exception_names([ast.parse(s) for s in sources.values()])
    assert {"RealprobeError", "BadArgument", "TaskFileError", "ValueError"} <= exceptions
    bad = [hit for p, s in sources.items()
           for hit in flag_strings(s, exceptions, p.relative_to(PACKAGE).as_posix())]
    assert not bad, "library errors that name CLI flags:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "planted",
    [
        'raise RealprobeError("--target must be given")',
        'raise RealprobeError(f"--target {value!r}: choose one")',
        'raise ValueError(f"bad {x}; pass --db FILE")',
        'err = BadArgument("db", "pass --db FILE")\nraise err',
        'def f():\n    raise TaskFileError("name tasks, or pass --all") from None',
        'raise RealprobeError("no rows " + "widen --since")',
    ],
)
def test_the_checker_catches_planted_flags(planted: str) -> None:
    exceptions = {"RealprobeError", "ValueError", "BadArgument", "TaskFileError"}
    assert flag_strings(planted, exceptions)


@pytest.mark.parametrize(
    "clean",
    [
        'raise RealprobeError("target \'x\': choose one of live, all")',
        'raise RealprobeError(f"{a}--{b}")',  # not a flag: no letter right after
        'print("--target")',  # not an error
        'help_text = "pass --db FILE"',
    ],
)
def test_the_checker_leaves_the_rest(clean: str) -> None:
    assert not flag_strings(clean, {"RealprobeError"})


def test_the_cli_spells_parameters_as_flags() -> None:
    exc = BadArgument("kinds", "pick one with kinds=sandbox|simulate, or kinds=all")
    assert cli_message(exc) == "pick one with --kinds sandbox|simulate, or --kinds all"
    assert str(exc).startswith("pick one with kinds=")  # Python users see the parameter
    # every flag is its keyword; paths, dotted names and quoted values stay as they are
    exc = RealprobeError("view 'view': unknown, see /tmp/view/x.view", param="view")
    assert cli_message(exc) == "--view 'view': unknown, see /tmp/view/x.view"
    exc = RealprobeError("since must be before until", param=("since", "until"))
    assert cli_message(exc) == "--since must be before --until"
    assert cli_message(RealprobeError("min_success_change must be >= 0",
                                      param="min_success_change")).startswith(
        "--min-success-change must")
    plain = RealprobeError("a target without params stays")
    assert cli_message(plain) == "a target without params stays"


def test_no_database_advice_is_added_by_the_cli_only(tmp_path: Path) -> None:
    exc = NoDatabase(tmp_path / "none.db")
    assert "realprobe probe" not in str(exc) and "--db" not in str(exc)
    assert str(in_cli_terms(exc)).endswith("run `realprobe probe` first or pass --db FILE")
    assert str(in_cli_terms(exc)).count("realprobe probe") == 1  # printed once


def test_python_errors_name_parameters(tmp_path: Path) -> None:
    import realprobe

    with pytest.raises(NoDatabase):
        realprobe.stats(tmp_path / "none.db")
    with pytest.raises(BadArgument, match=r"^kinds 'nope': choose one of") as err:
        realprobe.api.select_rows(tmp_path / "x.db", "nope", None, [(None, None)], None)
    assert err.value.params == ("kinds",)
    with pytest.raises(BadArgument, match=r"^since must be before until"):
        realprobe.window("2026-01-02", "2026-01-01")
    # epoch seconds that are no time: refused by name, not read as "the beginning" or an
    # OverflowError from SQLite
    for bad in (float("nan"), float("inf"), 10**400):
        with pytest.raises(BadArgument, match=r"^since '.*': not a time") as err:
            realprobe.window(bad, None)
        assert err.value.params == ("since",)
    assert realprobe.window(1_790_000_000, None) == (1_790_000_000.0, None)
    with pytest.raises(BadArgument, match=r"^correction 'x'"):
        realprobe.drift(tmp_path / "none.db", baseline="..", current="..",
                        correction="x")  # type: ignore[arg-type]
    for exc in (BadArgument("target", "target 'x'"), NoDatabase("x.db")):
        import pickle

        again = pickle.loads(pickle.dumps(exc))
        assert str(again) == str(exc) and type(again) is type(exc)
    assert isinstance(BadArgument("a", "b"), RealprobeError)


def test_cli_errors_name_the_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The same library errors, raised under the command line, name the flags users type."""
    import sys

    from cli_runner import main

    from realprobe import Store

    db = tmp_path / "p.db"
    Store(db).close()

    def error(*args: str) -> str:
        monkeypatch.setattr(sys, "argv", ["realprobe", *args])
        with pytest.raises(SystemExit) as stop:
            main()
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: "), err
        return err

    assert "--kinds 'nope': choose one of" in error("stats", "--db", str(db), "--kinds", "nope")
    assert "--since must be before --until" in error(
        "stats", "--db", str(db), "--since", "2026-01-02", "--until", "2026-01-01")
    assert "--by 'x'" in error("stats", "--db", str(db), "--by", "x")
    assert "--view 'x'" in error("calibrate", "--db", str(db), "--view", "x")
    assert "--correction 'x'" in error("drift", "--db", str(db), "--baseline", "..1d",
                                       "--current", "1d..", "--correction", "x")
    assert "--format 'pdf'" in error("report", "--db", str(db), "--format", "pdf")
    assert "--vantage: give at least one" in error("stats", "--db", str(db), "--vantage", ",")
    assert "run `realprobe probe` first or pass --db FILE" in error(
        "stats", "--db", str(tmp_path / "none.db"))
    assert "--every 'soon'" in error("schedule", "--every", "soon", "--all", "--db", str(db))
    assert "--toxic 'nope'" in error("sandbox", "--toxic", "nope")
