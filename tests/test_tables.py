"""Every table the commands print reads at 80 columns (what cron and CI logs get) and at 200:
names and numbers are never cut or split across lines, no table line is wider than the
console, and the columns left out are named in a footer."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_runner import invoke
from rich.console import Console

from realprobe.commands import common, tables
from realprobe.commands.tables import Column, FitTable, fit_table, plain

BOX = "┃│┏┗┡└┌╇┳┻┴┬"


def _render(table: Any, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, soft_wrap=True, color_system=None).print(table)
    return buf.getvalue()


def _intact(table: FitTable, text: str, width: int) -> None:
    """Every name and number cell of the columns shown at `width` is on one line, whole."""
    layout = table.layout(width)
    lines = text.splitlines()
    table_lines = [ln for ln in lines if ln and ln[0] in BOX]
    assert all(len(ln) <= width for ln in table_lines), table_lines
    shown = layout.shown if layout.widths is not None else range(len(table.columns))
    for i in shown:
        col = table.columns[i]
        if col.kind == "text":
            continue
        for cell in table.column_cells(i):
            parts = plain(cell).split(", ") if col.kind == "list" else plain(cell).splitlines()
            for part in parts:
                assert any(part in ln for ln in lines), (col.header, part, text)
    if layout.dropped:
        assert "left out to fit: " + ", ".join(layout.dropped) in " ".join(lines)


def _sample() -> FitTable:
    t = fit_table(
        [Column("tool", "name"), Column("api", "name", drop=3), Column("n", "num"),
         Column("p50 / p90 / p99 ms", "num"), Column("description", drop=1),
         Column("errors", "name", drop=2)],
        title="sample",
    )
    t.add_row("programming_quotes_list", "programming-quotes", "1320", "345/1200/42588*",
              "A long description that wraps between words at narrow widths", "TIMEOUT 3")
    t.add_row("a", "b", "7", "1/2/3", "short", "UPSTREAM_5XX 12\nTIMEOUT 1")
    return t


@pytest.mark.parametrize("width", [80, 200])
def test_names_and_numbers_survive(width: int) -> None:
    t = _sample()
    text = _render(t, width)
    _intact(t, text, width)
    assert "345/1200/42588*" in text and "programming_quotes_list" in text


def test_narrow_console_drops_columns_in_the_stated_order() -> None:
    t = _sample()
    wide, mid, narrow = t.layout(200), t.layout(75), t.layout(56)
    assert wide.dropped == [] and len(wide.shown) == 6
    assert mid.dropped == ["api", "errors"]
    assert narrow.dropped == ["api", "errors", "description"]
    text = _render(t, 56)
    assert "left out to fit: api, errors, description" in " ".join(text.split())


def test_too_narrow_for_the_kept_columns_prints_records() -> None:
    t = _sample()
    text = _render(t, 30)
    assert "tool: programming_quotes_list" in text
    assert "p50 / p90 / p99 ms: 345/1200/42588*" in text
    assert not any(ln and ln[0] in BOX for ln in text.splitlines())


@pytest.mark.parametrize("width", [40, 80, 200])
def test_a_list_column_breaks_between_its_items_only(width: int) -> None:
    t = fit_table([Column("tool", "name"), Column("top errors", "list")])
    t.add_row("advice_random", "RATE_LIMIT_ERROR 5, SERVER_ERROR 5, TIMEOUT 3")
    text = _render(t, width)
    _intact(t, text, width)
    cells = [ln.split("│")[2].strip() for ln in text.splitlines() if ln.startswith("│")]
    items = [i for c in cells for i in c.split(", ") if i]
    assert items == ["RATE_LIMIT_ERROR 5", "SERVER_ERROR 5", "TIMEOUT 3"], text
    assert len(cells) == (1 if width == 200 else 3 if width == 40 else len(cells))


def test_headers_break_only_between_words() -> None:
    t = fit_table([Column("tool", "name"), Column("p50 / p90 / p99 ms", "num")])
    t.add_row("x", "1")
    text = _render(t, 80)
    head = [ln for ln in text.splitlines() if "p50" in ln]
    assert head and "p50" in head[0] and not re.search(r"p9\s*┃", text)


# -- every command that prints a table -----------------------------------------------------


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tables") / "t.db"
    res = invoke(["probe", "--all", "--rounds", "3", "--profile", "harsh",
                  "--seed", "1", "--db", str(path), "--politeness", "off"])
    assert res.exit_code == 0, res.output
    return path


@pytest.fixture()
def printed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FitTable]]:
    seen: list[FitTable] = []
    real = FitTable.__rich_console__

    def spy(self: FitTable, console: Any, options: Any) -> Any:
        seen.append(self)
        return real(self, console, options)

    monkeypatch.setattr(tables.FitTable, "__rich_console__", spy)
    yield seen


def _cases(db: Path) -> dict[str, list[str]]:
    d = str(db)
    root = Path(__file__).resolve().parent.parent
    cassette = str(root / "cassettes" / "sandbox-published-round.json")
    return {
        "catalog": ["catalog"],
        "catalog public-apis": ["catalog", "public-apis", "--no-auth", "--https"],
        "call-all": ["call-all", "--profile", "harsh", "--seed", "2"],
        "probe": ["probe", "--tools", "advice_random,programming_quotes_list", "--rounds", "2",
                  "--profile", "harsh", "--db", d, "--politeness", "off"],
        "stats": ["stats", "--db", d],
        "stats by vantage": ["stats", "--db", d, "--by", "vantage"],
        "drift": ["drift", "--db", d, "--baseline", "1d..now", "--current", "1d..now"],
        "cassette inspect": ["cassette", "inspect", cassette],
        "cassette verify": ["cassette", "verify", cassette],
        "run --list": ["run", "--list"],
        "run": ["run", "travel_briefing", "--agent", "reference", "--mode", "replay",
                "--db", d],
        "results": ["results", "--db", d],
    }


CASES = list(_cases(Path("x")))


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("case", CASES)
def test_every_command_table_reads_at_width(
    case: str, width: int, db: Path, printed: list[FitTable], monkeypatch: pytest.MonkeyPatch,
    no_network: None,
) -> None:
    argv = _cases(db)[case]
    buf = io.StringIO()
    monkeypatch.setattr(common.console, "_console",
                        Console(file=buf, width=width, soft_wrap=True, color_system=None))
    res = invoke(argv)
    assert res.exit_code in (0, 1), (res.output, res.exception)
    assert printed, f"{case} printed no table"
    text = buf.getvalue()
    for table in printed:
        _intact(table, text, width)


@pytest.mark.parametrize("width", [80, 200])
def test_sweep_models_side_by_side_keep_their_names(
    width: int, printed: list[FitTable], monkeypatch: pytest.MonkeyPatch
) -> None:
    from realprobe.commands.sweep import print_compare

    buf = io.StringIO()
    monkeypatch.setattr(common.console, "_console",
                        Console(file=buf, width=width, soft_wrap=True, color_system=None))
    rows = [{"model": name, "agent": "scripted", "target": "simulate:published", "runs": 120,
             "infra_errors": 0, "full_rate": 0.5, "full_ci95": [0.41, 0.59],
             "partial_rate": 0.3, "partial_ci95": [0.22, 0.39], "pass^k": {1: 0.5, 3: 0.21},
             "recovery_rate": 0.6, "recovery_ci95": [0.5, 0.7]}
            for name in ("scripted-small-model", "scripted-large-model")]
    print_compare(rows)
    text = buf.getvalue()
    assert "scripted-small-model" in text and "scripted-large-model" in text
    for table in printed:
        _intact(table, text, width)
