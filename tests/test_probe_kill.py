"""Killing a prober: SIGKILL loses at most the calls in flight; SIGINT loses nothing."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from realprobe import Catalog, Sandbox, Store, load_profile
from realprobe.http.simulate import routes_from_catalog
from realprobe.sandbox.server import SandboxThread

CONCURRENCY = 6


@pytest.fixture
def slow_sandbox(catalog: Catalog) -> Iterator[Sandbox]:
    sb = Sandbox(routes_from_catalog(catalog), load_profile("calm"), latency_scale=1.5)
    thread = SandboxThread(sb)
    thread.start()
    yield sb
    thread.stop()


def start_probe(sb: Sandbox, db: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "probe", "--all", "--rounds", "40",
         "--politeness", "off", "--concurrency", str(CONCURRENCY), "--sandbox", sb.url,
         "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_for_rows(db: Path, n: int, proc: subprocess.Popen[str], limit: float = 30) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        if db.exists():
            try:
                with sqlite3.connect(db, timeout=1) as conn:
                    if conn.execute("SELECT count(*) FROM probes").fetchone()[0] >= n:
                        return
            except sqlite3.OperationalError:
                pass
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} rows after {limit}s")


def rows_and_run(db: Path) -> tuple[int, dict[str, object], str]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        n = conn.execute("SELECT count(*) FROM probes").fetchone()[0]
        run = dict(conn.execute("SELECT * FROM probe_runs").fetchone())
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        incomplete = conn.execute(
            "SELECT count(*) FROM probes WHERE outcome IS NULL OR latency_ms IS NULL "
            "OR started_ts IS NULL OR run_id IS NULL"
        ).fetchone()[0]
        assert incomplete == 0
    return n, run, integrity


def test_sigkill_loses_at_most_the_calls_in_flight(slow_sandbox: Sandbox, tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    proc = start_probe(slow_sandbox, db)
    wait_for_rows(db, 12, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    time.sleep(0.2)
    n, run, integrity = rows_and_run(db)
    assert integrity == "ok"
    assert n >= 12
    assert 0 <= slow_sandbox.stats.requests - n <= CONCURRENCY
    assert run["status"] == "running" and run["ended_at"] is None  # visibly cut short
    # the next command that opens the database marks it killed (its pid is gone)
    with Store(db) as store:
        after = store.run(str(run["id"]))
    assert after["status"] == "killed" and after["ended_ts"] is not None
    assert after["n_calls"] == n  # the rows it left behind


def test_sigint_stops_after_in_flight_calls_and_keeps_them(
    slow_sandbox: Sandbox, catalog: Catalog, tmp_path: Path
) -> None:
    db = tmp_path / "p.db"
    proc = start_probe(slow_sandbox, db)
    wait_for_rows(db, 12, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    n, run, integrity = rows_and_run(db)
    assert integrity == "ok"
    assert n == slow_sandbox.stats.requests  # every call that was sent has its row
    assert n < 40 * len(catalog)  # it stopped, rather than running its 40 rounds out
    assert run["status"] == "interrupted" and run["n_calls"] == n
    assert "stopped after the calls in flight" in out


def test_second_sigint_abandons_hanging_calls(calm_sandbox: str, tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "probe", "--all", "--rounds", "3",
         "--politeness", "off", "--timeout", "60", "--sandbox", f"{calm_sandbox}/_fault/hang",
         "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    end = time.monotonic() + 30
    with httpx.Client(timeout=5) as http:  # a call has reached the sandbox: one is in flight
        while http.get(f"{calm_sandbox}/_health").json()["requests"] < 1:
            assert proc.poll() is None and time.monotonic() < end, proc.communicate()
            time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # first: wait for calls in flight (they hang for 60 s)
    said = []
    for line in proc.stderr:  # the probe says it took the first one
        said.append(line)
        if "stopping after the calls in flight" in line:
            break
    assert said and "stopping after the calls in flight" in said[-1], said
    proc.send_signal(signal.SIGINT)  # second: abandon them
    _, rest = proc.communicate(timeout=15)
    err = "".join(said) + rest
    assert proc.returncode == 2 and "Traceback" not in err
    assert "interrupted twice" in err
    with sqlite3.connect(db) as conn:
        status, detail = conn.execute("SELECT status, detail FROM probe_runs").fetchone()
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert status == "interrupted" and "abandoned" in detail
