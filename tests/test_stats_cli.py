"""`realprobe stats`: output, bad input (one line, non-zero exit), reading while a prober writes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cli_runner import main
from probe_helpers import synthetic_rows

from realprobe import Store

T0 = 1_790_000_000.0  # 2026-09-21


def run_cli(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
            ) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["realprobe", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    out, err = capsys.readouterr()
    return code, out, err


def make_db(path: Path, tools: dict[str, int] | None = None) -> Path:
    tools = tools or {"catfact_fact": 120, "agify_age": 80}
    with Store(path) as store:
        for i, (name, n) in enumerate(tools.items()):
            for row in synthetic_rows(name, n, p_fail=0.25, seed=i, t0=T0):
                store.insert_probe(row)
    return path


def one_line_error(code: int, err: str, expected: int | None = None) -> str:
    """The one `error:` line; exit 2 for bad input, 3 when the window or file holds nothing
    to summarise (`expected` None: 3 when the line says no rows, else 2)."""
    if expected is None:
        expected = 3 if "no probe rows" in err or " rows between " in err else 2
    assert code == expected, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_stats_json_and_table(tmp_path: Path, monkeypatch, capsys) -> None:
    db = make_db(tmp_path / "p.db")
    code, out, _ = run_cli(["stats", "--db", str(db), "--json"], monkeypatch, capsys)
    assert code == 0
    data = json.loads(out)
    assert [t["tool"] for t in data["tools"]] == ["agify_age", "catfact_fact"]
    cat = data["tools"][1]
    assert cat["success"]["n"] == 120 and cat["success"]["denominator"] == "per attempt"
    assert set(cat["errors"]["counts"]) <= {"TIMEOUT", "SERVER_ERROR"}
    assert cat["latency"]["lognormal"]["n_censored"] == cat["errors"]["counts"].get("TIMEOUT", 0)
    code, out, _ = run_cli(["stats", "--db", str(db), "--tools", "agify_age"], monkeypatch, capsys)
    assert code == 0 and "agify_age" in out and "catfact_fact" not in out
    assert "per attempt" in out


def test_stats_windows(tmp_path: Path, monkeypatch, capsys) -> None:
    db = make_db(tmp_path / "p.db")
    # rows are one minute apart from T0: the first hour holds 60 of each tool's rows
    start = datetime.fromtimestamp(T0, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    end = datetime.fromtimestamp(T0 + 3600, UTC).isoformat()
    code, out, _ = run_cli(["stats", "--db", str(db), "--json", "--since", start, "--until", end],
                           monkeypatch, capsys)
    assert code == 0
    n = {t["tool"]: t["success"]["n"] for t in json.loads(out)["tools"]}
    assert n == {"agify_age": 60, "catfact_fact": 60}


def test_stats_relative_since(tmp_path: Path, monkeypatch, capsys) -> None:
    now = time.time()
    with Store(tmp_path / "p.db") as store:
        for row in synthetic_rows("catfact_fact", 180, t0=now - 3 * 3600, step_s=60):
            store.insert_probe(row)
    code, out, _ = run_cli(["stats", "--db", str(tmp_path / "p.db"), "--json", "--since", "1h"],
                           monkeypatch, capsys)
    assert code == 0
    assert json.loads(out)["tools"][0]["success"]["n"] in (59, 60)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--since", "yesterday"], "expected an ISO date"),
        (["--since", "2030-01-01"], "no probe rows"),
        (["--since", "2026-10-01", "--until", "2026-09-01"], "before --until"),
        (["--tools", "catfact_fakt"], "Did you mean"),
        (["--tools", ","], "at least one tool"),
    ],
)
def test_stats_bad_input(tmp_path: Path, monkeypatch, capsys, args: list[str], needle: str) -> None:
    db = make_db(tmp_path / "p.db")
    code, _, err = run_cli(["stats", "--db", str(db), *args], monkeypatch, capsys)
    assert needle in one_line_error(code, err)


def test_stats_bad_databases(tmp_path: Path, monkeypatch, capsys) -> None:
    empty = tmp_path / "empty.db"
    Store(empty).close()
    cases = {
        str(tmp_path / "missing.db"): "no database at",
        str(empty): "no probe rows",
        str(tmp_path): "is a directory",
    }
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    cases[str(junk)] = "not a readable realprobe database"
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x (a)").connection.commit()
    cases[str(other)] = "no `probes` table"
    for path, needle in cases.items():
        code, _, err = run_cli(["stats", "--db", path], monkeypatch, capsys)
        assert needle in one_line_error(code, err), path


def test_locked_database_is_a_clear_error(tmp_path: Path, monkeypatch, capsys) -> None:
    db = make_db(tmp_path / "p.db")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO probes (tool, started_ts) VALUES ('x', 1)")
    monkeypatch.setenv("REALPROBE_BUSY_TIMEOUT_S", "0.2")
    try:
        code, _, err = run_cli(["stats", "--db", str(db)], monkeypatch, capsys)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "database is locked" in one_line_error(code, err)


def test_stats_and_report_while_a_prober_writes(tmp_path: Path, monkeypatch, capsys) -> None:
    """WAL: readers see a consistent snapshot and never get 'database is locked'."""
    db = make_db(tmp_path / "p.db")
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        with Store(db) as store:
            i = 0
            while not stop.is_set():
                for row in synthetic_rows("catfact_fact", 5, seed=100 + i, t0=T0 + 10**6 + i * 300):
                    store.insert_probe(row)  # one commit per row, like the runner
                    written[0] += 1
                i += 1

    th = threading.Thread(target=writer)
    th.start()
    try:
        time.sleep(0.05)
        ns = []
        for _ in range(3):
            code, out, err = run_cli(["stats", "--db", str(db), "--json"], monkeypatch, capsys)
            assert code == 0, err
            data = json.loads(out)
            ns.append(sum(t["success"]["n"] for t in data["tools"]))
        code, _, err = run_cli(["report", "--db", str(db), "--format", "md", "-o",
                                str(tmp_path / "r.md")], monkeypatch, capsys)
        assert code == 0, err
    finally:
        stop.set()
        th.join()
    assert written[0] > 0
    assert ns == sorted(ns) and ns[-1] > 200  # the rows keep coming, every read is whole


def test_no_traceback_end_to_end(tmp_path: Path) -> None:
    """The installed entry point: one line on stderr, exit 2."""
    proc = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "stats", "--db", str(tmp_path / "none.db")],
        capture_output=True, text=True, check=False, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: no database at")
    assert "Traceback" not in proc.stderr


def test_period_option_drives_the_variability_flags(tmp_path: Path, monkeypatch, capsys) -> None:
    """One day of data: by day the flags need more periods; by hour they are computed."""
    with Store(tmp_path / "p.db") as store:
        for h in range(4):
            for row in synthetic_rows("catfact_fact", 30, p_fail=0.05 if h % 2 else 0.6,
                                      t0=T0 - T0 % 3600 + h * 3600, step_s=60, seed=h):
                store.insert_probe(row)
    db = str(tmp_path / "p.db")
    code, out, _ = run_cli(["stats", "--db", db, "--json"], monkeypatch, capsys)
    v = json.loads(out)["tools"][0]["variability"]
    assert code == 0 and v["variable_success"] is None and "2 periods" in v["reason"]
    code, out, _ = run_cli(["stats", "--db", db, "--json", "--period", "1h"], monkeypatch, capsys)
    v = json.loads(out)["tools"][0]["variability"]
    assert code == 0 and v["periods"] == 4 and v["variable_success"] is True
    code, _, err = run_cli(["stats", "--db", db, "--period", "hourly"], monkeypatch, capsys)
    # the one duration grammar's message, naming the flag and the forms it takes
    assert "--period 'hourly': expected a duration like 500ms, 90s, 1m30s, 2h" \
        in one_line_error(code, err)


def test_stats_says_when_day_to_day_variation_cannot_be_estimated(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A week of calls that rarely fail, at one rate every day: the console says in words that
    the long-run interval rests on too few failures and that the day sd cannot be told from
    0; the JSON carries the same notes and flags."""
    db = tmp_path / "w.db"
    with Store(db) as store:
        for row in synthetic_rows("catfact_fact", 140, p_fail=0.03, seed=2, t0=T0,
                                  step_s=7 * 86400 / 140):  # fmt: skip
            store.insert_probe(row)
    code, out, _ = run_cli(["stats", "--db", str(db)], monkeypatch, capsys)
    assert code == 0
    flat = " ".join(out.split())
    assert "too few to estimate day-to-day variation" in flat
    code, out, _ = run_cli(["stats", "--db", str(db), "--json"], monkeypatch, capsys)
    s = json.loads(out)["tools"][0]
    assert s["success"]["long_run_too_few_failures"] is True
    assert s["variability"]["success_logit_sd_ci95"] is not None


