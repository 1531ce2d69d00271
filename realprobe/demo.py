"""The main job end to end, offline: a loopback sandbox, every tool once, probes into SQLite,
statistics, a calibrated profile, a report, and the shipped real-world task cassettes replayed
with the reference agent. `realprobe demo` prints each step; this module does them."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from realprobe import api
from realprobe.errors import no_other_keywords, renamed_keyword
from realprobe.ranges import checked

if TYPE_CHECKING:
    from realprobe.probes.runner import RunSummary
    from realprobe.probes.stats import StatsReport
    from realprobe.result import ToolResult
    from realprobe.tasks.batch import TaskBatchResult

#: (step title, what the step produced); the CLI prints it
OnStep = Callable[[str, Any], None]


@dataclass
class DemoResult:
    out: Path
    db: Path
    profile: Path
    report: Path
    sandbox_url: str = ""
    calls: list[ToolResult] = field(default_factory=list)
    probe: RunSummary | None = None
    stats: StatsReport | None = None
    tasks: TaskBatchResult | None = None


def fresh_db(out: Path) -> Path:
    """`out/demo.db`, with any earlier demo database (and its WAL files) removed."""
    out.mkdir(exist_ok=True)  # its folder must exist: nothing is made silently
    db = out / "demo.db"
    for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        stale.unlink(missing_ok=True)
    return db


@checked
def run_demo(
    output: str | Path = "realprobe-demo",
    *,
    profile: str = "published",
    rounds: int = 5,
    seed: int = 0,
    timeout: float = 2.0,
    on_step: OnStep | None = None,
    **old: Any,
) -> DemoResult:
    """Run every step; files land in the folder `output` (demo.db, profile.json,
    report.html; `out=` is its old name)."""
    out = renamed_keyword(old, "out", "output", output)
    no_other_keywords(old, "output")
    step = on_step or (lambda title, value: None)
    folder = Path(out)
    res = DemoResult(folder, fresh_db(folder), folder / "profile.json", folder / "report.html")
    from realprobe.sandbox.server import running

    catalog = api.load_catalog()
    # every tool once and the probe both mostly wait on the sandbox (its latencies, and hangs
    # that last the whole deadline), so they run at the same time, each against its own
    # sandbox with its own seeded stream: the same seed gives the same output, and the
    # answers of one never shift the draws of the other
    shown = api.make_sandbox(profile, seed=seed, catalog=catalog)
    shown.runtime.reseed(f"{seed}:call-all")
    with api.sandbox_running(profile, seed=seed, catalog=catalog) as url, running(shown) as once:
        res.sandbox_url = url
        step("sandbox", url)
        with ThreadPoolExecutor(1, thread_name_prefix="realprobe-demo-probe") as pool:
            probing = pool.submit(
                api.probe, None, rounds=rounds, target=api.options(sandbox=url), db=res.db,
                timeout=timeout, politeness="off", seed=seed, catalog=catalog,
            )
            res.calls = api.call_all(target=api.options(sandbox=once), timeout=timeout,
                                     catalog=catalog)
            step("call-all", res.calls)
            res.probe = probing.result()
        step("probe", res.probe)
    res.stats = api.stats(res.db)
    step("stats", res.stats)
    prof = api.calibrate(res.db, from_stats=res.stats)
    prof.save(res.profile)
    step("calibrate", res.profile)
    data = api.build_report(res.db, stats=res.stats)
    api.write_report(data, res.report)
    step("report", res.report)
    res.tasks = api.run_tasks(all=True, agent="reference", mode="replay", db=res.db,
                              catalog=catalog)
    step("tasks", res.tasks)
    return res


__all__ = ["DemoResult", "run_demo"]
