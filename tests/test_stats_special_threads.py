"""The statistics' lazy `scipy.special` is the real package: scipy stays whole for whatever the
process imports next, from any thread."""

from __future__ import annotations

import subprocess
import sys

AFTER = r"""
import sys, threading
release = threading.Event()
other = threading.Thread(target=release.wait)
other.start()
from realprobe.probes.lazy_special import special
assert special.ndtr(0.0) == 0.5
import scipy.stats  # failed with "Module 'scipy' has no attribute '_lib'" after a quick load
assert scipy.stats.norm.cdf(0.0) == 0.5 and special.ndtr is scipy.special.ndtr
release.set()
other.join()
print("ok")
"""


def test_scipy_stats_imports_after_the_statistics_used_special() -> None:
    out = subprocess.run([sys.executable, "-c", AFTER], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