def test_stats_says_when_hangs_cannot_be_told_from_slow_calls(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A deadline at the median latency and few TIMEOUT faults: the console says the hangs
    cannot be told from slow calls, and the JSON carries the hang share's interval from 0."""
    db = tmp_path / "h.db"
    with Store(db) as store:
        for row in synthetic_rows("catfact_fact", 300, p_fail=0.0, seed=3, t0=T0,
                                  timeout_s=0.15):  # fmt: skip
            if row["latency_ms"] > 150.0:  # the deadline cuts the slow calls
                row.update(latency_ms=150.0, outcome="error", error_code="TIMEOUT")
            store.insert_probe(row)
    code, out, _ = run_cli(["stats", "--db", str(db)], monkeypatch, capsys)
    assert code == 0
    assert "hangs cannot be told from slow calls" in " ".join(out.split())
    code, out, _ = run_cli(["stats", "--db", str(db), "--json"], monkeypatch, capsys)
    fit = json.loads(out)["tools"][0]["latency"]["lognormal"]
    assert fit["hang_share_ci95"][0] == 0.0


def test_stats_loads_only_what_it_needs(tmp_path: Path) -> None:
    """`stats --json` on rows whose deadline does not bite loads scipy.special (plainly: the
    statistics' normal quantiles) but not scipy.optimize or scipy.stats; nor the call results'
    and drift's models; scipy stays whole for a later `import scipy.stats`."""
    db = make_db(tmp_path / "p.db")
    heavy = ["scipy.optimize", "scipy.stats", "realprobe.result", "realprobe.probes.drift"]
    script = (
        "import contextlib, io, sys\n"
        "from realprobe.cli import main\n"
        "import realprobe.commands\n"
        "realprobe.commands.OWN_PROCESS = True  # as the `realprobe` program (cli.run) sets it\n"
        f"sys.argv = ['realprobe', 'stats', '--db', {str(db)!r}, '--json']\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    main()\n"
        f"print([m for m in {heavy!r} if m in sys.modules])\n"
        "print('scipy.special' in sys.modules, len(out.getvalue()) > 100)\n"
        "from realprobe.probes.lazy_special import special\n"
        "import scipy.special, scipy.stats\n"
        "print(scipy.special.ndtr is special.ndtr, scipy.stats.norm.cdf(0.0) == 0.5)\n"
        "from threadpoolctl import threadpool_info\n"  # BLAS on one thread all the same
        "print(sorted({p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'}))"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    got = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, env=env).stdout.splitlines()
    assert got == ["[]", "True True", "True True", "[1]"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator settings")
def test_one_shot_commands_keep_freed_memory_and_one_blas_thread() -> None:
    """The analysis commands tell glibc to keep freed blocks (the statistics' temporary arrays
    then stop costing page faults each time, counted by the kernel, not timed) and load BLAS
    with one thread."""
    script = (
        "import resource, sys\n"
        "from realprobe.commands import common\n"
        "import realprobe.commands\n"
        "realprobe.commands.OWN_PROCESS = True\n"
        "if sys.argv[1] == 'keep':\n    common.one_shot()\n"
        "import numpy as np\nfrom threadpoolctl import threadpool_info\n"
        "from realprobe.probes.loading import ProbeArrays\n"
        "from realprobe.probes.stats import compute_stats\n"
        "rng, n = np.random.default_rng(0), 150_000\n"
        "code = np.where(rng.random(3 * n) < 0.8, -1, 0)\n"
        "arr = ProbeArrays(['a', 'b', 'c'], np.arange(4) * n, 1.79e9 + np.arange(3 * n) * 7.0,\n"
        "                  rng.lognormal(5, 0.5, 3 * n), code, np.full(3 * n, 10.0))\n"
        "compute_stats(arr)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "compute_stats(arr)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before,\n"
        "      max(p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    got = {how: [int(v) for v in subprocess.run(
               [sys.executable, "-c", script, how], capture_output=True, text=True, check=True,
               env=env).stdout.split()]
           for how in ("default", "keep")}  # fmt: skip
    assert got["keep"][0] * 3 < got["default"][0], got
    assert got["keep"][1] == 1, got


