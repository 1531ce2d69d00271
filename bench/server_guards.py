"""The server base's limits, measured: the sandbox journal under 10,000 long-path requests
(answer size, memory growth), and 300 half-sent requests against the exporter (threads held,
time until every one is closed, whether a scrape is served meanwhile). Then a battery of
attacks per surface (sandbox admin, proxy, exporter), printed as tried / held.

    python bench/server_guards.py [--requests 10000] [--half-sent 300] [--save]
"""

from __future__ import annotations

import argparse
import json
import socket
import tempfile
import threading
import time
from pathlib import Path

import httpx

from realprobe.adapters.catalog import default_catalog
from realprobe.monitor.exporter import Exporter, ExporterServer
from realprobe.sandbox.server import SandboxThread
from realprobe.sandbox.setup import sandbox_for
from realprobe.store import Store, open_db

RESULTS = Path(__file__).parent / "results"
EVIL = "http://evil.example"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def journal_bound(n: int) -> dict[str, float]:
    sb = sandbox_for(default_catalog(), "calm", latency_scale=0.0)
    path = "/agify/?name=" + "a" * 15000  # near h11's 16 KiB request-head limit
    with SandboxThread(sb) as url, httpx.Client(timeout=10) as client:
        before = rss_mb()
        started = time.perf_counter()
        for _ in range(n):
            client.get(url + path)
        took = time.perf_counter() - started
        answer = client.get(f"{url}/_journal")
        after = rss_mb()
    return {"requests": n, "path_bytes": len(path), "seconds": round(took, 1),
            "journal_answer_mb": round(len(answer.content) / 1e6, 2),
            "journal_entries": len(answer.json()), "rss_growth_mb": round(after - before, 1)}


def half_sent(n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "p.db"
        Store(db).close()
        server = ExporterServer(Exporter(open_db(db)), port=0)
        port = int(server.url.rsplit(":", 1)[1])
        threads = threading.active_count()
        socks = []
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(f"GET /metrics?{i} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".encode())
            socks.append(s)
        started = time.monotonic()
        scrape = httpx.get(f"{server.url}/metrics", timeout=10)
        scrape_s = time.monotonic() - started
        extra_threads = threading.active_count() - threads
        closed = 0
        for s in socks:
            try:
                data = s.recv(4096)
                closed += not data or data.startswith(b"HTTP/1.1 408")
            except TimeoutError:
                pass  # still held after 30 s
            except OSError:
                closed += 1  # reset: closed as well
            s.close()
        all_closed_s = time.monotonic() - started
        server.stop()
    return {"half_sent": n, "scrape_status": scrape.status_code,
            "scrape_meanwhile_s": round(scrape_s, 3), "extra_threads": extra_threads,
            "all_closed_after_s": round(all_closed_s, 1), "closed": closed}


def _held(r: httpx.Response, *statuses: int) -> bool:
    return r.status_code in statuses and "x-realprobe-error" in r.headers


def sandbox_attacks(url: str) -> list[bool]:
    json_h = {"Content-Type": "application/json"}
    def state() -> tuple[object, ...]:
        s = httpx.get(f"{url}/_admin").json()
        return s["profile"], s["seed"], s["toxics"], s["cleared"]

    before = state()
    tries = [
        _held(httpx.put(f"{url}/_admin/profile?builtin=harsh", headers={"Origin": EVIL}), 403),
        _held(httpx.post(f"{url}/_admin/reset", content=b"x",
                         headers={"Origin": EVIL, "Content-Type": "text/plain"}), 403),
        _held(httpx.put(f"{url}/_admin/toxics/*/latency", content=b'{"latency_ms": 9000}',
                        headers={"Content-Type": "text/plain"}), 415),
        _held(httpx.put(f"{url}/_admin/profile?builtin=harsh",
                        headers={"Host": "evil.example"}), 421),
        _held(httpx.get(f"{url}/_journal", headers={"Host": "evil.example:8765"}), 421),
        _held(httpx.put(f"{url}/_admin/toxics/*/bandwidth", headers=json_h,
                        content=b'{"rate": 1e309}'), 400),
        _held(httpx.put(f"{url}/_admin/toxics/*/latency", headers=json_h,
                        content=b'{"latency_ms": 1e300}'), 400),
        _held(httpx.get(f"{url}/nosuchapi/x"), 421),
    ]
    tries.append(state() == before)
    tries.append(httpx.get(f"{url}/agify/?name=a").status_code == 200)
    return tries


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--half-sent", type=int, default=300)
    ap.add_argument("--save", action="store_true", help="write bench/results/server_guards.json")
    args = ap.parse_args()
    out: dict[str, object] = {}
    with SandboxThread(sandbox_for(default_catalog(), "calm", latency_scale=0.0)) as url:
        held = sandbox_attacks(url)
    out["sandbox_attacks"] = {"tried": len(held), "held": sum(held)}
    print(f"sandbox attacks: {sum(held)}/{len(held)} held")
    out["half_sent"] = half_sent(args.half_sent)
    print("half-sent:", out["half_sent"])
    out["journal"] = journal_bound(args.requests)
    print("journal:", out["journal"])
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "server_guards.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
