"""The Prometheus exporter: /metrics from a database with known rows, /probe, /status."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx
import pytest
from monitor_helpers import write_rows
from prometheus_client.parser import text_string_to_metric_families

from realprobe import ApiSpec, Catalog, Mode, Profile, Store, TransportOptions, open_db
from realprobe.monitor.blackbox import BlackboxProber, _registry_for
from realprobe.monitor.exporter import Exporter, ExporterServer


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float:
    hits = [
        v for (n, ls), v in samples(text).items()
        if n == name and all(dict(ls).get(k) == want for k, want in labels.items())
    ]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


def test_metrics_count_every_row_and_fold_new_rows_incrementally(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    write_rows(db, "agify_age", "oooxoooxoo", latency_ms=80.0)  # 8 of 10
    write_rows(db, "catfact_fact", "xxxx", run_id="run-2", code="TIMEOUT")
    exporter = Exporter(open_db(db))
    text = exporter.metrics().decode()
    assert value(text, "realprobe_calls_total", tool="agify_age", outcome="ok") == 8
    assert value(text, "realprobe_calls_total", tool="agify_age", code="SERVER_ERROR") == 2
    assert value(text, "realprobe_calls_total", tool="catfact_fact", code="TIMEOUT") == 4
    assert value(text, "realprobe_success_ratio", tool="agify_age") == pytest.approx(0.8)
    lo = value(text, "realprobe_success_ratio_lower", tool="agify_age")
    hi = value(text, "realprobe_success_ratio_upper", tool="agify_age")
    assert 0.4 < lo < 0.8 < hi < 1.0
    assert value(text, "realprobe_latency_seconds_bucket", tool="agify_age", le="0.1") == 8
    assert value(text, "realprobe_latency_seconds_count", tool="agify_age") == 8
    assert value(text, "realprobe_success_ratio", tool="catfact_fact") == 0.0
    labels = dict(next(ls for (n, ls) in samples(text) if n == "realprobe_calls_total"))
    assert set(labels) == {"tool", "api", "target_kind", "vantage", "outcome", "code"}

    # new rows are folded in; the aggregator did not re-read the old ones
    before = exporter.aggregator.last_id
    write_rows(db, "agify_age", "oo", run_id="run-3")
    text = exporter.metrics().decode()
    assert exporter.aggregator.last_id == before + 2
    assert value(text, "realprobe_calls_total", tool="agify_age", outcome="ok") == 10


def test_a_run_excluded_later_leaves_ratios_but_counters_never_go_down(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    write_rows(db, "agify_age", "oooo")
    write_rows(db, "agify_age", "xxxx", run_id="dead-net", code="NETWORK_ERROR")
    exporter = Exporter(open_db(db))
    text = exporter.metrics().decode()
    assert value(text, "realprobe_calls_total", tool="agify_age", code="NETWORK_ERROR") == 4
    assert value(text, "realprobe_success_ratio", tool="agify_age") == 0.5
    with Store(db) as store:  # the prober marks its own outage at the end of the run
        store.finish_run("dead-net", {"status": "local_network_failure", "excluded": 1})
    text = exporter.metrics().decode()
    # a counter that went down would read as an exporter restart (a false rate spike)
    assert value(text, "realprobe_calls_total", tool="agify_age", code="NETWORK_ERROR") == 4
    assert value(text, "realprobe_calls_excluded_total", tool="agify_age") == 4
    assert value(text, "realprobe_success_ratio", tool="agify_age") == 1.0
    # a fresh exporter never counts them
    fresh = Exporter(open_db(db)).metrics().decode()
    hits = [k for k in samples(fresh) if k[0] == "realprobe_calls_total"
            and dict(k[1]).get("code") == "NETWORK_ERROR"]
    assert hits == []


def test_hostile_label_values_are_bounded(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    for i in range(80):
        write_rows(db, "agify_age", "o", run_id=f"r{i}", vantage=f"v{i}")
    write_rows(db, 'x"} evil{', "o", run_id="bad", api="a b")
    text = Exporter(open_db(db)).metrics().decode()
    vantages = {dict(ls).get("vantage") for (n, ls) in samples(text)
                if n == "realprobe_calls_total"}
    assert len(vantages) <= 65 and "other" in vantages
    tools = {dict(ls).get("tool") for (n, ls) in samples(text) if n == "realprobe_calls_total"}
    assert 'x"} evil{' not in tools


def test_status_page_says_up_degraded_down(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    write_rows(db, "agify_age", "o" * 40)
    write_rows(db, "catfact_fact", "ox" * 20, run_id="r2")
    write_rows(db, "dogceo_random", "x" * 10, run_id="r3")
    exporter = Exporter(open_db(db))
    states = {s["tool"]: s["state"] for s in exporter.status_json()}
    assert states == {"agify_age": "up", "catfact_fact": "degraded", "dogceo_random": "down"}
    page = exporter.status_html()
    assert "degraded" in page and "http-equiv=\"refresh\"" in page


def _sandbox_catalog(catalog: Catalog) -> Catalog:
    return catalog


def test_probe_endpoint_against_the_sandbox(
    tmp_path: Path, catalog: Catalog, sandbox_factory: object
) -> None:
    broken = Profile.model_validate({
        "format": "realprobe-profile/1",
        "tools": {"catfact_fact": {"n": 100, "success_rate": 0.0,
                                   "errors": {"SERVER_ERROR": 1.0}}},
    })
    url = sandbox_factory(broken)  # type: ignore[operator]
    db = tmp_path / "p.db"
    Store(db).close()
    from realprobe import Politeness, PolitenessConfig

    slow = PolitenessConfig(override=Politeness(min_interval_s=300, jitter_s=0))
    prober = BlackboxProber(catalog, TransportOptions(mode=Mode.LIVE, sandbox=url), open_db(db),
                            timeout_s=5, politeness=slow)
    server = ExporterServer(Exporter(open_db(db), prober=prober), port=0)
    base = server.start()
    try:
        ok = httpx.get(f"{base}/probe", params={"tool": "agify_age"}, timeout=10)
        assert ok.status_code == 200 and "x-realprobe-cached" not in ok.headers
        assert value(ok.text, "probe_success") == 1
        assert value(ok.text, "probe_http_status_code") == 200
        connect = value(ok.text, "probe_http_duration_seconds", phase="connect")
        processing = value(ok.text, "probe_http_duration_seconds", phase="processing")
        total = value(ok.text, "probe_duration_seconds")
        assert connect > 0 and processing > 0 and total >= processing

        bad = httpx.get(f"{base}/probe", params={"target": "catfact_fact"}, timeout=10)
        assert value(bad.text, "probe_success") == 0
        assert 500 <= value(bad.text, "probe_http_status_code") < 600
        assert value(bad.text, "realprobe_probe_error", code="SERVER_ERROR") == 1

        # politeness: a second scrape within the API's interval makes no call
        again = httpx.get(f"{base}/probe", params={"tool": "agify_age"}, timeout=10)
        assert again.headers["x-realprobe-cached"] == "politeness"
        assert value(again.text, "realprobe_probe_cached", reason="politeness") == 1
        assert value(again.text, "probe_success") == 1  # the stored call answers

        unknown = httpx.get(f"{base}/probe", params={"tool": "nope"}, timeout=10)
        assert unknown.status_code == 400
        metrics = httpx.get(f"{base}/metrics", timeout=10).text
        assert value(metrics, "realprobe_calls_total", tool="agify_age", outcome="ok") == 1
    finally:
        server.stop()
    with Store(db) as store:
        rows = list(store.db["probes"].rows)
        runs = list(store.db["probe_runs"].rows)
    assert len(rows) == 2  # the cached answer made no call
    assert runs[0]["status"] == "done" and runs[0]["n_calls"] == 2


def test_probe_endpoint_keeps_the_daily_budget_of_live_calls(tmp_path: Path) -> None:
    import http.server
    import threading

    hits: list[float] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(time.time())
            body = b'{"v": 1}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    api = ApiSpec.model_validate({
        "id": "local", "name": "Local", "docs_url": "https://example.org", "category": "Test",
        "base_url": f"http://127.0.0.1:{upstream.server_address[1]}", "https": False,
        "politeness": {"min_interval_s": 0, "jitter_s": 0, "daily_budget": 2},
        "tools": [{"name": "local_get", "title": "t", "description": "d", "path": "/v",
                   "output": {"v": {"from": "v", "type": "integer"}}, "examples": [{}],
                   "fixtures": [{"body": '{"v": 1}', "source": "test"}]}],
    })
    db = tmp_path / "p.db"
    Store(db).close()
    from realprobe import VirtualClock

    day = VirtualClock(start_wall=1930651200.0)  # 2031-03-07 12:00 UTC: the budget's day
    prober = BlackboxProber(Catalog([api]), TransportOptions(mode=Mode.LIVE), open_db(db),
                            timeout_s=5, reserve_for_schedule=0.0, clock=day)
    try:
        answers = [prober.probe("local_get") for _ in range(4)]
    finally:
        upstream.shutdown()
        upstream.server_close()
    assert [a.cached for a in answers] == [None, None, "budget", "budget"]
    assert len(hits) == 2
    ledger = sqlite3.connect(db).execute("SELECT day, api, used FROM api_budget").fetchall()
    assert ledger == [("2031-03-07", "local", 2)]  # today on the injected clock


def test_the_first_read_in_sql_equals_folding_row_by_row(tmp_path: Path) -> None:
    from realprobe.monitor.aggregate import Aggregator

    db = tmp_path / "p.db"
    now = time.time()
    write_rows(db, "agify_age", "ooxoooxxoo" * 5, t0=now - 3000, latency_ms=30.0)
    write_rows(db, "agify_age", "oxo", run_id="r2", vantage="there", latency_ms=700.0)
    write_rows(db, "catfact_fact", "xxo", run_id="r3", code="TIMEOUT", latency_ms=4000.0,
               extra={"tls_expires_ts": now + 86400, "tls_issuer": "CA"})
    bulk = Aggregator(open_db(db))
    bulk.refresh()
    by_row = Aggregator(open_db(db))
    by_row.last_id = -1  # skip the SQL path: fold every row one by one
    by_row.refresh()
    assert bulk.series.keys() == by_row.series.keys()
    for key, a in bulk.series.items():
        b = by_row.series[key]
        assert a.latency_sum_s == pytest.approx(b.latency_sum_s)
        a.latency_sum_s = b.latency_sum_s  # summed in another order
        assert a == b, key
    assert bulk.tls.keys() == by_row.tls.keys() == {"catfact"}
    assert bulk.rows_seen == by_row.rows_seen == 56


def test_the_grafana_dashboard_queries_metrics_the_exporter_serves(tmp_path: Path) -> None:
    import json
    import re

    dashboard = json.loads(
        (Path(__file__).parent.parent / "docs" / "grafana-realprobe.json").read_text()
    )
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    wanted = {m for e in exprs for m in re.findall(r"\b((?:realprobe|probe)_[a-z_]+)", e)}
    db = tmp_path / "p.db"
    write_rows(db, "agify_age", "ox", extra={"tls_expires_ts": time.time() + 9e5,
                                            "tls_issuer": "CA"})
    with Store(db) as store, store.conn:
        store.conn.execute("INSERT INTO api_budget VALUES ('2000-01-01', 'agify', 'live', 1)")
    from prometheus_client import generate_latest

    served = Exporter(open_db(db), budgets={"agify": 100}).metrics().decode()
    served += generate_latest(_registry_for(None, cached=None, age_s=None)).decode()
    names = {s.name for f in text_string_to_metric_families(served) for s in f.samples}
    names |= {f.name for f in text_string_to_metric_families(served)}
    assert wanted and wanted <= names, wanted - names


def test_the_exposition_is_byte_for_byte_what_prometheus_client_writes(tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

    from realprobe.monitor.metrics import exposition

    db = tmp_path / "p.db"
    write_rows(db, "agify_age", "oooxoooxoo", latency_ms=80.0)
    write_rows(db, "catfact_fact", "xxxx", run_id="run-2", code="TIMEOUT", vantage='a"b\\c')
    exporter = Exporter(open_db(db))
    families = list(exporter.registry.collect())
    odd = GaugeMetricFamily("odd", 'help with \\ and\nnewline', labels=["issuer", "z", "a"])
    odd.add_metric(['CN="x"\\y\nz', "1", "2"], 1e22)
    odd.add_metric(["plain", "", "é"], float("nan"), timestamp=1234.5)
    created = CounterMetricFamily("made", "a counter with its creation time", labels=["k"])
    created.add_metric(["v"], 3, created=1700000000.0)
    info = InfoMetricFamily("build", "an info family", value={"version": "1"})
    families += [odd, created, info]

    class Fixed:
        def collect(self):  # type: ignore[no-untyped-def]
            return iter(families)

    reg = CollectorRegistry(auto_describe=False)
    reg.register(Fixed())  # type: ignore[arg-type]
    assert exposition(families) == generate_latest(reg)
    assert b"realprobe_calls_total" in exposition(families)