def test_options_coerced_as_typer_coerces_them(tmp_path: Path) -> None:
    """The commands' options skip building typer's (pydantic) coercion where a value needs
    none; what a command receives is what typer's own coercion gives it, and a value that
    needs converting, or is wrong, goes through typer's (its message)."""
    import typer

    from realprobe.commands.checks import apply_checks

    seen: list[dict[str, object]] = []
    app = typer.Typer()

    @app.command()
    def cmd(name: str = "x", where: Path | None = None, out: Path = Path("o.txt"),
            level: float | None = None, tags: list[str] | None = None,
            flag: bool = False) -> None:
        seen.append({"name": name, "where": where, "out": out, "level": level, "tags": tags,
                     "flag": flag})

    def run(args: list[str], deferred: bool) -> object:
        command = typer.main.get_command(app)
        if deferred:
            apply_checks(command)
        try:
            command.main(args, standalone_mode=False)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        got = seen.pop()
        return got, {k: type(v) for k, v in got.items()}

    cases = [
        [], ["--name", "abc", "--where", str(tmp_path / "p.db"), "--out", "-", "--flag"],
        ["--where", "rel/x.db", "--level", "0.5", "--tags", "a", "--tags", "b"],
        ["--level", "abc"], ["--name", ""], ["--where", ""], ["--level", "1e3"],
    ]
    for args in cases:
        assert run(args, True) == run(args, False), args
    assert "valid number" in str(run(["--level", "abc"], True))


