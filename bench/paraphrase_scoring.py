"""A prompt-following agent's full-success rate per paraphrase level (ReliabilityBench's
epsilon), scored two ways: by the workflow's data flow (realprobe's rule: a step after the
steps it reads, the output last) and by the workflow's total order (the seed code's rule).

The agent is the reference agent under the `baseline` prompt: no workflow is shown, so it
does the steps in the order the task's text names them (each after the steps whose outputs
it reads). Level 2 reorders the text's items, so under the total-order rule the scorer, not
the agent, loses runs. Calm simulator, every shipped task, virtual clock.

    python bench/paraphrase_scoring.py [--repeat 3] [--save]
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchlib import bench_args, emit, load_average

from realprobe.adapters import default_catalog
from realprobe.tasks.batch import TaskBatch
from realprobe.tasks.paraphrase import missing_items, paraphrase_text
from realprobe.tasks.scoring import _first_success


def total_order_full(res: Any, task: Any) -> bool:
    """Full under the seed code's rule: first successes in the workflow's list order."""
    firsts = [_first_success(res.state.steps, s.tools()) for s in task.workflow.steps]
    return res.row["outcome"] == "full" and None not in firsts and firsts == sorted(firsts)


def main() -> None:
    args = bench_args(__doc__, repeat=3)
    load, t0 = load_average(), time.perf_counter()
    catalog = default_catalog()
    out: dict[str, Any] = {"agent": "reference", "prompt": "baseline", "profile": "calm",
                           "levels": {}}
    for eps in (0, 1, 2):
        batch = TaskBatch.plan([], all=True, catalog=catalog, profile="calm",
                               prompt="baseline", paraphrase=eps, repeat=args.repeat)
        runs = batch.run().runs
        tasks = {t.instance_id: t for t in batch.tasks}
        n = len(runs)
        out["levels"][str(eps)] = {
            "runs": n,
            "full_by_data_flow": round(sum(r.row["outcome"] == "full" for r in runs) / n, 3),
            "full_by_total_order": round(
                sum(total_order_full(r, tasks[r.row["task"]]) for r in runs) / n, 3),
            "texts_missing_an_item": sum(
                bool(missing_items(t, paraphrase_text(t.description, eps)))
                for t in tasks.values()),
        }
    out["seconds"] = round(time.perf_counter() - t0, 1)
    emit(out, args.save, Path(__file__).parent / "results" / "paraphrase_scoring.json", load)


if __name__ == "__main__":
    main()
