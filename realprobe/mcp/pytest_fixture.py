"""MCP cassettes in pytest: a recorded MCP server for the agent under test.

```python
import pytest
from mcp import Client

@pytest.mark.mcp_cassette(server=["mcp-server-time"])
async def test_my_agent_tells_the_time(mcp_server):
    async with Client(mcp_server.params) as client:       # or Client(mcp_server.url)
        assert await my_agent("What time is it in Tokyo?", client)
```

`mcp_server` replays `<test file folder>/cassettes/<test module>/<test name>.jsonl` (an MCP
session cassette) through `realprobe mcp replay`: no server is started, none need be
installed. When the cassette is missing and the record mode allows it, the session is
recorded instead, through `realprobe mcp proxy --record` in front of `server` (the
marker's command), and kept only if the test passes. The record modes and the network block
are the HTTP plugin's (`--realprobe-record-mode none|once|new_episodes|all`, default none;
`--realprobe-record`; `--realprobe-block-network`): a session is recorded whole, so
`new_episodes` records only a missing cassette, as `once` does. A request the cassette has
no answer for fails the test with one line naming the request and the cassette.

Marker keywords: `server` (argv list or a command line), `path` (another cassette file),
`record_mode`, `on_exhausted` (error|repeat-last|cycle), `latency` (none|real|scaled:X),
`env` (extra environment for the recorded server).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

MARKER = "mcp_cassette"
#: where the fixture keeps its cassette for the miss report
_CASSETTE = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(server=None, *, path=None, record_mode=None, on_exhausted='error', "
        "latency='none', env=None): the `mcp_server` fixture replays this test's MCP session "
        "cassette, or records it through realprobe's MCP proxy in front of `server`.",
    )


@dataclass
class McpServer:
    """The server handed to the agent under test: `params` for the SDK's `stdio_client` /
    `Client`, or `url` (streamable HTTP, started on first use)."""

    cassette: Path
    recording: bool
    command: list[str]
    env: dict[str, str]
    _http: subprocess.Popen[str] | None = field(default=None, repr=False)
    _url: str | None = field(default=None, repr=False)
    _http_record: Path | None = field(default=None, repr=False)

    @property
    def params(self) -> Any:
        """`mcp.StdioServerParameters` of the replaying (or recording) server."""
        from mcp import StdioServerParameters

        return StdioServerParameters(command=self.command[0], args=self.command[1:],
                                     env=self.env)

    @property
    def url(self) -> str:
        """A streamable-HTTP URL serving the same (one process for the test)."""
        if self._url is None:
            self._url = self._start_http()
        return self._url

    def _start_http(self) -> str:
        argv = list(self.command)
        at = argv.index("proxy" if self.recording else "replay")  # ours, before the server's
        extra = ["--transport", "http", "--port", "0"]
        if self.recording:  # over HTTP the proxy records a folder of sessions
            self._http_record = self.cassette.with_name(self.cassette.name + ".sessions")
            i = argv.index("--record")
            argv[i + 1] = str(self._http_record)
        argv[at + 1:at + 1] = extra
        self._http = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True, env=self.env)
        assert self._http.stderr is not None
        line = self._http.stderr.readline()
        found = re.search(r"on (http://\S+/mcp)", line)
        if found is None:
            self._stop_http()
            pytest.fail(f"the MCP server for {self.cassette.name} did not start: "
                        f"{line.strip()}", pytrace=False)
        return found.group(1)

    def _stop_http(self) -> None:
        if self._http is not None and self._http.poll() is None:
            self._http.send_signal(signal.SIGINT)
            try:
                self._http.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._http.kill()
                self._http.wait()


def _server(kwargs: dict[str, Any], args: tuple[Any, ...]) -> list[str] | None:
    given = kwargs.get("server", args[0] if args else None)
    if given is None:
        return None
    return shlex.split(given) if isinstance(given, str) else [str(a) for a in given]


@pytest.fixture
def mcp_server(request: pytest.FixtureRequest) -> Iterator[McpServer]:
    """A recorded MCP server for this test (see the module's doc)."""
    from realprobe.cassettes.pytest_plugin import cassette_path, record_mode_of
    from realprobe.cassettes.pytest_vcr import failed_test

    mark = request.node.get_closest_marker(MARKER)
    args, kwargs = (tuple(mark.args), dict(mark.kwargs)) if mark is not None else ((), {})
    path = cassette_path(request, kwargs.get("path"), ".jsonl")  # the HTTP plugin's layout
    request.node.stash[_CASSETTE] = path
    mode = record_mode_of(request.config, kwargs)
    recording = mode == "all" or (mode in ("once", "new_episodes") and not path.exists())
    env = {**os.environ, **{str(k): str(v) for k, v in (kwargs.get("env") or {}).items()}}
    realprobe = [sys.executable, "-m", "realprobe.cli", "mcp"]
    partial = None  # where a recording is written until the test has passed
    if not recording:
        if not path.exists():
            pytest.fail(f"no MCP cassette {path} (record mode {mode}); record it with "
                        "--realprobe-record-mode=once", pytrace=False)
        command = [*realprobe, "replay", str(path), "--on-exhausted",
                   str(kwargs.get("on_exhausted", "error")), "--latency",
                   str(kwargs.get("latency", "none"))]
    else:
        argv = _server(kwargs, args)
        if not argv:
            pytest.fail(f"cannot record {path.name}: give the server to record, "
                        "@pytest.mark.mcp_cassette(server=[...command...])", pytrace=False)
        partial = path.with_name(path.name + ".partial")
        command = [*realprobe, "proxy", "--record", str(partial), "--", *argv]
    server = McpServer(path, recording, command, env)
    try:
        yield server
    finally:
        server._stop_http()
        if partial is not None:
            _keep(server, partial, failed=failed_test(request))


def _keep(server: McpServer, partial: Path, *, failed: bool) -> None:
    """A passing test's recording becomes its cassette (through the one file writer); a
    failing test's is dropped."""
    import shutil

    from realprobe.outputs import write_output

    source = partial
    if server._http_record is not None:  # over HTTP: the session the test opened
        sessions = sorted(server._http_record.glob("*.jsonl"), key=lambda p: p.stat().st_size)
        source = sessions[-1] if sessions else partial
    try:
        if not failed and source.exists():
            write_output(server.cassette, source.read_bytes(), make_parents=True)
    finally:
        partial.unlink(missing_ok=True)
        if server._http_record is not None:
            shutil.rmtree(server._http_record, ignore_errors=True)


def _miss_in(exc: BaseException | None, cassette: str, depth: int = 0) -> str | None:
    """The replay's miss message inside what the test raised (an SDK `MCPError`, perhaps
    in an exception group or as a cause), if there is one."""
    if exc is None or depth > 8:
        return None
    text = str(exc)
    if cassette in text and ("no recording for" in text or "holds" in text):
        return text.splitlines()[0]
    for inner in getattr(exc, "exceptions", ()):
        found = _miss_in(inner, cassette, depth + 1)
        if found:
            return found
    return _miss_in(exc.__cause__ or exc.__context__, cassette, depth + 1)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report: Any = yield
    path = item.stash.get(_CASSETTE, None)
    if report.failed and path is not None and call.excinfo is not None:
        missed = _miss_in(call.excinfo.value, str(path))
        if missed:
            report.longrepr = f"MCP cassette miss: {missed}"
    return report  # type: ignore[no-any-return]
