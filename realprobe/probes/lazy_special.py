"""`scipy.special`'s compiled functions without importing `scipy.special`.

Importing the package costs about 0.2 s: its `__init__` sets up array-API dispatch, which
walks every numpy submodule (numpy.f2py, numpy.testing, numpy.ma, ...). The functions the
statistics use (ndtr, ndtri, log_ndtr, stdtrit, chdtrc, chdtri, betaincinv, expit, ...) are
numpy ufuncs in the extension module `scipy.special._ufuncs`, which loads in about 15 ms. On
first use `special` loads that module alone (its package, and scipy's own when not yet
imported, whose start-up loads subprocess, shutil and a version parser, stand in empty
meanwhile and are taken away after; only while no other thread runs, which could import scipy
in that moment and find the stand-ins), so `scipy.special.ndtr is special.ndtr`: the same objects
and the same numbers as a plain import. A name the module lacks, or any failure, falls back to
the full package; when the package is already imported it is used as it is."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

_PACKAGE = "scipy.special"
_lock = threading.Lock()


def _ufuncs() -> Any:
    """`scipy.special._ufuncs`, loaded without running `scipy/special/__init__.py` (or the full
    package when it is already there, or when loading the module alone fails)."""
    with _lock:
        if _PACKAGE in sys.modules:
            return sys.modules[_PACKAGE]
        if threading.active_count() > 1:
            # the stand-ins below would be seen by another thread importing scipy meanwhile
            # (it would find an empty `scipy`): with other threads about, the plain import
            return importlib.import_module(_PACKAGE)
        spec = importlib.util.find_spec("scipy")
        if spec is None or not spec.submodule_search_locations:
            return importlib.import_module(_PACKAGE)
        before = set(sys.modules)
        stand_ins = []
        for name, where in (("scipy", spec.submodule_search_locations),
                            (_PACKAGE, [f"{p}/special" for p in spec.submodule_search_locations])):
            if name not in sys.modules:
                stand_ins.append(types.ModuleType(name))
                stand_ins[-1].__path__ = list(where)
                sys.modules[name] = stand_ins[-1]
        try:
            return importlib.import_module(f"{_PACKAGE}._ufuncs")
        except Exception:  # another scipy layout: the ordinary import below
            for name in set(sys.modules) - before:
                if name.startswith("scipy"):
                    del sys.modules[name]
        finally:
            for stand_in in stand_ins:
                if sys.modules.get(stand_in.__name__) is stand_in:
                    del sys.modules[stand_in.__name__]
        return importlib.import_module(_PACKAGE)


class _Special:
    """Attribute access like `scipy.special`; each name is looked up once."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            value = getattr(_ufuncs(), name)
        except AttributeError:
            value = getattr(importlib.import_module(_PACKAGE), name)
        setattr(self, name, value)
        return value


#: use as `special.ndtr(...)`, like `from scipy import special`
special: Any = _Special()
