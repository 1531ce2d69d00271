"""Regenerate the shipped task cassettes: `python -m realprobe.tasks.cassettes [--out DIR]`.

Each task run of the reference agent (optimal workflow) is recorded against a loopback
sandbox under the `published` profile, one cassette per run. These are sandbox recordings:
the bodies are the catalogue's fixture bodies and the faults are drawn by the simulator, not
measured on the internet. `realprobe run --all --agent reference --mode replay` replays them.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import time
from pathlib import Path

from realprobe.adapters import default_catalog
from realprobe.clients import Mode
from realprobe.http.simulate import routes_from_catalog
from realprobe.outputs import write_output
from realprobe.sandbox.server import Sandbox, running
from realprobe.simulator.profile import load_profile
from realprobe.tasks.model import default_tasks_dir, load_tasks
from realprobe.tasks.runner import RunConfig, run_batch, shipped_cassettes

PROFILE = "published"
SANDBOX_SEED = 0
LATENCY_SCALE = 0.1  # answers arrive 10x faster than the profile says: a quick recording
CALL_TIMEOUT_S = 2.0  # a hang costs 2 s of real time while recording


def record(out: Path, *, seed: int = 0, repeat: int = 1) -> list[str]:
    catalog = default_catalog()
    tasks = list(load_tasks(default_tasks_dir()).values())
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    sandbox = Sandbox(
        routes_from_catalog(catalog),
        load_profile(PROFILE),
        seed=SANDBOX_SEED,
        latency_scale=LATENCY_SCALE,
    )
    with running(sandbox) as url:
        cfg = RunConfig(
            agent="reference",
            prompts=["optimal"],
            mode=Mode.RECORD,
            sandbox=url,
            profile=PROFILE,
            cassette=out,
            repeat=repeat,
            seed=seed,
            call_timeout_s=CALL_TIMEOUT_S,
        )
        results = asyncio.run(run_batch(tasks, cfg, catalog))
    for f in out.glob("*.json"):
        f.chmod(0o644)  # shipped data: readable by everyone
    write_output(
        out / "README.md",
        "# Shipped task cassettes (sandbox recordings)\n\n"
        "One cassette per task run of the `reference` agent (optimal workflow), recorded "
        f"against the loopback sandbox under the `{PROFILE}` profile (sandbox seed "
        f"{SANDBOX_SEED}, latency x{LATENCY_SCALE}, call deadline {CALL_TIMEOUT_S:g} s). "
        "Bodies are the catalogue's fixture bodies and the faults were drawn by the "
        "simulator: these are not live internet recordings.\n\n"
        "Replay: `realprobe run --all --agent reference --mode replay`.\n"
        "Regenerate: `python -m realprobe.tasks.cassettes`.\n\n"
        "| run | outcome | calls | retries | fallbacks |\n|---|---|---|---|---|\n"
        + "".join(
            f"| {Path(r.row['cassette']).stem} | {r.row['outcome']} | {r.row['tool_calls']} | "
            f"{r.row['retries']} | {r.row['fallbacks']} |\n"
            for r in results
        ),
    )
    return [f"{r.row['task']}: {r.row['outcome']}" for r in results]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=shipped_cassettes())
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    for line in record(args.out, seed=args.seed):
        print(line)
    print(f"recorded into {args.out} in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
