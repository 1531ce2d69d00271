"""What the sandbox can change while it runs: the profile, the toxics and the seed."""

from __future__ import annotations

import random
import time

from realprobe.simulator.faults import FaultModel, Outcome
from realprobe.simulator.plans import FaultPlan
from realprobe.simulator.profile import Profile
from realprobe.simulator.toxics import ToxicSet, toxics_from_profile


class Runtime:
    """The fault state of a running sandbox. `profile=None` means cleared: every request
    succeeds with no added latency (toxics still apply)."""

    def __init__(
        self, profile: Profile, seed: int | str = 0, plan: FaultPlan | None = None
    ) -> None:
        self.plan = plan
        self.start_profile = profile
        self.start_seed = seed
        self.profile: Profile | None = profile
        self.seed: int | str = seed
        self.toxics = ToxicSet(toxics_from_profile(profile.toxics))
        self.model = FaultModel(profile, seed, plan)
        self.rng = random.Random(f"{seed}:toxics")
        self._clear_rng = random.Random(f"{seed}:cleared")

    def set_profile(self, profile: Profile | None, *, toxics: bool = True) -> None:
        """A new profile (None clears it); its toxics replace the current ones."""
        self.profile = profile
        self.model = FaultModel(profile or self.start_profile, self.seed, self.plan)
        if toxics:
            self.toxics = ToxicSet(toxics_from_profile(profile.toxics) if profile else {})

    def reseed(self, seed: int | str | None = None) -> None:
        """Fresh random streams (from `seed`, or the current seed again)."""
        if seed is not None:
            self.seed = seed
        self.model = FaultModel(self.profile or self.start_profile, self.seed, self.plan)
        self.rng = random.Random(f"{self.seed}:toxics")
        self._clear_rng = random.Random(f"{self.seed}:cleared")

    def reset(self) -> None:
        """Back to how the sandbox started: its profile, its toxics, its seed."""
        self.seed = self.start_seed
        self.set_profile(self.start_profile)
        self.reseed()

    def draw(self, tool: str, numbered: tuple[str, int] | None = None) -> Outcome:
        """The next outcome of `tool`, or call n of a caller that numbers its calls
        (`numbered` = (caller key, n)): those get the same outcomes whatever order they
        arrive in."""
        if self.profile is None:
            return Outcome(None, 0.0, self._clear_rng.getrandbits(30))
        if numbered is not None:
            return self.model.draw_numbered(tool, *numbered, time.time())
        return self.model.draw(tool, time.time())
