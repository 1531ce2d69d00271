"""`scipy.special`, imported on first use: reading commands that never need it stay light.

An earlier version loaded the compiled ufuncs alone behind stand-in `scipy` packages (15 ms
instead of about 0.2 s), but the module it left behind broke a later `import scipy.stats` in
the same process (`scipy` had no `_lib`), and another thread could see the stand-ins: the
plain import is what every caller gets now."""

from __future__ import annotations

import importlib
from typing import Any


class _Special:
    """Attribute access like `scipy.special`; each name is looked up once."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(importlib.import_module("scipy.special"), name)
        setattr(self, name, value)
        return value


#: use as `special.ndtr(...)`, like `from scipy import special`
special: Any = _Special()
