"""The library functions the catalog commands are thin over, called directly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from realprobe import RealprobeError
from realprobe.adapters.openapi import ImportOptions
from realprobe.adapters.openapi.catalog_file import NothingImported, import_to_file
from realprobe.adapters.public_apis import CandidateFilter, read_candidates

SPECS = Path(__file__).parent / "data" / "openapi"


def test_import_to_file_writes_a_catalogue_that_loads(tmp_path: Path) -> None:
    out = tmp_path / "flood.json"
    res = import_to_file([str(SPECS / "open-meteo__flood.yml")], out, ImportOptions())
    written = json.loads(out.read_text())
    assert [a["id"] for a in written["apis"]] == [a["id"] for a in res.apis]
    assert res.tools == sum(len(a["tools"]) for a in written["apis"]) > 0
    assert res.output == out and len(res.reports) == 1


def test_nothing_imported_carries_the_reports_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "none.json"
    with pytest.raises(NothingImported) as info:
        import_to_file(
            [str(SPECS / "open-meteo__flood.yml")], out, ImportOptions(select=("nothing*",))
        )
    assert "no operation matches select nothing*" in str(info.value)
    assert info.value.params == ("select",)
    assert len(info.value.reports) == 1 and info.value.reports[0].not_selected > 0
    assert not out.exists()


def test_import_to_file_checks_its_options_first(tmp_path: Path) -> None:
    spec = str(SPECS / "open-meteo__flood.yml")
    with pytest.raises(RealprobeError, match="single SPEC"):
        import_to_file([spec, spec], tmp_path / "a.json", ImportOptions(api_id="x"))
    with pytest.raises(RealprobeError, match=r"use a \.json"):
        import_to_file([spec], tmp_path / "a.txt", ImportOptions())
    with pytest.raises(RealprobeError, match="absolute http"):
        import_to_file([spec], tmp_path / "a.json", ImportOptions(base_url="ftp://x"))


def test_read_candidates_filters_and_marks_coverage() -> None:
    everything = read_candidates()
    weather = read_candidates(keep=CandidateFilter(category="WEATHER", no_auth=True))
    assert 0 < len(weather.candidates) < len(everything.candidates)
    assert all(c.category == "Weather" and not c.needs_key for c in weather.candidates)
    assert weather.summary["candidates"] == len(weather.candidates)
    assert any(c.covered_by for c in everything.candidates)
    uncovered = read_candidates(keep=CandidateFilter(uncovered=True))
    assert not any(c.covered_by for c in uncovered.candidates)
    with pytest.raises(RealprobeError, match="not in the list; categories:"):
        read_candidates(keep=CandidateFilter(category="no such"))
