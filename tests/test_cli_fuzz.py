"""CLI fuzz: every option of every verb, given malformed or out-of-range values, ends in a
one-line error and exit 2 - never a traceback, never work started with a bad value.

Each verb gets base arguments that are valid and offline (simulate, replay, files in
tmp); one option at a time is then replaced by a bad value. The cases are built from the
command tree itself, so a new option is fuzzed by type without anyone listing it."""

from __future__ import annotations

import signal
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import typer.main
from cli_runner import app, main

from realprobe import data_dir

TASK = "content_social_post"
OPENAPI = Path(__file__).parent / "data" / "openapi" / "open-meteo__elevation.yml"
GUARD_S = 30  # a case that starts real work with a bad value is a failure, not a hang

#: by type: values no option of that type accepts
GENERIC: dict[str, list[str]] = {
    "int": ["abc", "1.5"],
    "float": ["abc"],
    "enum": ["bogus"],
}
#: by option name: out-of-range or malformed values of an otherwise valid type
BY_NAME: dict[str, list[str]] = {
    "port": ["-1", "99999", "65536"],
    "timeout": ["-1", "0", "nan", "inf"],
    "call_timeout": ["-1", "0", "nan"],
    "llm_timeout": ["-1", "0", "nan"],
    "lock_timeout": ["-1", "nan"],
    "jitter": ["-1", "nan"],
    "rounds": ["0", "-1"],
    "concurrency": ["0", "-1"],
    "repeat": ["0", "-3"],
    "max_runs": ["0", "-1"],
    "max_turns": ["0", "-1"],
    "latency_scale": ["-1", "nan"],
    "alpha": ["0", "1", "1.5", "-0.1", "nan"],
    "min_success_change": ["-1", "nan"],
    "min_latency_change": ["-1", "nan"],
    "sandbox": ["127.0.0.1:1", "ftp://127.0.0.1/"],
    "simulate": ["no-such-profile"],
    "profile": ["no-such-profile"],
    "every": ["bogus", "0s", "-5m"],
    "cron": ["bogus", "99 * * * *"],
    "since": ["bogus"],
    "until": ["bogus"],
    "period": ["bogus", "0s"],
    "baseline": ["bogus"],
    "current": ["bogus"],
    "fmt": ["pdf"],
    "view": ["toolbench"],
    "correction": ["bogus"],
    "agent": ["bogus"],
    "prompt": ["bogus"],
    "replay_latency": ["bogus"],
    "on_exhausted": ["bogus"],
    "record_mode": ["bogus", "twice"],
    "arg": ["noequals"],
    "tools": ["nonesuch_tool"],
    "transport": ["bogus"],
    "substitute": ["noequals"],
    "base_url": ["not a url"],
    "catalog": ["/nonexistent/realprobe/catalog.toml"],
    "spec": ["/nonexistent/realprobe/openapi.yml"],
    "upstream": ["127.0.0.1:1"],
    "interval": ["-1", "nan"],
    "target": ["bogus"],
    "window": ["bogus", "0s"],
    "sources": ["/nonexistent/realprobe/x.db"],
    "rules": ["/nonexistent/realprobe/alerts.toml"],
    "cassette": ["/nonexistent/realprobe/c.json"],
    "tasks_dir": ["/nonexistent/realprobe/tasks"],
    "db": ["/nonexistent/realprobe/x.db"],
    "out": ["/nonexistent/realprobe/out", "/proc/realprobe-demo"],
    "output": ["/nonexistent/realprobe/out.html"],
    "file": ["/nonexistent/realprobe/c.json"],
    "executor": ["bogus", "RAY"],
    "address": ["", "10.0.0.5:6379"],  # without --executor ray: refused, nothing joined
}
#: options whose any value is fine, or that need a live server or host to be meaningful
UNFUZZED = {"host", "vantage", "name", "secret", "header", "param", "api_key_env", "seed",
            "batch", "tool", "tasks", "source", "model"}


def _type_of(param: Any) -> str:
    """The kind of value a parameter takes: from typer's own parameter model where it has
    one (`bare_type`), else from click's parameter types (typer at the declared floor)."""
    if not hasattr(param, "bare_type"):
        return {"boolean": "bool", "integer": "int", "integer range": "int", "float": "float",
                "float range": "float", "choice": "enum"}.get(param.type.name, "other")
    bare = param.bare_type()
    for kind in (bool, int, float):  # bool before int: a bool is an int
        if isinstance(bare, type) and issubclass(bare, kind):
            return kind.__name__
    annotation = param.type_descriptor.annotation
    if isinstance(annotation, type) and hasattr(annotation, "__members__"):
        return "enum"
    return "other"


#: groups whose own callback is a verb
GROUP_VERBS = {"mcp"}


