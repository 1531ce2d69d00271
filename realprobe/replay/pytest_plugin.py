"""pytest plugin (entry point `realprobe`): replay a realprobe cassette in your own tests.

```python
import httpx, pytest

@pytest.mark.realprobe_cassette("cassettes/weather.json")   # optional; default path below
async def test_weather(realprobe_transport):
    async with httpx.AsyncClient(transport=realprobe_transport) as client:
        r = await client.get("https://api.open-meteo.com/v1/forecast?latitude=52.5&longitude=13.4")
    assert r.status_code == 200
```

Without `--realprobe-record` the test replays and never opens a socket; a request with no
recording fails with an error naming it. With `--realprobe-record` it runs for real (through
the `realprobe_base_transport` fixture: the live network unless you override it, say with a
sandbox router) and rewrites the cassette, failures and latencies included.

Synchronous code: `realprobe_sync_transport` for `httpx.Client` (replay latency none, real
or scaled:X). Default cassette path: `<test file folder>/cassettes/<test module>/<test name>.json`
(the folder name is the `realprobe_cassette_dir` ini option). Marker keywords:
`on_exhausted` (error|repeat-last|cycle) and `latency` (none|real|scaled:X|virtual).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import httpx

    from realprobe.replay.client import HttpClient

MARKER = "realprobe_cassette"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("realprobe")
    group.addoption(
        "--realprobe-record",
        action="store_true",
        default=False,
        help="Record realprobe cassettes anew instead of replaying them.",
    )
    parser.addini(
        "realprobe_cassette_dir",
        "Folder (next to each test file) holding realprobe cassettes.",
        default="cassettes",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(path=None, *, on_exhausted='error', latency='none'): replay this test's "
        "HTTP calls from a realprobe cassette (record it with --realprobe-record).",
    )


def _marker(request: pytest.FixtureRequest) -> tuple[tuple[Any, ...], dict[str, Any]]:
    mark = request.node.get_closest_marker(MARKER)
    if mark is None:
        return (), {}
    return tuple(mark.args), dict(mark.kwargs)


@pytest.fixture
def realprobe_cassette_path(request: pytest.FixtureRequest) -> Path:
    """Where this test's cassette lives (marker argument, or the default layout)."""
    args, kwargs = _marker(request)
    folder = Path(str(request.node.path)).parent
    given = args[0] if args else kwargs.get("path")
    if given:
        p = Path(given)
        return p if p.is_absolute() else folder / p
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name).strip("_")
    module = Path(str(request.node.path)).stem
    return folder / str(request.config.getini("realprobe_cassette_dir")) / module / f"{name}.json"


@pytest.fixture
def realprobe_base_transport() -> httpx.AsyncBaseTransport:
    """What answers while recording; override to record against a sandbox or a mock."""
    from realprobe.replay.transports import live_transport

    return live_transport()


@pytest.fixture
def realprobe_transport(
    request: pytest.FixtureRequest,
    realprobe_cassette_path: Path,
    realprobe_base_transport: httpx.AsyncBaseTransport,
) -> Iterator[httpx.AsyncBaseTransport]:
    """An httpx transport that replays this test's cassette (or records it)."""
    from realprobe.replay.recording import RecordingTransport
    from realprobe.replay.replayer import ReplayTransport

    _, kwargs = _marker(request)
    if request.config.getoption("--realprobe-record"):
        recorder = RecordingTransport(
            realprobe_base_transport, realprobe_cassette_path,
            meta={"source": "pytest", "test": request.node.nodeid},
        )
        yield recorder
        if recorder.saved is None:  # the client was not closed: write anyway
            recorder.save()
        return
    yield ReplayTransport.from_path(
        realprobe_cassette_path,
        latency=kwargs.get("latency", "none"),
        on_exhausted=kwargs.get("on_exhausted", "error"),
    )


@pytest.fixture
def realprobe_base_sync_transport() -> httpx.BaseTransport:
    """What answers while recording for `realprobe_sync_transport`; override at will."""
    import httpx

    return httpx.HTTPTransport()


@pytest.fixture
def realprobe_sync_transport(
    request: pytest.FixtureRequest,
    realprobe_cassette_path: Path,
    realprobe_base_sync_transport: httpx.BaseTransport,
) -> Iterator[httpx.BaseTransport]:
    """The same, for a synchronous `httpx.Client`."""
    from realprobe.replay.sync import SyncRecordingTransport, SyncReplayTransport

    _, kwargs = _marker(request)
    if request.config.getoption("--realprobe-record"):
        recorder = SyncRecordingTransport(
            realprobe_base_sync_transport, realprobe_cassette_path,
            meta={"source": "pytest", "test": request.node.nodeid},
        )
        yield recorder
        if recorder.saved is None:
            recorder.save()
        return
    yield SyncReplayTransport.from_path(
        realprobe_cassette_path,
        latency=kwargs.get("latency", "none"),
        on_exhausted=kwargs.get("on_exhausted", "error"),
    )


@pytest.fixture
def realprobe_client(realprobe_transport: httpx.AsyncBaseTransport) -> HttpClient:
    """realprobe's own HttpClient over the cassette, for `call_tool(tool, args, client)`."""
    from realprobe.clock import RealClock, VirtualClock
    from realprobe.replay.client import HttpClient
    from realprobe.replay.replayer import ReplayTransport

    if isinstance(realprobe_transport, ReplayTransport):
        # on a virtual clock: recorded latencies and timeouts, and nothing waits
        clock = VirtualClock()
        replay = ReplayTransport(
            realprobe_transport.cassette, clock=clock, latency="virtual",
            on_exhausted=realprobe_transport.on_exhausted,
        )
        return HttpClient(replay, clock=clock)
    return HttpClient(realprobe_transport, clock=RealClock())
