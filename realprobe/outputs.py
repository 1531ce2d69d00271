"""The one writer of every file realprobe writes: cassettes, profiles, reports, catalogue
files, fixtures, exports.

- never through a symbolic link (one clear error), never into a folder that does not exist
  (unless the caller makes folders), over an existing file only where the command does that;
- never half-written: a temp file in the same folder, flushed and fsync'd, then renamed over
  the name (which replaces a link itself, never its target), then the folder fsync'd;
- a name that is no regular file is never renamed over: a FIFO or a character device
  (`/dev/null`, a terminal) is written into, as a shell's `>` would (a FIFO nobody reads is
  refused in one line, never waited on); anything else (a socket, a block device) is refused;
- mode bits like the tools users know: a new file gets 0666 minus the umask (0644 under the
  usual 022); a file replaced keeps its own mode (one a user made private stays private);
  `private=True` gives 0600 whatever the umask, for a file that may hold secrets. Everything
  realprobe writes has been through the secrets scrubber first, so its own outputs are not
  private; `private` is for callers writing what the scrubber cannot vouch for.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import threading
from pathlib import Path
from typing import TextIO

from realprobe.errors import RealprobeError

PUBLIC_MODE = 0o666  # before the umask
PRIVATE_MODE = 0o600
_UMASK_LOCK = threading.Lock()


class OutputError(RealprobeError):
    """The output path cannot be written as asked."""


def check_output(path: Path, *, replace: bool, make_parents: bool = False) -> None:
    """Refuse a symlink, a folder, a missing parent folder (unless `make_parents`), and
    (unless `replace`) a file that already exists. Nothing is written."""
    if path.is_symlink():
        raise OutputError(f"{path} is a symbolic link; realprobe does not write through links")
    if path.is_dir():
        raise OutputError(f"{path} is a folder; give a file name")
    if not path.parent.is_dir() and not make_parents:
        raise OutputError(f"cannot write {path}: the folder {path.parent} does not exist")
    if path.exists() and not replace:
        raise OutputError(f"{path} already exists; realprobe does not overwrite it")
    _node_kind(path)


def _node_kind(path: Path) -> str | None:
    """None for a regular file or nothing there, "fifo" or "device" for a node written into;
    any other kind of node is refused."""
    try:
        mode = path.stat(follow_symlinks=False).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISCHR(mode):
        return "device"
    if stat.S_ISLNK(mode):
        raise OutputError(f"{path} is a symbolic link; realprobe does not write through links")
    if stat.S_ISDIR(mode):
        raise OutputError(f"{path} is a folder; give a file name")
    raise OutputError(f"{path} is not a regular file (a socket or a block device); "
                      "give a file name")


def _open_node(path: Path, kind: str) -> int:
    """An open descriptor on a FIFO or a character device, for writing into it (never
    created, truncated or followed): opened without waiting, so a FIFO that nobody reads is
    one clear error, then switched back to blocking writes."""
    # never waiting at the open: a FIFO without a reader, a serial line without a carrier
    flags = (os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_NOCTTY", 0))
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if kind == "fifo" and exc.errno == errno.ENXIO:
            raise OutputError(f"{path} is a FIFO that nothing reads; start its reader "
                              "first") from None
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):  # swapped since it was checked
            raise OutputError(f"{path} changed while it was opened; nothing was written")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_node(path: Path, kind: str, payload: bytes) -> Path:
    """Write `payload` into a FIFO or a character device (its mode and owner untouched)."""
    fd = _open_node(path, kind)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)
    return path


def umask() -> int:
    """This process's umask (read without changing it where the OS says it: Linux)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


def file_mode(path: Path, *, private: bool) -> int:
    """The mode `path` gets: 0600 if private, the mode of the file it replaces, else 0666
    minus the umask."""
    if private:
        return PRIVATE_MODE
    with contextlib.suppress(OSError):
        return stat.S_IMODE(path.stat(follow_symlinks=False).st_mode)
    return PUBLIC_MODE & ~umask()


def write_output(
    path: str | Path,
    data: str | bytes,
    *,
    replace: bool = True,
    private: bool = False,
    make_parents: bool = False,
) -> Path:
    """Write `data` to `path` atomically and durably after `check_output` (see the module
    doc for the mode); returns the path."""
    path = Path(path)
    check_output(path, replace=replace, make_parents=make_parents)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    kind = _node_kind(path)
    if kind is not None:
        return _write_node(path, kind, payload)
    mode = file_mode(path, private=private)
    try:
        if make_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        if not replace and path.exists():
            raise OutputError(f"{path} already exists; realprobe does not overwrite it")
        if _node_kind(path) is not None:  # a FIFO or a device appeared meanwhile
            raise OutputError(f"{path} changed while it was written; nothing was replaced")
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from exc
        raise
    _sync_folder(path.parent)
    return path


def open_stream(path: str | Path, *, private: bool = False) -> TextIO:
    """A text file written as it goes (a recording's journal, kept open for the run), under
    the same rules as `write_output` but the atomic rename: never through a symbolic link
    (refused, and not followed even if one appears meanwhile), the same modes."""
    path = Path(path)
    check_output(path, replace=True, make_parents=True)
    kind = _node_kind(path)
    if kind is not None:
        return os.fdopen(_open_node(path, kind), "w", encoding="utf-8")
    mode = file_mode(path, private=private)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, mode)
        os.fchmod(fd, mode)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from exc
    return os.fdopen(fd, "w", encoding="utf-8")


def _sync_folder(folder: Path) -> None:
    """fsync the folder, so the rename survives a power cut (best effort: not every OS or
    file system lets a folder be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
