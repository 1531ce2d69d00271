"""Where the shipped data folders are: inside the wheel (`realprobe/_data/`) or, in a source
checkout or editable install, at the repository root."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """`cassettes`, `tasks_realworld` or `docs`."""
    installed = _PKG / "_data" / name
    if installed.is_dir():
        return installed
    return _PKG.parent / name


def doc_path(name: str) -> Path:
    """A page of the documentation (`statistics.md`, `api.md`, ...), shipped in the wheel."""
    return data_dir("docs") / name
