"""A run that added to a cassette (record mode new_episodes) and was killed leaves a journal
that is rebuilt onto the cassette as it was: the loader keeps the old calls and the new ones;
a new recording from scratch does not silently drop what the killed run added.

The cassette is a real Ruby VCR recording of PokeAPI (tests/data/realworld_cassettes, sources
in its SOURCES.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

import realprobe
from realprobe.cassettes.core import Recorder
from realprobe.cassettes.journal import journal_path
from realprobe.cassettes.recording import SyncRecordingTransport

POKEAPI = Path(__file__).parent / "data/realworld_cassettes/pokeapi__rdavid1099-poke-api-v2.yaml"
NEW = "https://api.example.test/new"


def killed_run_adding_to(cassette: Path) -> int:
    """Record one call onto `cassette` and stop without saving, as a kill would: the journal
    stays. Returns the calls the cassette held before."""
    base = realprobe.load_cassette(cassette)
    origin = httpx.MockTransport(lambda request: httpx.Response(200, json={"new": True}))
    recorder = Recorder(cassette, base=base)
    transport = SyncRecordingTransport(origin, recorder=recorder)  # never closed: no save
    response = transport.handle_request(httpx.Request("GET", NEW))
    assert response.read() == b'{"new":true}'
    assert recorder.journal is not None
    recorder.journal.close()  # the journal is kept, as after a kill
    return len(base.calls)


def test_the_loader_rebuilds_onto_the_cassette_as_it_was(tmp_path: Path) -> None:
    cassette = tmp_path / "pokeapi.yaml"
    shutil.copy(POKEAPI, cassette)
    before = killed_run_adding_to(cassette)
    assert journal_path(cassette).exists()
    recovered = realprobe.load_cassette(cassette)
    assert [c.uri for c in recovered.calls][-1] == NEW
    assert len(recovered.calls) == before + 1 and not journal_path(cassette).exists()


def test_recording_anew_asks_for_the_killed_run_to_be_recovered(tmp_path: Path) -> None:
    cassette = tmp_path / "pokeapi.yaml"
    shutil.copy(POKEAPI, cassette)
    before = killed_run_adding_to(cassette)
    origin = httpx.MockTransport(lambda request: httpx.Response(204))
    with pytest.raises(realprobe.CassetteError, match="cassette recover"):
        SyncRecordingTransport(origin, cassette)
    assert journal_path(cassette).exists()  # nothing lost, nothing written
    assert len(realprobe.recover_cassette(cassette).calls) == before + 1
