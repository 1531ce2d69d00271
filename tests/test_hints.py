"""The hint for a request with no recording names the one record mode that records it: `once`
makes a cassette that does not exist yet, `new_episodes` adds to one that does."""

from __future__ import annotations

from pathlib import Path

from realprobe.cassettes.pytest_vcr import miss_hint


def test_missing_request_hint_names_new_episodes_for_an_existing_cassette(
    tmp_path: Path,
) -> None:
    there = tmp_path / "c.json"
    there.write_text("{}")
    hint = miss_hint(there, "--realprobe-record-mode")
    assert "--realprobe-record-mode=new_episodes" in hint
    assert "once never records into an existing cassette" in hint


def test_missing_cassette_hint_names_once(tmp_path: Path) -> None:
    hint = miss_hint(tmp_path / "none.json", "--record-mode")
    assert hint == "record it: pytest --record-mode=once"
