"""Cassettes: the format, the record/replay core and its transports, importers and
exporters, scrubbing, `use_cassette` for any code, and the pytest plugin.

Names load on first use, so importing a light submodule does not pull in httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from realprobe.cassettes.cassette import Cassette, CassetteError, save_cassette
    from realprobe.cassettes.core import CassetteExhausted, CassetteMiss
    from realprobe.cassettes.importers import load_cassette, recover_cassette
    from realprobe.cassettes.matching import MATCHER_NAMES
    from realprobe.cassettes.recording import RecordingTransport, SyncRecordingTransport
    from realprobe.cassettes.replayer import ReplayTransport, SyncReplayTransport
    from realprobe.cassettes.session import RECORD_MODES, CassetteSession, use_cassette

_WHERE = {
    "Cassette": "realprobe.cassettes.cassette",
    "CassetteError": "realprobe.cassettes.cassette",
    "save_cassette": "realprobe.cassettes.cassette",
    "CassetteExhausted": "realprobe.cassettes.core",
    "CassetteMiss": "realprobe.cassettes.core",
    "load_cassette": "realprobe.cassettes.importers",
    "recover_cassette": "realprobe.cassettes.importers",
    "MATCHER_NAMES": "realprobe.cassettes.matching",
    "RecordingTransport": "realprobe.cassettes.recording",
    "SyncRecordingTransport": "realprobe.cassettes.recording",
    "ReplayTransport": "realprobe.cassettes.replayer",
    "SyncReplayTransport": "realprobe.cassettes.replayer",
    "RECORD_MODES": "realprobe.cassettes.session",
    "CassetteSession": "realprobe.cassettes.session",
    "use_cassette": "realprobe.cassettes.session",
}

__all__ = [
    "MATCHER_NAMES",
    "RECORD_MODES",
    "Cassette",
    "CassetteError",
    "CassetteExhausted",
    "CassetteMiss",
    "CassetteSession",
    "RecordingTransport",
    "ReplayTransport",
    "SyncRecordingTransport",
    "SyncReplayTransport",
    "load_cassette",
    "recover_cassette",
    "save_cassette",
    "use_cassette",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
