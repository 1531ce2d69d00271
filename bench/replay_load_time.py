"""Cassette load time for 2,000 interactions, JSON vs YAML: realprobe's loader (safe YAML
loader, CSafeLoader when libyaml is present) and vcrpy's own, median of 7 runs each.

    python bench/replay_load_time.py [--n 2000]

Prints the numbers; with --save also writes bench/results/replay_load_time.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import yaml
from replay_cassette_2k import make_cassette
from vcr.cassette import Cassette as VcrCassette
from vcr.serializers import jsonserializer, yamlserializer

from realprobe.cassettes.cassette import save_cassette
from realprobe.cassettes.importers import load_cassette

RESULTS = Path(__file__).resolve().parent / "results" / "replay_load_time.json"
RUNS = 7


def median_s(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument(
        "--save", action="store_true", help="write bench/results/ (otherwise only print)"
    )
    args = ap.parse_args()
    warnings.simplefilter("ignore", DeprecationWarning)
    with tempfile.TemporaryDirectory() as tmp:
        js = Path(tmp) / "c.json"
        make_cassette(js, args.n)
        ym = Path(tmp) / "c.yaml"
        save_cassette(load_cassette(js), ym)
        out = {
            "interactions": args.n,
            "json_bytes": js.stat().st_size,
            "yaml_bytes": ym.stat().st_size,
            "libyaml": bool(getattr(yaml, "__with_libyaml__", False)),
            "realprobe_load_json_s": median_s(lambda: load_cassette(js)),
            "realprobe_load_yaml_s": median_s(lambda: load_cassette(ym)),
            "vcrpy_load_json_s": median_s(lambda: VcrCassette.load(
                path=str(js), serializer=jsonserializer, record_mode="none")),
            "vcrpy_load_yaml_s": median_s(lambda: VcrCassette.load(
                path=str(ym), serializer=yamlserializer, record_mode="none")),
            "runs": RUNS,
        }
    for k, v in list(out.items()):
        if k.endswith("_s"):
            out[k] = round(float(v), 4)
    out["yaml_over_json_realprobe"] = round(
        out["realprobe_load_yaml_s"] / out["realprobe_load_json_s"], 1)
    print(json.dumps(out, indent=2))
    if args.save:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
