"""Live-target calls from Ray workers sharing one politeness state: throughput at 1, 2 and 4
workers against the ideal (linear in workers) and the spacing every upstream host saw.

`--hosts` loopback servers stand in for live API hosts (each answers after `--latency-ms`;
the catalogue politeness of each: one call in flight, starts `--interval` s apart). `--jobs`
Ray tasks each make `--calls` calls, one after another, each to the next host in turn, the way
a task run calls its tools: through `SharedGates` (the state in a `GateState` actor, as
`--executor ray` runs live targets) and a realprobe client. The same jobs run on a local Ray
with 1, 2 and 4 worker CPUs. Spacing: the smallest gap between two arrivals at one host, and
how many gaps were shorter than the interval less 10 ms of arrival jitter (goal 0). A last
pass runs the same jobs at 4 workers over only `--contested-hosts` hosts, where the interval
binds: there the throughput is the hosts' own limit and the spacing is what is tested.

    python bench/ray_live_gate.py [--hosts 32] [--jobs 16] [--calls 8] [--save]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import emit, load_average

RESULTS = Path(__file__).resolve().parent / "results" / "ray_live_gate.json"


@dataclass(frozen=True)
class Polite:
    max_in_flight: int = 1
    min_interval_s: float = 0.5
    jitter_s: float = 0.0
    daily_budget: int = 10**9


@dataclass(frozen=True)
class Host:
    name: str
    base_url: str
    politeness: Polite = field(default_factory=Polite)


class Upstream:
    """`n` loopback servers on one event loop in a thread; arrival times per port."""

    def __init__(self, n: int, latency_s: float) -> None:
        self.n, self.latency_s = n, latency_s
        self.arrivals: dict[int, list[float]] = {}
        self.ports: list[int] = []
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait(30)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        ready.set()
        self.loop.run_forever()

    async def _start(self) -> None:
        for _ in range(self.n):
            server = await asyncio.start_server(self._handler, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            self.ports.append(port)
            self.arrivals[port] = []

    async def _handler(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        port = writer.get_extra_info("sockname")[1]
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                self.arrivals[port].append(time.time())
                await asyncio.sleep(self.latency_s)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 8\r\n\r\n{\"v\": 1}")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


class UpstreamProcess:
    """`Upstream` in a child process of its own (no GIL shared with anything measured): its
    ports, and its arrival times on request."""

    def __init__(self, n: int, latency_s: float) -> None:
        self.conn, there = multiprocessing.Pipe()
        self.proc = multiprocessing.get_context("fork").Process(
            target=_serve, args=(n, latency_s, there), daemon=True
        )
        self.proc.start()
        self.ports: list[int] = self.conn.recv()

    def arrivals(self) -> dict[int, list[float]]:
        """Every arrival since the last ask, per port."""
        self.conn.send("arrivals")
        got: dict[int, list[float]] = self.conn.recv()
        return got

    def close(self) -> None:
        self.conn.send("stop")
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.terminate()


def _serve(n: int, latency_s: float, conn: Any) -> None:
    up = Upstream(n, latency_s)
    conn.send(up.ports)
    while conn.recv() == "arrivals":
        conn.send({p: list(t) for p, t in up.arrivals.items()})
        for times in up.arrivals.values():
            times.clear()


def job(hosts: list[Host], first: int, calls: int, gate: Any) -> int:
    """One worker's run: `calls` calls, each to the next host, under the shared gate, over
    realprobe's client (whose phase timings tell the gate when each request left)."""
    from realprobe.hosts import SharedGates
    from realprobe.http.client import HttpClient
    from realprobe.http.transports import live_transport
    from realprobe.result import ToolResult
    from realprobe.tasks.executors import RayGateLink

    async def go() -> int:
        gates = SharedGates(RayGateLink(gate))
        ok = 0
        async with HttpClient(live_transport()) as client:
            for k in range(calls):
                host = hosts[(first + k) % len(hosts)]
                async with gates.turn(host, 30.0):
                    got = await client.fetch("GET", host.base_url + "/v", allow_private=True)
                gates.note(host, ToolResult(
                    tool="v", ok=got.status == 200, data={}, latency_ms=got.elapsed_s * 1000,
                    phases=got.phases,
                ))
                ok += got.status == 200
        return ok

    return asyncio.run(go())


