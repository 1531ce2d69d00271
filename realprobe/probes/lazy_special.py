"""`scipy.special` on first use. Importing it costs about half a second (it walks numpy's
submodules), and a command can spend that time reading the database instead: `warm()` starts
the import in a background thread, and the first attribute used waits for it (Python's
import lock), so the statistics run exactly as with a plain import."""

from __future__ import annotations

import importlib
import threading
from typing import Any


class _Special:
    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("scipy.special"), name)


#: use as `special.ndtr(...)`, like `from scipy import special`
special: Any = _Special()


def warm() -> None:
    """Start importing scipy.special in the background (no-op once it is imported)."""
    import sys

    if "scipy.special" not in sys.modules:
        threading.Thread(
            target=importlib.import_module, args=("scipy.special",), daemon=True
        ).start()
