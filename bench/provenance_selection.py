"""What choosing rows by provenance costs, and whether simulated time stays in the past.

1. A database of live and simulated rows (half each, 30 tools; the simulated half carries a
   virtual timeline in `virtual_s`). Times, best of 3: the one-scan survey of the window
   (kinds, targets, vantages, sources, excluded rows), loading the live rows (plain path),
   loading the simulated rows (virtual timeline anchored at the run's last real stamp), and
   the whole `realprobe stats --json` (default: live) in a fresh process.
2. A 10,000-round simulated probe (harsh profile, in process): rows stamped after the moment
   they were written (goal 0), and the simulated time span the rows keep.

    python bench/provenance_selection.py [--rows 1000000] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from realprobe.probes.loading import load_probes
from realprobe.probes.provenance import describe, survey
from realprobe.store import PROBES_COLUMNS, Store, open_db

HERE = Path(__file__).parent
RESULTS = HERE / "results"


def build(path: Path, rows: int, tools: int = 30, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    path.unlink(missing_ok=True)
    Store(path).close()
    cols = [c for c in PROBES_COLUMNS if c != "id"]
    per = rows // tools // 2
    t0 = time.time() - 30 * 86400
    conn = sqlite3.connect(path)
    for t in range(tools):
        name = f"tool_{t:02d}"
        for kind in ("live", "simulate"):
            fail = rng.random(per) < 0.1
            lat = np.exp(rng.normal(5.5, 0.6, per))
            if kind == "live":
                ts = t0 + np.sort(rng.uniform(0, 29 * 86400, per))
                virtual = [None] * per
            else:  # one simulated run of `per` calls, written within a few seconds
                ts = t0 + 29.5 * 86400 + np.linspace(0, 5, per)
                virtual = list(np.cumsum(rng.exponential(2.0, per)))
            data = []
            for i in range(per):
                f = bool(fail[i])
                row: dict[str, Any] = {
                    "run_id": f"{kind}-{t}", "tool": name, "api": name, "round": i,
                    "started_at": "", "started_ts": float(ts[i]), "latency_ms": float(lat[i]),
                    "outcome": "error" if f else "ok", "error_code": "SERVER_ERROR" if f else None,
                    "vantage": "bench", "timeout_s": 10.0, "excluded": 0,
                    "source": "probe", "target_kind": kind,
                    "target": "live" if kind == "live" else "simulate:harsh",
                    "virtual_s": virtual[i],
                }
                data.append(tuple(row.get(c) for c in cols))
            conn.executemany(
                f"INSERT INTO probes ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                data,
            )
    conn.commit()
    conn.close()


def best(fn: Any, n: int = 3) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(n):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def honest_time(rounds: int = 10_000) -> dict[str, Any]:
    from realprobe import PolitenessConfig, run_probes
    from realprobe.adapters.catalog import Catalog
    from realprobe.clients import TransportOptions, make_client

    catalog = Catalog.load([])
    tool = catalog.get("catfact_fact")
    late = 0
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "sim.db")
        insert = store.insert_probe

        def checked(row: dict[str, Any]) -> None:
            nonlocal late
            late += row["started_ts"] > time.time()
            insert(row)

        store.insert_probe = checked  # type: ignore[method-assign]

        async def go() -> float:
            client = make_client(catalog, TransportOptions(profile="harsh", seed=1))
            try:
                t = time.perf_counter()
                await run_probes(catalog, [tool], rounds, client, store,
                                 politeness=PolitenessConfig.off())
                return time.perf_counter() - t
            finally:
                await client.aclose()

        wall = asyncio.run(go())
        top, span = store.conn.execute(
            "SELECT max(started_ts), max(virtual_s) - min(virtual_s) FROM probes"
        ).fetchone()
        after = time.time()
        store.close()
    return {
        "rounds": rounds,
        "rows_stamped_after_write": late,
        "latest_stamp_before_end_s": round(after - top, 3),
        "simulated_span_h": round(span / 3600, 2),
        "run_wall_s": round(wall, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    root = Path(tempfile.gettempdir()) / f"realprobe-bench-{os.getuid()}"
    root.mkdir(exist_ok=True)
    db = root / f"provenance_{args.rows}.db"
    if not db.exists():
        t = time.perf_counter()
        build(db, args.rows)
        print(f"built {db} in {time.perf_counter() - t:.1f}s")
    survey_s, groups = best(lambda: survey(open_db(db)))
    live_s, live = best(lambda: load_probes(open_db(db), kinds=["live"]))
    sim_s, sim = best(lambda: load_probes(open_db(db), kinds=["simulate"]))
    prov = describe(open_db(db), ["live"], groups=groups)
    cli = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "realprobe.cli", "stats", "--db", str(db),
                        "--json"], check=True, capture_output=True)
        cli.append(round(time.perf_counter() - t, 3))
    result = {
        "rows": int(sum(n for *_x, n, _lo, _hi in groups)),
        "survey_s": round(survey_s, 3),
        "load_live_s": round(live_s, 3),
        "load_simulated_s": round(sim_s, 3),
        "live_rows": len(live),
        "simulated_rows": len(sim),
        "simulated_latest_ts_before_now": bool(float(sim.ts.max()) <= time.time()),
        "provenance_live_rows": prov.rows,
        "provenance_other_kinds": prov.other_kinds,
        "cli_stats_s": min(cli),
        "cli_runs_s": cli,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "honest_time": honest_time(),
    }
    print(json.dumps(result, indent=2))
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "provenance_selection.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
