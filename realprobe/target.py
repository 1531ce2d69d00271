"""Where calls go: one value, built once from the transport options and carried by the client.

Every stored row (probe, task run, MCP-served call) takes its `target_kind` from here, and
politeness and daily budgets ask `reaches_network` instead of re-deriving it from strings.
Recording is not a target: a record run against the sandbox is `sandbox`, against the
simulator `simulate`, against the real APIs `live`; the cassette being written is kept in
`recording`.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import PurePath
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from realprobe.errors import RealprobeError


class TransportOptions(Protocol):
    """What `from_options` reads of `realprobe.clients.TransportOptions` (named by shape:
    importing modes here would close a cycle modes -> client -> target -> modes)."""

    mode: Any
    sandbox: str | None
    profile: Any
    seed: int
    cassette: Any


class TargetKind(StrEnum):
    LIVE = "live"
    SANDBOX = "sandbox"
    SIMULATE = "simulate"
    REPLAY = "replay"

    @classmethod
    def parse(cls, value: str | TargetKind, what: str = "target") -> TargetKind:
        """A kind from a string; an unknown value is an error naming the choices."""
        if isinstance(value, TargetKind):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            choices = ", ".join(k.value for k in cls)
            raise RealprobeError(f"{what} {value!r}: choose one of {choices}") from None


#: where a stored row came from
SOURCES = ("probe", "mcp", "task")


class Target(BaseModel):
    """Where a client's calls go, whether that is the real network, and a label for people."""

    model_config = ConfigDict(frozen=True)

    kind: TargetKind
    sandbox: str | None = None  # the sandbox URL (kind sandbox)
    profile: str | None = None  # simulator profile name or file (kind simulate)
    seed: int | None = None  # simulator seed (kind simulate)
    cassette: str | None = None  # the cassette replayed (kind replay)
    recording: str | None = None  # the cassette being written (any kind but replay)

    @property
    def reaches_network(self) -> bool:
        """True only for the real public APIs: budgets and politeness apply to these calls."""
        return self.kind is TargetKind.LIVE

    @property
    def detail(self) -> str | None:
        """The one thing that says which sandbox, profile or cassette (None for live)."""
        if self.kind is TargetKind.SANDBOX:
            return self.sandbox
        if self.kind is TargetKind.SIMULATE:
            return f"{self.profile or 'profile'} seed {self.seed or 0}"
        if self.kind is TargetKind.REPLAY:
            return self.cassette
        return None

    @property
    def label(self) -> str:
        """`live`, `sandbox:<url>`, `simulate:<profile>` or `replay:<cassette>`."""
        if self.kind is TargetKind.SANDBOX:
            return f"sandbox:{self.sandbox}"
        if self.kind is TargetKind.SIMULATE:
            return f"simulate:{self.profile or 'profile'}"
        if self.kind is TargetKind.REPLAY:
            return f"replay:{self.cassette}"
        return "live"

    def describe(self) -> str:
        """For people: the label, plus the cassette being recorded if any."""
        return f"record:{self.label}->{self.recording}" if self.recording else self.label

    def matches(self, text: str) -> bool:
        """Whether a label a caller passed (a kind, the label, the sandbox URL, or a
        `simulate:`/`replay:` label) names this target."""
        t = text.strip()
        if t.lower() == self.kind.value or t == self.label:
            return True
        if self.kind is TargetKind.SANDBOX:
            return t.rstrip("/") == (self.sandbox or "").rstrip("/")
        prefix = f"{self.kind.value}:"
        return self.kind is not TargetKind.LIVE and t.startswith(prefix)

    @classmethod
    def live(cls) -> Target:
        return cls(kind=TargetKind.LIVE)

    @classmethod
    def from_options(cls, opts: TransportOptions) -> Target:
        """The target of normalised transport options (see `TransportOptions.normalised`).
        Modes compare by value (`Mode` is a StrEnum): importing it here would close an import
        cycle modes -> client -> target -> modes."""
        mode = str(opts.mode)
        recording = str(opts.cassette) if mode == "record" and opts.cassette else None
        if mode == "replay":
            return cls(kind=TargetKind.REPLAY, cassette=str(opts.cassette))
        if opts.sandbox:
            return cls(kind=TargetKind.SANDBOX, sandbox=opts.sandbox, recording=recording)
        if mode == "simulate" or opts.profile is not None:
            return cls(
                kind=TargetKind.SIMULATE,
                profile=profile_label(opts.profile),
                seed=opts.seed,
                recording=recording,
            )
        return cls(kind=TargetKind.LIVE, recording=recording)


def profile_label(profile: Any) -> str:
    """A profile's name for labels: the built-in name, the file, or the Profile's name."""
    if profile is None:
        return "published"  # the default profile (simulator/profile.py DEFAULT_PROFILE)
    if isinstance(profile, str | PurePath):
        return str(profile)
    return str(getattr(profile, "name", None) or "profile")


__all__ = ["SOURCES", "Target", "TargetKind", "profile_label"]
