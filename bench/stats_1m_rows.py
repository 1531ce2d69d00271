"""Time `stats` on 1,000,000 realistic probe rows across 30 tools, side by side with a plain
sqlite3 `GROUP BY` over the same table (goal: the command's CPU within 1.5x the GROUP BY's).

The rows are made by the simulator's fault model (the `published` profile: bursty failures,
lognormal latencies, 10 s deadlines) for 30 catalogue tools and written as the prober writes
them: every column, provenance included. `--kind live` (the default) relabels them as live
rows, with phase timings on successful calls as a live probe records them; `--kind simulate`
keeps them simulated, on their virtual timeline. The database is built once
($TMPDIR/realprobe-bench/stats_1m_<kind>.db, reused if it has the right size).

Measured in one run, best of 3 each: the anchor (`SELECT tool, count(*), sum(outcome =
'ok'), avg(latency_ms) ... GROUP BY tool` over the same selection, in a fresh process), the
whole `realprobe stats --json` command in a fresh process (wall and CPU), and in process the
loader and the statistics apart. The machine's load average is recorded.

    python bench/stats_1m_rows.py [--rows 1000000] [--tools 30] [--kind live|simulate] [--save]
"""

from __future__ import annotations

import argparse
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import emit, load_average

from realprobe.errors import ErrorCode
from realprobe.probes.loading import CODES, load_probes
from realprobe.probes.stats import compute_stats
from realprobe.store import PROBES_COLUMNS, Store, open_db

HERE = Path(__file__).parent
RESULTS = HERE / "results"
PROFILE = "published"
ROUND_S = 60.0  # one round of every tool a minute, as `probe --rounds` spaces them


def _catalogue_tools(n: int) -> list[str]:
    from realprobe.api import load_catalog

    names = sorted(t.name for t in load_catalog())
    return [names[i % len(names)] + ("" if i < len(names) else f"_{i}") for i in range(n)]


def _row(kind: str, tool: str, rnd: int, ts: float, virtual: float, code: int, lat: float,
         deadline: float) -> dict[str, Any]:
    ok = code < 0
    err = None if ok else CODES[code].value
    timed_out = err == ErrorCode.TIMEOUT.value
    row: dict[str, Any] = {
        "run_id": f"{kind}-{rnd // 100}", "tool": tool, "api": tool.split("_")[0],
        "round": rnd, "started_at": "", "started_ts": ts, "latency_ms": lat,
        "outcome": "ok" if ok else "error", "error_code": err,
        "http_status": None if timed_out else (200 if ok else 503), "bytes": 480,
        "retry_after": None, "rate_limit": "{}", "redirects": "[]", "vantage": "bench",
        "detail": "", "timeout_s": deadline, "excluded": 0, "source": "probe", "args": "{}",
        "target_kind": kind, "target": "live" if kind == "live" else f"simulate:{PROFILE}",
        "virtual_s": virtual if kind == "simulate" else None,
    }
    if kind == "live" and ok:  # a live call records where its time went
        new = rnd % 100 == 0
        row.update(
            ttfb_ms=0.8 * lat, transfer_ms=0.05 * lat, new_connection=int(new),
            dns_ms=2.0 if new else None, connect_ms=20.0 if new else None,
            tls_ms=40.0 if new else None,
        )
    return row


