"""Picking a transport: the only place that knows live, sandbox, record, replay and simulate.

Commands, probes, agents and the MCP server ask `make_client` for an HttpClient and never
branch on the mode themselves. The record/replay seam (`_record_mode`, `replay_latency_of`,
`on_exhausted_of`) reads the options here, for the async and the sync client alike, then hands
the cassette room (`open_cassette`) everything at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from realprobe.adapters.catalog import Catalog
from realprobe.cassettes.core import EXHAUSTION_POLICIES, LatencyPolicy
from realprobe.cassettes.session import open_cassette
from realprobe.clock import Clock, RealClock, VirtualClock
from realprobe.errors import RealprobeError
from realprobe.http.client import (
    ClientConfig,
    HttpClient,
    SyncHttpClient,
    sync_system_resolver,
    system_resolver,
)
from realprobe.http.mode import Mode
from realprobe.http.simulate import SimulateTransport, origins_of
from realprobe.http.transports import (
    SandboxRouter,
    SyncSandboxRouter,
    check_sandbox_url,
    live_transport,
    sync_live_transport,
)
from realprobe.ranges import checked
from realprobe.simulator.plans import FaultPlan, plan_for
from realprobe.simulator.profile import DEFAULT_PROFILE, Profile, resolve_profile
from realprobe.target import Target


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
    #: none|once|new_episodes|all (vcrpy's record modes); decides record or replay itself
    record_mode: str | None = None
    #: simulate: a fault plan (built-in name, file, or FaultPlan) applied over the profile
    fault_plan: str | Path | FaultPlan | None = None
    #: simulate: every tool's failure share set to this (Profile.scaled)
    fault_rate: float | None = None

    def __post_init__(self) -> None:
        # `mode="simulate"` (a plain string) must mean Mode.SIMULATE, and a typo must fail
        self.mode = Mode.parse(self.mode)
        check_seed(self.seed)

    @property
    def target(self) -> Target:
        """Where these options send calls (validated and normalised first)."""
        return Target.from_options(self.normalised())

    def normalised(self) -> TransportOptions:
        """The one check of where calls go, used by every entry point (the Python API, every
        command, tasks, MCP, probes and the exporter): a typo, a contradiction or a missing
        piece is an error naming the parameters, and a simulate target without a profile
        gets the one default profile (`DEFAULT_PROFILE`)."""
        mode = Mode.parse(self.mode)
        if self.record_mode is not None:
            mode = self._mode_for_record_mode()
        if self.sandbox is not None:
            check_sandbox_url(self.sandbox)
        profile = self.profile
        if self._check_faults(mode) and profile is None and mode is Mode.LIVE:
            profile = "calm"  # a fault plan or fault rate alone: on calm tools
        if profile is not None and mode is Mode.LIVE and self.sandbox is None:
            mode = Mode.SIMULATE
        if self.sandbox and (mode is Mode.SIMULATE or self.profile is not None):
            raise RealprobeError(
                "sandbox and profile exclude each other: the sandbox has its own profile and "
                "simulation runs in process; pick one",
                param=("sandbox", "profile"),
            )
        if mode is Mode.REPLAY and self.profile is not None:
            raise RealprobeError(
                "a replay answers from its cassette: drop the profile", param="profile"
            )
        if mode is Mode.LIVE and self.cassette is not None:
            raise RealprobeError(
                "a cassette needs mode record or replay (live calls write no cassette)",
                param=("cassette", "mode"),
            )
        if mode in (Mode.RECORD, Mode.REPLAY) and self.cassette is None:
            raise RealprobeError(
                f"mode {mode.value} needs cassette=PATH", param=("mode", "cassette")
            )
        if mode is Mode.SIMULATE and profile is None:
            profile = DEFAULT_PROFILE
        if profile is not None and not isinstance(profile, Profile):
            resolve_profile(profile)  # a bad name or file fails here, before anything runs
        if self.real_time and mode in (Mode.LIVE, Mode.RECORD) and profile is None:
            raise RealprobeError(
                "real_time applies to a simulated or replayed target (live and sandbox calls "
                "always take real time)",
                param="real_time",
            )
        return replace(self, mode=mode, profile=profile)

    def _check_faults(self, mode: Mode) -> bool:
        """Whether a fault plan or fault rate is set (checked: they apply in process)."""
        if self.fault_plan is None and self.fault_rate is None:
            return False
        if self.sandbox is not None or mode is Mode.REPLAY:
            raise RealprobeError(
                "fault_plan / fault_rate apply to the in-process simulator; a sandbox takes "
                "its own (give them to the sandbox when it starts)",
                param=("fault_plan", "fault_rate"),
            )
        check_fault_rate(self.fault_rate)
        if self.fault_plan is not None:  # a bad name or file, or a plan that cannot apply
            rule = resolve_profile(self.profile or DEFAULT_PROFILE).rule  # beside the profile,
            plan_for(self.fault_plan, self.fault_rate, rule)  # fails before anything runs
        return True

    def _mode_for_record_mode(self) -> Mode:
        from realprobe.cassettes.session import RECORD_MODES

        rm = self.record_mode
        if rm not in RECORD_MODES:
            raise RealprobeError(
                f"record_mode {rm!r}: choose one of {', '.join(RECORD_MODES)}",
                param="record_mode",
            )
        if self.cassette is None:
            raise RealprobeError(
                f"record_mode {rm} needs cassette=PATH", param=("record_mode", "cassette")
            )
        if self.mode is Mode.SIMULATE:
            raise RealprobeError(
                "record_mode decides record or replay; drop mode=simulate",
                param=("record_mode", "mode"),
            )
        if rm == "none" or (rm == "once" and Path(self.cassette).exists()):
            return Mode.REPLAY
        return Mode.RECORD


def check_seed(value: object, param: str = "seed") -> None:
    """A seed is an integer SQLite can store (every run and row keeps the seeds it ran with)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise RealprobeError(f"{param} {value!r}: expected an integer", param=param)
    if not -(2**63) <= value < 2**63:
        raise RealprobeError(
            f"{param} {str(value)[:30]}: expected an integer within 64 bits", param=param
        )


