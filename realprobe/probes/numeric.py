"""The statistics' fits run on one BLAS thread.

Their optimisations are many tiny problems (three to six parameters, evaluated thousands of
times). OpenBLAS parallelises even those, and on a busy machine its threads spin waiting for
a core: with two busy processes on two cores, stats and calibrate of three tools behind a
biting deadline took 3.96 s on the default threads and 0.64 s on one (0.41 s against 0.39 s
on an idle machine). One thread loses nothing on problems this small. `threadpoolctl` sets
the limit for the libraries numpy and scipy loaded, and puts the old one back on exit.
"""

from __future__ import annotations

from threadpoolctl import threadpool_limits


def one_blas_thread() -> threadpool_limits:
    """A context manager: BLAS on one thread inside it."""
    return threadpool_limits(limits=1, user_api="blas")
