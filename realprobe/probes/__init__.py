"""Probes: polite probe rounds into SQLite, scheduling them, and the statistics over them.

Names load on first use, so the statistics modules (`stats`, `drift`, ...) can be imported
without the prober's httpx and politeness machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from realprobe.probes.politeness import PolitenessConfig
    from realprobe.probes.runner import RunSummary, ToolSummary, run_probes

_WHERE = {
    "PolitenessConfig": "realprobe.probes.politeness",
    "RunSummary": "realprobe.probes.runner",
    "ToolSummary": "realprobe.probes.runner",
    "run_probes": "realprobe.probes.runner",
}

__all__ = ["PolitenessConfig", "RunSummary", "ToolSummary", "run_probes"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