def check_fault_rate(value: object, param: str = "fault_rate") -> None:
    """A fault rate is a share of calls, 0 to 1 (None: not set)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                              or not 0 <= value <= 1):
        raise RealprobeError(f"{param} {value!r}: expected a share between 0 and 1", param=param)


def base_transport(
    catalog: Catalog, opts: TransportOptions, clock: Clock, limits: httpx.Limits | None = None
) -> httpx.AsyncBaseTransport:
    """The transport that really answers: network, sandbox or simulator (`limits`: the
    network connection pool's)."""
    if opts.mode is Mode.SIMULATE or (opts.mode is Mode.RECORD and opts.profile is not None
                                      and not opts.sandbox):
        profile = resolve_profile(opts.profile)
        return SimulateTransport(
            catalog,
            profile.scaled(opts.fault_rate) if opts.fault_rate is not None else profile,
            seed=opts.seed,
            clock=clock,
            real_time=opts.real_time,
            # the plan's faults at their places, the dial's elsewhere (or one line refused)
            plan=plan_for(opts.fault_plan, opts.fault_rate, profile.rule),
        )
    if opts.sandbox:
        return SandboxRouter(opts.sandbox, origins_of(catalog), live_transport(limits))
    return live_transport(limits)


def _virtual_by_default(opts: TransportOptions) -> bool:
    """Simulate, replay, and recording the simulator run on a virtual clock unless real time
    is asked for (replay latency `real`/`scaled:X` sleeps for real)."""
    if opts.real_time:
        return False
    if opts.mode is Mode.RECORD:
        return opts.profile is not None and not opts.sandbox
    return opts.mode is Mode.SIMULATE


@checked
def make_client(
    catalog: Catalog,
    opts: TransportOptions | None = None,
    *,
    clock: Clock | None = None,
    config: ClientConfig | None = None,
) -> HttpClient:
    opts = (opts or TransportOptions()).normalised()
    # every setting first, then the cassette room once (a replay, or a recording around the
    # transport that really answers)
    record_mode, latency, policy = _record_mode(opts), _latency_setting(opts), on_exhausted_of(opts)
    meta = record_meta(catalog, opts)
    # the caller's clock, else real time when asked, else by what answers; a replay left
    # without one runs on a virtual clock when its latency is virtual
    if clock is None and (opts.real_time or record_mode != "none"):
        clock = VirtualClock() if _virtual_by_default(opts) else RealClock()
    transport = None if record_mode == "none" else base_transport(
        catalog, opts, clock or RealClock(), (config or ClientConfig()).pool_limits())
    if opts.cassette is not None and record_mode:
        transport = open_cassette(Path(opts.cassette), record_mode, transport, clock=clock,
                                  latency=latency, on_exhausted=policy, scrub=opts.scrub,
                                  meta=meta)
        clock = transport.clock if record_mode == "none" else clock
    assert transport is not None and clock is not None
    target = Target.from_options(opts)
    return HttpClient(
        transport,
        clock=clock,
        config=config,
        resolver=system_resolver if target.reaches_network else None,
        target=target,
    )


@checked
def make_sync_client(
    catalog: Catalog,
    opts: TransportOptions | None = None,
    *,
    config: ClientConfig | None = None,
) -> SyncHttpClient:
    """The synchronous client (scripts, notebooks): live, sandbox, record and replay.

    Simulation runs on a virtual clock inside an event loop: use `make_client` for it.
    """
    opts = (opts or TransportOptions()).normalised()
    if opts.mode is Mode.SIMULATE:
        raise RealprobeError(
            "the synchronous client cannot simulate; use make_client and call_tool (async)"
        )
    record_mode, latency, policy = _record_mode(opts), _latency_setting(opts), on_exhausted_of(opts)
    meta = record_meta(catalog, opts)
    transport: httpx.BaseTransport | None = None
    if record_mode != "none":
        transport = (SyncSandboxRouter(opts.sandbox, origins_of(catalog)) if opts.sandbox
                     else sync_live_transport((config or ClientConfig()).pool_limits()))
    if opts.cassette is not None and record_mode:
        transport = open_cassette(Path(opts.cassette), record_mode, transport, sync=True,
                                  latency=latency, on_exhausted=policy, scrub=opts.scrub,
                                  meta=meta)
    assert transport is not None
    # redirect targets' host names are resolved and checked only on the real network (the
    # sandbox, replay and the simulator use canonical names that need not resolve here)
    target = Target.from_options(opts)
    resolver = sync_system_resolver if target.reaches_network else None
    return SyncHttpClient(transport, config=config, resolver=resolver, target=target)


# -- the record/replay seam ----------------------------------------------------------------

LATENCY_ENV = "REALPROBE_REPLAY_LATENCY"
EXHAUSTED_ENV = "REALPROBE_ON_EXHAUSTED"


def replay_latency_of(opts: TransportOptions) -> LatencyPolicy:
    return LatencyPolicy.parse(_latency_setting(opts))


def _latency_setting(opts: TransportOptions) -> str:
    """Replay timing as set: the option, else $REALPROBE_REPLAY_LATENCY, else virtual."""
    return opts.replay_latency or os.environ.get(LATENCY_ENV) or "virtual"


def on_exhausted_of(opts: TransportOptions) -> str:
    policy = opts.on_exhausted or os.environ.get(EXHAUSTED_ENV) or "error"
    if policy not in EXHAUSTION_POLICIES:
        raise RealprobeError(
            f"on_exhausted {policy!r}: choose one of {', '.join(EXHAUSTION_POLICIES)}"
        )
    return policy


def _profile_label(profile: object) -> str | None:
    if profile is None:
        return None
    name = getattr(profile, "name", None)
    return str(name) if name else str(profile)


def record_meta(catalog: Catalog, opts: TransportOptions) -> dict[str, Any]:
    """What a recording says about where its answers came from (sync and async alike)."""
    source: dict[str, Any]
    if opts.sandbox:
        source = {"source": "realprobe sandbox", "sandbox": opts.sandbox}
        if opts.profile is not None:
            source["profile"] = _profile_label(opts.profile)
    elif opts.profile is not None:
        source = {"source": "realprobe simulator", "profile": _profile_label(opts.profile)}
    else:
        source = {"source": "live"}
    source["seed"] = opts.seed
    source["catalog_tools"] = len(catalog)
    return source


def _record_mode(opts: TransportOptions) -> str:
    """The cassette's record mode (vcrpy's: `none` replays, `all` records, `new_episodes`
    both); empty without a cassette."""
    if opts.mode is Mode.REPLAY:
        return "none"
    if opts.mode is not Mode.RECORD:
        return ""
    return "new_episodes" if opts.record_mode == "new_episodes" else "all"


def fetch_document(url: str, max_bytes: int | None = None) -> str:
    """A text document by URL (an OpenAPI description, say) through the one client:
    size-capped, redirects checked; a loopback URL is allowed because the user named it."""

    from realprobe.adapters.http import FetchFailure
    from realprobe.adapters.openapi.document import MAX_DOCUMENT_BYTES
    from realprobe.http.client import is_private_host

    config = ClientConfig(
        max_bytes=max_bytes or MAX_DOCUMENT_BYTES, deadline_s=60.0, read_timeout_s=30.0
    )
    host = urlsplit(url).hostname or ""
    with make_sync_client(Catalog([]), config=config) as client:
        try:
            got = client.fetch(
                "GET",
                url,
                headers={"Accept": "application/json, application/yaml;q=0.9, */*;q=0.5"},
                allow_private=is_private_host(host),
            )
        except FetchFailure as exc:
            raise RealprobeError(f"{url}: cannot fetch ({exc.code.value}: {exc.message})") from exc
    if got.status != 200:
        raise RealprobeError(f"{url}: HTTP {got.status}, expected 200 with the description")
    try:
        return got.body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise RealprobeError(f"{url}: the description is not UTF-8 text") from exc
