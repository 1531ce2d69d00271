"""Record and replay for synchronous `httpx.Client` users: the same core as the async
transports (see `recording` and `replayer`), under the names older code imports."""

from realprobe.cassettes.recording import SyncRecordingTransport
from realprobe.cassettes.replayer import SyncReplayTransport

__all__ = ["SyncRecordingTransport", "SyncReplayTransport"]
