"""`use_cassette`: record and replay every HTTP call made inside a block, with no code change.

```python
import realprobe

with realprobe.use_cassette("tests/cassettes/weather.json", record_mode="once"):
    my_code_that_makes_its_own_httpx_client()
```

httpx (`Client` and `AsyncClient` built without a transport) is captured at httpx's default
transports and keeps what realprobe keeps: exceptions (timeouts, resets) replayed as the same
exception, each call's latency, chunk boundaries, and order. `requests`, `urllib3` and
`aiohttp` are captured through vcrpy's own patchers, writing the same cassette; they keep what
vcrpy sees (status, headers, body; the time a call took, not its failures).

Record modes (vcrpy's names): `none` replays only; `once` records when the cassette is missing
and replays otherwise; `new_episodes` replays what exists and records what is new, keeping
both; `all` records everything anew.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import httpx

from realprobe.cassettes import httpx_patch
from realprobe.cassettes.cassette import Call, Cassette, CassetteError
from realprobe.cassettes.core import CassetteMiss, Player, Recorder
from realprobe.cassettes.importers import load_any, normalise_body
from realprobe.cassettes.matching import Matcher
from realprobe.cassettes.recording import RecordingTransport, SyncRecordingTransport
from realprobe.cassettes.replayer import ReplayTransport, SyncReplayTransport
from realprobe.cassettes.scrub import ScrubConfig
from realprobe.clock import Clock
from realprobe.errors import RealprobeError
from realprobe.http.transports import _pointed_at, _Routes, check_sandbox_url
from realprobe.ranges import checked

RECORD_MODES = ("none", "once", "new_episodes", "all")
LIBRARIES = ("httpx", "requests", "urllib3", "aiohttp")
F = TypeVar("F", bound=Callable[..., Any])
#: a request as matched: method, URL, body, headers (None: headers not part of the match)
Request = tuple[str, str, bytes | None, list[tuple[str, str]] | None]


class _Real(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """httpx's own handler as the transport a recording wraps; with `routes`, catalogue URLs
    go to the sandbox (the recording keeps the canonical URLs)."""

    def __init__(self, real: Any, routes: _Routes | None) -> None:
        self.real, self.routes = real, routes

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        target = self.routes.target(request.url) if self.routes is not None else None
        if self.routes is None or target is None:
            return self.real(request)  # type: ignore[no-any-return]
        with _pointed_at(request, target):
            return self.routes.unroute(self.real(request))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = self.routes.target(request.url) if self.routes is not None else None
        if self.routes is None or target is None:
            return await self.real(request)  # type: ignore[no-any-return]
        with _pointed_at(request, target):
            return self.routes.unroute(await self.real(request))


class CassetteSession:
    """One cassette in use: what it replays (a Player), what it records (a Recorder)."""

    def __init__(
        self,
        path: str | Path,
        *,
        record_mode: str = "once",
        match_on: Sequence[Matcher] | None = None,
        on_exhausted: str = "error",
        latency: str = "none",
        sandbox: str | None = None,
        scrub: bool | ScrubConfig = True,
        libraries: Sequence[str] = LIBRARIES,
        meta: dict[str, Any] | None = None,
        hint: str | None = None,
        extra_paths: Sequence[str | Path] = (),
        ignore_hosts: Sequence[str] = (),
        before_record: Callable[[Call], Call | None] | None = None,
        clock: Clock | None = None,
    ) -> None:
        if record_mode not in RECORD_MODES:
            raise RealprobeError(
                f"record mode {record_mode!r}: choose one of {', '.join(RECORD_MODES)}"
            )
        unknown = sorted(set(libraries) - set(LIBRARIES))
        if unknown:
            raise RealprobeError(
                f"cannot capture {', '.join(unknown)}: choose among {', '.join(LIBRARIES)}"
            )
        self.path = Path(path)
        self.record_mode = record_mode
        self.match_on = list(match_on) if match_on is not None else None
        self.on_exhausted = on_exhausted
        self.latency = latency  # parsed by the replay
        if sandbox is not None:
            check_sandbox_url(sandbox)  # the one target check, before anything is recorded
        self.sandbox = sandbox
        self.scrub = scrub if isinstance(scrub, ScrubConfig) else ScrubConfig(enabled=scrub)
        self.libraries = tuple(libraries)
        self.meta = dict(meta or {})
        self.hint = hint
        #: further cassettes replayed (never written), like pytest-recording's extra cassettes
        self.extra_paths = tuple(Path(p) for p in extra_paths)
        #: hosts answered live and never recorded (vcrpy's ignore_hosts / ignore_localhost)
        self.ignore_hosts = frozenset(h.lower() for h in ignore_hosts)
        #: vcrpy's before_record_* hooks as one step (see `vcr_bridge.before_record`)
        self.before_record = before_record
        #: the clock replays and recordings run on (None: by the latency, real time)
        self.clock = clock
        self.player: Player | None = None
        self.recorder: Recorder | None = None
        self.routes: _Routes | None = None
        self._sync_replay: SyncReplayTransport | None = None
        self._async_replay: ReplayTransport | None = None
        self._stack: contextlib.ExitStack | None = None

    # -- opening and closing -------------------------------------------------------------

    @property
    def recording(self) -> bool:
        return self.recorder is not None

    @property
    def play_count(self) -> int:
        """How many recorded responses were replayed (vcrpy's `Cassette.play_count`)."""
        return len(self.player.played) if self.player is not None else 0

    @property
    def all_played(self) -> bool:
        """Every recording was replayed (vcrpy's `Cassette.all_played`)."""
        return self.player is not None and not self.player.unplayed()

    def __len__(self) -> int:
        """Recordings in the cassette (vcrpy's `len(cassette)`)."""
        return len(self.player.cassette.calls) if self.player is not None else 0

    def as_recorded(self, method: str, url: str, body: bytes | None,
                    headers: list[tuple[str, str]] | None) -> Request | None:
        """The request as the cassette would record it, which is what it is matched on (vcrpy
        applies `before_record_request` before matching too); None: it is answered live and
        never recorded (its host is ignored, or the hook leaves it out)."""
        if self.ignore_hosts and (httpx.URL(url).host or "").lower() in self.ignore_hosts:
            return None
        if self.before_record is None:
            return method, url, body, headers
        seen = self.before_record(Call(0, method, url, list(headers or []), body))
        if seen is None:
            return None
        return (seen.method, seen.uri, seen.request_body,
                None if headers is None else seen.request_headers)

    @property
    def cassette(self) -> Cassette | None:
        return self.player.cassette if self.player is not None else None

    def open(self) -> CassetteSession:
        """Load, patch and get ready. A missing cassette in record mode none is fine until a
        request is made (the request then fails, naming the cassette)."""
        existing, replayed = self._load()
        if replayed is not None and self.record_mode in ("none", "once", "new_episodes"):
            self._async_replay = ReplayTransport(
                replayed, clock=self.clock, latency=self.latency, on_exhausted=self.on_exhausted,
                match_on=self.match_on, scrub=self.scrub if self.scrub.enabled else None,
            )
            self.player = self._async_replay.player  # one player for both transports
            self._sync_replay = self._async_replay.synced()
        if self.record_mode != "none" and (
            self.record_mode in ("all", "new_episodes") or existing is None
        ):
            base = existing if self.record_mode == "new_episodes" else None
            meta = {"source": "use_cassette", "record_mode": self.record_mode, **self.meta}
            if self.sandbox:
                meta["sandbox"] = self.sandbox
            self.recorder = Recorder(self.path, meta=meta, scrub=self.scrub, base=base,
                                     before_record=self.before_record, clock=self.clock)
            if self.sandbox:
                from realprobe.adapters.catalog import default_catalog
                from realprobe.http.simulate import origins_of

                self.routes = _Routes(self.sandbox, origins_of(default_catalog()))
        stack = contextlib.ExitStack()
        try:
            if "httpx" in self.libraries:
                httpx_patch.push(self)
                stack.callback(httpx_patch.pop, self)
            others = [lib for lib in self.libraries if lib != "httpx"]
            if others:
                from realprobe.cassettes.vcr_bridge import patch_libraries

                stack.enter_context(patch_libraries(self, others))
        except BaseException:
            stack.close()
            if self.recorder is not None:
                self.recorder.discard()
            raise
        self._stack = stack
        return self

    def _load(self) -> tuple[Cassette | None, Cassette | None]:
        """(This cassette as it is on disk, the cassette to replay: its calls, then each
        extra cassette's); neither in record mode all. Each is read by the one loader, which
        recovers a killed run's journal first; a missing extra adds nothing (as under
        pytest-recording)."""
        if self.record_mode == "all":
            return None, None
        found: list[Cassette | None] = []
        seen: set[Path] = set()
        for i, path in enumerate((self.path, *self.extra_paths)):
            if i and (not path.exists() or path.resolve() in seen):
                continue
            seen.add(path.resolve())
            try:
                found.append(load_any(path))
            except CassetteError:
                if i or path.exists():
                    raise
                found.append(None)
        existing = found[0]
        calls = list(existing.calls) if existing is not None else []
        for extra in found[1:]:
            calls += [replace(call, seq=len(calls) + n + 100_000_000)
                      for n, call in enumerate(extra.calls if extra is not None else ())]
        if len(found) == 1 or (existing is None and not calls):
            return existing, existing
        return existing, Cassette(calls, dict(existing.meta) if existing else {}, self.path)

    def close(self, *, failed: bool = False) -> Path | None:
        """Unpatch, then write what was recorded (nothing when the block failed, or when
        nothing new was recorded, as vcrpy)."""
        if self._stack is not None:
            self._stack.close()
            self._stack = None
        rec = self.recorder
        if rec is None:
            return None
        if failed:
            rec.discard()
            return None
        if not rec.calls:
            rec.discard()  # nothing new: the cassette stays byte for byte (or unwritten)
            return None
        return rec.save()

    def discard(self) -> None:
        if self.recorder is not None:
            self.recorder.discard()

    def __enter__(self) -> CassetteSession:
        return self.open()

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        self.close(failed=exc_type is not None)

    async def __aenter__(self) -> CassetteSession:
        return self.open()

    async def __aexit__(self, exc_type: Any, *_: Any) -> None:
        self.close(failed=exc_type is not None)

    def __call__(self, fn: F) -> F:
        """As a decorator: a fresh session around each call of `fn` (sync or async)."""
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapper(*a: Any, **kw: Any) -> Any:
                async with self._fresh():
                    return await fn(*a, **kw)

            return awrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*a: Any, **kw: Any) -> Any:
            with self._fresh():
                return fn(*a, **kw)

        return wrapper  # type: ignore[return-value]

    def _fresh(self) -> CassetteSession:
        return CassetteSession(
            self.path, record_mode=self.record_mode, match_on=self.match_on,
            on_exhausted=self.on_exhausted, latency=self.latency, sandbox=self.sandbox,
            scrub=self.scrub, libraries=self.libraries, meta=self.meta, hint=self.hint,
            extra_paths=self.extra_paths, ignore_hosts=tuple(self.ignore_hosts),
            before_record=self.before_record, clock=self.clock,
        )

    # -- answering -----------------------------------------------------------------------

    def find(self, method: str, url: str, body: bytes | None,
             headers: list[tuple[str, str]] | None) -> Call | None:
        """The recording to replay for this request; None: record it (when recording);
        CassetteMiss, with the session's hint, when it can be neither."""
        if self.player is not None:
            call = self.player.find(method, url, body, headers)
            if call is not None or self.recorder is not None:
                return call
            try:
                return self.player.lookup(method, url, body, headers)
            except CassetteMiss as exc:
                raise self._miss(exc) from None
        if self.recorder is None:
            why = "" if self.path.exists() else " (no cassette there; record mode none replays)"
            raise self._miss(CassetteMiss(f"no recording for {method} {url} in cassette "
                                          f"{self.path}{why}"))
        return None

    def _headers(self, request: httpx.Request) -> list[tuple[str, str]] | None:
        return self.player.headers_of(request) if self.player is not None else None

    def _miss(self, exc: CassetteMiss) -> CassetteMiss:
        if self.hint and self.hint not in str(exc):
            return type(exc)(f"{exc}; {self.hint}")
        return exc

    def _answer(self, request: httpx.Request, body: bytes) -> tuple[bool, Call | None]:
        """(whether the request is answered live and never recorded, its recording; None:
        record it)."""
        seen = self.as_recorded(request.method, str(request.url), body or None,
                                self._headers(request))
        return (True, None) if seen is None else (False, self.find(*seen))

    def handle_sync(self, request: httpx.Request, real: httpx_patch.SyncReal) -> httpx.Response:
        live, call = self._answer(request, request.read())
        if live:
            return real(request)
        if call is not None:
            assert self._sync_replay is not None
            return self._sync_replay.answer(call, request)
        assert self.recorder is not None
        return SyncRecordingTransport(_Real(real, self.routes),
                                      recorder=self.recorder).handle_request(request)

    async def handle_async(
        self, request: httpx.Request, real: httpx_patch.AsyncReal
    ) -> httpx.Response:
        live, call = self._answer(request, await request.aread())
        if live:
            return await real(request)
        if call is not None:
            assert self._async_replay is not None
            return await self._async_replay.answer(call, request)
        assert self.recorder is not None
        transport = RecordingTransport(_Real(real, self.routes), recorder=self.recorder)
        return await transport.handle_async_request(request)

    # -- for the vcrpy bridge ------------------------------------------------------------

    def fetch_for_bridge(self, method: str, url: str, headers: list[tuple[str, str]],
                         body: bytes | None) -> Call:
        """Record one request the vcrpy path routes to the sandbox, through httpx (so its
        latency and failures are kept); returns the stored call."""
        assert self.recorder is not None
        request = httpx.Request(method, url, headers=headers, content=body or b"")
        pool = httpx.HTTPTransport()
        try:
            real: httpx_patch.SyncReal = functools.partial(httpx_patch.ORIGINAL_SYNC, pool)
            transport = SyncRecordingTransport(_Real(real, self.routes), recorder=self.recorder)
            started = len(self.recorder.calls)
            with contextlib.suppress(httpx.HTTPError):
                response = transport.handle_request(request)
                response.read()
                response.close()
            return self.recorder.calls[started]
        finally:
            pool.close()

    def add_recorded(self, call: Call, started: float) -> None:
        assert self.recorder is not None
        call.elapsed_s = call.ttfb_s = max(0.0, time.monotonic() - started)
        normalise_body(call, read_by_library=True)
        self.recorder.add(call)


class SessionTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """A cassette session as an explicit transport, for a sync or an async client as `base`
    is one or the other: `base` answers what is not recorded. `close_session`: closing the
    client writes the cassette."""

    def __init__(self, session: CassetteSession, base: Any, *,
                 close_session: bool = False) -> None:
        self.session, self.base, self.close_session = session, base, close_session

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.session.handle_sync(request, self.base.handle_request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.session.handle_async(request, self.base.handle_async_request)

    def close(self) -> None:
        try:
            self.base.close()
        finally:
            if self.close_session:
                self.session.close()

    async def aclose(self) -> None:
        try:
            await self.base.aclose()
        finally:
            if self.close_session:
                self.session.close()


def open_cassette(path: Path, record_mode: str, inner: Any = None, *, sync: bool = False,
                  clock: Clock | None = None, latency: str = "none", on_exhausted: str = "error",
                  scrub: bool = True, meta: dict[str, Any] | None = None) -> Any:
    """The transport of an explicit client (realprobe's own, async or `sync`) for a cassette
    in a record mode: `none` replays it, `all` records what `inner` answers, `new_episodes`
    replays what it holds and records the rest (`inner` routes to the sandbox or simulates,
    so the cassette does not). The transport's `clock` is the one its client runs on."""
    if path.is_dir():
        raise CassetteError(f"cassette {path} is a directory; give a file name")
    if record_mode == "all":
        recording = SyncRecordingTransport if sync else RecordingTransport
        return recording(inner, path, clock=None if sync else clock, meta=meta,
                         scrub=ScrubConfig(enabled=scrub))
    session = CassetteSession(path, record_mode=record_mode, libraries=(), clock=clock,
                              on_exhausted=on_exhausted, latency=latency, meta=meta,
                              scrub=scrub and record_mode != "none")
    transport = SessionTransport(session, inner, close_session=True)
    session.open()
    if record_mode == "none" and session._async_replay is None:
        raise CassetteError(f"no cassette at {path}: record one first")
    if record_mode == "none":
        return session._sync_replay if sync else session._async_replay
    return transport


@checked
def use_cassette(
    path: str | Path,
    *,
    record_mode: str = "once",
    match_on: Sequence[Matcher] | None = None,
    on_exhausted: str = "error",
    latency: str = "none",
    sandbox: str | None = None,
    scrub: bool | ScrubConfig = True,
    libraries: Sequence[str] = LIBRARIES,
    filter_headers: Sequence[Any] = (),
    filter_query_parameters: Sequence[Any] = (),
    filter_post_data_parameters: Sequence[Any] = (),
    before_record_request: Any = None,
    before_record_response: Any = None,
    decode_compressed_response: bool = False,
) -> CassetteSession:
    """A context manager (`with`/`async with`) and decorator that records or replays every
    HTTP call made inside it through httpx (and httpx2), requests, urllib3 or aiohttp.

    `filter_*`: more credential names, as vcrpy takes them (names or `(name, replacement)`
    pairs); their values become realprobe's placeholder. `before_record_request`,
    `before_record_response` (callables or lists) and `decode_compressed_response`: vcrpy's,
    applied to each call as it is recorded.
    `match_on`: vcrpy matcher names (method, scheme, host, port, path, query, body, raw_body,
    headers, uri, url) and callables `(incoming, recorded) -> bool` on vcrpy `Request`s;
    default: the cassette's own (method + URL + JSON body digest for realprobe recordings).
    `sandbox`: record against realprobe's loopback sandbox (`realprobe sandbox`) instead of the
    real APIs; the cassette keeps the real URLs. `latency`: none, real or scaled:X.
    """
    base = scrub if isinstance(scrub, ScrubConfig) else ScrubConfig(enabled=scrub)
    scrub = base.with_vcrpy_filters(filter_headers, filter_query_parameters,
                                    filter_post_data_parameters)
    from realprobe.cassettes.vcr_bridge import before_record

    return CassetteSession(
        path, record_mode=record_mode, match_on=match_on, on_exhausted=on_exhausted,
        latency=latency, sandbox=sandbox, scrub=scrub, libraries=libraries,
        before_record=before_record(before_record_request, before_record_response,
                                    decode_compressed=decode_compressed_response),
    )