def test_one_shot_set_up_of_the_collector_and_pydantic() -> None:
    """One-shot commands: what is loaded is frozen out of the collections, the young are
    collected less often, and pydantic looks for no plugin unless the environment says."""
    script = (
        "import gc, os\n"
        "from realprobe.commands import common\n"
        "import realprobe.commands\n"
        "realprobe.commands.OWN_PROCESS = True\n"
        "common.one_shot(); common.one_shot()\n"
        "print(gc.get_freeze_count() > 0, gc.get_threshold()[0],"
        " os.environ['PYDANTIC_DISABLE_PLUGINS'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}

    def run(**more: str) -> str:
        return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              check=True, env={**env, **more}).stdout.strip()

    assert run() == "True 5000 1"
    assert run(PYDANTIC_DISABLE_PLUGINS="logfire") == "True 5000 logfire"


def test_a_command_inside_another_program_leaves_its_process_alone(tmp_path: Path) -> None:
    """`main()` called in-process (a test, a notebook) runs `stats` without touching the
    collector, the environment or the allocator of the program around it."""
    script = (
        "import gc, os, sys\n"
        "from realprobe.cli import main\n"
        "before = gc.get_threshold(), gc.get_freeze_count()\n"
        "try:\n    main(['stats', '--db', sys.argv[1], '--json'])\n"
        "except SystemExit:\n    pass\n"
        "print(gc.get_threshold() == before[0], gc.get_freeze_count() == before[1],"
        " 'PYDANTIC_DISABLE_PLUGINS' in os.environ)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    got = subprocess.run([sys.executable, "-c", script, str(tmp_path / "none.db")],
                         capture_output=True, text=True, check=True, env=env).stdout
    assert got.split()[-3:] == ["True", "True", "False"]


def test_one_shot_commands_end_without_teardown_yet_whole(tmp_path: Path) -> None:
    """`realprobe` (`cli.run`) ends a one-shot command without the interpreter's teardown:
    the output is the bytes `main` prints in process, the exit handlers have run, and the
    exit code is the command's (2 for a missing file, 0 otherwise)."""
    db = make_db(tmp_path / "p.db")
    script = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(tmp_path / 'ran')!r}, 'w').close())\n"
        "from realprobe.cli import run\n"
        "sys.argv = ['realprobe', 'stats', '--json', '--db', sys.argv[1]]\n"
        "run()\n"
    )
    inproc = (
        "import contextlib, sys\n"
        "from realprobe.cli import main\n"
        "sys.argv = ['realprobe', 'stats', '--json', '--db', sys.argv[1]]\n"
        "with contextlib.suppress(SystemExit):\n    main()\n"
    )

    def go(code: str, path: Path) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True)

    fast, slow = go(script, db), go(inproc, db)
    assert fast.returncode == 0 and len(fast.stdout) > 100
    assert fast.stdout == slow.stdout and (tmp_path / "ran").exists()
    missing = go(script, tmp_path / "none.db")
    assert missing.returncode == 2 and missing.stderr.startswith(b"error: ")
