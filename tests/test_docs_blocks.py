"""Every fenced shell and Python block of README.md and docs/*.md runs, as a reader would run
it, offline, against a sandbox this test starts (docs/api.md's Python blocks run in
test_front_door.py, the same way).

A block that cannot run here says why in a marker on the line before it:
`<!-- docs-test: skip: REASON -->` (installing into a new venv, systemd, a second machine, an
LLM endpoint). Everything else runs, with these substitutions, so that it stays offline and
fast:

- `http://127.0.0.1:8765` is the test's sandbox; `realprobe sandbox`, `realprobe exporter` and
  `realprobe mcp --transport http` lines start on a free port (`--host 0.0.0.0` becomes
  loopback), must announce themselves, and must exit 130 on Ctrl-C;
- optional parts in `[...]` are left out; `FILE` is a shipped cassette, `OUT` a new file;
  files the examples name (probes.db, eval.db, alerts.toml, prices.toml, openapi.yaml, ...)
  are prepared first;
  `export NAME=VALUE` sets NAME for the lines after it, and `--auth-token-env NAME` finds a
  token in NAME; `curl` lines go to the test's sandbox;
- each block gets its own copy of the prepared default database ($REALPROBE_DB);
- fast settings: `--rounds 1`, `--politeness off` against the sandbox, `rounds=2` in Python,
  a schedule runs one round at once (`--every 0.1s --max-runs 1`, also for `--cron`), drift
  compares the last day with itself;
- not run: `cassette recover` (it needs a recording killed mid-run), `sweep` (the example
  sweep file's models are LLM endpoints), lines that reach the
  real APIs (a comment starting with `live` or mentioning the internet, an `https://` URL,
  `record-fixtures`, a call or probe without `--sandbox`, `--profile`, `--fault-plan` or
  `--mode replay`), and lines that need an LLM endpoint (`--agent openai`) or Ray
  (`--executor ray`).

Exit codes 0 and 1 (a finding, e.g. a forced fault or a firing alert) pass; 2 or 3 fail.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_runner import main

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "api.md")]
DOC_SANDBOX = "http://127.0.0.1:8765"
SKIP = re.compile(r"<!-- docs-test: skip: (.*?) -->")
SERVERS = {"sandbox": "Ctrl-C stops", "exporter": "realprobe exporter on", "mcp": "serving"}
LIVE_VERBS = ("call", "call-all", "probe", "schedule", "run")
TOKEN = "docs-test-token-0123456789abcdef"
#: a second, small OpenAPI description (the first is the PokéAPI one under tests/data)
THINGS_SPEC = """openapi: 3.0.3
info: {title: Things, version: "1"}
servers: [{url: "https://things.example.org"}]
paths:
  /things/{id}:
    get:
      operationId: get_thing
      parameters: [{name: id, in: path, required: true, schema: {type: integer}}]
      responses: {"200": {description: ok}}
"""


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    skip: str | None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def doc_blocks() -> list[Block]:
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r"^```(bash|sh|shell|python)\n(.*?)^```", text, re.S | re.M):
            before = text[: m.start()].rstrip().rsplit("\n", 1)[-1]
            skip = SKIP.search(before)
            line = text[: m.start()].count("\n") + 1
            out.append(Block(page.name, line, m.group(1), m.group(2),
                             skip.group(1).strip() if skip else None))
    return out


BLOCKS = doc_blocks()


# -- shell lines ---------------------------------------------------------------------------


def logical_lines(code: str) -> list[str]:
    """Backslash continuations joined; an indented line continues the one before (a synopsis
    spread over lines)."""
    lines: list[str] = []
    for raw in code.replace("\\\n", " ").splitlines():
        if raw[:1].isspace() and lines and raw.strip():
            lines[-1] += " " + raw.strip()
        elif raw.strip():
            lines.append(raw)
    return lines


def _comment(line: str) -> str:
    """The comment at the end of a shell line (a `#` outside quotes, after a blank)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[i + 1:].strip().lower()
    return ""


def _drop_optional(tokens: list[str]) -> list[str]:
    out, depth = [], 0
    for tok in tokens:
        if depth == 0 and tok.startswith("[") and not tok.startswith("[["):
            depth = tok.count("[") - tok.count("]")
            continue
        if depth > 0:
            depth += tok.count("[") - tok.count("]")
            continue
        out.append(tok)
    return out


def commands(line: str) -> list[list[str]]:
    """The argv lists of one logical line (split at `&&`), optional parts left out."""
    tokens = _drop_optional(shlex.split(line, comments=True))
    out: list[list[str]] = [[]]
    for tok in tokens:
        if tok == "&&":
            out.append([])
        else:
            out[-1].append(tok)
    return [c for c in out if c]


