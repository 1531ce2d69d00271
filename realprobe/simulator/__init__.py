"""The fault model: a Profile turned into seeded outcomes, latencies and response plans."""

from realprobe.simulator.faults import FaultModel, Outcome
from realprobe.simulator.profile import Profile, ProfileError, ToolProfile, load_profile
from realprobe.simulator.render import VARIANTS, Plan, render
from realprobe.simulator.routes import Body, Route, RouteTable

__all__ = [
    "VARIANTS",
    "Body",
    "FaultModel",
    "Outcome",
    "Plan",
    "Profile",
    "ProfileError",
    "Route",
    "RouteTable",
    "ToolProfile",
    "load_profile",
    "render",
]
