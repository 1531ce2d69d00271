"""The README, docs/ and what the commands print stand alone: every relative link resolves in
the repository and in the installed wheel, nothing cites files outside the product, and the
numbers in docs/numbers.md are exactly what bench/readme_numbers.py writes from bench/results/."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub-style heading anchors of a Markdown page."""
    out = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
            out.add(text.replace(" ", "-"))
    return out


def _relative_links(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks are not links
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    for target in _relative_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: link to {target} points nowhere"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{page.name}: no heading for #{anchor} in {dest.name}"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_docs_links_stay_inside_docs(page: Path) -> None:
    """docs/ is shipped in the wheel on its own, so its links must not leave the folder."""
    for target in _relative_links(page):
        path = target.partition("#")[0]
        if path:
            dest = (page.parent / path).resolve()
            assert dest.parent == page.parent, f"{page.name}: {target} leaves docs/"


def _product_text_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "pyproject.toml", *DOCS]
    for folder in ("realprobe", "cassettes", "tasks_realworld", "bench"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md", ".toml", ".json", ".yaml") and path.is_file():
                files.append(path)
    return files


OUTSIDE = re.compile(r"DESIGN\.md|\.\./shared|/work/|shared/realworld|\b[Ii]ssue \d+\b")


def test_nothing_cites_files_outside_the_product() -> None:
    found = []
    for path in _product_text_files():
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines()):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n + 1}: {line.strip()[:100]}")
    assert not found, "\n".join(found)


def test_docs_ship_in_the_wheel_and_resolve_when_installed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert include.get("docs") == "realprobe/_data/docs"
    from realprobe import doc_path

    for page in DOCS:
        assert doc_path(page.name).is_file(), page.name


def test_printed_doc_paths_exist() -> None:
    """The paths `stats` and the HTML report print for the documentation exist."""
    from realprobe import doc_path

    assert doc_path("statistics.md").is_file()
    for printer in ("commands/analysis.py", "report/render.py"):
        source = (ROOT / "realprobe" / printer).read_text(encoding="utf-8")
        assert "doc_path('statistics.md')" in source


def test_readme_numbers_are_what_the_script_writes() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import readme_numbers
    finally:
        sys.path.pop(0)
    page = readme_numbers.NUMBERS.read_text(encoding="utf-8")
    assert readme_numbers.START in page and readme_numbers.END in page
    assert page == readme_numbers.with_table(page), (
        "docs/numbers.md is stale: python bench/readme_numbers.py --write"
    )
    # every results file has a row builder, so no measured number is left out
    stems = {p.stem for p in (ROOT / "bench" / "results").glob("*.json")}
    assert stems <= set(readme_numbers.TABLE), stems - set(readme_numbers.TABLE)


def test_benchmarks_write_results_only_when_asked() -> None:
    for script in sorted((ROOT / "bench").glob("*.py")):
        text = script.read_text(encoding="utf-8")
        if "results" in text and ".write_text(" in text and script.name != "readme_numbers.py":
            # benchlib's bench_args gives a script its --save flag
            assert '"--save"' in text or "bench_args(" in text, (
                f"{script.name} writes results without --save")