def _warm() -> None:
    import httpx  # noqa: F401

    import realprobe.tasks.executors  # noqa: F401

    time.sleep(1.0)  # held, so each warm-up lands on its own worker


def run(workers: int, hosts: list[Host], jobs: int, calls: int) -> tuple[float, int]:
    import ray

    from realprobe.tasks.executors import gate_actor, start_local_ray

    start_local_ray(ray, num_cpus=workers)  # listening on 127.0.0.1 only
    try:
        gate = gate_actor(ray)
        remote = ray.remote(num_cpus=1)(job)
        warm = ray.remote(num_cpus=1)(_warm)
        ray.get([warm.remote() for _ in range(workers)])  # every worker up, outside the timing
        t0 = time.perf_counter()
        done = ray.get([remote.remote(hosts, j * calls, calls, gate) for j in range(jobs)])
        return time.perf_counter() - t0, sum(done)
    finally:
        ray.shutdown()


def spacing(arrivals: dict[int, list[float]], interval: float) -> tuple[float | None, int]:
    gaps = [b - a for times in arrivals.values() for a, b in itertools.pairwise(sorted(times))]
    return (min(gaps) if gaps else None), sum(g < interval - 0.010 for g in gaps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=32)
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--contested-hosts", type=int, default=4)
    ap.add_argument("--save", action="store_true", help=f"write {RESULTS.name}")
    args = ap.parse_args()
    before = load_average()
    up = UpstreamProcess(args.hosts, args.latency_ms / 1000)
    polite = Polite(min_interval_s=args.interval)
    hosts = [Host(f"host{p}", f"http://127.0.0.1:{p}", polite) for p in up.ports]
    rows = {}
    try:
        for w in (1, 2, 4):
            up.arrivals()  # forget the warm-up
            took, ok = run(w, hosts, args.jobs, args.calls)
            min_gap, short = spacing(up.arrivals(), args.interval)
            rows[str(w)] = {
                "seconds": round(took, 2), "calls_ok": ok, "calls_per_s": round(ok / took, 2),
                "min_gap_s": None if min_gap is None else round(min_gap, 3),
                "gaps_shorter_than_interval": short,
            }
            print(w, rows[str(w)], flush=True)
        # the gate binding: the same jobs at 4 workers over a few hosts, busier than they allow
        few = hosts[: args.contested_hosts]
        up.arrivals()
        took, ok = run(4, few, args.jobs, args.calls)
        min_gap, short = spacing(up.arrivals(), args.interval)
    finally:
        up.close()
    contested = {
        "hosts": len(few), "seconds": round(took, 2), "calls_ok": ok,
        "calls_per_s": round(ok / took, 2),
        "hosts_allow_calls_per_s": round(len(few) / args.interval, 2),
        "min_gap_s": None if min_gap is None else round(min_gap, 3),
        "gaps_shorter_than_interval": short,
    }
    print("contested", contested, flush=True)
    out = {
        "contested_4_workers": contested,
        "hosts": args.hosts, "jobs": args.jobs, "calls_per_job": args.calls,
        "interval_s": args.interval, "latency_ms": args.latency_ms, "workers": rows,
        "speedup_2": round(rows["1"]["seconds"] / rows["2"]["seconds"], 2),
        "speedup_4": round(rows["1"]["seconds"] / rows["4"]["seconds"], 2),
        "goal": "spacing never violated; >= 3x at 4 workers where the hosts allow",
    }
    emit(out, args.save, RESULTS, before)


if __name__ == "__main__":
    main()
