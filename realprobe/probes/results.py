"""What `stats` returns beyond the core report: the stats with where the time goes, and the
stats once per vantage point (drift with what each window held is `probes.drift.Drift`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from realprobe.probes.stats import StatsReport


class Stats(StatsReport):
    """A StatsReport plus, per tool, the median DNS / connect / TLS / first byte / transfer
    times over successful calls that recorded their phases."""

    phases: dict[str, dict[str, Any]] = Field(default_factory=dict)


class VantageStats(BaseModel):
    """The same statistics once per vantage point (the same API seen from other networks)."""

    by: Literal["vantage"] = "vantage"
    target_kinds: list[str]
    vantages: dict[str, StatsReport]