def not_run_because(argv: list[str], comment: str) -> str | None:
    """Why a documented command line is not run here (None: it runs)."""
    verb = argv[1] if len(argv) > 1 else ""
    joined = " ".join(argv)
    if comment.startswith("live") or "internet" in comment:
        return "reaches the real APIs"
    if re.search(r"(?<!=)https://(?!127\.0\.0\.1)", joined) or "record-fixtures" in argv:
        return "reaches the real APIs"
    if "--agent" in argv and argv[argv.index("--agent") + 1] != "reference":
        return "needs an LLM endpoint"
    if "--executor" in argv and "ray" in argv:
        return "needs Ray"
    if "recover" in argv:
        return "needs a recording killed mid-run"
    if verb == "sweep":
        return "the example sweep file's models are LLM endpoints"
    offline = {"--sandbox", "--profile", "--simulate", "--fault-plan"} & set(argv) or (
        "replay" in argv)
    if verb in LIVE_VERBS and "--list" not in argv and not offline:
        return "reaches the real APIs"
    return None


def _set(argv: list[str], flag: str, value: str) -> list[str]:
    if flag in argv:
        i = argv.index(flag)
        return [*argv[: i + 1], value, *argv[i + 2:]]
    return [*argv, flag, value]


def _drop(argv: list[str], flag: str) -> list[str]:
    if flag not in argv:
        return argv
    i = argv.index(flag)
    return [*argv[:i], *argv[i + 2:]]


def substituted(argv: list[str], sandbox: str) -> list[str]:
    """The documented substitutions (see the module docstring)."""
    argv = [a.replace(DOC_SANDBOX, sandbox) for a in argv]
    argv = ["round.json" if a == "FILE" else "out.json" if a == "OUT" else a for a in argv]
    argv = [a for a in argv if a != "&"]
    verb = argv[1] if len(argv) > 1 else ""
    if "--rounds" in argv:
        argv = _set(argv, "--rounds", "1")
    if verb in ("probe", "schedule") and "--sandbox" in argv and "--politeness" not in argv:
        argv = [*argv, "--politeness", "off"]
    if verb == "schedule":
        argv = _set(_set(_drop(argv, "--cron"), "--every", "0.1s"), "--max-runs", "1")
    if verb == "drift":
        argv = _set(_set(argv, "--baseline", "1d..now"), "--current", "1d..now")
    if verb in SERVERS and (verb != "mcp" or "http" in argv):
        argv = _set(argv, "--port", "0")
        if "--host" in argv:
            argv = _set(argv, "--host", "127.0.0.1")
    return argv


# -- the workspace every block runs in ---------------------------------------------------------


