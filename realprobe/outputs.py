"""Writing a file the user named as an output: never through a symbolic link, never into a
folder that does not exist, never half-written, and over an existing file only where the
caller says that is what the command does."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from realprobe.errors import RealprobeError


class OutputError(RealprobeError):
    """The output path cannot be written as asked."""


def check_output(path: Path, *, replace: bool) -> None:
    """Refuse a symlink, a folder, a missing parent folder, and (unless `replace`) a file
    that already exists. Nothing is written."""
    if path.is_symlink():
        raise OutputError(f"{path} is a symbolic link; realprobe does not write through links")
    if path.is_dir():
        raise OutputError(f"{path} is a folder; give a file name")
    if not path.parent.is_dir():
        raise OutputError(f"cannot write {path}: the folder {path.parent} does not exist")
    if path.exists() and not replace:
        raise OutputError(f"{path} already exists; realprobe does not overwrite it")


def write_output(path: Path, data: str | bytes, *, replace: bool) -> Path:
    """Write atomically (a temp file in the same folder, then rename over the name, which
    replaces a link itself, never its target) after `check_output`."""
    check_output(path, replace=replace)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        if not replace and path.exists():
            raise OutputError(f"{path} already exists; realprobe does not overwrite it")
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from exc
        raise
    return path
