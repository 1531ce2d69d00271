"""The transport mode names alone: no httpx, so parsing `--mode` stays cheap.
`realprobe.replay.modes` turns a mode into a transport."""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    LIVE = "live"
    RECORD = "record"
    REPLAY = "replay"
    SIMULATE = "simulate"
