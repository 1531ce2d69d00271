"""Every row knows where and when it came from: the Target, row labels, selection by kind,
honest time stamps, provenance in outputs, killed runs, the schema migration."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_runner import main
from probe_helpers import synthetic_rows

from realprobe import (
    Catalog,
    Mode,
    Politeness,
    PolitenessConfig,
    RealprobeError,
    Store,
    TransportOptions,
    make_client,
    make_sync_client,
    open_db,
    run_probes,
)
from realprobe.probes.scheduler import ProbeSchedule, first_fire_time
from realprobe.store import SCHEMA_VERSION, default_vantage, probe_row, schema_version
from realprobe.target import TargetKind
from realprobe.tasks.store import TASK_SCHEMA_VERSION, TaskStore

ZERO = PolitenessConfig(override=Politeness(min_interval_s=0, jitter_s=0))
T0 = 1_790_000_000.0


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Refuse every connect to anything but loopback; record the attempts."""
    attempts: list[Any] = []
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else str(address)
        attempts.append(address)
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"non-loopback connect attempted: {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    return attempts


def run_cli(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["realprobe", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, err: str, expected: int | None = None) -> str:
    """The one `error:` line; exit 2 for bad input, 3 when the selection holds no rows to
    summarise (`expected` None: 3 when the line says no rows or all rows were excluded)."""
    if expected is None:
        empty = " rows between " in err or "nothing to summarise" in err
        expected = 3 if empty else 2
    assert code == expected, err
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# -- 1. one Target, string modes validated ------------------------------------------------


def test_string_modes_are_parsed_and_typos_are_errors() -> None:
    assert TransportOptions(mode="simulate", profile="published").mode is Mode.SIMULATE  # type: ignore[arg-type]
    assert TransportOptions(mode="SIMULATE").target.kind is TargetKind.SIMULATE  # type: ignore[arg-type]
    for bad in ("simulat", "", "offline", "sandbox"):
        with pytest.raises(RealprobeError, match="choose one of live, record, replay, simulate"):
            TransportOptions(mode=bad)  # type: ignore[arg-type]
    with pytest.raises(RealprobeError, match="exclude each other"):
        TransportOptions(mode="simulate", sandbox="http://127.0.0.1:1").normalised()  # type: ignore[arg-type]
    with pytest.raises(RealprobeError, match="needs cassette"):
        TransportOptions(mode="replay").normalised()  # type: ignore[arg-type]
    with pytest.raises(RealprobeError, match="cassette needs mode record or replay"):
        TransportOptions(cassette="x.json").normalised()
    with pytest.raises(RealprobeError, match="seed"):
        TransportOptions(seed="3")  # type: ignore[arg-type]
    from realprobe.tasks.runner import RunConfig

    assert RunConfig(mode="simulate").mode is Mode.SIMULATE  # type: ignore[arg-type]
    with pytest.raises(RealprobeError, match="choose one of"):
        RunConfig(mode="simulat")  # type: ignore[arg-type]


def test_target_of_each_option_set() -> None:
    box = "http://127.0.0.1:9"
    cases = [
        (TransportOptions(), TargetKind.LIVE, True, "live"),
        (TransportOptions(sandbox=box), TargetKind.SANDBOX, False, f"sandbox:{box}"),
        (TransportOptions(profile="harsh", seed=4), TargetKind.SIMULATE, False, "simulate:harsh"),
        (TransportOptions(mode=Mode.REPLAY, cassette="c.json"), TargetKind.REPLAY, False,
         "replay:c.json"),
        # recording is not a target: a record run against the sandbox is sandbox
        (TransportOptions(mode=Mode.RECORD, sandbox=box, cassette="r.json"), TargetKind.SANDBOX,
         False, f"sandbox:{box}"),
        (TransportOptions(mode=Mode.RECORD, cassette="r.json"), TargetKind.LIVE, True, "live"),
    ]
    for opts, kind, network, label in cases:
        t = opts.target
        assert (t.kind, t.reaches_network, t.label) == (kind, network, label), opts
    rec = TransportOptions(mode=Mode.RECORD, sandbox="http://127.0.0.1:9", cassette="r.json")
    assert rec.target.recording == "r.json"
    assert TransportOptions(profile="harsh", seed=4).target.seed == 4


async def test_clients_carry_their_target(catalog: Catalog) -> None:
    sim = make_client(catalog, TransportOptions(mode="simulate", profile="calm", seed=2))  # type: ignore[arg-type]
    box = make_client(catalog, TransportOptions(sandbox="http://127.0.0.1:9"))
    try:
        assert sim.target.kind is TargetKind.SIMULATE and sim.target.seed == 2
        assert sim.clock.virtual and sim.resolver is None
        assert box.target.kind is TargetKind.SANDBOX and box.resolver is None
    finally:
        await sim.aclose()
        await box.aclose()
    sync = make_sync_client(catalog, TransportOptions(sandbox="http://127.0.0.1:9"))
    assert sync.target.kind is TargetKind.SANDBOX
    sync.close()


async def test_python_api_string_simulate_never_opens_a_socket(
    catalog: Catalog, tmp_path: Path, loopback_only: list[Any], no_network: None
) -> None:
    """`mode="simulate"` (a plain string) simulates; nothing touches the network."""
    client = make_client(catalog, TransportOptions(mode="simulate", profile="published"))  # type: ignore[arg-type]
    try:
        with Store(tmp_path / "p.db") as store:
            s = await run_probes(catalog, None, 2, client, store, politeness=ZERO)
            rows = store.probes_for_run(s.run_id)
            run = store.run(s.run_id)
            used = store.conn.execute("SELECT count(*) FROM api_budget").fetchone()[0]
    finally:
        await client.aclose()
    assert s.n_calls == 2 * len(catalog) and s.target_kind == "simulate"
    assert run["target_kind"] == "simulate" and run["mode"] == "simulate"
    assert run["target"] == "simulate:published" and run["source"] == "probe"
    assert {r["target_kind"] for r in rows} == {"simulate"}
    assert used == 0  # simulated calls spend no daily budget


async def test_labels_given_to_run_probes_must_match_the_client(
    catalog: Catalog, tmp_path: Path, no_network: None
) -> None:
    client = make_client(catalog, TransportOptions(mode=Mode.SIMULATE, profile="calm"))
    try:
        with Store(tmp_path / "p.db") as store:
            for kw in ({"mode": "live"}, {"target": "live"}, {"target": "sandbox"},
                       {"mode": "simulat"}, {"source": "cron"}):
                with pytest.raises(RealprobeError):
                    await run_probes(catalog, None, 1, client, store, politeness=ZERO, **kw)
            ok = await run_probes(catalog, None, 1, client, store, politeness=ZERO,
                                  mode="simulate", target="simulate:calm")
            assert ok.target_kind == "simulate"
            assert store.conn.execute("SELECT count(*) FROM probe_runs").fetchone()[0] == 1
    finally:
        await client.aclose()


async def test_sandbox_run_from_python_is_labelled_sandbox_and_spends_no_budget(
    catalog: Catalog, calm_sandbox: str, tmp_path: Path, loopback_only: list[Any]
) -> None:
    tool = catalog.get("agify_age")
    client = make_client(catalog, TransportOptions(sandbox=calm_sandbox))
    try:
        with Store(tmp_path / "p.db") as store:
            s = await run_probes(catalog, [tool], 3, client, store, politeness=ZERO)
            rows = store.probes_for_run(s.run_id)
            run = store.run(s.run_id)
            spent = store.budget_used(time.strftime("%Y-%m-%d", time.gmtime()), "agify", "live")
    finally:
        await client.aclose()
    assert run["target_kind"] == "sandbox" and run["target"] == f"sandbox:{calm_sandbox}"
    assert {r["target_kind"] for r in rows} == {"sandbox"} and len(rows) == 3
    assert spent == 0
    assert loopback_only  # it did talk to the loopback sandbox


# -- 4. honest time ------------------------------------------------------------------------


#: simulated rounds: harsh draws over 5,000 s of simulated time for them, in about 2 s of
#: wall time, so a row stamped on the simulated clock would land far in the future
SIMULATED_ROUNDS = 2_000


async def test_thousands_of_simulated_rounds_stamp_nothing_after_write_time(
    catalog: Catalog, tmp_path: Path, no_network: None
) -> None:
    tool = catalog.get("catfact_fact")
    client = make_client(catalog, TransportOptions(mode=Mode.SIMULATE, profile="harsh", seed=1))
    late: list[tuple[float, float]] = []
    with Store(tmp_path / "p.db") as store:
        insert = store.insert_probe

        def checked(row: dict[str, Any]) -> None:
            now = time.time()
            if row["started_ts"] > now:
                late.append((row["started_ts"], now))
            insert(row)

        store.insert_probe = checked  # type: ignore[method-assign]
        try:
            s = await run_probes(catalog, [tool], SIMULATED_ROUNDS, client, store,
                                 politeness=PolitenessConfig.off())
        finally:
            await client.aclose()
        after = time.time()
        n, top, span = store.conn.execute(
            "SELECT count(*), max(started_ts), max(virtual_s) - min(virtual_s) FROM probes"
        ).fetchone()
        run = store.run(s.run_id)
    assert n == SIMULATED_ROUNDS and not late
    assert top <= after and run["ended_ts"] <= after
    # the virtual timeline is kept (harsh: thousands of seconds of simulated time)
    assert span > 600
    # and the readers place it before the write time, never in the future
    from realprobe.probes.loading import load_probes

    arr = load_probes(open_db(tmp_path / "p.db"), kinds=["simulate"])
    assert len(arr) == SIMULATED_ROUNDS and float(arr.ts.max()) <= after + 1e-6
    assert (arr.ts[1:] >= arr.ts[:-1]).all()
    assert float(arr.ts.max() - arr.ts.min()) == pytest.approx(span, rel=1e-6)


def test_a_row_stamped_in_the_future_is_refused() -> None:
    from realprobe import ToolResult

    result = ToolResult(tool="x", ok=True, latency_ms=1.0)
    with pytest.raises(ValueError, match="future"):
        probe_row(result, run_id="r", tool="x", api="x", round_no=0,
                  started_wall=time.time() + 3600, timeout_s=1, vantage="v")


# -- 3 and 5. selection by kind, provenance in every output ----------------------------------


def mixed_db(path: Path, kinds: tuple[str, ...] = ("live", "sandbox", "simulate", "mcp")) -> Path:
    """One tool, rows of several kinds: live (90% ok), sandbox (50%), simulate (20%), and
    MCP-served live calls from another vantage."""
    spec = {"live": (0.1, "live", "probe", "home"), "sandbox": (0.5, "sandbox", "probe", "home"),
            "simulate": (0.8, "simulate", "probe", "home"), "mcp": (0.1, "live", "mcp", "cloud"),
            "replay": (0.3, "replay", "probe", "home")}
    labels = {"live": "live", "sandbox": "sandbox:http://127.0.0.1:9",
              "simulate": "simulate:harsh", "replay": "replay:c.json"}
    with Store(path) as store:
        for i, name in enumerate(kinds):
            p_fail, kind, source, vantage = spec[name]
            for row in synthetic_rows("catfact_fact", 200, p_fail=p_fail, seed=i, t0=T0 + i):
                row.update(target_kind=kind, target=labels[kind], source=source,
                           vantage=vantage, run_id=f"run-{name}")
                store.insert_probe(row)
    return path


def test_stats_picks_live_and_names_it(tmp_path: Path, monkeypatch, capsys) -> None:
    db = mixed_db(tmp_path / "m.db")
    code, out, _ = run_cli(["stats", "--db", str(db), "--json"], monkeypatch, capsys)
    assert code == 0
    data = json.loads(out)
    prov = data["provenance"]
    assert prov["target_kinds"] == ["live"] and prov["rows"] == 400
    assert prov["vantages"] == ["cloud", "home"] and prov["sources"] == {"mcp": 200, "probe": 200}
    assert prov["other_kinds"] == {"sandbox": 200, "simulate": 200}
    assert data["tools"][0]["success"]["n"] == 400
    assert data["tools"][0]["success"]["rate"] > 0.8  # the sandbox's 50% never pooled in
    # one vantage
    code, out, _ = run_cli(["stats", "--db", str(db), "--json", "--vantage", "home"],
                           monkeypatch, capsys)
    assert json.loads(out)["provenance"]["vantages"] == ["home"]
    assert json.loads(out)["tools"][0]["success"]["n"] == 200
    # the table title says it too
    code, out, _ = run_cli(["stats", "--db", str(db)], monkeypatch, capsys)
    assert code == 0 and "target live" in out and "vantage cloud, home" in out
    assert "400 rows" in out


def test_stats_target_choices(tmp_path: Path, monkeypatch, capsys) -> None:
    db = mixed_db(tmp_path / "m.db")
    for kind, n in (("sandbox", 200), ("simulate", 200), ("all", 800)):
        code, out, err = run_cli(["stats", "--db", str(db), "--json", "--kinds", kind],
                                 monkeypatch, capsys)
        assert code == 0, err
        prov = json.loads(out)["provenance"]
        assert prov["rows"] == n
        assert prov["target_kinds"] == (
            ["live", "sandbox", "simulate"] if kind == "all" else [kind])
        assert "NOT MEASURED ON THE REAL APIS" in err or kind == "all"
    msg = one_line_error(*run_cli(["stats", "--db", str(db), "--kinds", "replay"],
                                  monkeypatch, capsys)[::2])
    assert "no replay rows" in msg and "sandbox (200)" in msg
    msg = one_line_error(*run_cli(["stats", "--db", str(db), "--kinds", "simulat"],
                                  monkeypatch, capsys)[::2])
    assert "choose one of live, sandbox, simulate, replay, all" in msg


def test_several_non_live_kinds_and_none_chosen_is_refused(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    db = mixed_db(tmp_path / "m.db", ("sandbox", "simulate"))
    for cmd in (["stats"], ["calibrate"], ["report", "-o", str(tmp_path / "r.html")],
                ["drift", "--baseline", "..2026-09-22T00:00Z", "--current", "2026-09-22..now"]):
        code, _, err = run_cli([*cmd, "--db", str(db)], monkeypatch, capsys)
        msg = one_line_error(code, err)
        assert "no live rows" in msg and "--kinds sandbox|simulate" in msg, cmd
    # one non-live kind: chosen, and said loudly
    only = mixed_db(tmp_path / "s.db", ("simulate",))
    code, out, err = run_cli(["stats", "--db", str(only), "--json"], monkeypatch, capsys)
    assert code == 0 and json.loads(out)["provenance"]["target_kinds"] == ["simulate"]
    assert "NOT MEASURED ON THE REAL APIS" in err and "simulator" in err


def test_calibrate_writes_provenance_into_source(tmp_path: Path, monkeypatch, capsys) -> None:
    db = mixed_db(tmp_path / "m.db")
    code, out, _ = run_cli(["calibrate", "--db", str(db)], monkeypatch, capsys)
    assert code == 0
    src = json.loads(out)["source"]
    assert src["target_kinds"] == ["live"] and src["vantages"] == ["cloud", "home"]
    assert src["rows_by_kind"] == {"live": 400} and "warning" not in src
    code, out, _ = run_cli(["calibrate", "--db", str(db), "--kinds", "sandbox"],
                           monkeypatch, capsys)
    src = json.loads(out)["source"]
    assert src["target_kinds"] == ["sandbox"] and src["targets"] == ["sandbox:http://127.0.0.1:9"]
    assert "NOT MEASURED ON THE REAL APIS" in src["warning"]


def test_drift_and_report_name_their_rows(tmp_path: Path, monkeypatch, capsys) -> None:
    db = mixed_db(tmp_path / "m.db")
    mid = "2026-09-21T15:00Z"  # the synthetic rows run from 13:33Z for 3.3 hours
    code, out, err = run_cli(["drift", "--db", str(db), "--baseline", f"..{mid}",
                              "--current", f"{mid}..now", "--json"], monkeypatch, capsys)
    assert code == 0, err
    prov = json.loads(out)["provenance"]
    assert prov["baseline"]["target_kinds"] == ["live"] == prov["current"]["target_kinds"]
    code, out, err = run_cli(["report", "--db", str(db), "--format", "json"],
                             monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(out)["stats"]["provenance"]["target_kinds"] == ["live"]
    html = tmp_path / "r.html"
    code, _, err = run_cli(["report", "--db", str(db), "-o", str(html), "--kinds", "simulate"],
                           monkeypatch, capsys)
    assert code == 0, err
    text = html.read_text()
    assert "id='banner'" in text and "NOT MEASURED ON THE REAL APIS" in text
    assert "simulate:harsh" in text and "vantage" in text
    code, out, _ = run_cli(["report", "--db", str(db), "--format", "md"], monkeypatch, capsys)
    assert "**target kind**: live (400 rows)" in out and "NOT MEASURED" not in out


def test_stats_on_only_excluded_rows_says_so(tmp_path: Path, monkeypatch, capsys) -> None:
    db = tmp_path / "x.db"
    with Store(db) as store:
        for row in synthetic_rows("catfact_fact", 30, t0=T0):
            row.update(excluded=1, target_kind="live")
            store.insert_probe(row)
    msg = one_line_error(*run_cli(["stats", "--db", str(db)], monkeypatch, capsys)[::2])
    assert "all 30 live rows" in msg and "excluded from statistics: the prober reached no " \
        "server" in msg and "then probe again" in msg


# -- 6. schedules and killed runs -------------------------------------------------------------


async def test_cron_waits_for_its_first_fire_time_on_an_injected_clock(tmp_path: Path) -> None:
    import datetime as dt

    from apscheduler.triggers.cron import CronTrigger

    from realprobe import RunSummary

    tz = dt.datetime.now().astimezone().tzinfo
    trigger = CronTrigger.from_crontab("0 3 1 1 *", timezone=tz)
    noon = dt.datetime(2026, 11, 22, 11, 55, tzinfo=tz)
    assert first_fire_time(trigger, noon, False) == dt.datetime(2027, 1, 1, 3, 0, tzinfo=tz)

    fired: list[float] = []

    async def round_fn(n: int, stop: asyncio.Event) -> RunSummary:
        fired.append(time.monotonic())
        return RunSummary(run_id=f"r{n}", status="done", mode="live", target="live",
                          vantage="v", started_at="", ended_at="", duration_s=0, rounds=1,
                          n_calls=1, n_ok=1, n_error=0, n_skipped=0, excluded=False, tools=[])

    # the injected clock says 02:59:59.4 on new year's day: the round is due in 0.6 s
    fake_now = dt.datetime(2027, 1, 1, 2, 59, 59, 400_000, tzinfo=tz)
    with Store(tmp_path / "s.db") as store:
        sched = ProbeSchedule(trigger, round_fn, store, max_runs=1, now=lambda: fake_now)
        t0 = time.monotonic()
        result = await asyncio.wait_for(sched.run(), 10)
    assert result.runs == 1 and len(fired) == 1
    assert fired[0] - t0 >= 0.5  # not at once: it waited for 03:00 (a lower bound only)
    assert sched.first_fire == dt.datetime(2027, 1, 1, 3, 0, tzinfo=tz)
    started = next(e for e in sched.events if e["kind"] == "started")
    assert "first round at 2027-01-01T03:00:00" in started["detail"]


async def test_every_fires_at_once(tmp_path: Path) -> None:
    from apscheduler.triggers.interval import IntervalTrigger

    from realprobe import RunSummary

    fired: list[float] = []

    async def round_fn(n: int, stop: asyncio.Event) -> RunSummary:
        fired.append(time.monotonic())
        return RunSummary(run_id=f"r{n}", status="done", mode="live", target="live",
                          vantage="v", started_at="", ended_at="", duration_s=0, rounds=1,
                          n_calls=1, n_ok=1, n_error=0, n_skipped=0, excluded=False, tools=[])

    with Store(tmp_path / "s.db") as store:
        sched = ProbeSchedule(IntervalTrigger(hours=1), round_fn, store, max_runs=1,
                              interval_s=3600)
        t0 = time.monotonic()
        await asyncio.wait_for(sched.run(), 10)
    assert fired and fired[0] - t0 < 2.0


def test_a_run_whose_process_died_is_marked_killed(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with Store(db) as store:
        for rid, pid in (("gone", dead.pid), ("alive", None), ("other-host", dead.pid)):
            store.start_run({"id": rid, "started_at": "", "started_ts": T0, "tools": []})
            host = "elsewhere" if rid == "other-host" else default_vantage()
            store.conn.execute(
                "UPDATE probe_runs SET pid = coalesce(?, pid), host = ?, pid_start = NULL "
                "WHERE id = ?", [pid, host, rid])
            store.conn.commit()
    with Store(db) as store:  # the next command that opens the file
        status = {r["id"]: r["status"] for r in store.runs()}
        gone = store.run("gone")
    assert status == {"gone": "killed", "alive": "running", "other-host": "running"}
    assert gone["ended_ts"] is not None and "killed" in gone["detail"]


@pytest.mark.parametrize("reader", ["stats", "alert check", "merge"])
def test_every_reader_of_the_database_gives_it_its_upkeep_first(
    tmp_path: Path, reader: str
) -> None:
    """One opener of the database, `open_db`, and an explicit `.migrate()` at every door that
    reads: a killed run is marked first, whichever door reads (stats did, alert check and
    merge did not)."""
    import realprobe

    db = tmp_path / "k.db"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with Store(db) as store:
        store.start_run({"id": "gone", "started_at": "", "started_ts": T0, "tools": []})
        store.conn.execute("UPDATE probe_runs SET pid = ?, pid_start = NULL", [dead.pid])
        store.conn.commit()
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rules]]\nkind = "p95_above"\nthreshold_ms = 1000\nwindow = "1h"\n')
    if reader == "stats":
        with pytest.raises(realprobe.RealprobeError):
            realprobe.stats(db)  # no rows, but the file was looked after
    elif reader == "alert check":
        realprobe.check_alerts(rules, db, dry_run=True)
    else:
        realprobe.merge_databases([db], tmp_path / "merged.db")
    status = sqlite3.connect(db).execute("SELECT status FROM probe_runs").fetchone()[0]
    assert status == "killed"
    assert open_db(None) == open_db(None, read=False)  # the default, one place


# -- the schema migration from the pre-provenance schema ------------------------------------

OLD_PROBE_RUNS = """CREATE TABLE [probe_runs] ([id] TEXT PRIMARY KEY, [started_at] TEXT,
 [ended_at] TEXT, [vantage] TEXT, [mode] TEXT, [target] TEXT, [tools] TEXT, [rounds] INTEGER,
 [status] TEXT, [n_calls] INTEGER, [version] TEXT, [started_ts] FLOAT, [ended_ts] FLOAT,
 [n_ok] INTEGER, [n_error] INTEGER, [n_skipped] INTEGER, [excluded] INTEGER,
 [schedule_id] TEXT, [detail] TEXT)"""
OLD_PROBES = """CREATE TABLE [probes] ([id] INTEGER PRIMARY KEY, [run_id] TEXT, [tool] TEXT,
 [api] TEXT, [round] INTEGER, [started_at] TEXT, [started_ts] FLOAT, [latency_ms] FLOAT,
 [outcome] TEXT, [error_code] TEXT, [http_status] INTEGER, [bytes] INTEGER,
 [retry_after] FLOAT, [rate_limit] TEXT, [redirects] TEXT, [vantage] TEXT, [detail] TEXT,
 [timeout_s] FLOAT, [excluded] INTEGER, [source] TEXT, [args] TEXT)"""
OLD_TASK_RUNS = """CREATE TABLE [task_runs] ([id] TEXT PRIMARY KEY, [batch] TEXT,
 [started_at] TEXT, [task] TEXT, [task_type] TEXT, [agent] TEXT, [model] TEXT, [prompt] TEXT,
 [flaw] TEXT, [mode] TEXT, [profile] TEXT, [seed] INTEGER, [run_seed] INTEGER,
 [repeat] INTEGER, [outcome] TEXT, [score] FLOAT, [grounded] INTEGER, [strict] INTEGER,
 [turns] INTEGER, [tool_calls] INTEGER, [failures] INTEGER, [retries] INTEGER,
 [fallbacks] INTEGER, [optimal_calls] INTEGER, [tokens_in] INTEGER, [tokens_out] INTEGER,
 [wall_s] FLOAT, [clock_s] FLOAT, [termination] TEXT, [reasons] TEXT, [conditions] TEXT,
 [artifact] TEXT, [final_message] TEXT, [cassette] TEXT)"""
OLD_TASK_STEPS = """CREATE TABLE [task_steps] ([id] INTEGER PRIMARY KEY,
 [run_id] TEXT REFERENCES [task_runs]([id]), [idx] INTEGER, [turn] INTEGER, [step_id] TEXT,
 [tool] TEXT, [kind] TEXT, [role] TEXT, [args] TEXT, [ok] INTEGER, [error_code] TEXT,
 [message] TEXT, [http_status] INTEGER, [retry_after] FLOAT, [latency_ms] FLOAT, [result] TEXT)"""


def old_database(path: Path) -> Path:
    """A file as the version before provenance wrote it: no meta table, no new columns."""
    conn = sqlite3.connect(path)
    for sql in (OLD_PROBE_RUNS, OLD_PROBES, OLD_TASK_RUNS, OLD_TASK_STEPS,
                "CREATE TABLE [api_budget] ([day] TEXT, [api] TEXT, [target] TEXT, "
                "[used] INTEGER, PRIMARY KEY ([day], [api], [target]))",
                "CREATE TABLE [schedule_events] ([id] INTEGER PRIMARY KEY, [schedule_id] TEXT, "
                "[ts] FLOAT, [at] TEXT, [kind] TEXT, [run_id] TEXT, [detail] TEXT)",
                "CREATE INDEX [idx_probes_tool_started_ts] ON [probes] ([tool], [started_ts])",
                "CREATE INDEX [idx_probes_run_id] ON [probes] ([run_id])"):
        conn.execute(sql)
    runs = [("r-live", "live", "live"), ("r-box", "live", "http://127.0.0.1:9"),
            ("r-sim", "simulate", "simulate:harsh"), ("mcp-r", "replay", "replay:c.json")]
    for rid, mode, target in runs:
        conn.execute("INSERT INTO probe_runs (id, mode, target, status, started_ts) "
                     "VALUES (?, ?, ?, 'done', ?)", [rid, mode, target, T0])
        for i in range(5):
            conn.execute(
                "INSERT INTO probes (run_id, tool, api, round, started_at, started_ts, "
                "latency_ms, outcome, vantage, timeout_s, excluded, source) "
                "VALUES (?, 'catfact_fact', 'catfact', ?, '', ?, 100, 'ok', 'home', 5, 0, ?)",
                [rid, i, T0 + i, "mcp" if rid.startswith("mcp") else "probe"])
    conn.execute("INSERT INTO task_runs (id, task, mode, profile, outcome) VALUES "
                 "('t1', 'x', 'live', 'http://127.0.0.1:9', 'full'), "
                 "('t2', 'x', 'simulate', 'harsh', 'full')")
    conn.execute("INSERT INTO task_steps (run_id, idx, tool, kind, ok) VALUES ('t1', 0, 'a', "
                 "'api', 1)")
    conn.commit()
    conn.close()
    return path


def test_an_old_database_is_migrated_when_opened(tmp_path: Path) -> None:
    db = old_database(tmp_path / "old.db")
    with Store(db) as store:
        assert store.schema_version() == SCHEMA_VERSION
        kinds = dict(store.conn.execute("SELECT id, target_kind FROM probe_runs").fetchall())
        assert kinds == {"r-live": "live", "r-box": "sandbox", "r-sim": "simulate",
                         "mcp-r": "replay"}
        rows = store.conn.execute(
            "SELECT run_id, target_kind, target, source FROM probes WHERE round = 0 "
            "ORDER BY run_id").fetchall()
        assert rows == [("mcp-r", "replay", "replay:c.json", "mcp"),
                        ("r-box", "sandbox", "http://127.0.0.1:9", "probe"),
                        ("r-live", "live", "live", "probe"),
                        ("r-sim", "simulate", "simulate:harsh", "probe")]
        assert store.conn.execute("SELECT count(*) FROM probes").fetchone()[0] == 20
        idx = {r[1] for r in store.conn.execute("PRAGMA index_list(probes)")}
        assert {"idx_probes_tool_started_ts", "idx_probes_run_id"} <= idx
        tasks = TaskStore(store)
        assert schema_version(store.db, "tasks") == TASK_SCHEMA_VERSION
        got = {r["id"]: (r["target_kind"], r["source"]) for r in tasks.runs()}
        assert got == {"t1": ("sandbox", "task"), "t2": ("simulate", "task")}
        assert tasks.steps("t1")[0]["target_kind"] == "sandbox"
    # opening again changes nothing, and new rows go in with their labels
    with Store(db) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.conn.execute("SELECT count(*) FROM probes").fetchone()[0] == 20


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    with Store(db) as store:
        store.conn.execute("UPDATE realprobe_meta SET value = '99' WHERE key = 'schema:probes'")
        store.conn.commit()
    with pytest.raises(RealprobeError, match="newer realprobe"):
        Store(db)


def test_stats_reads_an_old_database(tmp_path: Path, monkeypatch, capsys) -> None:
    db = old_database(tmp_path / "old.db")
    code, out, err = run_cli(["stats", "--db", str(db), "--json"], monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(out)["provenance"]["rows_by_kind"] == {"live": 5}


# -- 7. failures that are visible ---------------------------------------------------------------


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_call_all_with_nothing_reachable_fails(monkeypatch, capsys, loopback_only) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    code, _, err = run_cli(["call-all", "--sandbox", url, "--timeout", "2"], monkeypatch, capsys)
    msg = one_line_error(code, err, expected=3)  # runtime failure
    assert "nothing was reachable" in msg and url in msg


def test_schedule_with_nothing_reachable_fails(tmp_path: Path, monkeypatch, capsys,
                                               loopback_only) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    code, _, err = run_cli(
        ["schedule", "--every", "0.2s", "--max-runs", "2", "--tools", "catfact_fact",
         "--sandbox", url, "--timeout", "2", "--politeness", "off", "--db",
         str(tmp_path / "s.db")], monkeypatch, capsys)
    msg = one_line_error(code, err, expected=3)  # runtime failure
    assert "nothing was reachable in any of the 2 rounds" in msg


def test_task_batch_lost_to_an_unreachable_llm_fails_once(
    tmp_path: Path, monkeypatch, capsys, loopback_only
) -> None:
    base = f"http://127.0.0.1:{closed_port()}/v1"
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    code, _, err = run_cli(
        ["run", "content_social_post", "currency_snapshot", "--agent", "openai",
         "--base-url", base, "--model", "m", "--profile", "calm", "--db",
         str(tmp_path / "t.db"), "--llm-timeout", "2"],
        monkeypatch, capsys)
    msg = one_line_error(code, err, expected=3)  # runtime failure
    assert "failed on infrastructure" in msg and "LLM endpoint" in msg
    assert err.count("LLM endpoint") == 1


# -- 2. MCP-served and task rows carry the same labels ----------------------------------------


async def test_mcp_served_simulated_calls_are_labelled_and_stamped_in_real_time(
    catalog: Catalog, tmp_path: Path, no_network: None
) -> None:
    from realprobe import McpService, ServiceOptions

    db = tmp_path / "mcp.db"
    opts = ServiceOptions(
        transport=TransportOptions(mode="simulate", profile="harsh", seed=2),  # type: ignore[arg-type]
        db=str(db), vantage="laptop", tools="catfact_fact",
    )
    async with McpService(catalog, opts) as service:
        assert service.target.kind is TargetKind.SIMULATE
        for _ in range(40):
            await service.call("catfact_fact", {})
    after = time.time()
    with Store(db) as store:
        rows = store.conn.execute(
            "SELECT target_kind, source, vantage, started_ts, virtual_s FROM probes"
        ).fetchall()
        run = store.run(service.run_id)
    assert len(rows) == 40 and run["target_kind"] == "simulate" and run["source"] == "mcp"
    assert {(k, s, v) for k, s, v, _, _ in rows} == {("simulate", "mcp", "laptop")}
    assert max(r[3] for r in rows) <= after
    assert all(r[4] is not None for r in rows)
    assert rows[-1][4] > rows[0][4]  # the virtual timeline moved on


def test_task_runs_and_steps_are_labelled(tmp_path: Path, monkeypatch, capsys,
                                          no_network: None) -> None:
    db = tmp_path / "t.db"
    code, _, err = run_cli(["run", "content_social_post", "--profile", "calm", "--db", str(db)],
                           monkeypatch, capsys)
    assert code == 0, err
    with Store(db) as store:
        tasks = TaskStore(store)
        (run,) = tasks.runs()
        steps = tasks.steps(run["id"])
    assert (run["target_kind"], run["source"], run["target"]) == (
        "simulate", "task", "simulate:calm")
    assert run["vantage"] == default_vantage()
    assert steps and {s["target_kind"] for s in steps} == {"simulate"}
