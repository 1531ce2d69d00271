"""A real HTTP server on loopback serving every catalogue API under a fault profile."""

from realprobe.sandbox.server import Sandbox, SandboxThread, running

__all__ = ["Sandbox", "SandboxThread", "running"]
