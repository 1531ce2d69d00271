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

from realprobe import build_report, open_db
from realprobe.monitor.alerts import AlertConfig, Rule, check
from realprobe.monitor.exporter import Exporter
from realprobe.probes.stats import EXTRAPOLATED, interval_text, stats_from_db, wilson
from realprobe.report.render import render_html, render_markdown

# 40 calls, failures in runs: the chain's correlation widens the interval stats quotes
ROWS = "ooooxxxxxoooooooooxxxxxxoooooooooooxxooo"


def test_every_surface_quotes_the_stats_interval(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    now = time.time()
    write_rows(db, "agify_age", ROWS, t0=now - 40 * 10 - 5, step_s=10)
    _, rep = stats_from_db(open_db(db))
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

    exporter = Exporter(open_db(db), window_s=3600.0)
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
    result = check(open_db(db), AlertConfig(rules=[rule]), now=now, dry_run=True)
    (finding,) = result.findings
    assert want in finding.message
    # the decision is on the quoted interval: a threshold inside it does not fire, though
    # plain Wilson's upper bound lies below it
    inside = (wilson(k, len(ROWS))[1] + t.success.quoted95[1]) / 2
    quiet = Rule.model_validate({"kind": "success_below", "threshold": inside, "window": "1h"})
    assert check(open_db(db), AlertConfig(rules=[quiet]), now=now, dry_run=True).findings == []


def test_an_extrapolated_percentile_is_marked_in_stats_report_and_alerts(tmp_path: Path) -> None:
    """The deadline cuts into the latency: stats, the report and the p95 alert all mark the
    censored fit's percentiles with the one mark, decided by `LatencyStats.extrapolated`."""
    import numpy as np

    from realprobe import Store
    from realprobe.store import iso_utc

    db = tmp_path / "p.db"
    now = time.time()
    lat = np.exp(np.random.default_rng(3).normal(np.log(700.0), 0.5, 300))
    with Store(db) as store:
        store.start_run({"id": "r", "started_at": iso_utc(now - 3000), "started_ts": now - 3000,
                         "vantage": "here", "mode": "live", "target": "live",
                         "tools": ["agify_age"], "rounds": 300, "status": "done"})
        for i, ms in enumerate(lat):
            ts, ok = now - 3000 + i * 10, ms < 1000
            store.insert_probe({
                "run_id": "r", "tool": "agify_age", "api": "agify", "round": i,
                "started_at": iso_utc(ts), "started_ts": ts,
                "latency_ms": float(ms) if ok else 1000.0, "outcome": "ok" if ok else "error",
                "error_code": None if ok else "TIMEOUT", "http_status": 200 if ok else None,
                "bytes": 10, "vantage": "here", "detail": "", "timeout_s": 1.0, "excluded": 0,
                "source": "probe",
            })
    _, rep = stats_from_db(open_db(db))
    (t,) = rep.tools
    assert t.latency.extrapolated and t.latency.p95 is not None
    p95 = f"{t.latency.p95:.0f}{EXTRAPOLATED}"
    md = render_markdown(build_report(db))
    assert f"{t.latency.p99:.0f}\\{EXTRAPOLATED}" in md
    rule = Rule.model_validate({"kind": "p95_above", "threshold_ms": 100, "window": "1h"})
    (finding,) = check(open_db(db), AlertConfig(rules=[rule]), now=now, dry_run=True).findings
    assert f"{p95} ms" in finding.message and "extrapolated" in finding.message
