"""Picking a transport: the only place that knows live, sandbox, record, replay and simulate.

Commands, probes, agents and the MCP server ask `make_client` for an HttpClient and never
branch on the mode themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

import httpx

from realprobe.adapters.catalog import Catalog
from realprobe.clock import Clock, RealClock, VirtualClock
from realprobe.errors import RealprobeError
from realprobe.replay.client import (
    ClientConfig,
    HttpClient,
    SyncHttpClient,
    sync_system_resolver,
    system_resolver,
)
from realprobe.replay.simulate import SimulateTransport, origins_of
from realprobe.replay.target import Target
from realprobe.replay.transports import (
    SandboxRouter,
    SyncSandboxRouter,
    live_transport,
    sync_live_transport,
)
from realprobe.simulator.profile import Profile, resolve_profile


class Mode(StrEnum):
    LIVE = "live"
    RECORD = "record"
    REPLAY = "replay"
    SIMULATE = "simulate"

    @classmethod
    def parse(cls, value: str | Mode) -> Mode:
        """A mode from a string as a user types it; an unknown value is an error (never a
        silent fallback to live)."""
        if isinstance(value, Mode):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise RealprobeError(f"mode {value!r}: choose one of {choices}") from None


@dataclass
class TransportOptions:
    mode: Mode = Mode.LIVE
    sandbox: str | None = None
    profile: str | Path | Profile | None = None
    seed: int = 0
    cassette: str | Path | None = None
    real_time: bool = False
    #: replay: none|real|scaled:X|virtual (None: $REALPROBE_REPLAY_LATENCY, else virtual)
    replay_latency: str | None = None
    #: replay, when identical requests outrun their recordings: error|repeat-last|cycle
    on_exhausted: str | None = None
    #: record: scrub secrets before writing (on by default)
    scrub: bool = True

    def __post_init__(self) -> None:
        # `mode="simulate"` (a plain string) must mean Mode.SIMULATE, and a typo must fail
        self.mode = Mode.parse(self.mode)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise RealprobeError(f"seed {self.seed!r}: expected an integer")

    @property
    def target(self) -> Target:
        """Where these options send calls (validated and normalised first)."""
        return Target.from_options(self.normalised())

    def normalised(self) -> TransportOptions:
        mode = Mode.parse(self.mode)
        if self.profile is not None and mode is Mode.LIVE and self.sandbox is None:
            mode = Mode.SIMULATE
        if self.sandbox and mode is Mode.SIMULATE:
            raise RealprobeError(
                "--sandbox and --simulate exclude each other: simulation runs in process; "
                "pick one"
            )
        if mode is Mode.LIVE and self.cassette is not None:
            raise RealprobeError(
                "a cassette needs mode record or replay (live calls write no cassette)"
            )
        if mode in (Mode.RECORD, Mode.REPLAY) and self.cassette is None:
            raise RealprobeError(f"--mode {mode.value} needs --cassette PATH")
        return replace(self, mode=mode)


def base_transport(
    catalog: Catalog, opts: TransportOptions, clock: Clock
) -> httpx.AsyncBaseTransport:
    """The transport that really answers: network, sandbox or simulator."""
    if opts.mode is Mode.SIMULATE:
        return SimulateTransport(
            catalog,
            resolve_profile(opts.profile),
            seed=opts.seed,
            clock=clock,
            real_time=opts.real_time,
        )
    if opts.sandbox:
        return SandboxRouter(opts.sandbox, origins_of(catalog), live_transport())
    return live_transport()


def _virtual_by_default(opts: TransportOptions) -> bool:
    """Simulate, replay, and recording the simulator run on a virtual clock unless real time
    is asked for (replay latency `real`/`scaled:X` sleeps for real)."""
    if opts.real_time:
        return False
    if opts.mode is Mode.REPLAY:
        from realprobe.replay.recording import replay_latency_of

        return replay_latency_of(opts).virtual_clock
    if opts.mode is Mode.RECORD:
        return opts.profile is not None and not opts.sandbox
    return opts.mode is Mode.SIMULATE


def make_client(
    catalog: Catalog,
    opts: TransportOptions | None = None,
    *,
    clock: Clock | None = None,
    config: ClientConfig | None = None,
) -> HttpClient:
    opts = (opts or TransportOptions()).normalised()
    if clock is None:
        clock = VirtualClock() if _virtual_by_default(opts) else RealClock()
    if opts.mode in (Mode.RECORD, Mode.REPLAY):
        from realprobe.replay import recording

        transport = recording.transport_for(catalog, opts, clock, base_transport)
    else:
        transport = base_transport(catalog, opts, clock)
    target = Target.from_options(opts)
    return HttpClient(
        transport,
        clock=clock,
        config=config,
        resolver=system_resolver if target.reaches_network else None,
        target=target,
    )


def make_sync_client(
    catalog: Catalog,
    opts: TransportOptions | None = None,
    *,
    config: ClientConfig | None = None,
) -> SyncHttpClient:
    """The synchronous client (scripts, notebooks): live, sandbox, record and replay.

    Simulation runs on a virtual clock inside an event loop: use `make_client` for it.
    """
    from realprobe.replay.sync import SyncRecordingTransport, SyncReplayTransport

    opts = (opts or TransportOptions()).normalised()
    if opts.mode is Mode.SIMULATE:
        raise RealprobeError(
            "the synchronous client cannot simulate; use make_client and call_tool (async)"
        )
    base: httpx.BaseTransport = (
        SyncSandboxRouter(opts.sandbox, origins_of(catalog))
        if opts.sandbox
        else sync_live_transport()
    )
    transport: httpx.BaseTransport = base
    if opts.mode is Mode.REPLAY:
        assert opts.cassette is not None
        from realprobe.replay.recording import on_exhausted_of

        latency = opts.replay_latency or "none"
        transport = SyncReplayTransport.from_path(
            opts.cassette, latency=latency, on_exhausted=on_exhausted_of(opts)
        )
    elif opts.mode is Mode.RECORD:
        assert opts.cassette is not None
        from realprobe.replay.scrub import ScrubConfig

        source = (
            {"source": "realprobe sandbox", "sandbox": opts.sandbox}
            if opts.sandbox
            else {"source": "live"}
        )
        transport = SyncRecordingTransport(
            base, opts.cassette, meta=source, scrub=ScrubConfig(enabled=opts.scrub)
        )
    # redirect targets' host names are resolved and checked only on the real network (the
    # sandbox, replay and the simulator use canonical names that need not resolve here)
    target = Target.from_options(opts)
    resolver = sync_system_resolver if target.reaches_network else None
    return SyncHttpClient(transport, config=config, resolver=resolver, target=target)
