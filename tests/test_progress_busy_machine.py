"""A probe's rows never depend on how it is shown: the same seeded probe of a sandbox where
every call succeeds stores the same outcomes through the front door, through the command line
to a file (no bar) and on a terminal (its bar drawn), beside a busy loop on every core. The
bar's ETA once simulated the whole plan at every redraw while holding the lock each finished
call needed, so on a busy machine the probe missed deadlines it would have met (TIMEOUT rows
the statistics then blamed on the APIs). The cost itself is measured by bench/progress_cost.py."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import realprobe

#: 32 tools x 10 rounds, four calls in flight to a sandbox that answers at once, 10 s deadline
ROUNDS, CONCURRENCY, TIMEOUT, SEED = 10, 4, "10", 3


@contextlib.contextmanager
def busy_loops() -> Iterator[None]:
    """One loop per core: every core busy (more loops only slow the rest of the suite)."""
    n = max(2, os.cpu_count() or 2)
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()


@contextlib.contextmanager
def calm_sandbox() -> Iterator[str]:
    """A sandbox in a process of its own where every call succeeds (calm profile), answering
    at once."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "realprobe.cli", "sandbox", "--port", "0", "--profile", "calm",
         "--latency-scale", "0", "--seed", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "COLUMNS": "300"},
    )
    try:
        assert proc.stdout is not None
        match = re.search(r"http://127\.0\.0\.1:\d+", proc.stdout.readline())
        assert match, "sandbox did not start"
        yield match.group(0)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cli_args(url: str, db: Path) -> list[str]:
    return [sys.executable, "-m", "realprobe.cli", "probe", "--all", "--rounds", str(ROUNDS),
            "--sandbox", url, "--politeness", "off", "--timeout", TIMEOUT, "--seed", str(SEED),
            "--concurrency", str(CONCURRENCY), "--db", str(db)]


def front_door(url: str, db: Path) -> None:
    """The library call, in this process (no terminal here, so no bar either)."""
    realprobe.probe(None, rounds=ROUNDS, db=db, target=realprobe.options(sandbox=url, seed=SEED),
                    timeout=float(TIMEOUT), politeness="off", seed=SEED, concurrency=CONCURRENCY)


def to_a_file(url: str, db: Path, tmp: Path) -> None:
    with open(tmp / "stderr.txt", "wb") as err:
        subprocess.run(cli_args(url, db), check=True, stdout=subprocess.DEVNULL, stderr=err)


def on_a_terminal(url: str, db: Path) -> bytes:
    """The command with stdout and stderr on a pseudo-terminal: what it drew."""
    main, sub = pty.openpty()
    drawn = bytearray()

    def drain() -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(main, 65536):
                drawn.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    env.pop("NO_COLOR", None)
    try:
        proc = subprocess.run(cli_args(url, db), stdin=subprocess.DEVNULL, stdout=sub,
                              stderr=sub, env=env)
    finally:
        os.close(sub)
        reader.join(10)
        os.close(main)
    assert proc.returncode == 0, bytes(drawn)[-2000:]
    return bytes(drawn)


def outcomes(db: Path) -> list[tuple[str, int, str]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute(
            "SELECT tool, round, outcome FROM probes ORDER BY tool, round").fetchall()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pty and busy loops: Linux")
def test_a_probe_stores_the_same_rows_with_and_without_its_bar_on_a_busy_machine(
        tmp_path: Path) -> None:
    with calm_sandbox() as url, busy_loops():
        front_door(url, tmp_path / "door.db")
        to_a_file(url, tmp_path / "file.db", tmp_path)
        drawn = on_a_terminal(url, tmp_path / "tty.db")
    door = outcomes(tmp_path / "door.db")
    assert len(door) == 32 * ROUNDS and {o for _, _, o in door} == {"ok"}
    assert outcomes(tmp_path / "file.db") == door
    assert outcomes(tmp_path / "tty.db") == door
    assert b"ETA" in drawn and b"probing" in drawn  # the bar was drawn on the terminal
    # to a file, no bar at all (nothing worked out for one)
    assert b"ETA" not in (tmp_path / "stderr.txt").read_bytes()
