"""`realprobe schedule`: N rounds then stop, failures do not stop it, no overlap, missed runs
logged, SIGTERM stops after in-flight calls."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from apscheduler.triggers.interval import IntervalTrigger
from cli_runner import invoke

from realprobe import Catalog, RealprobeError, RunSummary, Sandbox, Store, load_profile
from realprobe.http.simulate import routes_from_catalog
from realprobe.probes.scheduler import ProbeSchedule, make_trigger
from realprobe.ranges import parse_duration
from realprobe.sandbox.server import SandboxThread


def fake_summary(n: int) -> RunSummary:
    return RunSummary(
        run_id=f"run-{n}", status="done", mode="simulate", target="t", vantage="v",
        started_at="", ended_at="", duration_s=0, rounds=1, n_calls=1, n_ok=1, n_error=0,
        n_skipped=0, excluded=False, tools=[],
    )


@pytest.mark.parametrize("text,seconds", [
    ("500ms", 0.5), ("90s", 90), ("30m", 1800), ("1h30m", 5400), ("2d", 172_800),
    ("1w", 604_800), ("45", 45), ("1w2d", 777_600),
])
def test_every_duration_door_takes_the_same_strings(text: str, seconds: float) -> None:
    """One grammar: --every, --since/--until ages, --period, alert rule windows and the
    exporter's window all parse through `parse_duration`."""
    from realprobe import window
    from realprobe.api_rows import period_arg
    from realprobe.monitor.alerts import Rule

    assert make_trigger(text, None)[1] == pytest.approx(seconds)
    assert period_arg(text) == pytest.approx(seconds)
    start, _ = window(since=text)
    assert start is not None and time.time() - start == pytest.approx(seconds, abs=5)
    Rule.model_validate({"kind": "success_below", "threshold": 0.9, "window": text}).check()


def test_parse_every_and_triggers() -> None:
    assert parse_duration("30m") == 1800 and parse_duration("1h30m") == 5400
    assert parse_duration("0.5s") == 0.5 and parse_duration("2d") == 172_800
    assert parse_duration("45") == 45 and parse_duration("1w") == 604_800
    assert make_trigger("1w", None)[1] == 604_800
    for bad in ("soon", "0s", "-5m", "5 q", ""):
        with pytest.raises(RealprobeError, match=r"^every ") as err:
            make_trigger(bad, None)
        assert err.value.params == ("every",)
    trigger, interval = make_trigger(None, "0 2 * * *", jitter_s=90)
    assert interval is None and "hour='2'" in str(trigger)
    now = dt.datetime(2026, 11, 22, 3, 0, tzinfo=dt.UTC)
    fires = {trigger.get_next_fire_time(None, now) for _ in range(20)}
    assert all(dt.timedelta(0) <= f - now.replace(day=23, hour=2) <= dt.timedelta(seconds=90)
               for f in fires if f is not None)
    assert len(fires) > 1  # jittered
    with pytest.raises(RealprobeError, match="crontab"):
        make_trigger(None, "0 25 * * *")
    with pytest.raises(RealprobeError, match="pick one"):
        make_trigger("5m", "0 2 * * *")
    with pytest.raises(RealprobeError, match="pick one"):
        make_trigger(None, None)


