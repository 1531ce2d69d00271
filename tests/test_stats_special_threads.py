"""The statistics' quick load of scipy's special functions never shows another thread a
half-made `scipy`: with other threads about it takes the plain import."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
import sys, threading
release = threading.Event()
other = threading.Thread(target=release.wait)
other.start()
from realprobe.probes.lazy_special import special
assert special.ndtr(0.0) == 0.5
# the plain import ran: the real package is in place for every thread
assert "scipy.special" in sys.modules and hasattr(sys.modules["scipy"], "__version__")
release.set()
other.join()
print("ok")
"""

ALONE = r"""
import sys
from realprobe.probes.lazy_special import special
assert special.ndtr(0.0) == 0.5
# alone, the quick path: the package's own start-up never ran, and nothing is left behind
assert "scipy.special" not in sys.modules
print("ok")
"""


def test_with_another_thread_the_plain_import_is_used() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_alone_the_quick_path_leaves_no_stand_in() -> None:
    out = subprocess.run([sys.executable, "-c", ALONE], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
