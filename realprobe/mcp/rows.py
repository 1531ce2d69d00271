"""Runs of calls served over MCP (by the service or the proxy) as probe rows (source mcp),
built by the store's shared `probe_row`, so MCP traffic feeds the same statistics as
scheduled probes."""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from realprobe.errors import ErrorCode
from realprobe.result import ToolResult
from realprobe.store import iso_utc, probe_row
from realprobe.target import Target
from realprobe.version import __version__

if TYPE_CHECKING:
    from realprobe.store import Database

log = logging.getLogger("realprobe.mcp")


def new_run_id() -> str:
    """`mcp-<UTC stamp>-<hex>`: one run per server session, apart from probe runs at a glance."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"mcp-{stamp}-{uuid.uuid4().hex[:8]}"


def reached_the_api(result: ToolResult) -> bool:
    """False for arguments rejected before anything was sent: not the API's behaviour."""
    return not (result.code is ErrorCode.INVALID_INPUT and result.http_status is None)


class RunRows:
    """One run of served calls in the store: its `probe_runs` row opened here, one probe row
    per call (a full disk is logged, never the server's end), closed with its counts."""

    def __init__(self, db: Database, *, mode: str, target: Target, vantage: str,
                 timeout_s: float, tools: list[str], run_id: str | None = None) -> None:
        self.store = db.write()
        self.target, self.vantage, self.timeout_s = target, vantage, timeout_s
        self.tools = tools  # none given (the proxy's): the tools called, at the end
        self.run_id = run_id or new_run_id()
        self.n: dict[str, int] = {}  # rows per tool so far (the row's round)
        self.ok = self.stored = 0
        wall = time.time()
        try:
            self.store.start_run({
                "id": self.run_id, "started_at": iso_utc(wall), "started_ts": wall,
                "vantage": vantage, "mode": mode, "target": target.label,
                "target_kind": target.kind.value, "source": "mcp", "tools": tools,
                "rounds": 0, "n_calls": 0, "version": __version__,
            })  # fmt: skip
        except BaseException:
            self.store.close()
            raise

    def add(self, result: ToolResult, *, tool: str, api: str, started_wall: float, args: Any,
            target: Target | None = None, **fields: Any) -> None:
        """One call's row; `target`: where its outcome came from, when not the run's (the
        server's own answers in a faulted proxy session are live, or replay)."""
        self.n[tool] = n = self.n.get(tool, 0) + 1
        detail = fields.pop("detail", None)
        row = probe_row(result, run_id=self.run_id, tool=tool, api=api, round_no=n - 1,
                        started_wall=started_wall, timeout_s=self.timeout_s,
                        vantage=self.vantage, args=args, source="mcp",
                        target=target or self.target, **fields)
        if detail:
            row["detail"] = detail
        try:
            self.store.insert_probe(row)
        except Exception as exc:  # a full disk must not take the server down
            log.error("could not store the call of %s: %s", tool, exc)
            return
        self.stored += 1
        self.ok += int(result.ok)

    def close(self, status: str) -> None:
        wall = time.time()
        try:
            self.store.finish_run(self.run_id, {
                "status": status, "ended_at": iso_utc(wall), "ended_ts": wall,
                "n_calls": self.stored, "n_ok": self.ok, "n_error": self.stored - self.ok,
                "tools": self.tools or sorted(self.n),
            })  # fmt: skip
        except Exception as exc:
            log.error("could not close run %s in %s: %s", self.run_id, self.store.path, exc)
        finally:
            self.store.close()
