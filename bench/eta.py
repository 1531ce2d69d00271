"""How far the progress bar's ETA is from the real remaining time, on real runs on this
machine: a probe of every tool through the published sandbox (2 s deadline, so hangs wait it
out) with the catalogue's politeness and without it (calls side by side), and sweeps of the
fourteen shipped tasks with the reference agent through the sandbox (real latencies, runs of
0.3 to 80 s: each hang the agent meets costs it its 10 s tool deadline). The sweep's bar plays
each run in the simulator as the sandbox's seed decides it (`modelled_seconds`); each sweep
also reports how far the runs' real times were from those modelled (`run_over_model`: the
median and extremes of real / modelled, runs of at least a second).

    python bench/eta.py [--sweep-seeds 5] [--save]     # writes bench/results/eta.json

The ETA is what the command line's bar shows (`LiveCounts` for the probe, with the model of
the sandbox's profile the command line gives it; `SweepProgress` for the sweep, which asks
the sandbox for its profile as the command does), fed by the run's own callbacks and read ten
times a second as the bar redraws it. Its error is (estimate - actual) / actual, from 20% of
the run's time to 90% (in the last tenth a second is a large share of what is left; those
moments are counted apart). The range the bar shows beside it (10th to 90th percentile) is
read at the same moments: `range_coverage` is the share of them at which it held the real
time left, `range_width` the median of (high - low) / actual. The old estimate, time so far
x items left / items done, is read at the same moments too.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import bench_args, emit, load_average

ROOT = Path(__file__).resolve().parent.parent

#: (seconds since the start, the ETA, items done, its range) at each reading
Reading = tuple[float, float | None, int, tuple[float, float] | None]


class Reader:
    """Reads `eta()` ten times a second in a thread of its own, as the bar does; the run ends
    when its last item does (`mark` at each), not when the call returns."""

    def __init__(self, eta: Callable[[], Any], done: Callable[[], int]) -> None:
        self.eta, self.done = eta, done
        self.readings: list[Reading] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.end = 0.0

    def mark(self, *_: object) -> None:
        self.end = time.monotonic() - self.t0

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            eta = self.eta()
            self.readings.append((time.monotonic() - self.t0, eta.remaining(), self.done(),
                                  eta.spread()))

    def __enter__(self) -> Reader:
        self.t0 = time.monotonic()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def errors(readings: list[Reading], end: float, total: int) -> dict[str, Any]:
    """The ETA's and the old estimate's errors from 20% to 90% of the run, and in its last
    tenth."""
    ours, old, tail, held, widths = [], [], [], [], []
    for t, est, done, spread in readings:
        actual = end - t
        if est is None or t < 0.2 * end or actual <= 0:
            continue  # before 20%, or after the last item ended
        (tail if t > 0.9 * end else ours).append((est - actual) / actual)
        if t <= 0.9 * end:
            held.append(spread is not None and spread[0] <= actual <= spread[1])
            widths.append(0.0 if spread is None else (spread[1] - spread[0]) / actual)
        if t <= 0.9 * end and done:
            old.append((t * (total - done) / done - actual) / actual)
    return {"error": quantiles(ours), "old_rate_estimate_error": quantiles(old),
            "last_tenth_error": quantiles(tail),
            "range_coverage": round(sum(held) / len(held), 3) if held else None,
            "range_width": round(sorted(widths)[len(widths) // 2], 3) if widths else None}


def quantiles(errors: list[float]) -> dict[str, Any]:
    e = sorted(errors)
    if not e:
        return {"samples": 0}
    return {"samples": len(e), "min": round(e[0], 3), "median": round(e[len(e) // 2], 3),
            "max": round(e[-1], 3),
            "share_within_25pct": round(sum(abs(x) <= 0.25 for x in e) / len(e), 3)}


def eta_probe(rounds: int, polite: bool) -> dict[str, Any]:
    from realprobe import api
    from realprobe.commands.common import PolitenessChoice, load_catalog
    from realprobe.commands.probes import LiveCounts, probe_model, probe_plan

    cat = load_catalog(None)
    choice = PolitenessChoice.CATALOG if polite else PolitenessChoice.OFF
    with tempfile.TemporaryDirectory() as tmp, api.sandbox_running("published", seed=1) as url:
        target = api.options(sandbox=url)
        plan, lanes, workers = probe_plan(list(cat), rounds, target, choice)
        model, exact = probe_model(list(cat), rounds, target, 2.0, seed=1)
        live = LiveCounts(plan, "probing", enabled=False, lanes=lanes, workers=workers or 32,
                          deadline=2.0, model=model, exact=exact)
        with Reader(lambda: live.eta, lambda: live.ok + live.err) as reader:

            def on_call(row: dict[str, Any], result: Any) -> None:
                live(row, result)
                reader.mark()

            api.probe(None, rounds=rounds, target=target, db=Path(tmp) / "p.db", timeout=2.0,
                      politeness=choice.value, seed=1, concurrency=32, on_call=on_call,
                      on_start=live.started)
    return {"seconds": round(reader.end, 1), "calls": len(plan), "polite": polite,
            "calls_modelled_one_by_one": sum(map(len, live.exact.values())),
            **errors(reader.readings, reader.end, len(plan))}


def eta_sweep(seed: int, concurrency: int = 4) -> dict[str, Any]:
    from realprobe import api
    from realprobe.commands.sweep import SweepProgress

    with tempfile.TemporaryDirectory() as tmp, api.sandbox_running("published",
                                                                   seed=seed) as url:
        sweep = Path(tmp) / "s.toml"
        sweep.write_text(f'prompts = ["optimal"]\nagents = ["reference"]\nrepeats = 2\n\n'
                         f'[[targets]]\nkind = "sandbox"\nurl = "{url}"\n')
        progress = SweepProgress(disable=True, workers=concurrency, estimate=True)
        walls: list[tuple[str, float]] = []  # (kind, seconds) of each run
        with Reader(lambda: progress.eta, lambda: progress.eta.done) as reader:

            def on_done(run: Any) -> None:
                progress.finished(run)
                reader.mark()
                walls.append((progress.kind_of.get(str(run.row.get("resume_key")), ""),
                               float(run.row.get("wall_s") or 0.0)))

            result = api.sweep(sweep, db=Path(tmp) / "s.db", concurrency=concurrency,
                               on_planned=progress.planned, on_plan=progress.plan,
                               on_done=on_done)
    runs = result.summary.ran
    prior = progress.eta.prior
    ratios = sorted(wall / prior[k][0] for k, wall in walls
                    if len(prior.get(k, ())) == 1 and prior[k][0] >= 1.0)
    return {"seconds": round(reader.end, 1), "runs": runs, "workers": concurrency,
            "sandbox_seed": seed, "prior": bool(prior),
            "runs_modelled_one_by_one": sum(len(v) == 1 for v in prior.values()),
            "run_over_model": {"runs": len(ratios), "min": round(ratios[0], 3),
                               "median": round(ratios[len(ratios) // 2], 3),
                               "max": round(ratios[-1], 3)} if ratios else None,
            **errors(reader.readings, reader.end, runs)}


def pooled(parts: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Weighted by samples: the share within ±25% (and, for the ETA, the range's coverage)
    and the range over the sweeps."""
    n = sum(p[key]["samples"] for p in parts)
    if not n:
        return {"samples": 0}

    def weighted(get: Any) -> float:
        return round(sum(get(p) * p[key]["samples"] for p in parts) / n, 3)

    out = {"samples": n, "share_within_25pct": weighted(lambda p: p[key]["share_within_25pct"]),
           "medians": sorted(p[key]["median"] for p in parts),
           "min": min(p[key]["min"] for p in parts), "max": max(p[key]["max"] for p in parts)}
    if key == "error":
        out["range_coverage"] = weighted(lambda p: p["range_coverage"])
    return out


def main() -> None:
    args = bench_args(__doc__, sweep_seeds=5)
    load = load_average()
    out: dict[str, Any] = {
        "probe_polite": eta_probe(rounds=3, polite=True),
        "probe_side_by_side": eta_probe(rounds=10, polite=False),
    }
    sweeps = [eta_sweep(seed) for seed in range(2, 2 + args.sweep_seeds)]
    out["sweeps"] = sweeps
    out["sweep"] = {k: pooled(sweeps, k) for k in ("error", "old_rate_estimate_error")}
    emit(out, args.save, ROOT / "bench" / "results" / "eta.json", load)


if __name__ == "__main__":
    main()
