"""The hint for a request missing from an existing cassette names the record mode that records
into it: `once` only records a cassette that does not exist yet."""

from __future__ import annotations

from realprobe.cassettes.pytest_plugin import HINT


def test_missing_request_hint_names_new_episodes_for_an_existing_cassette() -> None:
    assert "--realprobe-record-mode=new_episodes" in HINT
    assert "existing" in HINT and "once never records into an existing cassette" in HINT