def test_cli_schedule_runs_three_rounds_and_stops(catalog: Catalog, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    names = ",".join(t.name for t in list(catalog)[:3])
    t = time.monotonic()
    res = invoke(
        ["schedule", "--every", "0.3s", "--max-runs", "3", "--tools", names, "--rounds", "2",
              "--profile", "harsh", "--db", str(db), "--json"],
    )
    assert res.exit_code == 0, res.output
    assert time.monotonic() - t < 10
    result = json.loads(res.stdout)
    assert result["runs"] == 3 and result["rounds_ok"] == 3 and result["stopped_by"] == "max_runs"
    with Store(db) as store:
        runs = list(store.runs())
        assert [r["status"] for r in runs] == ["done"] * 3
        assert {r["schedule_id"] for r in runs} == {result["schedule_id"]}
        assert sum(r["n_calls"] for r in runs) == 3 * 3 * 2
        kinds = [e["kind"] for e in store.events(result["schedule_id"])]
    assert kinds[0] == "started" and kinds.count("round_ok") == 3 and kinds[-1] == "stopped"


def test_schedule_bad_input_is_a_user_error(tmp_path: Path) -> None:
    base = ["schedule", "--profile", "calm", "--db", str(tmp_path / "s.db")]
    for extra, msg in (
        (["--every", "soon", "--all"], "--every"),
        (["--cron", "61 * * * *", "--all"], "crontab"),
        (["--all"], "pick one of --every"),
        (["--every", "1m", "--max-runs", "0", "--all"], "--max-runs must be at least 1"),
        (["--every", "1m", "--tools", "nope_tool"], "unknown tool"),
    ):
        res = invoke(base[:1] + extra + base[1:])
        assert isinstance(res.exception, RealprobeError), (extra, res.output)
        assert msg in str(res.exception)


async def test_a_failing_round_never_stops_the_schedule(tmp_path: Path) -> None:
    calls: list[int] = []

    async def round_fn(n: int, stop: asyncio.Event) -> RunSummary:
        calls.append(n)
        if n in (1, 3):
            raise RuntimeError(f"boom in round {n}")
        return fake_summary(n)

    with Store(tmp_path / "s.db") as store:
        sched = ProbeSchedule(IntervalTrigger(seconds=0.1), round_fn, store, interval_s=0.1,
                              max_runs=4)
        result = await asyncio.wait_for(sched.run(), 10)
        events = store.events(sched.schedule_id)
    assert calls == [1, 2, 3, 4]
    assert (result.runs, result.rounds_ok, result.rounds_failed) == (4, 2, 2)
    failed = [e for e in events if e["kind"] == "round_failed"]
    assert len(failed) == 2 and "boom in round 1" in failed[0]["detail"]


async def test_rounds_never_overlap_and_skipped_fire_times_are_logged(tmp_path: Path) -> None:
    active = 0
    peak = 0

    async def slow_round(n: int, stop: asyncio.Event) -> RunSummary:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.45)
        active -= 1
        return fake_summary(n)

    with Store(tmp_path / "s.db") as store:
        sched = ProbeSchedule(IntervalTrigger(seconds=0.1), slow_round, store, interval_s=0.1,
                              max_runs=2)
        result = await asyncio.wait_for(sched.run(), 10)
    assert peak == 1 and result.runs == 2
    assert any(e["kind"] == "skipped_overlap" for e in result.events)


async def test_missed_fire_times_are_logged(tmp_path: Path) -> None:
    async def blocking_round(n: int, stop: asyncio.Event) -> RunSummary:
        if n == 1:
            time.sleep(3.3)  # the machine was busy or asleep past the next fire time + grace
        return fake_summary(n)

    with Store(tmp_path / "s.db") as store:
        sched = ProbeSchedule(IntervalTrigger(seconds=2), blocking_round, store,
                              interval_s=2, misfire_grace_s=1, max_runs=2)
        result = await asyncio.wait_for(sched.run(), 15)
        stored = [e["kind"] for e in store.events(sched.schedule_id)]
    assert result.runs == 2
    assert "missed" in stored


async def test_stop_while_idle_ends_at_once(tmp_path: Path) -> None:
    async def round_fn(n: int, stop: asyncio.Event) -> RunSummary:
        return fake_summary(n)

    with Store(tmp_path / "s.db") as store:
        sched = ProbeSchedule(IntervalTrigger(hours=1), round_fn, store, interval_s=3600)
        task = asyncio.ensure_future(sched.run())
        await asyncio.sleep(0.3)  # round 1 ran at once; the next is an hour away
        sched.stop("signal")
        result = await asyncio.wait_for(task, 5)
    assert result.runs == 1 and result.stopped_by == "signal"


