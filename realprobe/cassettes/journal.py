"""Crash-safe recording: each finished call is appended to `<cassette>.journal` (JSON lines,
written through to the OS before the call returns to the client, and fsync'd by a background
thread within about 50 ms) as it ends. The cassette itself is still written atomically at the end;
a clean close removes the journal. After a `kill -9` the journal holds every call that had
finished, and the next open of the cassette (or `realprobe cassette recover`) rebuilds it.

Line 1 is a header `{"realprobe_journal": 1, "pid": ..., "base": bool, "meta": {...}}`
(`base`: the run added to an existing cassette); every other line is one call in the same
shape as a cassette's `beyond_vcrpy` entries. A torn last line (killed mid-write) is skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from realprobe.cassettes.cassette import (
    Call,
    Cassette,
    CassetteError,
    call_from_record,
    call_record,
    save_cassette,
)
from realprobe.cassettes.matching import MATCH_URL_BODY
from realprobe.errors import RealprobeError
from realprobe.limits import json_or_none, load_json_text, max_bytes
from realprobe.outputs import OutputError, open_stream
from realprobe.store import process_alive

JOURNAL_VERSION = 1
SUFFIX = ".journal"
SYNC_EVERY_S = 0.05


def journal_path(cassette: Path) -> Path:
    return cassette.with_name(cassette.name + SUFFIX)


def pid_alive(pid: int) -> bool:
    """Whether another process than this one, `pid`, is running."""
    return 0 < pid != os.getpid() and process_alive(pid)


class Journal:
    """The append-only side file of one record run."""

    def __init__(self, path: Path, fh: Any) -> None:
        self.path = path
        self._fh = fh
        self._ino = os.fstat(fh.fileno()).st_ino
        self._lock = threading.Lock()
        self._dirty = threading.Event()
        self._closed = False
        self._sync_fd = os.dup(fh.fileno())  # fsync'd by the syncer, never under the lock
        self._syncer = threading.Thread(target=self._sync_loop, name="realprobe-journal",
                                        daemon=True)
        self._syncer.start()

    def _sync_loop(self) -> None:
        """fsync off the caller's path: a line is in the OS (safe from kill -9) when
        `append` returns; this puts it on the disk soon after, batching bursts."""
        try:
            while True:
                self._dirty.wait()
                self._dirty.clear()
                with contextlib.suppress(OSError):
                    os.fsync(self._sync_fd)
                if self._closed:
                    return
                time.sleep(SYNC_EVERY_S)
        finally:
            with contextlib.suppress(OSError):
                os.close(self._sync_fd)

    @classmethod
    def start(cls, cassette: Path, *, base: Cassette | None, meta: dict[str, Any]) -> Journal:
        """The journal of a new run; a killed run's calls are kept first."""
        path, pid = journal_path(cassette), journal_running(cassette)
        if pid is not None:
            raise CassetteError(f"{cassette} is being recorded by another process (pid {pid}); "
                                f"wait for it, or remove {path} if that run is gone")
        recover_stale(cassette, base)
        return cls.open_at(path, {"realprobe_journal": JOURNAL_VERSION, "pid": os.getpid(),
                                  "base": base is not None, "meta": meta})

    def _write(self, line: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._fh.write(line + "\n")
            self._fh.flush()
        self._dirty.set()

    @classmethod
    def open_at(cls, path: Path, header: dict[str, Any]) -> Journal:
        """An append-only JSON-lines file of any records (a record run's calls, an MCP
        session's messages): `header` first, then each `write` in the OS before it returns."""
        try:
            journal = cls(path, open_stream(path))  # kept open for the run
        except OutputError as exc:
            raise CassetteError(f"cannot write {path}: {exc}") from exc
        journal.write(header)
        return journal

    def write(self, record: dict[str, Any] | Call) -> None:
        data = call_record(record) if isinstance(record, Call) else record
        self._write(json.dumps(data, ensure_ascii=False, default=str))

    def close(self) -> None:
        """Close and keep the file."""
        with self._lock:
            self._closed = True
            with contextlib.suppress(OSError):
                self._fh.close()
        self._dirty.set()

    def remove(self) -> None:
        """Close and delete the journal, unless another run has replaced it meanwhile."""
        self.close()
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self._ino:
                os.unlink(self.path)


def read_header(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            first = fh.readline()
    except OSError:
        return None
    header = json_or_none(first, max_bytes())
    if header is None:
        return {"realprobe_journal": JOURNAL_VERSION, "pid": 0, "base": False, "meta": {}}
    return header if isinstance(header, dict) else None


def recover_stale(cassette: Path, base: Cassette | None) -> Cassette | None:
    """Rebuild `cassette` from a journal a killed run left (not one a live run is writing);
    `base`: the cassette as it is on disk (None: none there, or not read)."""
    path = journal_path(cassette)  # never a link (realprobe never writes one), nor a live run's
    if not path.exists() or path.is_symlink() or journal_running(cassette) is not None:
        return None
    return rebuild(cassette, *read_journal(path), base)


def rebuild(p: Path, header: dict[str, Any], calls: list[Call],
            base: Cassette | None) -> Cassette:
    """The cassette a journal's header and calls make (added to `base` when the run added to
    the cassette there), written; the journal is then removed."""
    meta = header.get("meta") if isinstance(header.get("meta"), dict) else {}
    if header.get("base") and p.exists() and base is None:
        raise CassetteError(f"a killed run added to {p}: run `realprobe cassette recover "
                            f"{p}` before recording it anew")
    if header.get("base") and base is not None:
        first = max((c.seq for c in base.calls), default=-1) + 1
        for i, call in enumerate(sorted(calls, key=lambda c: c.seq)):
            call.seq = first + i
        cassette = Cassette(base.calls + calls, base.meta, p)
    else:
        cassette = Cassette(
            calls, {"match_on": list(MATCH_URL_BODY), **(meta or {}), "recovered": True}, p
        )
    save_cassette(cassette, p)
    journal_path(p).unlink(missing_ok=True)
    return cassette


def read_journal(path: Path) -> tuple[dict[str, Any], list[Call]]:
    """The header and every call whose line was written whole."""
    header = read_header(path) or {}
    calls: list[Call] = []
    cap = max_bytes()
    with open(path, encoding="utf-8", errors="replace") as fh:
        fh.readline()
        for n, line in enumerate(fh, start=2):
            if not line.endswith("\n"):
                break  # torn by the kill
            where = f"{path}: line {n}"
            try:
                calls.append(call_from_record(load_json_text(line, where, max_bytes=cap), where))
            except (ValueError, RealprobeError):  # a pydantic error is a ValueError too
                continue
    return header, calls


def journal_running(cassette: Path) -> int | None:
    """The pid of a live process recording this cassette right now, if any."""
    header = read_header(journal_path(cassette))
    if header is None:
        return None
    pid = int(header.get("pid", 0) or 0)
    return pid if pid_alive(pid) else None
