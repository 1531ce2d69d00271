"""The exporter's /status page says exactly which kinds of rows it shows, in the words the
report and `realprobe stats` use."""

from __future__ import annotations

import pytest

from realprobe.monitor.status import ToolStatus, render_status


def _row(kind: str, tool: str = "advice_random") -> ToolStatus:
    return ToolStatus(tool=tool, api="advice-slip", target_kind=kind, vantage="vm", state="up",
                      n=10, ok=9, ratio=0.9, lower=0.6, upper=0.98, hours=[(10, 9)],
                      last_ok_ts=None)


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        (["live"], None),
        (["sandbox"], "NOT MEASURED ON THE REAL APIS: every number here comes from"),
        (["live", "simulate"], "MIXED SOURCES: these numbers pool live rows with rows from"),
    ],
)
def test_status_banner_names_the_kinds(kinds: list[str], expected: str | None) -> None:
    page = render_status([_row(k, f"t{i}") for i, k in enumerate(kinds)], title="status")
    if expected is None:
        assert 'class="warn"' not in page
    else:
        assert expected in page
        assert "Not only the real APIs" not in page
