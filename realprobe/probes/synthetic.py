"""Probe rows drawn straight from the seeded fault model, without HTTP: for checking the
statistics against a known truth in thousands of experiments (tests and benchmarks).

Each call draws an outcome from the profile's stream for the tool, as the simulate transport
does, and applies the caller's deadline the same way: a hang, or any answer slower than the
deadline, is a TIMEOUT stored with the deadline as its latency. Only the HTTP layer is skipped.
"""

from __future__ import annotations

import numpy as np

from realprobe.errors import ErrorCode
from realprobe.probes.loading import _TIMEOUT, CODES, ProbeArrays
from realprobe.simulator.faults import FaultModel
from realprobe.simulator.profile import Profile

_INDEX = {c: i for i, c in enumerate(CODES)}


def fault_model_arrays(
    profile: Profile,
    tools: list[str],
    calls: int,
    *,
    seed: int | str = 0,
    deadline_s: float = 10.0,
    t0: float = 1_790_000_000.0,
    step_s: float = 1.0,
) -> ProbeArrays:
    """`calls` consecutive calls per tool, `step_s` apart, as the rows `load_probes` returns."""
    model = FaultModel(profile, seed)
    tools = sorted(tools)
    n = calls * len(tools)
    ts = np.empty(n)
    lat = np.empty(n)
    code = np.empty(n, dtype=np.int64)
    i = 0
    for tool in tools:
        for j in range(calls):
            ts[i] = t0 + j * step_s
            o = model.draw(tool, float(ts[i]))
            if o.code is ErrorCode.TIMEOUT or o.latency_s > deadline_s:
                code[i], lat[i] = _TIMEOUT, deadline_s * 1000.0
            else:
                code[i] = -1 if o.code is None else _INDEX[o.code]
                lat[i] = o.latency_s * 1000.0
            i += 1
    bounds = np.arange(len(tools) + 1, dtype=np.int64) * calls
    return ProbeArrays(tools, bounds, ts, lat, code, np.full(n, deadline_s))
