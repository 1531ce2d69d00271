"""Where the shipped data folders are: inside the wheel (`realprobe/_data/`) or, in a source
checkout or editable install, at the repository root."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """`cassettes` or `tasks_realworld`."""
    installed = _PKG / "_data" / name
    if installed.is_dir():
        return installed
    return _PKG.parent / name
