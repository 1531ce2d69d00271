"""The task tables in the one SQLite file: `task_runs` (one row per run) and `task_steps`
(every tool call of a run). Added beside the probe tables through `realprobe.store.Store`."""

from __future__ import annotations

import json
from typing import Any

from realprobe.secrets import scrub_row
from realprobe.store import Store

TASK_RUNS_COLUMNS: dict[str, Any] = {
    "id": str,
    "batch": str,
    "started_at": str,
    "task": str,
    "task_type": str,
    "agent": str,
    "model": str,
    "prompt": str,  # baseline | cot | optimal | flawed:<type>
    "flaw": str,  # the flaw type, or null
    "mode": str,  # live | record | replay | simulate
    "profile": str,  # simulator profile or sandbox URL
    "seed": int,
    "run_seed": int,
    "repeat": int,
    "outcome": str,  # full | partial | failure | error
    "score": float,  # 1.0 / 0.6 / 0.0
    "grounded": int,
    "strict": int,
    "turns": int,
    "tool_calls": int,
    "failures": int,  # failed API calls met
    "retries": int,
    "fallbacks": int,
    "optimal_calls": int,  # calls a failure-free run of the optimal workflow makes
    "tokens_in": int,
    "tokens_out": int,
    "wall_s": float,  # real seconds
    "clock_s": float,  # seconds on the run's clock (virtual in simulate/replay)
    "termination": str,
    "reasons": str,  # JSON list
    "conditions": str,  # JSON object
    "artifact": str,
    "final_message": str,
    "cassette": str,
}

TASK_STEPS_COLUMNS: dict[str, Any] = {
    "id": int,
    "run_id": str,
    "idx": int,
    "turn": int,
    "step_id": str,
    "tool": str,
    "kind": str,  # api | output | unknown | malformed
    "role": str,  # call | retry | fallback
    "args": str,  # JSON
    "ok": int,
    "error_code": str,
    "message": str,
    "http_status": int,
    "retry_after": float,
    "latency_ms": float,
    "result": str,  # JSON of the data (truncated)
}


class TaskStore:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.db = store.db
        self.ensure_schema()

    def ensure_schema(self) -> None:
        names = self.db.table_names()
        if "task_runs" not in names:
            runs = self.db["task_runs"]
            runs.create(TASK_RUNS_COLUMNS, pk="id")  # type: ignore[union-attr]
            runs.create_index(["agent", "prompt"])  # type: ignore[union-attr]
            runs.create_index(["batch"])  # type: ignore[union-attr]
        if "task_steps" not in names:
            steps = self.db["task_steps"]
            steps.create(TASK_STEPS_COLUMNS, pk="id", foreign_keys=[("run_id", "task_runs", "id")])  # type: ignore[union-attr]
            steps.create_index(["run_id", "idx"])  # type: ignore[union-attr]

    def insert_run(self, row: dict[str, Any], steps: list[dict[str, Any]]) -> None:
        """One run and its steps; secrets (the LLM key, secret arguments, keys in URLs or in
        the final message) are scrubbed before anything reaches the file."""
        row = scrub_row(row)
        steps = [scrub_row(s) for s in steps]
        row = {k: json.dumps(v) if isinstance(v, list | dict) else v for k, v in row.items()}
        with self.db.conn:
            self.db["task_runs"].insert(row)  # type: ignore[union-attr]
            if steps:
                self.db["task_steps"].insert_all(steps)  # type: ignore[union-attr]

    def runs(self, batch: str | None = None) -> list[dict[str, Any]]:
        if "task_runs" not in self.db.table_names():
            return []
        where, params = ("batch = ?", [batch]) if batch else (None, None)
        return list(self.db["task_runs"].rows_where(where, params, order_by="started_at"))

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        return list(self.db["task_steps"].rows_where("run_id = ?", [run_id], order_by="idx"))
