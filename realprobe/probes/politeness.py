"""Per-host politeness of a probe run: what it applies on top of the catalogue, and budgets.

By default (from the catalogue's `api.politeness`, overridable per run):
- at most `max_in_flight` calls in flight per host (1),
- consecutive call *starts* on one host at least `min_interval_s` apart, plus a random
  jitter in [0, `jitter_s`] so probes from many machines do not synchronise,
- a `Retry-After` (on any answer that carries one) pauses the host for that long; a 429
  without one backs off exponentially; a pause longer than `max_pause_s` ends the host's
  probing for this run,
- a daily budget of calls per API, counted in the database so it holds across runs and
  processes. Budgets protect real providers, so by default they count only calls that
  leave the machine for a real API (live and record modes), not sandbox or simulated calls.

The waits themselves are the shared per-host limiter (`realprobe.hosts`). Hosts are keyed
by the canonical host of the API's base URL. Request URLs stay canonical
above the SandboxRouter, so against the sandbox each emulated API is its own host and a
sandbox run is as parallel as a live one. Waits use the client's clock: under simulation
(a virtual clock) they advance time without sleeping.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from realprobe.adapters.spec import ApiSpec, Politeness
from realprobe.clock import Clock, utc_day
from realprobe.hosts import Backoff
from realprobe.store import Store

#: politeness when it is switched off (sandbox/simulate benchmarks): no waits, no budget
UNLIMITED_IN_FLIGHT = 1_000_000


class PolitenessConfig(BaseModel):
    """What a probe run applies on top of the catalogue's per-API politeness."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    #: replaces every API's politeness (tests: `Politeness(min_interval_s=0, jitter_s=0)`)
    override: Politeness | None = None
    #: replaces the politeness of the named APIs
    per_api: dict[str, Politeness] = Field(default_factory=dict)
    honour_retry_after: bool = True
    #: a Retry-After (or backoff) longer than this ends the host's probing in this run
    max_pause_s: float = 300.0
    #: first backoff after a 429 without Retry-After (doubles per consecutive 429)
    backoff_429_s: float = 5.0
    #: None: budgets count only for live/record runs; True/False forces them on/off
    budgets: bool | None = None

    @classmethod
    def off(cls) -> PolitenessConfig:
        """No interval, no jitter, no in-flight limit, no budget (sandbox/simulate only)."""
        return cls(enabled=False, budgets=False)

    def backoff(self) -> Backoff:
        """How the run's host limiters react to Retry-After and 429s."""
        return Backoff(
            honour_retry_after=self.enabled and self.honour_retry_after,
            backoff_429_s=self.backoff_429_s,
        )

    def for_api(self, api: ApiSpec) -> Politeness:
        if not self.enabled:
            return Politeness(
                max_in_flight=UNLIMITED_IN_FLIGHT,
                min_interval_s=0.0,
                jitter_s=0.0,
                daily_budget=2**62,
            )
        if api.id in self.per_api:
            return self.per_api[api.id]
        if self.override is not None:
            return self.override
        return api.politeness


class Budget:
    """The daily call budget per API, kept in the store (UTC days on the client's clock)."""

    def __init__(self, store: Store, target: str, clock: Clock, enabled: bool) -> None:
        self.store = store
        self.target = target
        self.clock = clock
        self.enabled = enabled

    def day(self) -> str:
        return utc_day(self.clock.wall())[0]

    def take(self, api: str, limit: int) -> bool:
        if not self.enabled:
            return True
        return self.store.budget_take(self.day(), api, self.target, limit)
