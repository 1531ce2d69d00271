"""Alert delivery like Alertmanager's: one grouped POST per check per webhook, a repeat
interval, a total deadline per delivery, rounds never held by webhooks, and a line when the
rules' rows are not there."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from monitor_helpers import write_rows
from test_monitor_alerts import Receiver

from realprobe import open_db
from realprobe.monitor.alerts import AlertConfig, RoundChecks, check

T0 = 1_790_000_000.0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


class Dripper:
    """Accepts a POST, then answers one byte every 0.5 s (for at most 30 s)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 20:
                if self.stop.wait(0.5):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def dripper() -> Iterator[Dripper]:
    d = Dripper()
    yield d
    d.close()


def _config(*urls: str, timeout_s: float = 5.0, **extra: object) -> AlertConfig:
    return AlertConfig.model_validate({
        "webhooks": [{"url": u, "timeout_s": timeout_s} for u in urls],
        "rules": [{"kind": "success_below", "threshold": 0.9, "window": "10m", "min_calls": 5}],
        **extra,
    })


def test_a_dripping_webhook_is_cut_at_its_total_deadline(tmp_path: Path,
                                                         dripper: Dripper) -> None:
    db = tmp_path / "p.db"
    write_rows(db, "agify_age", "x" * 20, t0=T0)
    t = time.monotonic()
    result = check(open_db(db), _config(dripper.url, timeout_s=1.0), now=T0 + 250)
    took = time.monotonic() - t
    assert took < 4.0, took  # the whole answer would take over 25 s
    assert result.delivery_failures == [f"{dripper.url.rsplit('/', 1)[0]}/...: "
                                        "no answer within 1s"]


def test_one_post_per_check_per_webhook_firing_and_resolved_grouped(
    tmp_path: Path, receiver: Receiver
) -> None:
    db = tmp_path / "p.db"
    config = _config(f"{receiver.url}/a", f"{receiver.url}/b")
    for i, tool in enumerate(("agify_age", "catfact_fact", "kanye_quote")):
        write_rows(db, tool, "x" * 20, t0=T0, run_id=f"r{i}")
    assert len(check(open_db(db), config, now=T0 + 250).events) == 3
    posts = receiver.take()
    assert sorted(p for p, _ in posts) == ["/a", "/b"]
    assert all(len(body["alerts"]) == 3 and body["firing"] == 3 for _, body in posts)

    # ten minutes later: the three recovered (or went quiet), a fourth tool fails
    write_rows(db, "agify_age", "o" * 60, t0=T0 + 400, run_id="ok", step_s=1)
    write_rows(db, "dogceo_random", "x" * 20, t0=T0 + 400, run_id="new", step_s=1)
    later = check(open_db(db), config, now=T0 + 900)
    assert sorted((e.status, e.subject) for e in later.events) == [
        ("firing", "dogceo_random"), ("resolved", "agify_age"), ("resolved", "catfact_fact"),
        ("resolved", "kanye_quote")]
    posts = receiver.take()
    assert len(posts) == 2
    for _, body in posts:
        assert body["status"] == "firing" and (body["firing"], body["resolved"]) == (1, 3)


def test_an_alert_still_firing_is_sent_again_after_the_repeat_interval(
    tmp_path: Path, receiver: Receiver
) -> None:
    db = tmp_path / "p.db"
    config = _config(receiver.url, repeat_interval="10m")
    write_rows(db, "agify_age", "x" * 50, t0=T0, step_s=30)
    assert [e.repeat for e in check(open_db(db), config, now=T0 + 400).events] == [False]
    assert check(open_db(db), config, now=T0 + 700).events == []
    again = check(open_db(db), config, now=T0 + 1010)
    assert [(e.status, e.repeat) for e in again.events] == [("firing", True)]
    assert len(receiver.take()) == 2
    assert check(open_db(db), config, now=T0 + 1100).events == []


def test_rules_on_kinds_the_window_does_not_hold_say_so(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    write_rows(db, "agify_age", "o" * 20, t0=time.time() - 600,
               extra={"target_kind": "sandbox"})
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rules]]\nkind = "success_below"\nthreshold = 0.9\nwindow = "1h"\n')
    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "alert", "check", str(rules), "--db", str(db)],
        capture_output=True, text=True, timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert "no live rows in the last 1h (the window holds: sandbox 20)" in res.stdout
    assert "no alert firing" in res.stdout


def test_a_round_never_waits_for_webhooks(tmp_path: Path, dripper: Dripper) -> None:
    db = tmp_path / "p.db"
    write_rows(db, "agify_age", "x" * 20, t0=time.time() - 300)
    said: list[str] = []

    async def rounds() -> float:
        checks = RoundChecks(open_db(db), _config(dripper.url, timeout_s=1.5), said.append)
        t = time.monotonic()
        checks.after_round()
        checks.after_round()  # the next round ends while the first check is still sending
        took = time.monotonic() - t
        await checks.drain()
        return took

    assert asyncio.run(rounds()) < 0.5
    assert any("still running" in line for line in said)
    assert any("no answer within 1.5s" in line for line in said)
