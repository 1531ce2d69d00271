"""Who caused a task step's fault: an injection (the simulator's ledger, or the sandbox's
journal), a real API's own failure, or the agent's own input. Evaluators read the labels;
the agent never sees them."""

from __future__ import annotations

from typing import Any

from realprobe.errors import ErrorCode
from realprobe.http.client import HttpClient
from realprobe.limits import json_or_none
from realprobe.simulator.faults import FaultModel, Injection
from realprobe.simulator.profile import IMPLICIT_VARIANTS
from realprobe.tasks.model import Task

#: fault origins that count for recovery (the agent's own input errors never do)
TOOL_FAULT_ORIGINS = ("injected", "upstream")
#: codes a server answers to the arguments it was sent: the agent's input, unless injected
INPUT_CODES = (ErrorCode.INVALID_INPUT.value, ErrorCode.NOT_FOUND.value)
#: journal `fault` values that are no injected fault
_NOT_INJECTED = ("ok", "no_fixture", "not-routed", "fixture:ok")

#: (origin, kind, variant) of a step; all None: no fault
Label = tuple[str | None, str | None, str | None]


def fault_ledger(client: HttpClient) -> list[Injection] | None:
    """The injections of the client's in-process simulator (None: another target)."""
    ledger = getattr(client.transport, "ledger", None)
    return ledger if isinstance(ledger, list) else None


def bind_task(client: HttpClient, task: Task) -> None:
    """Tell the run's in-process simulator the task's preferred path (a fault plan's steps)
    and each tool's dependencies (ResiliBench's factors); other targets ignore it."""
    model = getattr(client.transport, "model", None)
    if not isinstance(model, FaultModel):
        return
    steps = task.workflow.steps
    groups = {s.id: s.tools() for s in steps}
    deps = {t: [groups[u] for u in dict.fromkeys(r for r, _ in s.refs())]
            for s in steps for t in s.tools()}  # fmt: skip
    model.bind([s.tools() for s in steps[:-1]], deps)


def from_ledger(tool: str, injected: list[Injection]) -> tuple[Label, str | None] | None:
    """The label of the tool's last injected fault, and which setting injected it: profile,
    rate (the fault-rate dial) or plan (a fault plan's rule)."""
    mine = [i for i in injected if i.tool == tool]
    if not mine:
        return None
    last = mine[-1]
    return ("injected", f"{last.kind}-{last.persistence}", last.variant or last.code), last.by


def from_journal(entry: dict[str, Any]) -> Label | None:
    """What the sandbox played for one request, from its journal entry (None: no fault)."""
    fault = str(entry.get("fault") or "ok")
    if fault in _NOT_INJECTED:
        return None
    if fault.startswith(("upstream-", "held-back")):
        return "upstream", "explicit-transient", fault
    kind = "implicit" if fault in IMPLICIT_VARIANTS else "explicit"
    return "injected", f"{kind}-transient", fault


def fault_label(ok: bool, error_code: str | None, target_kind: str) -> Label:
    """A step's label when no ledger or journal says: a server's answer to the arguments
    (INVALID_INPUT, NOT_FOUND) is the agent's; any other failure is the simulator's or the
    sandbox's injection (a slow answer past the deadline, a hang, a reset), or on live and
    replay targets the API's own."""
    if ok:
        return None, None, None
    if error_code in INPUT_CODES:
        return "agent", None, None
    origin = "injected" if target_kind in ("sandbox", "simulate") else "upstream"
    return origin, "explicit-transient", None


class SandboxJournal:
    """The sandbox's journal, read after each call through the run's own client, to label
    steps by the request id the sandbox echoed. Turns itself off when the sandbox does not
    show it (its runtime API switched off, a token required)."""

    def __init__(self, client: HttpClient, url: str) -> None:
        self.client = client
        # a `/_fault/<variant>/` prefix forces faults on API paths, not on the runtime API
        self.url = url.split("/_fault/", 1)[0].rstrip("/") + "/_journal"
        self.seq = 0
        self.on = True
        self.by_id: dict[str, dict[str, Any]] = {}

    async def entry(self, request_id: str | None) -> dict[str, Any] | None:
        if request_id is None or not self.on:
            return None
        if request_id not in self.by_id:
            await self._read()
        return self.by_id.pop(request_id, None)

    async def _read(self) -> None:
        try:
            got = await self.client.fetch(
                "GET", self.url, params={"since": str(self.seq)}, timeout_s=5.0,
                allow_private=True,
            )  # fmt: skip
            entries = json_or_none(got.body) if got.status == 200 else None
        except Exception:  # any failure: the journal is not available to this run
            entries = None
        if not isinstance(entries, list):
            self.on = False
            return
        for e in entries:
            if isinstance(e, dict):
                self.seq = max(self.seq, int(e.get("seq") or 0))
                if e.get("request_id"):
                    self.by_id[str(e["request_id"])] = e
