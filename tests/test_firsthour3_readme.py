"""The README a newcomer reads in five minutes: at most 250 lines, the two commands first (the
second exactly what CI runs), the three journeys, at most eight headline numbers written by
bench/readme_numbers.py, and the rest in docs/ (the design notes in docs/design.md)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TEST_COMMAND = ("python3 -m venv .venv && . .venv/bin/activate && pip install -q -e '.[test]' "
                "&& pytest -q")


def _text() -> str:
    return README.read_text(encoding="utf-8")


def test_the_readme_is_short_and_opens_with_the_two_commands() -> None:
    text = _text()
    assert len(text.splitlines()) <= 250
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    assert "realprobe demo" in blocks[0] and "pip install ." in blocks[0]
    assert blocks[1].strip() == TEST_COMMAND
    ci = (ROOT / ".ci" / "run")
    if ci.exists():
        assert TEST_COMMAND in ci.read_text(encoding="utf-8")


def test_the_three_journeys_and_pointers_to_the_docs() -> None:
    text = _text()
    heads = re.findall(r"^### (.*)", text, re.M)
    assert heads[:3] == ["Which tools are flaky?", "CI replays: record once, replay offline",
                         "My agent under faults, MCP included"]
    journeys = text.split("## Three journeys", 1)[1].split("## Numbers", 1)[0]
    assert "realprobe mcp" in journeys and "realprobe probe" in journeys
    assert "--mode replay" in journeys and "@pytest.mark.realprobe" in journeys
    assert "(docs/design.md)" in text and (ROOT / "docs" / "design.md").exists()
    assert "## Design notes" in (ROOT / "docs" / "design.md").read_text(encoding="utf-8")


def test_the_headline_numbers_are_what_the_bench_script_writes() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import readme_numbers
    finally:
        sys.path.pop(0)
    text = _text()
    assert text == readme_numbers.with_headlines(text), (
        "README.md's headline numbers are stale: python bench/readme_numbers.py --write")
    block = text.split(readme_numbers.HEAD_START, 1)[1].split(readme_numbers.HEAD_END, 1)[0]
    bullets = [ln for ln in block.splitlines() if ln.startswith("- ")]
    assert 1 <= len(bullets) <= 8 and len(readme_numbers.HEADLINES) <= 8


def test_the_counts_the_readme_states_are_what_ships() -> None:
    from realprobe import Catalog, data_dir

    text = " ".join(_text().split())
    catalog = Catalog.load([])
    tools, apis = len(list(catalog)), len({t.api.id for t in catalog})
    assert f"{tools} tools over {apis} APIs" in text
    tasks = len(list(data_dir("tasks_realworld").glob("*.json")))
    runs = len(list((data_dir("cassettes") / "tasks").glob("*.json")))
    assert runs == tasks and f"the shipped cassettes of its {tasks} real-world tasks" in text
