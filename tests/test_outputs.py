"""One output writer for every file realprobe writes: every command that writes refuses a
symbolic link with one line (the link's target untouched), files get the mode bits the usual
tools give (0644 under umask 022), and a profile saves and loads back through the front
door."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli_runner import main
from probe_helpers import synthetic_rows

import realprobe
from realprobe import Store
from realprobe.outputs import OutputError, write_output

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent
SPEC = DATA / "openapi" / "open-meteo__elevation.yml"


def run_cli(args: list[str], monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["realprobe", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    _, err = capsys.readouterr()
    return code, err


def _db(tmp: Path) -> Path:
    db = tmp / "p.db"
    with Store(db) as store:
        for row in synthetic_rows("agify_age", 60, seed=1):
            store.insert_probe(row)
    return db


def _catalog(tmp: Path) -> Path:
    out = tmp / "cat.json"
    realprobe.import_openapi(str(SPEC), out)
    return out


def _har(tmp: Path) -> Path:
    har = tmp / "in.har"
    har.write_text('{"log": {"version": "1.2", "entries": []}}')
    return har


#: every command that writes a file the user names: (name, arguments before the output)
WRITERS: dict[str, Callable[[Path], list[str]]] = {
    "report": lambda t: ["report", "--db", str(_db(t)), "-o"],
    "calibrate": lambda t: ["calibrate", "--db", str(_db(t)), "-o"],
    "catalog import-openapi": lambda t: ["catalog", "import-openapi", str(SPEC), "-o"],
    "catalog record-fixtures": lambda t: [
        "catalog", "record-fixtures", str(_catalog(t)), "--sandbox", "http://127.0.0.1:9",
        "-o"],
    "cassette scrub": lambda t: [
        "cassette", "scrub", str(REPO / "cassettes" / "sandbox-published-round.json"), "-o"],
    "cassette import": lambda t: ["cassette", "import", str(_har(t)), "-o"],
    "cassette record-round": lambda t: ["cassette", "record-round", "-o"],
}


@pytest.fixture
def victim(tmp_path: Path) -> Iterator[Path]:
    """A file a link points at: no command may write into it."""
    path = tmp_path / "victim.txt"
    path.write_text("keep me\n")
    yield path
    assert path.read_text() == "keep me\n"


@pytest.mark.parametrize("verb", sorted(WRITERS))
def test_every_command_that_writes_refuses_a_symbolic_link(
    verb: str, tmp_path: Path, victim: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    suffix = {"report": ".html", "calibrate": ".json"}.get(verb, ".json")
    link = tmp_path / f"out{suffix}"
    link.symlink_to(victim)
    args = WRITERS[verb](tmp_path)
    capsys.readouterr()
    code, err = run_cli([*args, str(link)], monkeypatch, capsys)
    assert code == 2 and "symbolic link" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert link.is_symlink()


def test_profiles_reports_and_cassettes_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        made = write_output(tmp_path / "a.json", "{}\n")
        assert stat.S_IMODE(made.stat().st_mode) == 0o644
        secret = write_output(tmp_path / "s.json", "{}\n", private=True)
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
        os.umask(0o077)
        tight = write_output(tmp_path / "b.json", "{}\n")
        assert stat.S_IMODE(tight.stat().st_mode) == 0o600
        os.umask(0o022)
        write_output(secret, "{}\n")  # replacing a private file keeps it private
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
        cassette = realprobe.load_cassette(REPO / "cassettes" / "sandbox-published-round.json")
        saved = realprobe.save_cassette(cassette, tmp_path / "c.json")
        assert stat.S_IMODE(saved.stat().st_mode) == 0o644
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "c.json",
                                                          "s.json"]  # no temp file left


def test_a_profile_saves_and_loads_back_through_the_front_door(tmp_path: Path,
                                                               victim: Path) -> None:
    prof = realprobe.calibrate(_db(tmp_path))
    path = realprobe.save_profile(prof, tmp_path / "mine.json")
    assert realprobe.load_profile(path) == prof
    link = tmp_path / "link.json"
    link.symlink_to(victim)
    with pytest.raises(OutputError, match="symbolic link"):
        prof.save(link)
    with pytest.raises(OutputError, match="already exists"):
        realprobe.save_profile(prof, path, replace=False)


def test_a_recording_journal_is_not_written_through_a_link(tmp_path: Path,
                                                           victim: Path) -> None:
    from realprobe.cassettes.journal import Journal, journal_path

    cassette = tmp_path / "run.json"
    journal_path(cassette).symlink_to(victim)
    with pytest.raises(realprobe.CassetteError, match="symbolic link"):
        Journal.start(cassette, base=False, meta={})