def build(path: Path, rows: int, tools: int, kind: str = "live", seed: int = 1, *,
          seal: bool = True) -> None:
    """`rows // tools` rounds over `tools` catalogue tools, drawn by the simulator, written
    by plain INSERTs (fast), then sealed into the column-wise chunks a prober's Store seals
    as it writes (`seal`)."""
    from realprobe.probes.synthetic import fault_model_arrays
    from realprobe.simulator.profile import load_profile

    path.unlink(missing_ok=True)
    Store(path).close()
    names = _catalogue_tools(tools)
    per = rows // tools
    t0 = time.time() - per * ROUND_S
    arr = fault_model_arrays(load_profile(PROFILE), names, per, seed=seed, t0=t0, step_s=ROUND_S)
    cols = [c for c in PROBES_COLUMNS if c != "id"]
    sql = f"INSERT INTO probes ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})"
    conn = sqlite3.connect(path)
    for i, tool in enumerate(arr.tools):
        a, b = int(arr.bounds[i]), int(arr.bounds[i + 1])
        data = []
        for j in range(a, b):
            rnd = j - a
            row = _row(kind, tool, rnd, float(arr.ts[j]) + 0.01 * i, rnd * ROUND_S,
                       int(arr.code[j]), float(arr.latency_ms[j]), float(arr.timeout_s[j]))
            data.append(tuple(row.get(c) for c in cols))
        conn.executemany(sql, data)
        conn.commit()
    conn.close()
    if seal:
        with Store(path) as store:
            store.seal()


def count_rows(path: Path) -> int:
    try:
        with sqlite3.connect(path) as conn:
            return int(conn.execute("SELECT count(*) FROM probes").fetchone()[0])
    except sqlite3.Error:
        return -1


ANCHOR = (
    "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(\"SELECT tool, count(*), "
    "sum(outcome = 'ok'), avg(latency_ms) FROM probes WHERE target_kind = ? AND "
    "coalesce(excluded, 0) = 0 GROUP BY tool\", [sys.argv[2]]).fetchall()"
)


def fresh(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of `cmd` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed: {proc.stderr.strip()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(db: Path, kind: str, repeats: int) -> dict[str, Any]:
    """Anchor and command interleaved, best of `repeats` each; then the in-process steps."""
    stats_cmd = [sys.executable, "-m", "realprobe.cli", "stats", "--db", str(db), "--json",
                 "--target", kind]
    anchor_cmd = [sys.executable, "-c", ANCHOR, str(db), kind]
    anchor, cli = [], []
    for _ in range(repeats):
        anchor.append(fresh(anchor_cmd))
        cli.append(fresh(stats_cmd))
    steps = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        arr = load_probes(open_db(db), kinds=[kind])
        t1 = time.perf_counter()
        compute_stats(arr)
        steps.append((t1 - t0, time.perf_counter() - t1))
    a_cpu, c_cpu = min(c for _, c in anchor), min(c for _, c in cli)
    return {
        "anchor_group_by_cpu_s": round(a_cpu, 3),
        "anchor_group_by_wall_s": round(min(w for w, _ in anchor), 3),
        "stats_cli_cpu_s": round(c_cpu, 3),
        "stats_cli_wall_s": round(min(w for w, _ in cli), 3),
        "ratio_cpu_stats_to_group_by": round(c_cpu / a_cpu, 2),
        "load_s": round(min(s[0] for s in steps), 3),
        "compute_s": round(min(s[1] for s in steps), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--tools", type=int, default=30)
    ap.add_argument("--kind", choices=["live", "simulate"], default="live")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--save", action="store_true", help="write bench/results/ (otherwise only print)"
    )
    args = ap.parse_args()
    db = Path(tempfile.gettempdir()) / "realprobe-bench" / f"stats_{args.rows}_{args.kind}.db"
    db.parent.mkdir(exist_ok=True)
    if count_rows(db) != args.rows // args.tools * args.tools:
        t = time.perf_counter()
        build(db, args.rows, args.tools, args.kind)
        print(f"built {db} in {time.perf_counter() - t:.1f} s")
    with Store(db) as store:  # a file built before the chunk store: sealed once
        store.seal()
    before = load_average()
    out = {
        "rows": count_rows(db),
        "tools": args.tools,
        "kind": args.kind,
        "profile": PROFILE,
        **measure(db, args.kind, args.repeats),
        "goal_ratio": 1.5,
    }
    name = "stats_1m_rows.json" if args.kind == "live" else f"stats_1m_rows_{args.kind}.json"
    emit(out, args.save, RESULTS / name, before)

if __name__ == "__main__":
    main()
