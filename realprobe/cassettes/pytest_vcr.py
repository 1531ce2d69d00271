"""pytest-recording's conventions, served by realprobe, for suites written for pytest-recording
(registered by realprobe's plugin only when pytest-recording's own plugin is not active: not
installed, or disabled with `-p no:recording`).

```python
@pytest.mark.vcr                                  # cassettes/<module>/<test>.yaml
def test_users(): ...

@pytest.mark.vcr("shared.yaml", default_cassette="users-v2.yaml", record_mode="once")
def test_users_v2(): ...

@pytest.fixture(scope="module")
def vcr_config():
    return {"filter_headers": ["authorization"], "match_on": ["method", "uri"]}
```

- `@pytest.mark.vcr(*extra, **config)`: the test's cassette is
  `<vcr_cassette_dir>/<default_cassette_name>.yaml` (`.json` with `serializer="json"`); the
  marker's positional cassettes are replayed too, never written: a relative one is looked up
  in `vcr_cassette_dir` (pytest-recording's place), then next to the test file, then in the
  project root; one found nowhere adds nothing (as under pytest-recording). Its keywords
  override `vcr_config`. A marker on a class or module adds the default cassette as
  pytest-recording does. `@pytest.mark.default_cassette("name.yaml")` names the test's own
  cassette.
- Fixtures: `vcr_config`, `vcr_cassette_dir` (`<test folder>/cassettes/<module>`),
  `default_cassette_name` (`Class.test_name`, with `<>?%*:|"'/\\` replaced by `-`),
  `record_mode`, and `vcr` (the cassette session in use: `play_count`, `all_played`,
  `len(vcr)`, `recording`).
- Options: `--record-mode none|once|new_episodes|all|rewrite` (default none),
  `--block-network`, `--allowed-hosts=h1,h2`, `--disable-recording`.
- `@pytest.mark.block_network(allowed_hosts=[...])`: the network block below, except while a
  cassette records.
- `vcr_config` keys used: `record_mode`, `match_on` (names, callables, and matchers a
  `pytest_recording_configure(config, vcr)` hook registered with `vcr.register_matcher`),
  `filter_headers`, `filter_query_parameters`, `filter_post_data_parameters` (names; their
  values are replaced by realprobe's placeholder), `before_record_request`,
  `before_record_response` (callables or lists of them, applied to each call as it is
  recorded, on vcrpy's own request and response objects; the request hook to each request
  before it is matched too), `decode_compressed_response`,
  `serializer`, `allow_playback_repeats`, `ignore_hosts`, `ignore_localhost`. Others (custom
  persisters and serializers) are ignored with one warning per key.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
from pluggy import HookspecMarker

RECORD_MODES = ("once", "new_episodes", "none", "all", "rewrite")
USED_KEYS = frozenset({
    "record_mode", "match_on", "filter_headers", "filter_query_parameters",
    "filter_post_data_parameters", "serializer", "allow_playback_repeats", "ignore_hosts",
    "ignore_localhost", "cassette_library_dir", "before_record_request", "before_record",
    "before_record_response", "decode_compressed_response",
})
LOCALHOST = ("localhost", "127.0.0.1", "::1", "0.0.0.0")
_WARNED: set[str] = set()
#: set by realprobe's plugin when a test fails (its cassette is then not written)
FAILED = pytest.StashKey[bool]()


#: the packages between a test and a cassette miss: their frames are left out of the
#: failure, which then shows the test's own line and the miss
HIDDEN_PACKAGES = frozenset({"realprobe", "vcr", "httpx", "httpcore", "requests", "urllib3",
                             "aiohttp", "anyio", "h11"})


def miss_hint(cassette: Path, option: str) -> str:
    """What a request with no recording tells the user to run: the record mode that records
    it (`once` makes a cassette that does not exist yet and never records into one that does;
    `new_episodes` adds to it)."""
    if cassette.exists():
        return (f"add it to the cassette: pytest {option}=new_episodes (once never records "
                "into an existing cassette)")
    return f"record it: pytest {option}=once"


def _hidden(tb: TracebackType) -> bool:
    name = str(tb.tb_frame.f_globals.get("__name__", ""))
    return name.split(".", 1)[0] in HIDDEN_PACKAGES


def short_miss(item: pytest.Item, call: pytest.CallInfo[None]) -> bool:
    """For a cassette miss, leave realprobe's, vcrpy's and the HTTP libraries' frames out of
    the traceback (as `__tracebackhide__` would, had those libraries set it; `--fulltrace`
    keeps them), so the failure is the test's line and the miss. The exception's own
    traceback is relinked (`tb_next`), as pytest rebuilds its view from it. True when
    `call` ended in a miss."""
    from realprobe.cassettes.core import CassetteMiss

    excinfo = call.excinfo
    if excinfo is None or not excinfo.errisinstance(CassetteMiss):
        return False
    if not item.config.getoption("fulltrace", False):
        chain: list[TracebackType] = []
        tb: TracebackType | None = excinfo.tb
        while tb is not None:
            chain.append(tb)
            tb = tb.tb_next
        kept = [t for t in chain if not _hidden(t)]
        if kept and kept[0] is chain[0]:
            for a, b in zip(kept, [*kept[1:], None], strict=True):
                a.tb_next = b
    return True


def miss_summary(report: Any, call: pytest.CallInfo[None]) -> None:
    """The short summary line of a cassette miss reads its message ("no recording for GET
    ..."), not the exception's dotted class name."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and call.excinfo is not None:
        crash.message = str(call.excinfo.value)


def failed_test(request: pytest.FixtureRequest) -> bool:
    """Whether this test has failed so far."""
    return request.node.stash.get(FAILED, False)


def in_use(request: pytest.FixtureRequest, session: Any) -> Iterator[Any]:
    """A fixture's cassette session, open for the test; closed after it, writing what was
    recorded unless the test failed."""
    session.open()
    try:
        yield session
    finally:
        session.close(failed=failed_test(request))


class _Hooks:
    @HookspecMarker("pytest")
    def pytest_recording_configure(self, config: pytest.Config, vcr: Any) -> None:
        """pytest-recording's hook: register matchers on `vcr` (a vcrpy `VCR`) by name."""


def add_hookspecs(pluginmanager: pytest.PytestPluginManager) -> None:
    """pytest-recording's hook, so a conftest that implements it loads."""
    if not pluginmanager.hook.__dict__.get("pytest_recording_configure"):
        pluginmanager.add_hookspecs(_Hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("recording", "pytest-recording conventions (served by realprobe)")
    group.addoption("--record-mode", action="store", default=None, choices=RECORD_MODES,
                    help='Record mode of @pytest.mark.vcr cassettes. Default "none".')
    group.addoption("--block-network", action="store_true", default=False,
                    help="Block network access except while a cassette records.")
    group.addoption("--allowed-hosts", action="store", default=None,
                    help="Comma-separated hosts reachable despite --block-network.")
    group.addoption("--disable-recording", action="store_true", default=False,
                    help="Ignore @pytest.mark.vcr: no cassette is used.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "vcr: record or replay this test's HTTP calls "
                                       "(pytest-recording conventions, served by realprobe).")
    config.addinivalue_line("markers", "block_network: block network access except while "
                                       "a cassette records.")
    config.addinivalue_line("markers", "default_cassette(name): this test's own cassette.")


def cassette_name(test_class: type | None, test_name: str) -> str:
    """pytest-recording's default cassette name for a test."""
    name = f"{test_class.__name__}.{test_name}" if test_class else test_name
    for ch in "<>?%*:|\"'/\\":
        name = name.replace(ch, "-")
    return name


@pytest.fixture(scope="session")
def record_mode(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("--record-mode") or "none")


@pytest.fixture
def vcr_config() -> dict[str, Any]:
    """Configuration shared by every cassette of the tests that see this fixture."""
    return {}


@pytest.fixture(scope="module")
def vcr_cassette_dir(request: pytest.FixtureRequest) -> str:
    path = Path(str(request.node.path))
    return str(path.parent / "cassettes" / path.stem)


@pytest.fixture
def default_cassette_name(request: pytest.FixtureRequest) -> str:
    marker = request.node.get_closest_marker("default_cassette")
    if marker is not None:
        if not marker.args:
            raise pytest.UsageError("@pytest.mark.default_cassette needs the cassette's name")
        return str(marker.args[0])
    return cassette_name(request.cls, request.node.name)


def _merged(config: dict[str, Any], marks: list[pytest.Mark]) -> dict[str, Any]:
    out = dict(config)
    for mark in reversed(marks):  # the closest marker wins
        out.update(mark.kwargs)
    return out


def _warn_unused(config: dict[str, Any]) -> None:
    for key in sorted(set(config) - USED_KEYS - {"default_cassette"}):
        if key not in _WARNED:
            _WARNED.add(key)
            warnings.warn(f"realprobe's vcr marker ignores the vcrpy option {key!r}",
                          stacklevel=2)


def session_for(request: pytest.FixtureRequest, marks: list[pytest.Mark]) -> Any:
    """The cassette session pytest-recording would open for this test."""
    from realprobe.cassettes.scrub import ScrubConfig
    from realprobe.cassettes.session import CassetteSession
    from realprobe.cassettes.vcr_bridge import before_record

    config = _merged(request.getfixturevalue("vcr_config"), marks)
    _warn_unused(config)
    folder = Path(
        config.get("cassette_library_dir") or request.getfixturevalue("vcr_cassette_dir")
    )
    suffix = "." + str(config.get("serializer") or "yaml")
    default = str(
        config.get("default_cassette") or request.getfixturevalue("default_cassette_name")
    )
    path = folder / (default if default.endswith(suffix) else default + suffix)
    mode = str(config.get("record_mode") or request.getfixturevalue("record_mode"))
    if mode == "rewrite":
        mode = "all"
    extras = [_extra_path(request, folder, str(p)) for m in marks for p in m.args]
    ignore = list(config.get("ignore_hosts") or ())
    if config.get("ignore_localhost"):
        ignore += LOCALHOST
    return CassetteSession(
        path, record_mode=mode, match_on=_matchers(request, config.get("match_on")),
        on_exhausted="repeat-last" if config.get("allow_playback_repeats") else "error",
        scrub=ScrubConfig().with_vcrpy_filters(
            config.get("filter_headers"), config.get("filter_query_parameters"),
            config.get("filter_post_data_parameters"),
        ),
        meta={"source": "pytest", "test": request.node.nodeid},
        hint=miss_hint(path, "--record-mode"),
        extra_paths=extras, ignore_hosts=ignore,
        before_record=before_record(
            config.get("before_record_request", config.get("before_record")),
            config.get("before_record_response"),
            decode_compressed=bool(config.get("decode_compressed_response")),
        ),
    )


def _extra_path(request: pytest.FixtureRequest, folder: Path, given: str) -> Path:
    """An extra cassette where pytest-recording looks (the cassette folder), else next to
    the test file, else in the project root; a relative path found nowhere stays in the
    cassette folder (and adds nothing)."""
    p = Path(given)
    if p.is_absolute():
        return p
    for base in (folder, Path(str(request.node.path)).parent, request.config.rootpath):
        if (base / p).exists():
            return base / p
    return folder / p


def _matchers(request: pytest.FixtureRequest, match_on: Any) -> Any:
    """Matcher names realprobe does not know, looked up among those a
    `pytest_recording_configure` hook registered on a vcrpy `VCR`."""
    from realprobe.cassettes.matching import MATCHER_NAMES

    if not match_on or all(callable(m) or m in MATCHER_NAMES for m in match_on):
        return match_on
    from vcr import VCR

    registry = VCR()
    request.config.hook.pytest_recording_configure(config=request.config, vcr=registry)
    return [m if callable(m) or m in MATCHER_NAMES else registry.matchers.get(m, m)
            for m in match_on]


@pytest.fixture(autouse=True)
def vcr(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The cassette of a test marked `vcr` (None for other tests)."""
    marks = list(request.node.iter_markers(name="vcr"))
    if not marks or request.config.getoption("--disable-recording"):
        yield None
        return
    yield from in_use(request, session_for(request, marks))


@pytest.fixture(autouse=True)
def block_network(request: pytest.FixtureRequest, vcr: Any) -> Iterator[None]:
    """pytest-recording's block: on with the marker or --block-network, off while recording."""
    from realprobe.cassettes.network_block import blocked_network

    marker = request.node.get_closest_marker("block_network")
    if not (marker or request.config.getoption("--block-network")) or (
        vcr is not None and vcr.recording
    ):
        yield
        return
    allowed = marker.kwargs.get("allowed_hosts") if marker is not None else None
    if allowed is None:
        allowed = request.config.getoption("--allowed-hosts") or ""
    with blocked_network(allowed, "block_network (pytest-recording's marker or --block-network)"):
        yield
