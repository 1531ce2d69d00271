"""What the readers return beyond the core reports: the stats with where the time goes, the
stats once per vantage point, and drift with what each window held."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from realprobe.probes.drift import DriftReport
from realprobe.probes.provenance import Provenance
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


class Drift(DriftReport):
    """A DriftReport plus which rows each window held (keys `baseline` and `current`)."""

    provenance: dict[str, Provenance]


__all__ = ["Drift", "Stats", "VantageStats"]
