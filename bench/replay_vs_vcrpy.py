"""Replay a 2,000-interaction cassette end to end (load + every request + every body),
realprobe's ReplayTransport vs vcrpy 9.x, on the same cassette file and the same
httpx.AsyncClient, in one run.

    python bench/replay_vs_vcrpy.py [--n 2000]

Prints the numbers; with --save also writes bench/results/replay_vs_vcrpy.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import tempfile
import time
import warnings
from pathlib import Path

import httpx
import vcr
from replay_cassette_2k import make_cassette

from realprobe.cassettes.replayer import ReplayTransport

RESULTS = Path(__file__).resolve().parent / "results" / "replay_vs_vcrpy.json"


async def replay_realprobe(path: Path, urls: list[str]) -> tuple[float, list[bytes]]:
    t0 = time.perf_counter()
    transport = ReplayTransport.from_path(path)
    async with httpx.AsyncClient(transport=transport) as client:
        bodies = [(await client.get(u)).content for u in urls]
    return time.perf_counter() - t0, bodies


async def replay_vcrpy(path: Path, urls: list[str]) -> tuple[float, list[bytes]]:
    t0 = time.perf_counter()
    with vcr.use_cassette(str(path), serializer="json", record_mode="none"):
        async with httpx.AsyncClient() as client:
            bodies = [(await client.get(u)).content for u in urls]
    return time.perf_counter() - t0, bodies


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument(
        "--save", action="store_true", help="write bench/results/ (otherwise only print)"
    )
    args = ap.parse_args()
    warnings.simplefilter("ignore", DeprecationWarning)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c2k.json"
        t0 = time.perf_counter()
        urls = make_cassette(path, args.n)
        record_s = time.perf_counter() - t0
        size = path.stat().st_size
        rp_s, rp_bodies = asyncio.run(replay_realprobe(path, urls))
        print(f"realprobe: {args.n} requests replayed in {rp_s:.3f} s", flush=True)
        vc_s, vc_bodies = asyncio.run(replay_vcrpy(path, urls))
        print(f"vcrpy:     {args.n} requests replayed in {vc_s:.3f} s", flush=True)
    assert rp_bodies == vc_bodies, "the two replays served different bodies"
    out = {
        "interactions": args.n,
        "cassette_bytes": size,
        "record_through_sandbox_s": round(record_s, 3),
        "realprobe_replay_s": round(rp_s, 4),
        "realprobe_per_request_us": round(rp_s / args.n * 1e6, 1),
        "vcrpy_replay_s": round(vc_s, 3),
        "vcrpy_per_request_ms": round(vc_s / args.n * 1e3, 2),
        "speedup": round(vc_s / rp_s, 1),
        "vcrpy_version": vcr.__version__,
        "httpx_version": httpx.__version__,
        "python": platform.python_version(),
        "note": "one run each, same cassette file and same httpx.AsyncClient settings; "
                "times include loading the cassette",
    }
    print(json.dumps(out, indent=2))
    if args.save:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
