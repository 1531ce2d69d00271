"""The network seam: the one httpx client factory, the transports that are not recordings
(live, sandbox routing, simulate), body decoding and per-call phase timing.

Names load on first use, so importing a light submodule does not pull in httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from realprobe.http.client import ClientConfig, HttpClient, SyncHttpClient
    from realprobe.http.mode import Mode
    from realprobe.http.transports import SandboxRouter, SyncSandboxRouter

_WHERE = {
    "ClientConfig": "realprobe.http.client",
    "HttpClient": "realprobe.http.client",
    "SyncHttpClient": "realprobe.http.client",
    "Mode": "realprobe.http.mode",
    "SandboxRouter": "realprobe.http.transports",
    "SyncSandboxRouter": "realprobe.http.transports",
}

__all__ = [
    "ClientConfig",
    "HttpClient",
    "Mode",
    "SandboxRouter",
    "SyncHttpClient",
    "SyncSandboxRouter",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
