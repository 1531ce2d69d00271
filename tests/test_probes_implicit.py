"""Implicit-fault signs seen by probes: drift, empty and stale from answers we construct,
stored per row, summarised by stats, calibrated into the profile, and read back from a file
made before the column existed."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from probe_helpers import probe, synthetic_rows

from realprobe import ApiSpec, Catalog, Mode, Store, ToolResult, TransportOptions, open_db
from realprobe.probes.calibrate import calibrate
from realprobe.probes.implicit import ImplicitWatch
from realprobe.probes.stats import stats_from_db
from realprobe.simulator.plans import FaultPlan

API = ApiSpec.model_validate({
    "id": "news", "name": "News", "base_url": "https://news.example", "docs_url": "https://n.org",
    "category": "Test", "https": True,
    "tools": [{
        "name": "news_latest", "title": "t", "description": "d", "path": "/latest",
        "output": {
            "headline": {"from": "headline", "type": "string"},
            "published": {"from": "published", "type": "string"},
            "author": {"from": "author", "type": "string", "optional": True},
            "tags": {"from": "tags", "type": "array", "item_type": "string"},
        },
        "fixtures": [{"body": '{"headline": "h", "published": "2026-11-01", "author": "a",'
                              ' "tags": ["x"]}', "source": "test"}],
    }],
})  # fmt: skip
CATALOG = Catalog([API])
TOOL = CATALOG.get("news_latest")


def answer(**data: Any) -> ToolResult:
    base = {"headline": "h", "published": "2026-11-01", "author": "a", "tags": ["x"]}
    return ToolResult(tool=TOOL.name, ok=True, data={**base, **data})


def test_drift_is_a_vanished_field_or_an_answer_off_the_declared_output() -> None:
    watch = ImplicitWatch()
    for _ in range(3):  # a field's history needs MIN_SEEN answers
        assert watch.check(TOOL, answer()) is None
    assert watch.check(TOOL, answer(author=None)) == "drift"  # it was always filled
    assert watch.check(TOOL, answer(author=None)) == "drift"  # each drifted answer counts
    assert watch.check(TOOL, answer()) is None
    assert watch.check(TOOL, answer(tags="x")) == "drift"  # an array became text
    fresh = ImplicitWatch()
    assert fresh.check(TOOL, answer(author=None)) is None  # never seen filled: no sign


def _watch(tool: Any, answers: list[dict[str, Any]], args: Any = None) -> list[str | None]:
    watch = ImplicitWatch()
    return [watch.check(tool, ToolResult(tool=tool.name, ok=True, data=a), args) for a in answers]


def test_drift_reads_nested_fields_types_units_and_closed_sets() -> None:
    from realprobe import default_catalog

    cat = default_catalog()
    day = {"date": "2026-01-01", "name": "New Year", "global": True}
    holidays = cat.get("nager_public_holidays")
    dropped = {k: v for k, v in day.items() if k != "global"}
    # a declared field of one list element disappears (absent, not null)
    assert _watch(holidays, [{"holidays": [day, day]}] * 3 + [{"holidays": [dropped, day]}])[
        -1] == "drift"
    # a number that became text, a unit that changed
    fact = cat.get("catfact_fact")
    base = [{"fact": f"cat {i}", "length": 5} for i in range(3)]
    assert _watch(fact, [*base, {"fact": "cat", "length": [5]}])[-1] == "drift"
    person = cat.get("swapi_person")

    def who(i: int, **kw: Any) -> dict[str, Any]:
        return {"name": f"p{i}", "height": f"{170 + i} cm", "mass": str(60 + i),
                "birth_year": f"{i}BBY", "gender": ("male", "female")[i % 2], "homeworld": "h",
                "films": ["f"], "url": f"u{i}", **kw}

    signs = _watch(person, [who(0), who(1), who(2), who(3, height="5.8 ft"), who(4)])
    assert signs == [None, None, None, "drift", None]  # the unit changed, once
    # a short code that only ever took two values (under several arguments) takes a third
    watch = ImplicitWatch()
    codes = [watch.check(person, ToolResult(tool=person.name, ok=True, data=who(i)),
                         {"id": i % 5}) for i in range(25)]
    assert codes == [None] * 25
    odd = ToolResult(tool=person.name, ok=True, data=who(30, gender="droid_v2"))
    assert watch.check(person, odd, {"id": 1}) == "drift"


def test_empty_is_every_collection_empty_or_every_field_blank() -> None:
    watch = ImplicitWatch()
    assert watch.check(TOOL, answer(tags=[])) == "empty"
    assert watch.check(TOOL, answer(headline="", published="", author=None, tags=["", ""])) in (
        "drift,empty", "empty",
    )
    assert watch.check(TOOL, answer(tags=["a", "b"])) is None


def test_stale_is_a_repeat_where_answers_varied_or_dates_far_behind() -> None:
    watch = ImplicitWatch()
    assert watch.check(TOOL, answer(headline="one")) is None
    assert watch.check(TOOL, answer(headline="one")) is None  # has never varied: no sign
    assert watch.check(TOOL, answer(headline="two")) is None
    assert watch.check(TOOL, answer(headline="three")) is None
    assert watch.check(TOOL, answer(headline="four")) is None
    assert watch.check(TOOL, answer(headline="four")) == "stale"  # it varies, now repeats
    assert watch.check(TOOL, answer(headline="three", published="2024-06-01")) == "stale"
    assert watch.check(TOOL, answer(headline="five", published="2026-10-30")) is None
    # another argument set has its own history
    assert watch.check(TOOL, answer(headline="five"), {"q": "b"}) is None


def test_errors_show_no_signs() -> None:
    bad = ToolResult(tool=TOOL.name, ok=False)
    assert ImplicitWatch().check(TOOL, bad) is None


def _probe_with_empty_answers(db: Path) -> None:
    plan = FaultPlan(base="none", rules=[{"tool": "news_latest", "every": 4, "fault": "empty"}])
    opts = TransportOptions(mode=Mode.SIMULATE, profile="calm", fault_plan=plan)
    probe(CATALOG, [TOOL], 40, opts, db, 5.0)


def test_probes_store_the_signs_and_calibrate_them_into_the_profile(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    _probe_with_empty_answers(db)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT outcome, implicit FROM probes ORDER BY id").fetchall()
    assert len(rows) == 40 and all(o == "ok" for o, _ in rows)  # the calls stay ok
    assert [i for _, i in rows].count("empty") == 10  # every fourth answer
    arr, rep = stats_from_db(open_db(db))
    assert rep.implicit is not None and rep.implicit["news_latest"]["empty"] == 10
    assert rep.implicit["news_latest"]["rates"]["empty"] == pytest.approx(0.25)
    prof = calibrate(rep, arrays=arr)
    assert prof.implicit["news_latest"].rates == {"empty": pytest.approx(0.25)}
    assert rep.tools[0].success.rate == 1.0  # quiet faults are successes in the statistics


def test_a_file_from_before_the_column_is_migrated(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE realprobe_meta (key TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO realprobe_meta VALUES ('schema:probes', '3')")
        conn.execute(
            "CREATE TABLE probes (id INTEGER PRIMARY KEY, run_id TEXT, tool TEXT, api TEXT, "
            "round INTEGER, started_at TEXT, started_ts FLOAT, latency_ms FLOAT, outcome TEXT, "
            "error_code TEXT, timeout_s FLOAT, excluded INTEGER, source TEXT, target_kind TEXT)"
        )
    with Store(db) as store:
        for row in synthetic_rows("catfact_fact", 30, p_fail=0.0):
            store.insert_probe({**row, "target_kind": "live"})
        assert store.schema_version() >= 4
    summary = stats_from_db(open_db(db))[1].implicit or {}
    assert summary["catfact_fact"]["ok"] == 30 and summary["catfact_fact"]["empty"] == 0


def test_stats_and_the_report_show_the_signs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_stats_cli import run_cli

    from realprobe import build_report
    from realprobe.report.render import render_html

    db = tmp_path / "p.db"
    _probe_with_empty_answers(db)
    code, out, err = run_cli(["stats", "--db", str(db)], monkeypatch, capsys)
    assert code == 0, err
    # the notes are grouped: the group's line, then one line per tool
    assert ("quiet faults (drifted, empty or stale bodies) in the ok calls of 1 tool: "
            "news_latest's 40 ok calls: empty 10 (25.0%)") in " ".join(out.split())
    html = render_html(build_report(db), plots={})
    assert "<h2>Quiet faults</h2>" in html and "<td>10 (25" in html
