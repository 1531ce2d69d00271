"""`realprobe catalog public-apis`: the shipped public-apis list read into candidates whose
counts match the Markdown tables; filters, coverage marks, JSON, and a newer README."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from cli_runner import invoke

from realprobe import Catalog, RealprobeError
from realprobe.adapters import public_apis as pa


def cli(*args: str) -> tuple[int, str, str]:
    res = invoke(list(args))
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        if isinstance(res.exception, RealprobeError):
            return 2, res.stdout, f"error: {res.exception}\n"
        raise res.exception
    return res.exit_code, res.stdout, res.stderr


def markdown_counts(text: str) -> tuple[Counter[str], Counter[str]]:
    """Rows per category and per Auth value, counted straight from the tables."""
    per_category: Counter[str] = Counter()
    per_auth: Counter[str] = Counter()
    for section in text.split("\n### ")[1:]:
        title, _, body = section.partition("\n")
        lines = body.splitlines()
        header = next((i for i, line in enumerate(lines) if "| Auth |" in line), None)
        if header is None:
            continue
        for line in lines[header + 2 :]:
            if not line.startswith("| ["):
                break
            per_category[title.strip()] += 1
            per_auth[line.split("|")[3].strip().strip("`")] += 1
    return per_category, per_auth


def test_shipped_list_counts_match_the_markdown_tables() -> None:
    text = pa.shipped_text()
    found = pa.parse(text)
    per_category, per_auth = markdown_counts(text)
    assert Counter(c.category for c in found) == per_category
    assert Counter(c.auth for c in found) == per_auth
    assert len(found) == sum(per_category.values()) > 1400
    assert len(per_category) >= 50
    assert {"No", "apiKey", "OAuth"} <= set(per_auth)
    meteo = next(c for c in found if c.name == "Open-Meteo")
    assert (meteo.category, meteo.auth, meteo.https, meteo.cors, meteo.link) == (
        "Weather",
        "No",
        True,
        "Yes",
        "https://open-meteo.com/",
    )


def test_the_shipped_copy_is_the_real_list() -> None:
    shipped = Path(pa.__file__).parent / "data"
    assert "c045a2eb505f0f8b7992bb4af53cc020f25003fd" in (shipped / "SOURCES.md").read_text()
    assert "MIT" in (shipped / "public-apis.LICENSE").read_text()


def test_coverage_marks_use_hosts_before_names() -> None:
    found = pa.mark_covered(pa.parse(pa.shipped_text()), Catalog.load().apis.values())
    covered = {(c.name, c.link): c.covered_by for c in found if c.covered_by}
    assert covered[("Open-Meteo", "https://open-meteo.com/")] == "open-meteo"
    assert covered[("Cat Facts", "https://catfact.ninja/")] == "catfact"
    # a different API that happens to share the name is not marked
    assert ("Cat Facts", "https://alexwohlbruck.github.io/cat-facts/") not in covered
    assert len({v for v in covered.values()}) >= 20


def test_filters_and_json() -> None:
    code, out, err = cli(
        "catalog", "public-apis", "--no-auth", "--https", "--category", "weather", "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    cands = data["candidates"]
    assert cands and all(
        c["auth"] == "No" and c["https"] and c["category"] == "Weather" for c in cands
    )
    by_name = {c["name"]: c for c in cands}
    assert by_name["Open-Meteo"]["status"] == "covered"
    assert by_name["Open-Meteo"]["covered_by"] == "open-meteo"
    assert by_name["wttr.in"]["status"] == "no key"
    assert "OpenAPI" in by_name["wttr.in"]["next_step"]
    assert data["summary"]["candidates"] == len(cands)
    assert "OpenWeatherMap" not in by_name  # needs a key
    code, out, _ = cli("catalog", "public-apis", "--category", "Weather", "--json")
    statuses = {c["name"]: c["status"] for c in json.loads(out)["candidates"]}
    assert statuses["OpenWeatherMap"] == "needs key"
    assert statuses["Foreca"] == "needs OAuth"


def test_table_output_says_what_is_profilable_without_a_key() -> None:
    code, out, err = cli("catalog", "public-apis", "--category", "Animals")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "covered by the catalogue" in flat and "without a key" in flat
    assert "import-openapi" in flat


def test_a_newer_readme_and_bad_input(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Public APIs\n\n### Weather\nAPI | Description | Auth | HTTPS | CORS |\n"
        "|:---|:---|:---|:---|:---|\n"
        "| [Sky](https://sky.example/) | Skies \\| clouds | No | Yes | Unknown |\n"
        "| [Keyed](https://k.example/) | Needs a key | `apiKey` | No | No |\n",
        encoding="utf-8",
    )
    code, out, err = cli("catalog", "public-apis", str(readme), "--json")
    assert code == 0, err
    cands = json.loads(out)["candidates"]
    assert [(c["name"], c["description"], c["auth"], c["https"]) for c in cands] == [
        ("Sky", "Skies | clouds", "No", True),
        ("Keyed", "Needs a key", "apiKey", False),
    ]
    code, _, err = cli("catalog", "public-apis", "--category", "Nope")
    assert code == 2 and "categories:" in err
    empty = tmp_path / "empty.md"
    empty.write_text("# nothing here\n", encoding="utf-8")
    code, _, err = cli("catalog", "public-apis", str(empty))
    assert code == 2 and "no API tables" in err
    code, _, err = cli("catalog", "public-apis", str(tmp_path / "missing.md"))
    assert code == 2 and "cannot read" in err
