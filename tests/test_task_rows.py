"""Task runs and steps enter the store under the same rules as probe rows: finite numbers,
a start that is a time and not in the future, known kinds, bounded text."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from realprobe import Store
from realprobe.store import RowRefused, iso_utc
from realprobe.tasks.store import TaskStore


def run_row(**over: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": "r1", "batch": "b", "started_at": iso_utc(1_700_000_000.0), "task": "t",
        "agent": "reference", "model": "-", "prompt": "optimal", "outcome": "full",
        "score": 1.0, "wall_s": 0.5, "target_kind": "simulate", "target": "simulate:calm",
    }
    return {**row, **over}


def step_row(**over: Any) -> dict[str, Any]:
    return {"run_id": "r1", "idx": 0, "tool": "agify_age", "ok": 1, "latency_ms": 12.0, **over}


@pytest.mark.parametrize(
    ("run", "steps", "reason"),
    [
        (run_row(score=math.nan), [], "bad_number"),
        (run_row(wall_s=math.inf), [], "bad_number"),
        (run_row(started_at=iso_utc(32_503_680_000.0)), [], "future_time"),  # the year 3000
        (run_row(started_at="yesterday"), [], "bad_time"),
        (run_row(target_kind="elsewhere"), [], "unknown_kind"),
        (run_row(colour="red"), [], "unknown_column"),
        (run_row(), [step_row(latency_ms=-math.inf)], "bad_number"),
        (run_row(), [step_row(idx=1.5)], "bad_number"),
        (run_row(tokens_in=10**30), [], "bad_number"),  # past 64 bits (an OverflowError)
    ],
)
def test_a_bad_task_row_is_refused_and_nothing_is_written(
    tmp_path: Path, run: dict[str, Any], steps: list[dict[str, Any]], reason: str
) -> None:
    with Store(tmp_path / "t.db") as store:
        tasks = TaskStore(store)
        with pytest.raises(RowRefused) as info:
            tasks.insert_run(run, steps)
        assert info.value.reason == reason
        assert tasks.runs() == [] and tasks.steps("r1") == []


def test_a_good_task_row_is_stored_with_long_text_cut(tmp_path: Path) -> None:
    with Store(tmp_path / "t.db") as store:
        tasks = TaskStore(store)
        tasks.insert_run(run_row(final_message="x" * 100_000), [step_row()])
        (stored,) = tasks.runs()
        assert stored["score"] == 1.0 and len(stored["final_message"]) <= 16_384
        assert [s["tool"] for s in tasks.steps("r1")] == ["agify_age"]
