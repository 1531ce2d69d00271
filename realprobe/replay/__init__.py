"""Transports (live, sandbox routing, record, replay, simulate) and the one client factory."""

from realprobe.replay.client import ClientConfig, HttpClient
from realprobe.replay.modes import Mode, TransportOptions, make_client
from realprobe.replay.target import Target, TargetKind

__all__ = [
    "ClientConfig",
    "HttpClient",
    "Mode",
    "Target",
    "TargetKind",
    "TransportOptions",
    "make_client",
]
