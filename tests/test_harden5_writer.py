"""The one writer never replaces a node that is not a regular file: every command that writes
a file the user names writes into a character device (a `/dev/null` made in the test's
folder) and into a FIFO someone reads, refuses a FIFO nobody reads and a socket in one line,
and leaves each node what it was."""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
from pathlib import Path

import pytest
from test_outputs import WRITERS, run_cli

from realprobe.outputs import OutputError, open_stream, write_output

NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a device needs root")


def _name(verb: str) -> str:
    """A name each command takes (a catalogue file names its format)."""
    return "node.html" if verb == "report" else "node.json"


def _fakenull(tmp: Path, name: str = "fakenull") -> Path:
    node = tmp / name
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the numbers of /dev/null
    os.chmod(node, 0o666)  # past the umask
    return node


def _one_line(err: str) -> None:
    """One error line (a command that called tools first has printed its progress)."""
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error:") and "Traceback" not in err, err
    assert sum(line.startswith("error:") for line in lines) == 1, err


@NEEDS_ROOT
@pytest.mark.parametrize("verb", sorted(WRITERS))
def test_every_command_writes_into_a_device_and_leaves_it_a_device(
    verb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    node = _fakenull(tmp_path, _name(verb))
    before = node.stat()
    args = WRITERS[verb](tmp_path)
    capsys.readouterr()
    code, err = run_cli([*args, str(node)], monkeypatch, capsys)
    assert code in (0, 2), err
    if code:
        _one_line(err)
    after = node.stat(follow_symlinks=False)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert stat.S_IMODE(after.st_mode) == 0o666  # its mode untouched
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".node")] == []


@pytest.mark.parametrize("verb", sorted(WRITERS))
def test_every_command_refuses_a_fifo_nobody_reads_in_one_line(
    verb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fifo = tmp_path / _name(verb)
    os.mkfifo(fifo)
    args = WRITERS[verb](tmp_path)
    capsys.readouterr()
    code, err = run_cli([*args, str(fifo)], monkeypatch, capsys)
    assert code == 2
    _one_line(err)
    assert stat.S_ISFIFO(fifo.stat(follow_symlinks=False).st_mode)


@pytest.mark.parametrize("verb", sorted(WRITERS))
def test_every_command_refuses_a_socket(
    verb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / _name(verb)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        args = WRITERS[verb](tmp_path)
        capsys.readouterr()
        code, err = run_cli([*args, str(path)], monkeypatch, capsys)
    assert code == 2 and "not a regular file" in err
    _one_line(err)
    assert stat.S_ISSOCK(path.stat(follow_symlinks=False).st_mode)


def _read_fifo(fifo: Path, got: list[bytes], ready: threading.Event) -> None:
    """Read `fifo` until its writer came and went (empty reads before it came)."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open without a writer yet
    ready.set()
    chunks: list[bytes] = []
    for _ in range(100_000):
        try:
            chunk: bytes | None = os.read(fd, 65536)
        except BlockingIOError:  # a writer is there, nothing written yet
            chunk = None
        if chunk:
            chunks.append(chunk)
        elif chunk == b"" and chunks:
            break
        else:
            time.sleep(0.001)
    os.close(fd)
    got.append(b"".join(chunks))


def _release(fifo: Path, reader: threading.Thread) -> None:
    """End a reader the command never wrote to."""
    if reader.is_alive():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"-")
        os.close(fd)
    reader.join(30)


def _fifo_with_reader(tmp: Path) -> tuple[Path, threading.Thread, list[bytes]]:
    """A FIFO whose reader has opened it (what it reads lands in the list)."""
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    ready = threading.Event()
    reader = threading.Thread(target=_read_fifo, args=(fifo, got, ready), daemon=True)
    reader.start()
    assert ready.wait(10)
    return fifo, reader, got


def test_the_writer_writes_into_a_fifo_its_reader_opened(tmp_path: Path) -> None:
    fifo, reader, got = _fifo_with_reader(tmp_path)
    payload = "x" * 300_000  # more than a pipe holds: the writes block, never fail
    assert write_output(fifo, payload) == fifo
    reader.join(30)
    assert got == [payload.encode()]
    assert stat.S_ISFIFO(fifo.stat(follow_symlinks=False).st_mode)


def test_a_report_into_a_read_fifo_is_written_or_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """The command line may refuse a pipe before any work; it never replaces it."""
    fifo, reader, got = _fifo_with_reader(tmp_path)
    args = WRITERS["report"](tmp_path)
    capsys.readouterr()
    code, err = run_cli([*args, str(fifo)], monkeypatch, capsys)
    _release(fifo, reader)
    if code:
        assert code == 2
        _one_line(err)
    else:
        assert got and got[0].lstrip().lower().startswith(b"<!doctype html")
    assert stat.S_ISFIFO(fifo.stat(follow_symlinks=False).st_mode)


@NEEDS_ROOT
def test_a_recording_journal_streams_into_a_device_and_refuses_a_silent_fifo(
    tmp_path: Path,
) -> None:
    node = _fakenull(tmp_path)
    with open_stream(node) as fh:
        fh.write("{}\n")
    assert write_output(node, "{}\n" * 100_000) == node
    assert stat.S_ISCHR(node.stat().st_mode) and stat.S_IMODE(node.stat().st_mode) == 0o666
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="nothing reads"):
        open_stream(fifo)
    with pytest.raises(OutputError, match="already exists"):
        write_output(node, "x", replace=False)
    assert stat.S_ISCHR(node.stat().st_mode)