def _rp(*args: str, env: dict[str, str], cwd: Path, timeout: float = 120) -> None:
    res = subprocess.run([sys.executable, "-c", "from realprobe.cli import main; main()", *args],
                         env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, (args, res.stdout[-2000:], res.stderr[-2000:])


def _toml_block(page: str, first_line: str) -> str:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    m = re.search(r"```toml\n(" + re.escape(first_line) + r"\n.*?)```", text, re.S)
    assert m, f"docs/{page} lost its {first_line} block"
    return m.group(1)


def _server(argv: list[str], ready: str, env: dict[str, str], cwd: Path,
            stdin: Any = subprocess.DEVNULL) -> subprocess.Popen[str]:
    log = cwd / f"server-{time.monotonic_ns()}.log"
    sink = log.open("w")
    proc = subprocess.Popen([sys.executable, "-c", "from realprobe.cli import main; main()",
                             *argv], stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                            text=True, stdin=stdin)
    proc.log = log  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while ready not in log.read_text() and time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    assert ready in log.read_text(), (argv, log.read_text()[-2000:])
    return proc


@dataclass
class Workspace:
    path: Path
    env: dict[str, str]
    sandbox: str


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    base = tmp_path_factory.mktemp("docs")
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "REALPROBE_DB": str(base / "realprobe.db"), "COLUMNS": "100",
           "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
           "REALPROBE_MCP_TOKEN": TOKEN}
    proc = _server(["sandbox", "--port", "0", "--profile", "calm"], "Ctrl-C stops", env, base)
    url = re.search(r"http://127\.0\.0\.1:\d+", proc.log.read_text())  # type: ignore[attr-defined]
    assert url
    _rp("probe", "--all", "--rounds", "3", "--profile", "harsh", "--seed", "1",
        "--politeness", "off", env=env, cwd=base)
    for name in ("probes.db", "berlin.db", "tokyo.db", "ohio.db"):
        shutil.copy(base / "realprobe.db", base / name)
    shutil.copy(ROOT / "cassettes" / "sandbox-published-round.json", base / "round.json")
    (base / "night").mkdir()
    shutil.copy(base / "round.json", base / "night" / "round.json")
    _rp("calibrate", "-o", "calibrated.json", env=env, cwd=base)
    for profile in ("harsh", "calm"):  # task runs for the `results` examples
        _rp("run", "travel_briefing", "pet_newsletter", "--profile", profile, "--repeat", "2",
            "--db", "eval.db", env=env, cwd=base)
    (base / "prices.toml").write_text(_toml_block("tasks.md", '["qwen2.5-7b-instruct"]'))
    (base / "plans").mkdir()
    (base / "plans" / "cat-dies.toml").write_text(
        _toml_block("faults.md", 'format = "realprobe-fault-plan/1"     # optional'))
    alerts = _toml_block("monitoring.md", "# alerts.toml")
    (base / "alerts.toml").write_text(re.sub(r'url = "https://[^"]*"',
                                             'url = "http://127.0.0.1:9/hook"', alerts))
    spec = ROOT / "tests" / "data" / "openapi" / "pokeapi__openapi.yml"
    for name in ("openapi.yaml", "a.yml"):
        shutil.copy(spec, base / name)
    (base / "b.yml").write_text(THINGS_SPEC, encoding="utf-8")
    shutil.copy(ROOT / "tests" / "data" / "realworld_cassettes"
                / "jsonplaceholder__MikeWooster-api-client.yaml", base / "posts.yml")
    from realprobe.adapters.public_apis import shipped_text

    (base / "newer-README.md").write_text(shipped_text(), encoding="utf-8")
    try:
        yield Workspace(base, env, url.group(0))
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def run_line(argv: list[str], ws: Workspace, env: dict[str, str],
             monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Servers (and MCP over stdio, which reads stdin) in a process of their own; every other
    line in this one, as `realprobe` runs it (`cli.main`), which keeps the suite fast."""
    verb = argv[1] if len(argv) > 1 else ""
    if "--auth-token-env" in argv:  # the token the example exports first
        env = {**env, argv[argv.index("--auth-token-env") + 1]: TOKEN}
    if verb in SERVERS and (verb != "mcp" or "http" in argv):
        proc = _server(argv[1:], SERVERS[verb], env, ws.path)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130, (argv, proc.log.read_text()[-2000:])  # type: ignore[attr-defined]
        return
    if verb == "mcp":
        res = subprocess.run(
            [sys.executable, "-c", "from realprobe.cli import main; main()", *argv[1:]],
            env=env, cwd=ws.path, capture_output=True, text=True, timeout=120,
            stdin=subprocess.DEVNULL,
        )
        code, err = res.returncode, res.stderr
    else:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        with pytest.raises(SystemExit) as exc:
            main(argv[1:])
        code, err = exc.value.code or 0, capsys.readouterr().err
    assert code in (0, 1), (argv, code, err[-2000:])
    assert "Traceback" not in err, err


def _fresh_db(ws: Workspace, block: Block) -> str:
    """Each block starts from the same prepared default database (its own copy)."""
    path = ws.path / f"{block.page}-{block.line}.db"
    shutil.copy(ws.env["REALPROBE_DB"], path)
    return str(path)


def test_every_block_runs_or_says_why_not() -> None:
    """A block that cannot run here (a live API, an LLM endpoint, systemd) carries a marker
    with its reason; it is not collected as a test, and a Python one must still compile."""
    assert len(BLOCKS) >= 30
    for b in BLOCKS:
        assert b.skip is None or len(b.skip) > 10, f"{b.id}: say why it is not run"
        if b.skip is not None and b.lang == "python":
            compile(b.code, b.id, "exec")
    assert sum(b.skip is None for b in BLOCKS) >= 40


RUN = [b for b in BLOCKS if b.skip is None]


@pytest.mark.parametrize("block", [b for b in RUN if b.lang != "python"], ids=lambda b: b.id)
def test_shell_block(block: Block, workspace: Workspace, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str], loopback_only: None) -> None:
    monkeypatch.chdir(workspace.path)
    env = {**workspace.env, "REALPROBE_DB": _fresh_db(workspace, block)}
    ran = 0
    for line in logical_lines(block.code):
        comment = _comment(line)
        for argv in commands(line):
            if argv[0] == "export":
                name, _, value = argv[1].partition("=")
                env[name] = value if "$(" not in line else TOKEN
                continue
            if argv[0] == "curl":  # the sandbox's runtime API, by hand
                argv = [a.replace(DOC_SANDBOX, workspace.sandbox) for a in argv]
                res = subprocess.run([*argv, "--fail", "--silent", "--show-error"],
                                     capture_output=True, text=True, timeout=60)
                assert res.returncode == 0, (argv, res.stderr)
                ran += 1
                continue
            assert argv[0] == "realprobe", f"{block.id}: {argv[0]!r} needs a skip marker"
            if not_run_because(argv, comment):
                continue
            run_line(substituted(argv, workspace.sandbox), workspace, env, monkeypatch, capsys)
            ran += 1
    assert ran, f"{block.id}: no line of it runs; mark the block with a reason"


@pytest.mark.parametrize("block", [b for b in RUN if b.lang == "python"], ids=lambda b: b.id)
def test_python_block(block: Block, workspace: Workspace, monkeypatch: pytest.MonkeyPatch,
                      loopback_only: None) -> None:
    code = block.code.replace(DOC_SANDBOX, workspace.sandbox)
    code = re.sub(r"\brounds=\d+", "rounds=2", code)
    here = workspace.path / f"py-{block.page}-{block.line}"  # a reader's fresh folder
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("PATH", workspace.env["PATH"])
    monkeypatch.setenv("REALPROBE_DB", _fresh_db(workspace, block))
    exec(compile(code, block.id, "exec"), {"__name__": "__docs__", "url": workspace.sandbox})
