"""The exit codes and the error line, the same on every verb: 0 ok, 1 a finding, 2 usage,
3 runtime or infrastructure failure, 130 interrupted; errors are one `error: ...` line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from realprobe.cli import COMMANDS, LazyGroup, app, main

CLOSED = "http://127.0.0.1:9"  # the discard port: nothing listens on loopback


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 0), out, err


@pytest.fixture()
def empty_db(tmp_path: Path) -> Path:
    from realprobe import Store

    path = tmp_path / "empty.db"
    Store(path).close()
    return path


def test_bare_realprobe_prints_help_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run([], capsys)
    assert code == 0 and "Usage: realprobe" in out and "probe" in out


def test_h_stays_a_help_flag_after_a_bare_context_looked_a_verb_up(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A verb looked up from a context without the program's settings (a tool walking the
    commands, a completion script) must not leave it knowing only --help."""
    import typer

    root = typer.main.get_command(app)
    root.get_command(typer.Context(root), "report")
    code, out, _ = _run(["report", "-h"], capsys)
    assert code == 0 and "Usage:" in out


@pytest.mark.parametrize("argv", [["--version"], ["-h"], ["--help"], ["probe", "-h"],
                                  ["cassette", "inspect", "-h"]])
def test_conventions(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(argv, capsys)
    assert code == 0
    assert ("realprobe " in out) if argv == ["--version"] else ("Usage:" in out)


def test_completion_is_offered(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(["--help"], capsys)
    assert "--install-completion" in out


@pytest.mark.parametrize("verb", list(COMMANDS))
def test_usage_error_is_one_line_and_exits_2(verb: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run([verb, "--no-such-flag"], capsys)
    assert code == 2, (verb, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Usage:" not in err + out


@pytest.mark.parametrize("verb", list(COMMANDS))
def test_help_shows_readable_metavars(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run([verb, "--help"], capsys)
    assert code == 0
    assert not re.search(r"<(str|int|float|path|bool|list\[\w+\])>",
                         out.replace("/<api-id>/<path>", "")), out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["call", "advice_random", "--profile", "calm"], 0),
        (["catalog"], 0),
        (["call", "advice_random", "--sandbox", f"{CLOSED}/_fault/500", "--timeout", "2"], 1),
        (["call", "no_such_tool"], 2),
        (["probe", "--all", "--rounds", "0"], 2),
        (["stats", "--db", "{tmp}/missing.db"], 2),
        (["report", "--db", "{tmp}/missing.db"], 2),
        (["drift", "--db", "{empty}", "--baseline", "2d..1d", "--current", "1d..now"], 3),
        (["results", "--db", "{tmp}/missing.db"], 2),
        (["results", "--db", "{empty}"], 3),
        (["probe", "--tools", "advice_random", "--sandbox", CLOSED, "--politeness", "off",
          "--db", "{tmp}/p.db", "--timeout", "2"], 3),
        (["call-all", "--sandbox", CLOSED, "--timeout", "2"], 3),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_exit_code_table(argv: list[str], expected: int, tmp_path: Path, empty_db: Path,
                         capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.format(tmp=tmp_path, empty=empty_db) for a in argv]
    code, _, err = _run(argv, capsys)
    assert code == expected, (argv, err)
    if expected >= 2:
        lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
        assert len(lines) == 1, err


def test_old_flag_names_still_work_with_one_notice(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["call", "advice_random", "--simulate", "calm", "--json"], capsys)
    assert code == 0 and '"ok": true' in out
    assert err.count("--simulate is deprecated, use --profile") == 1


def test_an_interrupt_exits_130(monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    from realprobe import Catalog

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Catalog, "load", interrupted)
    code, _, _ = _run(["catalog"], capsys)
    assert code == 130


def _interrupt(argv: list[str], ready: str, tmp_path: Path) -> int:
    """Start `realprobe argv`, wait for `ready` on its output, press Ctrl-C (SIGINT)."""
    log = tmp_path / "out.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from realprobe.cli import main; main()", *argv],
            stdout=sink, stderr=subprocess.STDOUT, cwd=tmp_path,
            env={**os.environ, "REALPROBE_DB": str(tmp_path / "x.db"), "COLUMNS": "200"},
        )
        try:
            deadline = time.monotonic() + 60
            while ready not in log.read_text() and time.monotonic() < deadline:
                assert proc.poll() is None, log.read_text()
                time.sleep(0.1)
            assert ready in log.read_text(), log.read_text()
            proc.send_signal(signal.SIGINT)
            return proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()


@pytest.mark.parametrize(
    ("argv", "ready"),
    [
        (["sandbox", "--port", "0", "--profile", "calm"], "Ctrl-C stops"),
        (["schedule", "--every", "1h", "--tools", "advice_random", "--profile", "calm"],
         "round"),
        (["exporter", "--db", "{db}", "--port", "0", "--no-probe"], "realprobe exporter on"),
        (["mcp", "--transport", "http", "--port", "0", "--profile", "calm"], "serving"),
    ],
    ids=["sandbox", "schedule", "exporter", "mcp-http"],
)
def test_ctrl_c_exits_130_on_long_running_verbs(argv: list[str], ready: str,
                                                tmp_path: Path, empty_db: Path) -> None:
    argv = [a.format(db=empty_db) for a in argv]
    assert _interrupt(argv, ready, tmp_path) == 130


def test_one_name_per_concept_across_verbs(capsys: pytest.CaptureFixture[str]) -> None:
    """The fault profile, output paths and politeness are spelled the same on every verb; the
    old spellings are rewritten (one notice line each)."""
    from realprobe.commands.help import renamed_flags

    assert renamed_flags(["sandbox", "--no-polite", "--out=x"]) == [
        "sandbox", "--politeness", "off", "--output=x"]
    assert renamed_flags(["mcp", "--no-politeness", "--", "--out"]) == [
        "mcp", "--politeness", "off", "--", "--out"]
    err = capsys.readouterr().err
    assert err.count("is deprecated") == 3
    flags: dict[str, set[str]] = {}
    for verb in COMMANDS:
        _run([verb, "--help"], capsys)

    for group in LazyGroup._groups.values():
        for cmd in _commands(group):
            for p in cmd.params:
                for opt in p.opts:
                    flags.setdefault(p.name, set()).add(opt)
    assert not any(o in ("--simulate", "--out", "--polite", "--no-politeness")
                   for opts in flags.values() for o in opts)


def _commands(group: object) -> list[object]:
    subs = list(getattr(group, "commands", {}).values())
    return subs + [c for s in subs for c in _commands(s)]


def test_mcp_over_stdio_with_stdin_from_a_file_or_dev_null(tmp_path: Path) -> None:
    """No traceback, no hang: the file is served as the client's side, then EOF stops it."""
    init = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
            '"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n')
    script = tmp_path / "init.jsonl"
    script.write_text(init)
    cmd = [sys.executable, "-c", "from realprobe.cli import main; main()", "mcp", "--profile",
           "calm"]
    with open(os.devnull, "rb") as empty:
        res = subprocess.run(cmd, stdin=empty, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    with script.open("rb") as stdin:
        res = subprocess.run(cmd, stdin=stdin, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and '"id":1,"result"' in res.stdout, res.stderr


@pytest.mark.parametrize("severity", ["²", "5" * 5000, "٣٠"])
def test_a_severity_no_int_reads_is_one_usage_line(
    severity: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(["run", "pet_newsletter", "--profile", "calm", "--db",
                           str(tmp_path / "r.db"), "--prompt",
                           f"flawed:missing_steps@{severity}"], capsys)
    assert code == 2 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("error:") and "1 to 100" in line and len(line) < 300
