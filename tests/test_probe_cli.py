"""`realprobe probe` as a user runs it: JSON and table output, and every kind of bad input."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

from cli_runner import invoke

from realprobe import Catalog, RealprobeError, Store


def rp(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "realprobe.cli", *args], capture_output=True, text=True,
        timeout=timeout,
    )


def assert_user_error(res: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert res.returncode != 0, res.stdout
    assert "Traceback" not in res.stderr, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, res.stderr
    for frag in fragments:
        assert frag in errors[0], errors[0]


def test_probe_all_json_summary_and_rows(catalog: Catalog, tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    res = invoke(
        ["probe", "--all", "--rounds", "2", "--profile", "harsh", "--db", str(db), "--json",
              "--vantage", "laptop", "--seed", "4"],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["n_calls"] == 2 * len(catalog) and summary["status"] == "done"
    assert summary["target"] == "simulate:harsh" and summary["vantage"] == "laptop"
    assert {t["tool"] for t in summary["tools"]} == {t.name for t in catalog}
    with sqlite3.connect(db) as conn:
        (n,) = conn.execute("SELECT count(*) FROM probes WHERE run_id = ?",
                            [summary["run_id"]]).fetchone()
    assert n == summary["n_calls"]


def test_probe_table_output_against_the_sandbox(catalog: Catalog, calm_sandbox: str,
                                                tmp_path: Path) -> None:
    names = [t.name for t in catalog][:3]
    res = invoke(
        ["probe", "--tools", ",".join(names), "--rounds", "2", "--sandbox", calm_sandbox,
              "--politeness", "off", "--db", str(tmp_path / "p.db")],
    )
    assert res.exit_code == 0, res.output
    assert "p50 ms" in res.stdout and "6 calls, 6 ok, 0 errors" in res.stdout
    assert "probing" not in res.stderr  # the bar (on stderr) is drawn only on a terminal


def test_unknown_tool_suggests_names(tmp_path: Path) -> None:
    res = rp("probe", "--tools", "uselesfacts_random", "--profile", "calm",
             "--db", str(tmp_path / "p.db"))
    assert_user_error(res, "unknown tool 'uselesfacts_random'", "uselessfacts_random")


def in_process_error(*args: str) -> str:
    """Run in process; the command must fail with one RealprobeError (main() prints it)."""
    res = invoke(list(args))
    assert isinstance(res.exception, RealprobeError), (res.exception, res.output)
    message = str(res.exception)
    assert "\n" not in message
    return message


def test_option_mistakes_are_one_line_errors(tmp_path: Path) -> None:
    db = str(tmp_path / "p.db")
    sim = ("--profile", "calm", "--db", db)
    assert "--rounds must be at least 1" in in_process_error(
        "probe", "--all", "--rounds", "0", *sim
    )
    assert "--tools a,b or --tools all" in in_process_error("probe", *sim)
    assert "not both" in in_process_error("probe", "--all", "--tools", "advice_random", *sim)
    assert "--timeout must be positive" in in_process_error("probe", "--all", "--timeout", "0",
                                                             *sim)
    assert "--politeness off is only for" in in_process_error(
        "probe", "--all", "--politeness", "off", "--db", db
    )
    assert "expected a URL" in in_process_error("probe", "--all", "--sandbox", "127.0.0.1:1",
                                                "--db", db)
    assert not Path(db).exists()  # nothing written for bad input


def test_unusable_databases(tmp_path: Path) -> None:
    assert "is a directory" in in_process_error("probe", "--all", "--profile", "calm",
                                                "--db", str(tmp_path))
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite at all" * 100)
    assert "not a usable SQLite database" in in_process_error(
        "probe", "--all", "--profile", "calm", "--db", str(garbage)
    )


def test_locked_database(tmp_path: Path) -> None:
    db = tmp_path / "locked.db"
    Store(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process is writing and holds the lock
    try:
        message = in_process_error("probe", "--all", "--profile", "calm", "--db", str(db),
                                   "--lock-timeout", "0.2")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "database is locked by another process" in message


def test_unreachable_sandbox_is_marked_and_exits_non_zero(tmp_path: Path) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    db = tmp_path / "p.db"
    res = rp("probe", "--all", "--rounds", "3", "--sandbox", f"http://127.0.0.1:{port}",
             "--db", str(db), "--json")
    assert_user_error(res, "nothing was reachable", "local_network_failure")
    summary = json.loads(res.stdout)
    assert summary["status"] == "local_network_failure" and summary["excluded"] is True
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM probes WHERE excluded = 0").fetchone()[0] == 0
        assert conn.execute("SELECT status FROM probe_runs").fetchone()[0] == (
            "local_network_failure"
        )


def test_probe_record_mode_once_records_then_replays(calm_sandbox: str, tmp_path: Path) -> None:
    """--record-mode once: the first run records the cassette, the next replays it offline."""
    db, tape = tmp_path / "p.db", tmp_path / "c.json"
    args = ["probe", "--tools", "agify_age", "--rounds", "2", "--sandbox", calm_sandbox,
            "--cassette", str(tape), "--record-mode", "once", "--politeness", "off",
            "--db", str(db), "--json"]
    first = invoke(args)
    assert first.exit_code == 0, first.output
    assert tape.exists() and json.loads(first.stdout)["target_kind"] == "sandbox"
    recorded = tape.read_bytes()
    second = invoke(args)
    assert second.exit_code == 0, second.output
    summary = json.loads(second.stdout)
    assert summary["target_kind"] == "replay" and summary["n_ok"] == 2
    assert tape.read_bytes() == recorded  # replayed, not re-recorded
    assert_user_error(rp(*args[:-1], "--record-mode", "sometimes"), "sometimes", "once")
