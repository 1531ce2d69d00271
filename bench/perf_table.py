"""The performance table in one run, every figure a CPU ratio to its anchor measured side by
side (on 2 shared cores wall times measure the neighbours; CPU time does not).

Sections (all by default, or pick with --only):

- stats: `realprobe stats --json --kinds live` vs the anchor query ANCHOR_SQL (below), each in
  a fresh process, on 10k / 100k / 1M / 10M rows (the databases of bench/stats_1m_rows.py),
  best of `--repeats` interleaved (one run each at 10M); also the command's wall time and
  peak memory, and the anchor query's own CPU run in this process (no interpreter start),
  with the command's ratio to that too, and the CPU of the command's read of the rows and
  provenance survey in this process (from the chunk store; the files are sealed first). The
  10M database (3.6 GB) takes about 25 minutes to build the first time; `--sizes
  10000,100000,1000000` leaves it out.
- calls: `call_tool_sync` / `call_tool` vs raw httpx on the same loopback sandbox (CPU of this
  process: the server runs in its own).
- replay: a request replayed by `use_cassette` vs an `httpx.MockTransport` handing back
  prebuilt responses.
- metrics: `/metrics` of the exporter on a 1M-row database vs a bare prometheus_client server
  serving the same samples, 100 new rows between scrapes.
- calibrate: `realprobe calibrate` over --calibrate-tools tools behind a biting deadline (fresh
  process, wall and CPU).
- startup: `catalog import-openapi` of an 8 kB document (best of 3), and `realprobe --help`
  vs a one-command typer app (fresh processes, --startup-runs interleaved rounds, the median
  of their ratios).

    python bench/perf_table.py [--only stats,calls,...] [--sizes 10000,100000,1000000] [--save]

`claims` lists the figures the README states from this run, each with the noise a rerun on
the same machine may show; `python bench/readme_numbers.py --check` reruns this script and
fails when a figure moved by more than its noise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from benchlib import emit, load_average

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "perf_table.json"
TMP = Path(tempfile.gettempdir()) / "realprobe-bench"
PY = sys.executable

#: the anchor: the per-tool counts `stats` prints that SQL alone can give (rows, successes,
#: mean latency), over the same selection, in a fresh process
ANCHOR_SQL = (
    "SELECT tool, count(*), sum(outcome = 'ok'), avg(latency_ms) FROM probes "
    "WHERE target_kind = 'live' AND coalesce(excluded, 0) = 0 GROUP BY tool"
)
ANCHOR = f'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("{ANCHOR_SQL}").fetchall()'


def child(cmd: list[str], **kw: Any) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of `cmd` in a fresh process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[:5])} failed: {err[-400:]}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def cpu_of(fn: Callable[[], Any]) -> float:
    c = time.process_time()
    fn()
    return time.process_time() - c


def stats(sizes: list[int], repeats: int) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from stats_1m_rows import build, count_rows

    from realprobe.probes.implicit import IMPLICIT_EXTRA
    from realprobe.probes.loading import PHASE_EXTRA, load_probes
    from realprobe.probes.provenance import survey
    from realprobe.store import Store, open_db

    extra = {**PHASE_EXTRA, **IMPLICIT_EXTRA}  # what `stats` reads

    out = {}
    for rows in sizes:
        db = TMP / f"stats_{rows}_live.db"
        TMP.mkdir(exist_ok=True)
        if count_rows(db) != rows // 30 * 30:
            build(db, rows, 30, "live")
        with Store(db) as store:  # a file built before the chunk store: sealed once
            store.seal()
        cmd = [PY, "-m", "realprobe.cli", "stats", "--db", str(db), "--json", "--kinds", "live"]
        a, s, q, r = [], [], [], []
        for _ in range(1 if rows >= 10_000_000 else repeats):
            a.append(child([PY, "-c", ANCHOR, str(db)]))
            s.append(child(cmd))
            with closing(sqlite3.connect(db)) as conn:
                q.append(cpu_of(conn.execute(ANCHOR_SQL).fetchall))
            # the command's read of the rows and provenance survey, in this process
            r.append(cpu_of(lambda db=db: (load_probes(open_db(db), kinds=["live"], extra=extra),
                                           survey(open_db(db)))))
        a_cpu, s_cpu, q_cpu = min(x[1] for x in a), min(x[1] for x in s), min(q)
        out[str(rows)] = {
            "anchor_cpu_s": round(a_cpu, 3), "stats_cpu_s": round(s_cpu, 3),
            "stats_wall_s": round(min(x[0] for x in s), 3),
            "stats_peak_mb": round(min(x[2] for x in s), 1),
            "ratio": round(s_cpu / a_cpu, 2),
            "anchor_query_in_process_cpu_s": round(q_cpu, 3),
            "read_and_survey_in_process_cpu_s": round(min(r), 4),
            "ratio_to_query_in_process": round(s_cpu / q_cpu, 2),
        }
        print("stats", rows, out[str(rows)], flush=True)
    return {"anchor_sql": ANCHOR_SQL, "by_rows": out}


def calls(n: int, rounds: int) -> dict[str, Any]:
    """`call_tool_sync` / `call_tool` vs raw httpx `get` + `.json()` on the same loopback
    sandbox (its own process), both on a warm keep-alive connection: per round `n` calls of
    each, side by side (which goes first alternates); CPU of the calling loop only (client
    set-up is left out of both). Per-call figures are medians over the rounds; a ratio is the
    median of the rounds' ratios (raw / realprobe: 1 is httpx speed). The rounds also
    time the client's `fetch` of the same request and a `json.loads` of its body (what the
    raw side does too): the rest of a call (argument and output validation, classification,
    the result) is realprobe's own work, reported as a share of a raw call; the async rounds
    likewise."""
    import httpx
    from call_overhead import TOOL, _mirror_catalog, sandbox_process

    from realprobe.adapters import call_tool, call_tool_sync
    from realprobe.clients import TransportOptions, make_client, make_sync_client

    def side_by_side(pairs: list[tuple[float, float]]) -> dict[str, float]:
        raw, rp = zip(*pairs, strict=True)
        return {"raw_us": round(statistics.median(raw) / n * 1e6, 1),
                "realprobe_us": round(statistics.median(rp) / n * 1e6, 1),
                "ratio": round(statistics.median(a / b for a, b in pairs), 3)}

    with sandbox_process() as url:
        cat = _mirror_catalog(url)
        tool = cat.get(TOOL)
        args = tool.examples[0]
        method, canonical, params = tool.build_request(tool.validate_args(dict(args)))
        raw_url = str(httpx.URL(canonical, params=params))

        with httpx.Client() as raw, make_sync_client(cat, TransportOptions()) as rp:

            def raw_sync() -> None:
                for _ in range(n):
                    raw.get(raw_url).json()

            def rp_sync() -> None:
                for _ in range(n):
                    assert call_tool_sync(tool, dict(args), rp).ok

            def rp_fetch() -> None:
                for _ in range(n):
                    json.loads(rp.fetch(method, canonical, params=params, headers=headers).body)

            headers = tool.request_headers(tool.validate_args(dict(args)))
            raw.get(raw_url)
            call_tool_sync(tool, dict(args), rp)
            sync, own = [], []
            for i in range(rounds):
                first, second = (raw_sync, rp_sync) if i % 2 == 0 else (rp_sync, raw_sync)
                a, b = cpu_of(first), cpu_of(second)
                sync.append((a, b) if i % 2 == 0 else (b, a))
                own.append((sync[-1][1] - cpu_of(rp_fetch)) / sync[-1][0])

        async def async_rounds() -> tuple[list[tuple[float, float]], list[float]]:
            client = make_client(cat, TransportOptions())
            async with httpx.AsyncClient() as araw:

                async def raw_async() -> float:
                    c = time.process_time()
                    for _ in range(n):
                        (await araw.get(raw_url)).json()
                    return time.process_time() - c

                async def rp_async() -> float:
                    c = time.process_time()
                    for _ in range(n):
                        assert (await call_tool(tool, dict(args), client)).ok
                    return time.process_time() - c

                async def rp_fetch_async() -> float:
                    c = time.process_time()
                    for _ in range(n):
                        json.loads((await client.fetch(method, canonical, params=params,
                                                       headers=headers)).body)
                    return time.process_time() - c

                await araw.get(raw_url)
                await call_tool(tool, dict(args), client)
                out, own_async = [], []
                for i in range(rounds):
                    if i % 2 == 0:
                        out.append((await raw_async(), await rp_async()))
                    else:
                        b = await rp_async()
                        out.append((await raw_async(), b))
                    own_async.append((out[-1][1] - await rp_fetch_async()) / out[-1][0])
            await client.aclose()
            return out, own_async

        asyn, own_async = asyncio.run(async_rounds())
    s, a = side_by_side(sync), side_by_side(asyn)
    return {"n": n, "rounds": rounds, "raw_sync_us": s["raw_us"],
            "realprobe_sync_us": s["realprobe_us"], "raw_async_us": a["raw_us"],
            "realprobe_async_us": a["realprobe_us"], "ratio_sync": s["ratio"],
            "ratio_async": a["ratio"], "own_work_share_sync": round(statistics.median(own), 3),
            "own_work_share_async": round(statistics.median(own_async), 3)}


def replay(n: int, rounds: int) -> dict[str, Any]:
    import httpx
    from replay_cassette_2k import make_cassette

    from realprobe.cassettes.importers import load_cassette
    from realprobe.cassettes.session import use_cassette

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.json"
        urls = make_cassette(path, n)
        prebuilt = {httpx.URL(c.uri): (c.status or 200, list(c.headers), c.body)
                    for c in load_cassette(path).calls}

        def handler(request: httpx.Request) -> httpx.Response:
            status, headers, body = prebuilt[request.url]
            return httpx.Response(status, headers=headers, content=body)

        def loop(client: httpx.Client) -> None:
            for u in urls:
                client.get(u).content  # noqa: B018

        rp, mock = [], []
        with httpx.Client() as client:
            for _ in range(rounds):
                with use_cassette(path, record_mode="none"):
                    rp.append(cpu_of(lambda: loop(client)))
                with httpx.Client(transport=httpx.MockTransport(handler)) as mc:
                    mock.append(cpu_of(lambda: loop(mc)))
    r, m = min(rp) / n * 1e6, min(mock) / n * 1e6
    return {"n": n, "use_cassette_us": round(r, 1), "mock_transport_us": round(m, 1),
            "ratio": round(r / m, 2)}


def metrics(rows: int, scrapes: int) -> dict[str, Any]:
    import httpx
    from monitor_synthetic import build
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.parser import text_string_to_metric_families

    from realprobe.monitor.exporter import Exporter, ExporterServer
    from realprobe.store import Store, iso_utc, open_db

    db = TMP / f"metrics_{rows}.db"
    TMP.mkdir(exist_ok=True)
    if not db.exists():
        build(db, rows, t_end=time.time())
    server = ExporterServer(Exporter(open_db(db)), port=0)
    url = server.start() + "/metrics"
    try:
        text = httpx.get(url, timeout=900).text
        families = list(text_string_to_metric_families(text))

        class Fixed:
            def collect(self) -> Any:
                return iter(families)

        reg = CollectorRegistry(auto_describe=False)
        reg.register(Fixed())  # type: ignore[arg-type]
        bare_server, _bare_thread = start_http_server(0, "127.0.0.1", registry=reg)
        bare = f"http://127.0.0.1:{bare_server.server_port}/metrics"
        ours, theirs = [], []
        with Store(db) as store, httpx.Client() as client:
            for _ in range(scrapes):
                now = time.time()
                with store.conn:
                    store.conn.executemany(
                        "INSERT INTO probes (run_id, tool, api, started_at, started_ts, "
                        "latency_ms, outcome, vantage, excluded, source) "
                        "VALUES ('live', ?, 'api00', ?, ?, 150, 'ok', 'bench', 0, 'probe')",
                        [(f"tool_{j % 30:02d}", iso_utc(now), now) for j in range(100)],
                    )
                pair = [lambda: client.get(url, timeout=60).raise_for_status(),
                        lambda: client.get(bare, timeout=60).raise_for_status()]
                first = len(ours) % 2  # alternate which goes first (caches, GC)
                one, two = cpu_of(pair[first]), cpu_of(pair[1 - first])
                ours.append(two if first else one)
                theirs.append(one if first else two)
        bare_server.shutdown()
    finally:
        server.stop()
    o, t = statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3
    # the median of the scrapes' own ratios: a scrape that the machine slowed down slows
    # both of its pair, so the ratio holds where the two medians drift apart
    ratios = sorted(a / b for a, b in zip(ours, theirs, strict=True) if b > 0)
    return {"rows": rows, "scrapes": scrapes, "series_bytes": len(text),
            "exporter_cpu_ms": round(o, 2), "bare_prometheus_cpu_ms": round(t, 2),
            "ratio": round(statistics.median(ratios), 2),
            "ratio_quartiles": [round(q, 2) for q in statistics.quantiles(ratios, n=4)]}


def calibrate(tools: int, per_tool: int) -> dict[str, Any]:
    """`calibrate` (profile from statistics and rows) of `tools` tools behind a deadline that
    bites (bench/calibrate_burst_roundtrip.py's truth, 200 ms deadline), in process; CPU
    counts the worker processes too."""
    import resource

    sys.path.insert(0, str(HERE))
    from calibrate_burst_roundtrip import DEADLINE, MIXED, truth

    from realprobe.probes.calibrate import calibrate as calibrate_report
    from realprobe.probes.stats import compute_stats
    from realprobe.probes.synthetic import fault_model_arrays

    names = [f"t{i:04d}" for i in range(tools)]
    arr = fault_model_arrays(truth(MIXED), names, per_tool, seed=1, deadline_s=DEADLINE)
    rep = compute_stats(arr)

    def cpu() -> float:
        own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                      resource.RUSAGE_CHILDREN))
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    load, busy = load_average(), machine_cpu()
    t, c = time.perf_counter(), cpu()
    calibrate_report(rep, arrays=arr)
    wall, used = time.perf_counter() - t, cpu() - c
    others = machine_cpu() - busy - used
    return {"tools": tools, "rows_per_tool": per_tool, "deadline_s": DEADLINE,
            "wall_s": round(wall, 2), "cpu_s": round(used, 2),
            "cpu_per_tool_s": round(used / tools, 3), "cores": len(os.sched_getaffinity(0)),
            "others_cpu_s": round(others, 1), "load_average_1m": [load, load_average()]}


def machine_cpu() -> float:
    """CPU seconds the whole machine has spent busy since boot (/proc/stat; 0 elsewhere): the
    difference over a run, less the run's own, is what other work took meanwhile."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(v) for v in fields]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


TYPER_APP = (
    "import typer\napp = typer.Typer()\n@app.command()\ndef main(x: int = 1) -> None:\n"
    "    'One command.'\napp()\n"
)


def startup(runs: int) -> dict[str, Any]:
    """import-openapi (best of 3), and `--help` against the typer app: `runs` rounds, each
    running both in fresh processes back to back (which goes first alternates), so the two
    meet the same neighbours; the ratio is the median of the rounds' ratios (a single best
    of 7 moved by 0.1 between runs on shared cores). Bytecode is written and each command
    run once first, as an installed package has its .pyc files (typer's own do)."""
    spec = HERE.parent / "tests" / "data" / "openapi" / "open-meteo__flood.yml"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    load = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        imp = [child([PY, "-m", "realprobe.cli", "catalog", "import-openapi", str(spec), "-o",
                      str(Path(tmp) / "c.json")], env=env) for _ in range(4)][1:]
    ours, theirs = [PY, "-m", "realprobe.cli", "--help"], [PY, "-c", TYPER_APP, "--help"]
    helps: list[float] = []
    typer_: list[float] = []
    order = [(ours, helps), (theirs, typer_)]
    child(ours, env=env), child(theirs, env=env)
    for i in range(runs):
        for cmd, into in order if i % 2 == 0 else order[::-1]:
            into.append(child(cmd, env=env)[1])
    ratios = [h / t for h, t in zip(helps, typer_, strict=True)]
    return {"import_openapi_doc_bytes": spec.stat().st_size,
            "import_openapi_wall_s": round(min(x[0] for x in imp), 3),
            "import_openapi_cpu_s": round(min(x[1] for x in imp), 3),
            "help_runs": runs,
            "help_cpu_s": round(statistics.median(helps), 4),
            "typer_one_command_cpu_s": round(statistics.median(typer_), 4),
            "ratio_help_to_typer": round(statistics.median(ratios), 3),
            "ratio_quartiles": [round(q, 3) for q in statistics.quantiles(ratios, n=4)],
            "load_average_1m": [load, load_average()]}


#: the README's check reruns the stats below this many rows (the 10M point, a growth figure,
#: takes minutes and its database half an hour to build)
CHECKED_BELOW = 10_000_000

#: relative noise of each kind of figure on 2 shared cores (CPU ratios side by side move
#: little; wall times move with the neighbours)
NOISE = {"ratio": 0.25, "cpu_s": 0.3, "wall_s": 0.5, "share": 0.5}


def claims(d: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """{figure: (value, relative noise)} of a perf_table result."""
    out: dict[str, tuple[float, float]] = {}
    for rows, r in d.get("stats", {}).get("by_rows", {}).items():
        if int(rows) < CHECKED_BELOW:
            out[f"stats {rows} rows / GROUP BY, CPU"] = (r["ratio"], NOISE["ratio"])
    if "calls" in d:
        out["raw httpx / call_tool_sync, CPU"] = (d["calls"]["ratio_sync"], NOISE["ratio"])
        out["raw httpx / call_tool, CPU"] = (d["calls"]["ratio_async"], NOISE["ratio"])
        if "own_work_share_sync" in d["calls"]:
            out["call_tool_sync own work / raw call, CPU"] = (
                d["calls"]["own_work_share_sync"], NOISE["share"])
        if "own_work_share_async" in d["calls"]:
            out["call_tool own work / raw call, CPU"] = (
                d["calls"]["own_work_share_async"], NOISE["share"])
    if "replay" in d:
        out["use_cassette / MockTransport per request, CPU"] = (d["replay"]["ratio"],
                                                                NOISE["ratio"])
    if "metrics" in d:
        out["/metrics / bare prometheus_client, CPU"] = (d["metrics"]["ratio"], NOISE["ratio"])
    if "calibrate" in d:
        out["calibrate, CPU per tool"] = (d["calibrate"]["cpu_per_tool_s"], NOISE["cpu_s"])
        out["calibrate, wall"] = (d["calibrate"]["wall_s"], NOISE["wall_s"])
    if "startup" in d:
        st = d["startup"]
        out["import-openapi 8 kB, CPU"] = (st["import_openapi_cpu_s"], NOISE["cpu_s"])
        out["--help / one-command typer app, CPU"] = (st["ratio_help_to_typer"], NOISE["ratio"])
    return out


def with_load(section: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A section's figures with the load average while it ran (before → after): sections
    of one table may come from separate runs."""
    before = load_average()
    out = section()
    out["load_average_1m"] = [before, load_average()]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="stats,calls,replay,metrics,calibrate,startup")
    ap.add_argument("--sizes", default="10000,100000,1000000,10000000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--calls", type=int, default=500, help="calls per round")
    ap.add_argument("--call-rounds", type=int, default=15)
    ap.add_argument("--metrics-rows", type=int, default=1_000_000)
    ap.add_argument("--calibrate-tools", type=int, default=700)
    ap.add_argument("--startup-runs", type=int, default=41)
    ap.add_argument("--save", action="store_true", help=f"write {RESULTS.name}")
    ap.add_argument("--out", type=Path, help="write the results here (a rerun's check)")
    args = ap.parse_args()
    only = args.only.split(",")
    # the commands start from bytecode, as an installed package does (an environment with
    # PYTHONDONTWRITEBYTECODE would otherwise compile every module at every start)
    import compileall

    import realprobe

    compileall.compile_dir(Path(realprobe.__file__).parent, quiet=1)
    before = load_average()
    out: dict[str, Any] = {"args": {
        "only": args.only, "sizes": args.sizes, "repeats": args.repeats, "calls": args.calls,
        "call_rounds": args.call_rounds,
        "metrics_rows": args.metrics_rows, "calibrate_tools": args.calibrate_tools,
        "startup_runs": args.startup_runs}}
    if "stats" in only:
        out["stats"] = stats([int(s) for s in args.sizes.split(",")], args.repeats)
    if "calls" in only:
        out["calls"] = with_load(lambda: calls(args.calls, args.call_rounds))
        print(out["calls"], flush=True)
    if "replay" in only:
        out["replay"] = with_load(lambda: replay(2000, 5))
        print(out["replay"], flush=True)
    if "metrics" in only:
        out["metrics"] = metrics(args.metrics_rows, 60)
        print(out["metrics"], flush=True)
    if "calibrate" in only:
        out["calibrate"] = calibrate(args.calibrate_tools, 1000)
        print(out["calibrate"], flush=True)
    if "startup" in only:
        out["startup"] = startup(args.startup_runs)
    emit(out, args.save or args.out is not None, args.out or RESULTS, before)


if __name__ == "__main__":
    main()
