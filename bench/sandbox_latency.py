"""How faithfully the sandbox's latencies reach a client: per call, the latency the sandbox drew
(its journal's `delay_ms`) against the latency the prober measured, on the closed-loop setup
(three tools on three emulated hosts, lognormal mu 5.0 sigma 0.5 ms, latency scale 0.25, 150
rounds, 0.25 s deadline).

- sandbox lateness: first response byte written minus the drawn delay (the sandbox's own
  work and its timer; it sleeps until the request's arrival plus the draw, so its work is
  inside the delay, not added to it);
- client overhead: measured latency minus the drawn delay (loopback, the client, the store,
  and the CPU the machine gives the process);
- the censored lognormal fit of the drawn and of the measured latencies (overhead median
  removed, profile units).

The load average is recorded: on shared cores the client overhead is mostly scheduling.

    python bench/sandbox_latency.py [--rounds 150] [--save]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "sandbox_latency.json"
SCALE, DEADLINE_S, N_TOOLS = 0.25, 0.25, 3


def _q(a: np.ndarray) -> dict[str, float]:
    return {k: round(float(v), 2) for k, v in {
        "median": np.median(a), "p90": np.percentile(a, 90), "p99": np.percentile(a, 99),
        "max": a.max(), "robust_sd": 1.4826 * np.median(np.abs(a - np.median(a))),
    }.items()}


def measure(rounds: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "tests"))
    from probe_helpers import distinct_host_tools, probe_concurrently, truth_profile

    from realprobe import open_db
    from realprobe.adapters.catalog import default_catalog
    from realprobe.clients import TransportOptions
    from realprobe.http.simulate import routes_from_catalog
    from realprobe.probes.loading import ProbeArrays, load_probes
    from realprobe.probes.stats import compute_stats
    from realprobe.sandbox.server import Sandbox, SandboxThread

    catalog = default_catalog()
    tools = distinct_host_tools(catalog, N_TOOLS)
    thread = SandboxThread(Sandbox(routes_from_catalog(catalog), truth_profile(), seed=11,
                                   latency_scale=SCALE))
    url = thread.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "probe.db"
            t0 = time.perf_counter()
            probe_concurrently(catalog, tools, rounds, [(TransportOptions(sandbox=url), db)],
                               DEADLINE_S)
            wall = time.perf_counter() - t0
            journal = httpx.get(f"{url}/_journal").json()
            raw = load_probes(open_db(db))
    finally:
        thread.stop()
    # pair each success with the journal entries of its tool read while it was in flight
    drawn = np.full(len(raw), np.nan)
    late: list[float] = []
    for k, tool in enumerate(raw.tools):
        rows = [e for e in journal if e["tool"] == tool]
        at = np.array([e["at"] for e in rows])
        delay = np.array([e["delay_ms"] for e in rows])
        late += [e["first_byte_ms"] - e["delay_ms"] for e in rows
                 if e["fault"] == "ok" and e["first_byte_ms"] is not None]
        for i in range(raw.bounds[k], raw.bounds[k + 1]):
            end = raw.ts[i] + raw.latency_ms[i] / 1000
            inside = (at >= raw.ts[i] - 0.002) & (at <= end + 0.002)
            if inside.any():
                drawn[i] = delay[inside].sum()
    ok = (raw.code < 0) & np.isfinite(drawn)
    over = raw.latency_ms[ok] - drawn[ok]
    o = float(np.median(over))
    timeout = (raw.timeout_s * 1000 - o) / SCALE / 1000
    measured = np.maximum(raw.latency_ms - o, 0.05) / SCALE

    def fit(lat: np.ndarray) -> dict[str, float]:
        arr = ProbeArrays(["all"], np.array([0, len(raw)]), raw.ts, lat, raw.code, timeout)
        f = compute_stats(arr).tools[0].latency.lognormal
        assert f is not None
        return {"mu": round(f.mu, 3), "sigma": round(f.sigma, 3)}

    return {
        "calls": len(raw), "paired_successes": int(ok.sum()), "wall_s": round(wall, 2),
        "sandbox_lateness_ms": _q(np.array(late)),
        "client_overhead_ms": _q(over),
        "fit_drawn": fit(np.where(ok, drawn / SCALE, measured)),
        "fit_measured": fit(measured),
        "truth": {"mu": 5.0, "sigma": 0.5},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--save", action="store_true", help="write bench/results/ (else print only)")
    args = ap.parse_args()
    out = measure(args.rounds)
    out["load_average_1m"] = round(os.getloadavg()[0], 2)
    out["python"] = sys.version.split()[0]
    print(json.dumps(out, indent=2))
    if args.save:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