def _commands() -> Iterator[tuple[str, Any]]:
    root = typer.main.get_command(app)

    def walk(cmd: Any, prefix: str) -> Iterator[tuple[str, Any]]:
        # list_commands/get_command rather than .commands: the root loads verbs lazily
        if hasattr(cmd, "list_commands"):
            if prefix in GROUP_VERBS:  # a verb of its own too (`mcp`, beside `mcp proxy`)
                yield prefix, cmd
            ctx = typer.Context(cmd)
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), f"{prefix} {name}".strip())
        else:
            yield prefix, cmd

    yield from walk(root, "")


def _cases() -> list[tuple[str, str, str, str]]:
    """(verb, option name, flag or '' for an argument, bad value)."""
    out = []
    for verb, cmd in _commands():
        for param in cmd.params:
            kind = _type_of(param)
            if kind == "bool" or param.name in UNFUZZED:
                continue
            values = GENERIC.get(kind, []) + BY_NAME.get(param.name, [])
            flag = max(param.opts, key=len) if param.param_type_name == "option" else ""
            for value in values:
                out.append((verb, param.name, flag, value))
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A probe database with rows, a task database, a cassette: what the verbs read."""
    base = tmp_path_factory.mktemp("fuzz")
    db = base / "p.db"
    code = _run(["probe", "--tools", "uselessfacts_random", "--rounds", "3", "--profile",
                 "calm", "--db", str(db), "--json"])[0]
    assert code == 0
    tasks_db = base / "t.db"
    cassette = data_dir("cassettes") / "sandbox-published-round.json"
    catalogue = base / "mine.toml"
    catalogue.write_text(
        '[[apis]]\nid = "mine"\nname = "Mine"\nbase_url = "http://127.0.0.1:9"\n'
        'docs_url = "http://127.0.0.1/"\ncategory = "Test"\nhttps = false\n'
        '[[apis.tools]]\nname = "mine_x"\ntitle = "x"\ndescription = "x"\npath = "/x"\n'
        '[apis.tools.output.x]\ndescription = "x"\n'
    )
    sweep = base / "sweep.toml"
    sweep.write_text('tasks = ["pet_newsletter"]\n[[targets]]\nkind = "simulate"\n')
    rules = base / "alerts.toml"
    rules.write_text(
        '[[rules]]\nname = "r"\nkind = "success_below"\nthreshold = 0.9\nwindow = "10m"\n'
    )
    mcp_cassette = base / "session.jsonl"
    mcp_cassette.write_text('{"realprobe_mcp_cassette": 1, "meta": {}}\n')
    mcp_tape = base / "tape.jsonl"
    mcp_tape.write_text('{"t": 0, "dir": "in", "raw": {"jsonrpc": "2.0", "id": 1, '
                        '"method": "ping"}}\n')
    incidents = base / "incidents.json"  # a Statuspage incidents.json: one declared window
    incidents.write_text(
        '{"page": {"id": "p", "name": "Example"}, "incidents": [{"id": "i1", "name": "API down",'
        ' "status": "resolved", "impact": "major", "created_at": "2026-11-01T10:00:00Z",'
        ' "started_at": "2026-11-01T10:00:00Z", "resolved_at": "2026-11-01T11:00:00Z",'
        ' "components": [{"name": "API"}]}]}'
    )
    history_db = base / "h.db"
    code = _run(["history", "import", f"statuspage:{incidents}", "--db", str(history_db)])[0]
    assert code == 0
    return {"base": base, "db": db, "tasks_db": tasks_db, "cassette": cassette,
            "incidents": incidents, "history_db": history_db,
            "mcp_cassette": mcp_cassette, "mcp_tape": mcp_tape,
            "catalogue": catalogue, "rules": rules, "sweep": sweep}


def _base_args(verb: str, f: dict[str, Path]) -> list[str]:
    db, base = str(f["db"]), f["base"]
    sim = ["--profile", "calm"]
    return {
        "catalog import-openapi": [str(OPENAPI), "--output", str(base / "o.toml")],
        "catalog record-fixtures": [str(f["catalogue"]), "--sandbox", "http://127.0.0.1:9",
                                    "--output", str(base / "rf.toml")],
        "catalog public-apis": [],
        "call": ["uselessfacts_random", *sim],
        "sandbox": [],
        "call-all": sim,
        "demo": ["--output", str(base / "demo")],
        "probe": ["--tools", "uselessfacts_random", *sim, "--db", str(base / "q.db")],
        "schedule": ["--every", "1h", "--max-runs", "1", "--tools", "uselessfacts_random",
                     *sim, "--db", str(base / "q.db")],
        "stats": ["--db", db],
        "calibrate": ["--db", db],
        "drift": ["--baseline", "30d..1d", "--current", "1d..now", "--db", db],
        "report": ["--db", db, "-o", str(base / "r.html")],
        "run": [TASK, "--agent", "reference", "--mode", "replay", "--db", str(f["tasks_db"])],
        "results": ["--db", str(f["tasks_db"])],
        "sweep": [str(f["sweep"]), "--db", str(base / "sw.db")],
        "mcp": [],
        "mcp proxy": ["--upstream", "http://127.0.0.1:9/mcp"],
        "mcp replay": [str(f["mcp_cassette"])],
        "mcp import": [str(f["mcp_tape"]), str(base / "imported.jsonl")],
        "exporter": ["--db", db],
        "merge": [db, "-o", str(base / "merged.db")],
        "alert check": [str(f["rules"]), "--db", db, "--dry-run"],
        "cassette inspect": [str(f["cassette"])],
        "cassette verify": [str(f["cassette"])],
        "cassette scrub": [str(f["cassette"]), "-o", str(base / "s.json")],
        "cassette import": [str(f["cassette"]), "-o", str(base / "i.json")],
        "cassette record-round": ["-o", str(base / "rr.json")],
        "cassette replay-round": [str(f["cassette"])],
        "cassette recover": [str(base / "never-recorded.json")],
        "cassette export": [str(f["cassette"]), "-o", str(base / "e.har")],
        "mcp export": [str(f["mcp_cassette"]), "-o", str(base / "e.json")],
        "history import": [f"statuspage:{f['incidents']}", "--db", str(base / "hi.db")],
        "history calibrate": ["--db", str(f["history_db"]), "-o", str(base / "hp.json")],
    }[verb]


def _with(args: list[str], flag: str, value: str) -> list[str]:
    """`args` with `flag value` replacing any earlier value of the same flag (or, for an
    argument, the value put first)."""
    if not flag:
        rest = args[1:] if args and not args[0].startswith("-") else args
        return [value, *rest]
    out, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a == flag and i + 1 < len(args):
            skip = True
            continue
        out.append(a)
    return [*out, flag, value]


def _without(args: list[str], flag: str) -> list[str]:
    if flag not in args:
        return args
    i = args.index(flag)
    return args[:i] + args[i + 2 :]


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError(f"still running after {GUARD_S}s: a bad value started real work")


def _run(argv: list[str]) -> tuple[int, str]:
    import io
    from contextlib import redirect_stderr, redirect_stdout

    out, err = io.StringIO(), io.StringIO()
    old_argv = sys.argv
    sys.argv = ["realprobe", *argv]
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(GUARD_S)
    code = 0
    try:
        with redirect_stdout(out), redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        sys.argv = old_argv
    return code, out.getvalue() + err.getvalue()


def test_every_verb_has_base_arguments(files: dict[str, Path]) -> None:
    verbs = {verb for verb, _ in _commands()}
    for verb in verbs:
        _base_args(verb, files)  # a new verb without an entry fails here
    assert len(CASES) > 150


@pytest.mark.parametrize(("verb", "name", "flag", "value"), CASES,
                         ids=[f"{v}-{n}={x}" for v, n, _, x in CASES])
def test_bad_value_is_a_one_line_error(
    verb: str, name: str, flag: str, value: str, files: dict[str, Path],
    no_network: None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(files["base"])
    base = _base_args(verb, files)
    if name == "cassette" and "--mode" not in base:  # a cassette matters only in replay
        base = _with(_without(base, "--profile"), "--mode", "replay")
    argv = [*verb.split(), *_with(base, flag, value)]
    code, text = _run(argv)
    assert "Traceback" not in text, text
    assert code == 2, (argv, code, text[-500:])
    assert text.strip(), argv
    assert not Path("/nonexistent").exists()


def test_foreign_database_is_refused_without_force(tmp_path: Path) -> None:
    foreign = tmp_path / "other.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    code, text = _run(["probe", "--tools", "uselessfacts_random", "--profile", "calm",
                       "--db", str(foreign)])
    assert code == 2 and "--force" in text and "Traceback" not in text
    with sqlite3.connect(foreign) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert tables == {"notes"} and mode == "delete"
    code, _ = _run(["probe", "--tools", "uselessfacts_random", "--profile", "calm",
                    "--db", str(foreign), "--force", "--json"])
    assert code == 0


def test_report_does_not_write_through_a_symlink(
    files: dict[str, Path], tmp_path: Path
) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "report.html"
    link.symlink_to(target)
    code, text = _run(["report", "--db", str(files["db"]), "-o", str(link)])
    assert code == 2 and "symbolic link" in text
    assert target.read_text() == "keep me" and link.is_symlink()


def test_a_second_recording_does_not_overwrite_the_first(tmp_path: Path) -> None:
    from realprobe import Sandbox  # noqa: F401  (the sandbox verb's server)

    folder = tmp_path / "rec"
    folder.mkdir()
    existing = folder / f"{TASK}__reference__optimal__s0__r0.json"
    existing.write_text('{"earlier": "run"}')
    code, text = _run(["run", TASK, "--agent", "reference", "--mode", "record",
                       "--profile", "calm", "--cassette", f"{folder}/",
                       "--db", str(tmp_path / "t.db")])
    assert code == 2 and "already exists" in text, text
    assert existing.read_text() == '{"earlier": "run"}'
