"""The transport mode names alone: no httpx, so parsing `--mode` stays cheap.
`realprobe.clients` turns a mode into a transport."""

from __future__ import annotations

from enum import StrEnum

from realprobe.errors import RealprobeError


class Mode(StrEnum):
    LIVE = "live"
    RECORD = "record"
    REPLAY = "replay"
    SIMULATE = "simulate"

    @classmethod
    def parse(cls, value: str | Mode) -> Mode:
        """A mode from a string as a user types it; an unknown value is an error (never a
        silent fallback to live)."""
        if isinstance(value, Mode):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise RealprobeError(f"mode {value!r}: choose one of {choices}") from None
