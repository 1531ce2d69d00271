"""Regenerate the shipped cassettes: one round of every catalogue tool through the loopback
sandbox under the `published` profile, recorded into `cassettes/sandbox-published-round.json`.

    python bench/record_shipped_cassettes.py [--seed 0] [--timeout 2.0]

Same as `realprobe cassette record-round -o cassettes/sandbox-published-round.json`.
The cassette's metadata labels it a sandbox recording (source, profile, seed, date).
Replay it offline with `realprobe cassette replay-round`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from realprobe.adapters.catalog import default_catalog
from realprobe.cassettes.importers import load_cassette
from realprobe.sandbox.rounds import record_round

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=2.0)
    ap.add_argument("--out", type=Path, default=ROOT / "cassettes" / "sandbox-published-round.json")
    args = ap.parse_args()
    cat = default_catalog()
    results = record_round(cat, args.out, profile="published", seed=args.seed, timeout=args.timeout)
    cassette = load_cassette(args.out)
    failures = sum(1 for c in cassette.calls if c.error is not None)
    codes: dict[str, int] = {}
    for r in results:
        key = r.code.value if r.code else "ok"
        codes[key] = codes.get(key, 0) + 1
    summary = {
        "cassette": str(args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out),
        "tools": len(cat), "calls_recorded": len(cassette.calls),
        "ended_in_exception": failures, "results": codes, "meta": cassette.meta,
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
