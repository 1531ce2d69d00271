"""pytest plugin (entry point `realprobe`): record and replay the HTTP calls of your own tests.

```python
import pytest

@pytest.mark.realprobe            # nothing else: every httpx/requests/urllib3/aiohttp call
def test_weather():               # made by the test is recorded or replayed
    assert my_app.forecast("Berlin")["temperature"] is not None
```

Options (pytest-recording's, with a `realprobe-` prefix):

- `--realprobe-record-mode none|once|new_episodes|all` (default `none`: replay only, a request
  with no recording fails naming it); `--realprobe-record` is `all`.
- `--realprobe-block-network`: any socket a replaying test opens fails, except to
  `--realprobe-allowed-hosts host1,host2` (recording tests may reach the network).
- `--realprobe-sandbox URL`: record the catalogue APIs from a running `realprobe sandbox`
  instead of the real ones; cassettes keep the real URLs.

A test that fails while recording writes no cassette. Default cassette path:
`<test file folder>/cassettes/<test module>/<test name>.json` (folder: the
`realprobe_cassette_dir` ini option); `@pytest.mark.realprobe("path.json")` names another.
Marker keywords: `record_mode`, `match_on` (vcrpy matcher names and callables),
`on_exhausted` (error|repeat-last|cycle), `latency` (none|real|scaled:X). The
`realprobe_cassette` marker takes the same arguments for the fixtures below without patching.

Fixtures for code that takes a transport: `realprobe_transport` (async httpx),
`realprobe_sync_transport`, and `realprobe_client` (realprobe's own HttpClient).
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from realprobe.cassettes.network_block import blocked_network
from realprobe.cassettes.pytest_vcr import FAILED, in_use, miss_hint, miss_summary, short_miss

if TYPE_CHECKING:
    import httpx

    from realprobe.cassettes.session import CassetteSession
    from realprobe.http.client import HttpClient

MARKER = "realprobe"
CONFIG_MARKER = "realprobe_cassette"
MODES = ("none", "once", "new_episodes", "all")


def recording_plugin_active(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Whether pytest-recording's plugin runs in this session: loaded, or installed and
    neither disabled (`-p no:recording`) nor kept from loading (plugin autoload off)."""
    if pluginmanager.has_plugin("recording") or pluginmanager.has_plugin(
        "pytest_recording.plugin"
    ):
        return True
    if pluginmanager.is_blocked("recording") or os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return importlib.util.find_spec("pytest_recording") is not None


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not recording_plugin_active(pluginmanager):
        # pytest-recording's marker, fixtures and options, served by realprobe; with
        # pytest-recording's plugin active they are its own, and realprobe steps aside
        from realprobe.cassettes import pytest_vcr

        if not pluginmanager.is_registered(pytest_vcr):
            pytest_vcr.add_hookspecs(pluginmanager)
            pluginmanager.register(pytest_vcr, "realprobe-vcr")
    group = parser.getgroup("realprobe")
    group.addoption(
        "--realprobe-record-mode",
        choices=MODES,
        default=None,
        help="none (replay only; default), once (record missing cassettes), new_episodes "
        "(record requests the cassette lacks, keep the rest), all (re-record).",
    )
    group.addoption(
        "--realprobe-record",
        action="store_true",
        default=False,
        help="Record realprobe cassettes anew (the same as --realprobe-record-mode=all).",
    )
    group.addoption(
        "--realprobe-block-network",
        action="store_true",
        default=False,
        help="Fail any socket a replaying test opens (see --realprobe-allowed-hosts).",
    )
    group.addoption(
        "--realprobe-allowed-hosts",
        default="",
        help="Comma-separated hosts/addresses still reachable with --realprobe-block-network.",
    )
    group.addoption(
        "--realprobe-sandbox",
        default=None,
        metavar="URL",
        help="Record against this realprobe sandbox instead of the real APIs.",
    )
    parser.addini(
        "realprobe_cassette_dir",
        "Folder (next to each test file) holding realprobe cassettes.",
        default="cassettes",
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    if recording_plugin_active(config.pluginmanager):
        return ("realprobe: pytest-recording is active, so @pytest.mark.vcr and "
                "--record-mode are its own; @pytest.mark.realprobe is realprobe's")
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(path=None, *, record_mode=None, match_on=None, on_exhausted='error', "
        "latency='none'): record or replay every HTTP call this test makes (httpx, requests, "
        "urllib3, aiohttp) with a realprobe cassette.",
    )
    config.addinivalue_line(
        "markers",
        f"{CONFIG_MARKER}(path=None, *, record_mode=None, match_on=None, on_exhausted='error', "
        "latency='none'): the cassette of the realprobe_transport fixtures.",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[None]:
    missed = short_miss(item, call)
    report: Any = yield
    if report.failed:
        item.stash[FAILED] = True
        if missed:
            miss_summary(report, call)
    return report  # type: ignore[no-any-return]


def _marker(request: pytest.FixtureRequest) -> tuple[tuple[Any, ...], dict[str, Any]]:
    for name in (MARKER, CONFIG_MARKER):
        mark = request.node.get_closest_marker(name)
        if mark is not None:
            return tuple(mark.args), dict(mark.kwargs)
    return (), {}


def record_mode_of(config: pytest.Config, kwargs: dict[str, Any]) -> str:
    """The command line wins, then the marker, then `none`."""
    if config.getoption("--realprobe-record"):
        return "all"
    return str(config.getoption("--realprobe-record-mode") or kwargs.get("record_mode") or "none")


def cassette_path(request: pytest.FixtureRequest, given: Any, suffix: str) -> Path:
    """`given` (relative to the test file), else `<test folder>/<realprobe_cassette_dir>/<test
    module>/<test name><suffix>`: the layout of HTTP and MCP cassettes alike."""
    folder = Path(str(request.node.path)).parent
    if given:
        p = Path(given)
        return p if p.is_absolute() else folder / p
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name).strip("_")
    module = Path(str(request.node.path)).stem
    return folder / str(request.config.getini("realprobe_cassette_dir")) / module / (name + suffix)


@pytest.fixture
def realprobe_cassette_path(request: pytest.FixtureRequest) -> Path:
    """Where this test's cassette lives (marker argument, or the default layout)."""
    args, kwargs = _marker(request)
    return cassette_path(request, args[0] if args else kwargs.get("path"), ".json")


@pytest.fixture
def realprobe_session(
    request: pytest.FixtureRequest, realprobe_cassette_path: Path
) -> Iterator[CassetteSession]:
    """This test's cassette in use; with the `realprobe` marker every HTTP library is
    captured, otherwise only the realprobe_transport fixtures use it."""
    from realprobe.cassettes.session import LIBRARIES, CassetteSession

    _, kwargs = _marker(request)
    marked = request.node.get_closest_marker(MARKER) is not None
    session = CassetteSession(
        realprobe_cassette_path,
        record_mode=record_mode_of(request.config, kwargs),
        match_on=kwargs.get("match_on"),
        on_exhausted=kwargs.get("on_exhausted", "error"),
        latency=kwargs.get("latency", "none"),
        sandbox=request.config.getoption("--realprobe-sandbox"),
        libraries=kwargs.get("libraries", LIBRARIES) if marked else (),
        meta={"source": "pytest", "test": request.node.nodeid},
        hint=miss_hint(realprobe_cassette_path, "--realprobe-record-mode"),
    )
    yield from in_use(request, session)


@pytest.fixture(autouse=True)
def _realprobe_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """The `realprobe` marker alone opens the test's cassette; the network block applies."""
    recording = False
    marked = request.node.get_closest_marker(MARKER) is not None
    if marked or "realprobe_session" in request.fixturenames:
        session: CassetteSession = request.getfixturevalue("realprobe_session")
        recording = session.recording
    if request.config.getoption("--realprobe-block-network") and not recording:
        with blocked_network(request.config.getoption("--realprobe-allowed-hosts")):
            yield
        return
    yield


@pytest.fixture
def realprobe_base_transport(request: pytest.FixtureRequest) -> httpx.AsyncBaseTransport:
    """What answers while recording; override to record against a mock. With
    --realprobe-sandbox, the catalogue APIs are answered by that sandbox."""
    from realprobe.http.transports import live_transport

    return live_transport()


@pytest.fixture
def realprobe_base_sync_transport() -> httpx.BaseTransport:
    """What answers while recording for `realprobe_sync_transport`; override at will."""
    from realprobe.http.transports import sync_live_transport

    return sync_live_transport()


@pytest.fixture
def realprobe_transport(
    realprobe_session: CassetteSession, realprobe_base_transport: httpx.AsyncBaseTransport
) -> httpx.AsyncBaseTransport:
    """An httpx transport that replays this test's cassette (or records it)."""
    from realprobe.cassettes.session import SessionTransport

    return SessionTransport(realprobe_session, realprobe_base_transport)


@pytest.fixture
def realprobe_sync_transport(
    realprobe_session: CassetteSession, realprobe_base_sync_transport: httpx.BaseTransport
) -> httpx.BaseTransport:
    """The same, for a synchronous `httpx.Client`."""
    from realprobe.cassettes.session import SessionTransport

    return SessionTransport(realprobe_session, realprobe_base_sync_transport)


@pytest.fixture
def realprobe_client(
    realprobe_session: CassetteSession, realprobe_transport: httpx.AsyncBaseTransport
) -> HttpClient:
    """realprobe's own HttpClient over the cassette, for `call_tool(tool, args, client)`."""
    from realprobe.cassettes.replayer import ReplayTransport
    from realprobe.clock import RealClock, VirtualClock
    from realprobe.http.client import HttpClient

    cassette = realprobe_session.cassette
    if not realprobe_session.recording and cassette is not None:
        # on a virtual clock: recorded latencies and timeouts, and nothing waits
        clock = VirtualClock()
        replay = ReplayTransport(
            cassette, clock=clock, latency="virtual", on_exhausted=realprobe_session.on_exhausted,
            match_on=realprobe_session.match_on,
        )
        return HttpClient(replay, clock=clock)
    return HttpClient(realprobe_transport, clock=RealClock())
