"""Transports (live, sandbox routing, record, replay, simulate), the one client factory, and
cassettes for any code (`use_cassette`).

Names load on first use, so importing a light submodule does not pull in httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from realprobe.replay.cassette import Cassette, CassetteError, save_cassette
    from realprobe.replay.client import ClientConfig, HttpClient
    from realprobe.replay.core import CassetteExhausted, CassetteMiss
    from realprobe.replay.importers import load_cassette, recover_cassette
    from realprobe.replay.matching import MATCHER_NAMES
    from realprobe.replay.mode import Mode
    from realprobe.replay.modes import TransportOptions, make_client, make_sync_client
    from realprobe.replay.recording import RecordingTransport, SyncRecordingTransport
    from realprobe.replay.replayer import ReplayTransport, SyncReplayTransport
    from realprobe.replay.session import RECORD_MODES, CassetteSession, use_cassette
    from realprobe.replay.target import Target, TargetKind
    from realprobe.replay.transports import SandboxRouter, SyncSandboxRouter

_WHERE = {
    "Cassette": "realprobe.replay.cassette",
    "CassetteError": "realprobe.replay.cassette",
    "save_cassette": "realprobe.replay.cassette",
    "ClientConfig": "realprobe.replay.client",
    "HttpClient": "realprobe.replay.client",
    "CassetteExhausted": "realprobe.replay.core",
    "CassetteMiss": "realprobe.replay.core",
    "load_cassette": "realprobe.replay.importers",
    "recover_cassette": "realprobe.replay.importers",
    "MATCHER_NAMES": "realprobe.replay.matching",
    "Mode": "realprobe.replay.mode",
    "TransportOptions": "realprobe.replay.modes",
    "make_client": "realprobe.replay.modes",
    "make_sync_client": "realprobe.replay.modes",
    "RecordingTransport": "realprobe.replay.recording",
    "SyncRecordingTransport": "realprobe.replay.recording",
    "ReplayTransport": "realprobe.replay.replayer",
    "SyncReplayTransport": "realprobe.replay.replayer",
    "RECORD_MODES": "realprobe.replay.session",
    "CassetteSession": "realprobe.replay.session",
    "use_cassette": "realprobe.replay.session",
    "Target": "realprobe.replay.target",
    "TargetKind": "realprobe.replay.target",
    "SandboxRouter": "realprobe.replay.transports",
    "SyncSandboxRouter": "realprobe.replay.transports",
}

__all__ = [
    "MATCHER_NAMES",
    "RECORD_MODES",
    "Cassette",
    "CassetteError",
    "CassetteExhausted",
    "CassetteMiss",
    "CassetteSession",
    "ClientConfig",
    "HttpClient",
    "Mode",
    "RecordingTransport",
    "ReplayTransport",
    "SandboxRouter",
    "SyncRecordingTransport",
    "SyncReplayTransport",
    "SyncSandboxRouter",
    "Target",
    "TargetKind",
    "TransportOptions",
    "load_cassette",
    "make_client",
    "make_sync_client",
    "recover_cassette",
    "save_cassette",
    "use_cassette",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
