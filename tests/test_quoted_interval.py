"""One quoted interval: the same rows give the same success interval string in `stats`, the
report (Markdown and HTML), /status, /status.json, the exporter's bounds and `alert check`;
and it is the burst-adjusted one `stats` quotes, not plain Wilson."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from monitor_helpers import write_rows
from prometheus_client.parser import text_string_to_metric_families

from realprobe.monitor.alerts import AlertConfig, Rule, check
from realprobe.monitor.exporter import Exporter
from realprobe.probes.stats import interval_text, stats_from_db, wilson
from realprobe.report.build import build_report
from realprobe.report.render import render_html, render_markdown

# 40 calls, failures in runs: the chain's correlation widens the interval stats quotes
ROWS = "ooooxxxxxoooooooooxxxxxxoooooooooooxxooo"


def test_every_surface_quotes_the_stats_interval(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    now = time.time()
    write_rows(db, "agify_age", ROWS, t0=now - 40 * 10 - 5, step_s=10)
    _, rep = stats_from_db(db)
    (t,) = rep.tools
    want = interval_text(t.success.quoted95)
    k = ROWS.count("o")
    assert want != interval_text(wilson(k, len(ROWS)))  # a burst-adjusted interval, not Wilson

    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "stats", "--db", str(db)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
    )
    assert res.returncode == 0, res.stderr
    assert want in res.stdout

    data = build_report(db)
    assert want in render_markdown(data) and want in render_html(data, plots={})

    exporter = Exporter(db, window_s=3600.0)
    assert want in exporter.status_html()
    (row,) = exporter.status_json()
    assert interval_text((row["lower"], row["upper"])) == want
    gauges = {
        f.name: f.samples[0].value
        for f in text_string_to_metric_families(exporter.metrics().decode())
        if f.name in ("realprobe_success_ratio_lower", "realprobe_success_ratio_upper")
    }
    got = (gauges["realprobe_success_ratio_lower"], gauges["realprobe_success_ratio_upper"])
    assert interval_text(got) == want

    rule = Rule.model_validate({"kind": "success_below", "threshold": 0.95, "window": "1h"})
    result = check(db, AlertConfig(rules=[rule]), now=now, dry_run=True)
    (finding,) = result.findings
    assert want in finding.message
    # the decision is on the quoted interval: a threshold inside it does not fire, though
    # plain Wilson's upper bound lies below it
    inside = (wilson(k, len(ROWS))[1] + t.success.quoted95[1]) / 2
    quiet = Rule.model_validate({"kind": "success_below", "threshold": inside, "window": "1h"})
    assert check(db, AlertConfig(rules=[quiet]), now=now, dry_run=True).findings == []