def test_sigterm_stops_after_in_flight_calls_losing_nothing(
    catalog: Catalog, tmp_path: Path
) -> None:
    sb = Sandbox(routes_from_catalog(catalog), load_profile("calm"), latency_scale=1.5)
    thread = SandboxThread(sb)
    url = thread.start()
    db = tmp_path / "s.db"
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "realprobe.cli", "schedule", "--every", "1h", "--all",
             "--rounds", "30", "--politeness", "off", "--concurrency", "6", "--sandbox", url,
             "--db", str(db)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        end = time.monotonic() + 30
        n = 0
        while time.monotonic() < end and n < 10:
            time.sleep(0.1)
            assert proc.poll() is None, proc.communicate()
            if db.exists():
                try:
                    with sqlite3.connect(db, timeout=1) as conn:
                        n = conn.execute("SELECT count(*) FROM probes").fetchone()[0]
                except sqlite3.OperationalError:
                    pass
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        thread.stop()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "stopped by signal" in out
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT count(*) FROM probes").fetchone()[0]
        status = conn.execute("SELECT status FROM probe_runs").fetchone()[0]
        kinds = [k for (k,) in conn.execute("SELECT kind FROM schedule_events ORDER BY id")]
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert rows == sb.stats.requests and rows >= 10
    assert status == "interrupted"
    assert "stopping" in kinds and kinds[-1] == "stopped"


def test_hostile_or_unreachable_targets_never_stop_the_schedule(
    catalog: Catalog, calm_sandbox: str, tmp_path: Path
) -> None:
    s = __import__("socket").socket()
    s.bind(("127.0.0.1", 0))
    closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()
    tool = next(iter(catalog)).name
    for target, status, code in (
        (f"{calm_sandbox}/_fault/hang", "done", "TIMEOUT"),
        (closed, "local_network_failure", "NETWORK_ERROR"),
    ):
        db = tmp_path / f"{status}.db"
        t = time.monotonic()
        res = invoke(
            ["schedule", "--every", "0.2s", "--max-runs", "2", "--tools", tool,
                  "--rounds", "2", "--timeout", "0.4", "--politeness", "off",
                  "--sandbox", target, "--db", str(db), "--json"],
        )
        if status == "done":
            assert res.exit_code == 0, res.output
        else:  # both rounds ran, and the command says nothing was reachable
            assert isinstance(res.exception, RealprobeError), res.output
            assert "nothing was reachable in any of the 2 rounds" in str(res.exception)
        assert time.monotonic() - t < 8
        assert json.loads(res.stdout)["runs"] == 2
        with Store(db) as store:
            assert [r["status"] for r in store.runs()] == [status, status]
            codes = {r["error_code"] for r in store.db["probes"].rows}
        assert codes == {code}


async def test_second_stop_abandons_the_running_round(tmp_path: Path) -> None:
    started = asyncio.Event()

    async def hanging_round(n: int, stop: asyncio.Event) -> RunSummary:
        started.set()
        await asyncio.sleep(60)  # a call in flight that ignores the first stop
        return fake_summary(n)

    with Store(tmp_path / "s.db") as store:
        sched = ProbeSchedule(IntervalTrigger(hours=1), hanging_round, store, interval_s=3600)
        task = asyncio.ensure_future(sched.run())
        await asyncio.wait_for(started.wait(), 5)
        sched.stop("signal")
        await asyncio.sleep(0.1)
        assert not task.done()  # still waiting for the call in flight
        sched.stop("signal")
        result = await asyncio.wait_for(task, 5)
    assert result.runs == 1 and result.rounds_failed == 1
    assert [e["kind"] for e in result.events][-3:] == ["stopping", "round_abandoned", "stopped"]
