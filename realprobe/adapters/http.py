"""The adapters' view of the network: a Fetcher protocol that `replay.client` implements.

Adapters never import httpx or a transport; they ask a Fetcher for a response and get
either a `Fetched` or a `FetchFailure` that already carries its taxonomy code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from realprobe.errors import FetchFailure

__all__ = ["FetchFailure", "Fetched", "Fetcher", "SyncFetcher"]


@dataclass(slots=True)
class Fetched:
    status: int
    headers: dict[str, str]
    body: bytes
    url: str
    elapsed_s: float
    redirects: list[str] = field(default_factory=list)
    #: phase timings and TLS facts of the call (`replay.phases.Phases` as a dict), if measured
    phases: dict[str, Any] | None = None


class Fetcher(Protocol):
    async def fetch(
        self,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float | None = None,
        allow_private: bool = False,
    ) -> Fetched: ...


class SyncFetcher(Protocol):
    def fetch(
        self,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float | None = None,
        allow_private: bool = False,
    ) -> Fetched: ...
