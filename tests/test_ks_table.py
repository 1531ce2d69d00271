"""The goodness-of-fit null distribution shipped for the sample cap."""

from __future__ import annotations


def test_shipped_lilliefors_table_is_the_draw_itself() -> None:
    """`stats` reads the null distribution at the sample cap from a shipped table instead of
    drawing it; the table must be exactly that draw."""
    import numpy as np

    from realprobe.probes import latency_fit
    from realprobe.probes import lilliefors_table as shipped

    assert shipped.N == latency_fit.KS_BOOT_MAX_N
    drawn = latency_fit._lilliefors_draw(shipped.N)
    assert np.array_equal(drawn, np.array(shipped.TABLE))
    latency_fit._lilliefors_null.cache_clear()
    assert np.array_equal(latency_fit._lilliefors_null(shipped.N), drawn)
