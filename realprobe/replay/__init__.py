"""Transports (live, sandbox routing, record, replay, simulate) and the one client factory.

Names load on first use, so importing a light submodule (`realprobe.replay.mode`) does not
pull in httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from realprobe.replay.client import ClientConfig, HttpClient
    from realprobe.replay.mode import Mode
    from realprobe.replay.modes import TransportOptions, make_client
    from realprobe.replay.target import Target, TargetKind

_WHERE = {
    "ClientConfig": "realprobe.replay.client",
    "HttpClient": "realprobe.replay.client",
    "Mode": "realprobe.replay.mode",
    "Target": "realprobe.replay.target",
    "TargetKind": "realprobe.replay.target",
    "TransportOptions": "realprobe.replay.modes",
    "make_client": "realprobe.replay.modes",
}

__all__ = [
    "ClientConfig",
    "HttpClient",
    "Mode",
    "Target",
    "TargetKind",
    "TransportOptions",
    "make_client",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
