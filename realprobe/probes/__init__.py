"""Probes: polite probe rounds into SQLite, and scheduling them."""

from realprobe.probes.politeness import PolitenessConfig
from realprobe.probes.runner import RunSummary, ToolSummary, run_probes

__all__ = ["PolitenessConfig", "RunSummary", "ToolSummary", "run_probes"]
