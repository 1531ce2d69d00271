"""What parsing JSON under the input limits costs beside a bare `json.loads`: for every JSON
response body of the real recordings in tests/data/realworld_cassettes, for a body of many
small objects (more brackets than the depth limit, so their depth is counted: over the text by
`text_depth`, beside the walk over the parsed value it replaced), and to refuse a body nested
5,000 deep. Median
milliseconds of `--repeat` runs, wall clock on the machine as it is (its load average is
saved with them).

    python bench/json_limits.py [--repeat 30] [--save]
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib import bench_args, emit, load_average

import realprobe
from realprobe.limits import check_nesting, json_or_none, text_depth

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "json_limits.json"


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1e3, 4)


def real_bodies() -> list[bytes]:
    """The JSON response bodies of the real recordings (third-party Ruby VCR cassettes)."""
    out = []
    for path in sorted((ROOT / "tests/data/realworld_cassettes").glob("*.yaml")):
        for call in realprobe.load_cassette(path).calls:
            if call.body and json_or_none(call.body) is not None:
                out.append(call.body)
    return out


def costs(body: bytes, repeat: int) -> dict[str, Any]:
    value = json.loads(body)
    return {"bytes": len(body),
            "json.loads": median_ms(lambda: json.loads(body), repeat),
            "json_or_none": median_ms(lambda: json_or_none(body), repeat),
            "check_nesting alone": median_ms(lambda: check_nesting(value, "b"), repeat),
            "text_depth alone": median_ms(lambda: text_depth(body), repeat)}


def main() -> None:
    args = bench_args(__doc__, repeat=30)
    before = load_average()
    many = json.dumps([{"id": i, "name": f"n{i}", "tags": ["a", "b"], "at": {"x": [1, {"y": 2}]}}
                       for i in range(3000)]).encode()
    deep = b"[" * 5000 + b"]" * 5000
    bodies = real_bodies()
    real = [costs(b, args.repeat) for b in bodies]
    out = {
        "real_bodies": len(real),
        "real_total_ms": {k: round(sum(r[k] for r in real), 3)
                          for k in ("json.loads", "json_or_none")},
        "real_largest": max(real, key=lambda r: r["bytes"]) if real else None,
        "many_small_objects": costs(many, args.repeat),
        "refuse_5000_deep_ms": median_ms(lambda: json_or_none(deep), args.repeat),
    }
    emit(out, args.save, RESULTS, before)


if __name__ == "__main__":
    main()
