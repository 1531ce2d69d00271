"""Replay a 2,000-interaction cassette through `use_cassette` with a plain `httpx.Client`
(no transport passed: the patch point answers), against vcrpy 9.x on the same file and the
same client code, in one run; and the per-request cost of that replay against the floor, an
`httpx.MockTransport` whose handler hands back prebuilt responses.

    python bench/use_cassette_replay.py [--n 2000] [--rounds 5] [--vcrpy-requests K] [--save]

`--vcrpy-requests K` replays only K requests with vcrpy, for a machine too loaded to wait for
all of them, and estimates the whole replay, marked as such. vcrpy finds a request's answer by
scanning the recorded interactions in order, so a request costs more the later its match sits
in the cassette (a + b x position): the K requests are spread evenly over the positions, each
is timed on its own, the line is fitted to them, and the total is the sum of that line over
all N positions plus the cassette's opening.

Goals: use_cassette at least 100 times faster than vcrpy end to end; per request within 2x
of the MockTransport floor. Writes bench/results/use_cassette_replay.json only with --save.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import vcr
from replay_cassette_2k import make_cassette

from realprobe.cassettes.importers import load_cassette
from realprobe.cassettes.session import use_cassette

RESULTS = Path(__file__).resolve().parent / "results" / "use_cassette_replay.json"


def run_requests(urls: list[str]) -> list[bytes]:
    with httpx.Client() as client:  # the user's own client: no transport passed in
        return [client.get(u).content for u in urls]


def end_to_end_realprobe(path: Path, urls: list[str]) -> tuple[float, list[bytes]]:
    t0 = time.perf_counter()
    with use_cassette(path, record_mode="none"):
        bodies = run_requests(urls)
    return time.perf_counter() - t0, bodies


def end_to_end_vcrpy(path: Path, urls: list[str]) -> tuple[float, list[bytes]]:
    t0 = time.perf_counter()
    with vcr.use_cassette(str(path), serializer="json", record_mode="none"):
        bodies = run_requests(urls)
    return time.perf_counter() - t0, bodies


def vcrpy_load(path: Path) -> float:
    """vcrpy's cost of opening the cassette with no request made."""
    t0 = time.perf_counter()
    with vcr.use_cassette(str(path), serializer="json", record_mode="none") as cassette:
        len(cassette)
    return time.perf_counter() - t0


def vcrpy_estimate(path: Path, urls: list[str], k: int) -> dict[str, Any]:
    """vcrpy's whole replay estimated from `k` requests spread over the match positions:
    each timed alone, a + b x position fitted, summed over every position, plus opening."""
    n = len(urls)
    positions = sorted({round(j * (n - 1) / max(1, k - 1)) for j in range(k)})
    times = []
    with vcr.use_cassette(str(path), serializer="json", record_mode="none"), \
            httpx.Client() as client:
        for i in positions:
            t0 = time.perf_counter()
            client.get(urls[i]).content  # noqa: B018
            times.append(time.perf_counter() - t0)
    b, a = np.polyfit(np.array(positions, dtype=float), np.array(times), 1)
    load = vcrpy_load(path)
    total = load + n * a + b * n * (n - 1) / 2
    return {"total_s": float(total), "open_s": load, "per_request_at_0_ms": a * 1e3,
            "per_request_per_position_us": b * 1e6, "timed_positions": len(positions)}


def per_request_realprobe(path: Path, urls: list[str], client: httpx.Client) -> float:
    """Seconds per request once the cassette is open (the loop only)."""
    with use_cassette(path, record_mode="none"):
        t0 = time.perf_counter()
        for u in urls:
            client.get(u).content  # noqa: B018
        return (time.perf_counter() - t0) / len(urls)


def per_request_mock(handler: Callable[[httpx.Request], httpx.Response], urls: list[str]) -> float:
    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        t0 = time.perf_counter()
        for u in urls:
            client.get(u).content  # noqa: B018
        return (time.perf_counter() - t0) / len(urls)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--vcrpy-requests", type=int, default=0,
                    help="replay only the first K requests with vcrpy and scale (0: all)")
    ap.add_argument("--save", action="store_true", help="write bench/results/...json")
    args = ap.parse_args()
    warnings.simplefilter("ignore", DeprecationWarning)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c2k.json"
        urls = make_cassette(path, args.n)
        rp_s, rp_bodies = end_to_end_realprobe(path, urls)
        print(f"use_cassette: {args.n} requests replayed in {rp_s:.3f} s", flush=True)
        k = args.vcrpy_requests if 0 < args.vcrpy_requests < args.n else args.n
        fit: dict[str, Any] = {}
        if k < args.n:
            fit = vcrpy_estimate(path, urls, k)
            vc_s = fit["total_s"]
            print(f"vcrpy:        {fit['timed_positions']} requests timed across the cassette; "
                  f"all {args.n} estimated at {vc_s:.1f} s", flush=True)
        else:
            vc_s, vc_bodies = end_to_end_vcrpy(path, urls)
            assert rp_bodies == vc_bodies, "the two replays served different bodies"
            print(f"vcrpy:        {args.n} requests replayed in {vc_s:.3f} s", flush=True)

        # the floor: prebuilt responses (status, headers, body) handed back by a MockTransport
        prebuilt = {
            httpx.URL(c.uri): (c.status or 200, list(c.headers), c.body)
            for c in load_cassette(path).calls
        }

        def handler(request: httpx.Request) -> httpx.Response:
            status, headers, body = prebuilt[request.url]
            return httpx.Response(status, headers=headers, content=body)

        rp_req, mock_req = [], []
        with httpx.Client() as client:  # created before the cassette opens: still captured
            for _ in range(args.rounds):
                rp_req.append(per_request_realprobe(path, urls, client))
                mock_req.append(per_request_mock(handler, urls))
    rp_us, mock_us = min(rp_req) * 1e6, min(mock_req) * 1e6
    out = {
        "interactions": args.n,
        "use_cassette_replay_s": round(rp_s, 4),
        "vcrpy_replay_s": round(vc_s, 3),
        "speedup_vs_vcrpy": round(vc_s / rp_s, 1),
        "use_cassette_per_request_us": round(rp_us, 1),
        "mock_transport_per_request_us": round(mock_us, 1),
        "ratio_to_mock_floor": round(rp_us / mock_us, 2),
        "rounds": args.rounds,
        "vcrpy_requests_timed": k,
        "vcrpy_estimated": k < args.n,
        **({"vcrpy_fit": {key: round(v, 4) for key, v in fit.items()}} if fit else {}),
        "vcrpy_version": vcr.__version__,
        "httpx_version": httpx.__version__,
        "python": platform.python_version(),
        "note": "end to end: one run each, same cassette file and same plain httpx.Client code, "
                "times include loading the cassette; per request: best of the rounds, loop only",
    }
    print(json.dumps(out, indent=2))
    if args.save:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
