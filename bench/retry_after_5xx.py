"""Retry-After on server errors, round trip over HTTP: a loopback API answers SERVER_ERRORs
(500, 502, 503, 504) of which 30% carry Retry-After; calibrate measures the share; the
simulator (through the real render path and the client's header parsing) sends it back; the
second calibration's share is compared with the first's 95% interval, over several seeds.

    python bench/retry_after_5xx.py [--seeds 5] [--save]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

RESULTS = Path(__file__).parent / "results" / "retry_after_5xx.json"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--save", action="store_true")
    args = parser.parse_args()
    from loopback_api import catfact_on_loopback
    from probe_helpers import probe
    from test_stats_outages import SERVER_ANSWERS

    import realprobe
    from realprobe import open_db
    from realprobe.errors import ErrorCode
    from realprobe.probes.calibrate import calibrate
    from realprobe.probes.stats import stats_from_db

    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "live.db"
        with catfact_on_loopback(min_interval_s=0.0, answers=SERVER_ANSWERS) as api:
            tool = api.api.tools[0].name
            probe(api.catalog, [api.catalog.get(tool)], 200, realprobe.TransportOptions(), db, 5)
        _, rep = stats_from_db(open_db(db))
        prof = calibrate(rep, db=open_db(db))
        first = prof.tools[tool].retry_after[ErrorCode.SERVER_ERROR]
        assert first.share_ci95 is not None
        out["first"] = {"n": first.n, "share": first.share, "share_ci95": first.share_ci95}
        print(f"loopback: {first.n} SERVER_ERRORs, Retry-After share {first.share:.3f} "
              f"[{first.share_ci95[0]:.3f}, {first.share_ci95[1]:.3f}]")
        again = []
        for seed in range(args.seeds):
            db2 = Path(tmp) / f"sim{seed}.db"
            sim = realprobe.TransportOptions(mode=realprobe.Mode.SIMULATE, profile=prof, seed=seed)
            realprobe.probe([tool], rounds=600, db=db2, target=sim, catalog=api.catalog,
                            politeness="off")
            _, rep2 = stats_from_db(open_db(db2))
            ra = calibrate(rep2, db=open_db(db2)).tools[tool].retry_after[ErrorCode.SERVER_ERROR]
            inside = first.share_ci95[0] <= ra.share <= first.share_ci95[1]
            again.append({"seed": seed, "n": ra.n, "share": round(ra.share, 4), "inside": inside})
            print(f"  seed {seed}: {ra.n} SERVER_ERRORs, share {ra.share:.3f} "
                  f"({'inside' if inside else 'OUTSIDE'} the first interval)")
        out["simulated"] = again
    if args.save:
        RESULTS.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
