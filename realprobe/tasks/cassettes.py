"""Regenerate the shipped task cassettes: `python -m realprobe.tasks.cassettes [--out DIR]`
(`--task NAME`, repeatable: record only those tasks, keeping the other cassettes;
`--profile calm` records the reference solution with no faults).

Each task run of the reference agent (optimal workflow) is recorded against a loopback
sandbox under a profile (`published` unless told), one cassette per run. These are sandbox
recordings: the bodies are the catalogue's fixture bodies (real responses, each with its
source in the catalogue) and the faults are drawn by the simulator, not measured on the
internet. `realprobe run --all --agent reference --mode replay` replays them.
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


def record(
    out: Path, *, seed: int = 0, repeat: int = 1, names: list[str] | None = None,
    profile: str = PROFILE,
) -> list[str]:
    """Record every task into a fresh `out`, or only `names` (their old cassettes replaced)
    next to what `out` holds (its README's table keeps the other rows), the sandbox serving
    `profile`."""
    catalog = default_catalog()
    tasks = list(load_tasks(default_tasks_dir()).values())
    kept: list[str] = []
    if names:
        tasks = [t for t in tasks if t.instance_id in names]
        readme = out / "README.md"
        old = readme.read_text(encoding="utf-8").splitlines() if readme.exists() else []
        kept = [row + "\n" for row in old if row.startswith("| ") and "__" in row
                and row.split("__", 1)[0][2:] not in names]
        for name in names:  # recorded again: a recording never replaces a cassette itself
            for old_file in out.glob(f"{name}__*.json"):
                old_file.unlink()
    elif out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    sandbox = Sandbox(
        routes_from_catalog(catalog),
        load_profile(profile),
        seed=SANDBOX_SEED,
        latency_scale=LATENCY_SCALE,
    )
    with running(sandbox) as url:
        cfg = RunConfig(
            agent="reference",
            prompts=["optimal"],
            mode=Mode.RECORD,
            sandbox=url,  # the sandbox plays the profile: a run sets no profile of its own
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
        "against the loopback sandbox under the profile its row names (sandbox seed "
        f"{SANDBOX_SEED}, latency x{LATENCY_SCALE}, call deadline {CALL_TIMEOUT_S:g} s): "
        "`published` runs meet the simulator's faults, `calm` runs are the reference "
        "solution with none. Bodies are the catalogue's fixture bodies (real responses, "
        "each with its source in the catalogue) and the faults were drawn by the "
        "simulator: these are not live internet recordings.\n\n"
        "Replay: `realprobe run --all --agent reference --mode replay`.\n"
        "Regenerate: `python -m realprobe.tasks.cassettes [--profile calm] [--task NAME]`."
        "\n\n"
        "| run | outcome | calls | retries | fallbacks | profile |\n|---|---|---|---|---|---|\n"
        + "".join(sorted(kept + [
            f"| {Path(r.row['cassette']).stem} | {r.row['outcome']} | {r.row['tool_calls']} | "
            f"{r.row['retries']} | {r.row['fallbacks']} | {profile} |\n"
            for r in results
        ])),
    )
    return [f"{r.row['task']}: {r.row['outcome']}" for r in results]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=shipped_cassettes())
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--task", action="append", help="record only this task (repeatable)")
    parser.add_argument("--profile", default=PROFILE, help="the sandbox's profile")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    for line in record(args.out, seed=args.seed, names=args.task, profile=args.profile):
        print(line)
    print(f"recorded into {args.out} in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
