"""The task tables in the one SQLite file: `task_runs` (one row per run) and `task_steps`
(every tool call of a run). Added beside the probe tables through `realprobe.store.Store`.

Every run and step carries `target_kind` (live | sandbox | simulate | replay), `source`
(`task`) and `vantage`; files from before those columns are migrated when opened."""

from __future__ import annotations

import json
from typing import Any

from realprobe.errors import RealprobeError
from realprobe.secrets import scrub_row
from realprobe.store import (
    Store,
    check_table_row,
    default_vantage,
    schema_version,
    set_schema_version,
)

#: version of the task tables (1: before the provenance columns; 3 added resume keys and
#: infrastructure errors; 4 flaw seeds and severities, paraphrase levels, trajectory metrics;
#: 5 the fault labels: who caused each step's fault, and of what kind; 7 attempts and
#: reflections, each step's attempt and the setting that injected its fault, the task's
#: complexity grade)
TASK_SCHEMA_VERSION = 7

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
    # provenance (schema 2)
    "target_kind": str,  # live | sandbox | simulate | replay
    "target": str,  # label: live, sandbox:<url>, simulate:<profile>, replay:<cassette>
    "source": str,  # task
    "vantage": str,
    # schema 3: (task, agent, model, prompt, target, seed, repeat), what --resume skips
    "resume_key": str,
    #: why the run says nothing about the agent (LLM endpoint down, nothing reachable)
    "infra_error": str,
    # schema 4: graded flaws, paraphrase level (epsilon), trajectory against the workflow
    "flaw_seed": int,
    "severity": int,  # percent of the API steps a graded flaw touched
    "paraphrase": int,  # 0 | 1 | 2
    "chain_f1": float,
    "kendall_tau": float,
    "graph_f1": float,
    # schema 5: faults the agent did not cause (injected, or a real API's own), by kind
    "tool_faults": int,
    "fault_kinds": str,  # JSON {explicit-transient: n, implicit-permanent: n, ...}
    "fault_plan": str,
    "fault_rate": float,
    # schema 6: WorkflowPerturb's MCIS node F1; the share of API steps a graded flaw touched
    "graph_node_f1": float,
    "severity_share": float,
    # schema 7: attempts used (Reflexion tries again), earlier attempts and their reflections
    "attempts": int,
    "reflections": str,  # JSON list: per earlier attempt its outcome, end and reflection
    "topology": str,  # C1 | C2 | C3 | C4: the task's data-flow grade (ToolMaze's)
    "has_alternative": int,  # some API step of the task has another tool to switch to
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
    "target_kind": str,  # schema 2
    # schema 4
    "fault_origin": str,  # injected | upstream | agent (null: no fault)
    "fault_kind": str,  # explicit|implicit - transient|permanent
    "fault_variant": str,
    # schema 7
    "fault_source": str,  # profile | rate | plan: which setting injected the fault
    "attempt": int,  # 1, 2, ...: the attempt the call belongs to
}


class TaskStore:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.db = store.db
        self.ensure_schema()

    def ensure_schema(self) -> None:
        have = schema_version(self.db, "tasks")
        if have > TASK_SCHEMA_VERSION:
            raise RealprobeError(
                f"{self.store.path}: task tables written by a newer realprobe (schema {have}); "
                "upgrade realprobe to use this database"
            )
        if have < TASK_SCHEMA_VERSION:
            self.db.table("task_runs").create(TASK_RUNS_COLUMNS, pk="id", transform=True)
            self.db.table("task_steps").create(
                TASK_STEPS_COLUMNS,
                pk="id",
                foreign_keys=[("run_id", "task_runs", "id")],
                transform=True,
            )
            if have == 1:
                kind = (
                    "CASE WHEN mode IN ('simulate', 'replay') THEN mode "
                    "WHEN profile LIKE 'http%' THEN 'sandbox' "
                    "WHEN profile IS NOT NULL THEN 'simulate' ELSE 'live' END"
                )
                with self.db.conn:
                    self.db.execute(
                        f"UPDATE task_runs SET target_kind = {kind}, source = 'task' "
                        "WHERE target_kind IS NULL"
                    )
                    self.db.execute(
                        "UPDATE task_steps SET target_kind = (SELECT r.target_kind FROM "
                        "task_runs r WHERE r.id = task_steps.run_id) WHERE target_kind IS NULL"
                    )
            set_schema_version(self.db, "tasks", TASK_SCHEMA_VERSION)
        runs = self.db.table("task_runs")
        runs.create_index(["agent", "prompt"], if_not_exists=True)
        runs.create_index(["batch"], if_not_exists=True)
        runs.create_index(["resume_key"], if_not_exists=True)
        self.db.table("task_steps").create_index(["run_id", "idx"], if_not_exists=True)

    def insert_run(self, row: dict[str, Any], steps: list[dict[str, Any]]) -> None:
        """One run and its steps; secrets (the LLM key, secret arguments, keys in URLs or in
        the final message) are scrubbed before anything reaches the file."""
        row = scrub_row(row)
        steps = [scrub_row(s) for s in steps]
        row = {k: json.dumps(v) if isinstance(v, list | dict) else v for k, v in row.items()}
        row.setdefault("source", "task")
        row.setdefault("vantage", default_vantage())
        row = check_table_row(row, TASK_RUNS_COLUMNS, "task run")  # the store's row rules
        kind = row.get("target_kind")
        steps = [check_table_row({"target_kind": kind, **s}, TASK_STEPS_COLUMNS, "task step")
                 for s in steps]
        with self.db.conn:
            key = row.get("resume_key")
            if key:  # a run replaces an earlier attempt that failed on infrastructure
                old = [r[0] for r in self.db.execute(
                    "SELECT id FROM task_runs WHERE resume_key = ? AND (outcome = 'error' "
                    "OR infra_error IS NOT NULL)", [key]
                ).fetchall()]
                for run_id in old:
                    self.db.execute("DELETE FROM task_steps WHERE run_id = ?", [run_id])
                    self.db.execute("DELETE FROM task_runs WHERE id = ?", [run_id])
            self.db.table("task_runs").insert(row)
            if steps:
                self.db.table("task_steps").insert_all(steps)

    def complete_keys(self) -> set[str]:
        """Resume keys of runs stored complete: an agent's result, not an infra error."""
        if "task_runs" not in self.db.table_names():
            return set()
        return {
            r[0] for r in self.db.execute(
                "SELECT resume_key FROM task_runs WHERE resume_key IS NOT NULL "
                "AND outcome != 'error' AND infra_error IS NULL"
            ).fetchall()
        }

    def runs(self, batch: str | None = None) -> list[dict[str, Any]]:
        if "task_runs" not in self.db.table_names():
            return []
        where, params = ("batch = ?", [batch]) if batch else (None, None)
        return list(self.db.table("task_runs").rows_where(where, params, order_by="started_at"))

    def call_errors(self) -> dict[str, dict[str, int]]:
        """run id -> error code -> failed calls the agent made in that run."""
        if "task_steps" not in self.db.table_names():
            return {}
        out: dict[str, dict[str, int]] = {}
        for run_id, code, n in self.db.execute(
            "SELECT run_id, error_code, count(*) FROM task_steps WHERE ok = 0 "
            "GROUP BY run_id, error_code"
        ).fetchall():
            out.setdefault(run_id, {})[code or "UNKNOWN"] = n
        return out

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        return list(self.db.table("task_steps").rows_where("run_id = ?", [run_id], order_by="idx"))
