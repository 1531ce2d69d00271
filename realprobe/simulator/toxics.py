"""Toxics: parametrised faults on the wire, applied on top of whatever the answer is.

Modelled on Toxiproxy's toxics, each acts on the bytes of one response as they are written:

- `latency` (`latency_ms`, `jitter_ms`): wait before the first byte (jitter uniform +-).
- `bandwidth` (`rate`, bytes per second): pace every byte of the response at that rate.
- `slicer` (`average_size`, `size_variation`, `delay_ms`): write in slices of about that many
  bytes, with a pause between slices.
- `slow_close` (`delay_ms`): after the response, wait that long, then close the connection.
- `limit_data` (`bytes`): close the connection once that many response bytes went out.
- `timeout` (`timeout_ms`): send nothing; close the connection after that long (0: never).
- `reset_peer` (`after_bytes`): send that many bytes, then reset the connection (RST).

Every toxic has a `toxicity` (the probability it applies to a request, default 1). Toxics are
keyed by scope: `*` (every API), an API id, or a tool name; the most specific scope wins for a
toxic of the same name.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

#: the longest wait any toxic may add (an hour): longer ones are refused, not overflowed
MAX_MS = 3_600_000.0


class _Toxic(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    toxicity: float = Field(1.0, ge=0, le=1)


class LatencyToxic(_Toxic):
    type: Literal["latency"] = "latency"
    latency_ms: float = Field(ge=0, le=MAX_MS)
    jitter_ms: float = Field(0.0, ge=0, le=MAX_MS)


class BandwidthToxic(_Toxic):
    type: Literal["bandwidth"] = "bandwidth"
    rate: float = Field(ge=1, le=1e12, description="bytes per second")


class SlicerToxic(_Toxic):
    type: Literal["slicer"] = "slicer"
    average_size: int = Field(ge=1)
    size_variation: int = Field(0, ge=0)
    delay_ms: float = Field(0.0, ge=0, le=MAX_MS)


class SlowCloseToxic(_Toxic):
    type: Literal["slow_close"] = "slow_close"
    delay_ms: float = Field(ge=0, le=MAX_MS)


class LimitDataToxic(_Toxic):
    type: Literal["limit_data"] = "limit_data"
    bytes: int = Field(ge=0)


class TimeoutToxic(_Toxic):
    type: Literal["timeout"] = "timeout"
    timeout_ms: float = Field(ge=0, le=MAX_MS)


class ResetPeerToxic(_Toxic):
    type: Literal["reset_peer"] = "reset_peer"
    after_bytes: int = Field(0, ge=0)


Toxic = Annotated[
    LatencyToxic
    | BandwidthToxic
    | SlicerToxic
    | SlowCloseToxic
    | LimitDataToxic
    | TimeoutToxic
    | ResetPeerToxic,
    Field(discriminator="type"),
]
#: the toxics' `type` names, in the order of the union above
TOXIC_TYPES: tuple[str, ...] = tuple(
    kind.model_fields["type"].default for kind in get_args(get_args(Toxic)[0]))
ANY_SCOPE = "*"

toxic_adapter: TypeAdapter[Toxic] = TypeAdapter(Toxic)


class ToxicSet:
    """Named toxics per scope (`*`, an API id, or a tool name). Plain, mutable, not thread-safe:
    the sandbox touches it from its one event loop."""

    def __init__(self, initial: dict[str, dict[str, Toxic]] | None = None) -> None:
        self.scopes: dict[str, dict[str, Toxic]] = {
            k: dict(v) for k, v in (initial or {}).items()
        }

    def set(self, scope: str, name: str, toxic: Toxic) -> None:
        self.scopes.setdefault(scope, {})[name] = toxic

    def remove(self, scope: str, name: str) -> bool:
        found = self.scopes.get(scope, {}).pop(name, None) is not None
        if scope in self.scopes and not self.scopes[scope]:
            del self.scopes[scope]
        return found

    def clear(self) -> None:
        self.scopes.clear()

    def for_request(self, api: str | None, tool: str | None) -> dict[str, Toxic]:
        """The toxics that apply to a request: `*`, then the API's, then the tool's."""
        out: dict[str, Toxic] = {}
        for scope in (ANY_SCOPE, api, tool):
            if scope is not None and scope in self.scopes:
                out.update(self.scopes[scope])
        return out

    def dump(self) -> dict[str, dict[str, object]]:
        return {
            scope: {name: t.model_dump(mode="json") for name, t in items.items()}
            for scope, items in self.scopes.items()
        }


def toxics_from_profile(raw: dict[str, list[Toxic]]) -> dict[str, dict[str, Toxic]]:
    """Profile toxics (`{"scope": [toxic, ...]}`) keyed by name; the name is the type unless
    the same type appears twice in one scope (then `type-2`, `type-3`, ...)."""
    out: dict[str, dict[str, Toxic]] = {}
    for scope, items in raw.items():
        named: dict[str, Toxic] = {}
        for t in items:
            name: str = t.type
            i = 1
            while name in named:
                i += 1
                name = f"{t.type}-{i}"
            named[name] = t
        out[scope] = named
    return out
