"""The statistics' fits run on one BLAS thread; and a median without numpy.ma.

Their optimisations are many tiny problems (three to six parameters, evaluated thousands of
times). OpenBLAS parallelises even those, and on a busy machine its threads spin waiting for
a core: with two busy processes on two cores, stats and calibrate of three tools behind a
biting deadline took 3.96 s on the default threads and 0.64 s on one (0.41 s against 0.39 s
on an idle machine). One thread loses nothing on problems this small. `threadpoolctl` sets
the limit for the libraries numpy and scipy loaded, and puts the old one back on exit.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np

#: every BLAS library of this process loaded with one thread (`single_blas_from_the_start`)
_SINGLE_FROM_THE_START = False


def one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """A context manager: BLAS on one thread inside it (nothing to set, and threadpoolctl's
    search of the loaded libraries skipped, where they all loaded with one thread)."""
    if _SINGLE_FROM_THE_START:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def single_blas_from_the_start() -> None:
    """Tell `one_blas_thread` that every BLAS library loads with one thread in this process:
    the environment said so before numpy was first imported (`commands.common.one_shot`)."""
    global _SINGLE_FROM_THE_START
    _SINGLE_FROM_THE_START = True


def median(v: Any, overwrite: bool = False) -> float:
    """The median of a 1-d float array, the number `np.median` gives (the middle value, or
    the mean of the two middle ones), by partition alone: `np.median` also checks for masked
    arrays, which imports numpy.ma (15 ms) the first time. NaN when `v` is empty.
    `overwrite`: partition `v` itself (a temporary) instead of a copy."""
    n = v.shape[0]
    if n == 0:
        return math.nan
    h = n // 2
    part = v if overwrite else v.copy()
    part.partition([h] if n % 2 else [h - 1, h])
    return float(part[h]) if n % 2 else float((part[h - 1] + part[h]) / 2)


def sorted_quantiles(ordered: Any, q: Any) -> Any:
    """`np.quantile(ordered, q)` (linear interpolation; q an array of fractions, the answer
    in its shape) of an array already sorted, with numpy's own arithmetic, so the same
    numbers: read off the sorted values, no partition, and no numpy.ma (np.quantile's
    np.unique imports it, 15 ms)."""
    n = ordered.shape[0]
    virtual = (n - 1) * np.asarray(q, dtype=np.float64)
    prev = np.floor(virtual)
    prev[virtual >= n - 1] = -1  # at or past the last value: the last value
    index = prev.astype(np.intp)
    below, above = ordered[index], ordered[np.where(index < 0, -1, index + 1)]
    gamma = virtual - index
    diff = above - below
    out = below + diff * gamma
    np.subtract(above, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    return out

