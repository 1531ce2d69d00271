"""One bad row never breaks monitoring: rows written around the store's checks (by hand, by
an older tool) that are dated in the year 3000 or whose start is not a number leave
`/metrics`, `/status`, `stats`, `report` and `alert check` working on the other rows; label
values stay bounded, with what was folded counted."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from monitor_helpers import write_rows
from prometheus_client.parser import text_string_to_metric_families

from realprobe import Store, open_db
from realprobe.monitor import aggregate
from realprobe.monitor.exporter import Exporter


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(text) for s in family.samples
    ]


def _raw(db: Path, rows: list[dict[str, object]]) -> None:
    """Rows put in without the store's checks, as another program could."""
    with Store(db) as store, store.conn:
        for row in rows:
            store.conn.execute(
                f"INSERT INTO probes ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                list(row.values()),
            )


def _bad_rows(now: float) -> list[dict[str, object]]:
    base = {"run_id": "evil", "tool": "agify_age", "api": "agify", "outcome": "ok",
            "latency_ms": 10.0, "vantage": "evil"}
    return [
        {**base, "started_ts": 32503680000.0},  # the year 3000
        {**base, "started_ts": "tomorrow"},
        {**base, "started_ts": float("inf")},
        {**base, "started_ts": now - 30, "latency_ms": "slow"},
        {**base, "started_ts": now - 20, "tls_expires_ts": "never", "api": "tlsbad"},
    ]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "p.db"
    now = time.time()
    write_rows(path, "agify_age", "ox" * 15, vantage="berlin", run_id="b", t0=now - 900,
               step_s=20)
    write_rows(path, "agify_age", "o" * 30, vantage="tokyo", run_id="t", t0=now - 900,
               step_s=20)
    _raw(path, _bad_rows(now))
    return path


def test_metrics_and_status_survive_bad_rows(db: Path) -> None:
    exporter = Exporter(open_db(db))
    text = exporter.metrics().decode()
    ratios = {s[1]["vantage"]: s[2] for s in _samples(text)
              if s[0] == "realprobe_success_ratio"}
    assert ratios["berlin"] == pytest.approx(0.5) and ratios["tokyo"] == 1.0
    states = {(s["vantage"], s["state"]) for s in exporter.status_json()}
    assert ("berlin", "degraded") in states and ("tokyo", "up") in states
    assert all(state != "no data" for _, state in states)
    assert exporter.aggregator.last_error is None
    exporter.metrics()  # and again, incrementally


@pytest.mark.parametrize("verb", [
    ["stats"], ["report", "--format", "md"], ["alert", "check", "RULES", "--dry-run"],
])
def test_readers_do_not_trace_back_on_bad_rows(db: Path, verb: list[str]) -> None:
    rules = db.parent / "rules.json"
    rules.write_text(json.dumps({"rules": [
        {"kind": "p95_above", "threshold_ms": 5000}, {"kind": "no_success", "for": "1h"},
        {"kind": "cert_expiring", "days": 10},
    ]}))
    args = [str(rules) if a == "RULES" else a for a in verb]
    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", *args, "--db", str(db)],
        capture_output=True, text=True, timeout=120, cwd=db.parent,
    )
    assert "Traceback" not in res.stderr and res.returncode in (0, 1), res.stderr
    if verb == ["stats"]:
        assert "agify_age" in res.stdout


def test_labels_come_from_closed_sets_and_what_is_folded_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aggregate, "MAX_TLS", 50)
    db, now = tmp_path / "p.db", time.time()
    write_rows(db, "agify_age", "oo", t0=now - 100)
    base = {"run_id": "x", "tool": "agify_age", "api": "agify", "vantage": "here",
            "latency_ms": 5.0}
    _raw(db, [{**base, "outcome": "error", "error_code": f"CODE_{i}", "started_ts": now - 50}
              for i in range(3000)])
    _raw(db, [{**base, "outcome": "ok", "api": f"api{i}", "tls_expires_ts": now + 86400,
               "tls_issuer": "x" * 500, "started_ts": now - 40} for i in range(200)])
    text = Exporter(open_db(db)).metrics().decode()
    samples = _samples(text)
    codes = {s[1]["code"] for s in samples if s[0] == "realprobe_calls_total"}
    assert codes <= {"", "other"}
    tls = [s for s in samples if s[0] == "realprobe_tls_expiry_days"]
    assert len(tls) == 50
    dropped = {s[1]["label"]: s[2] for s in samples
               if s[0] == "realprobe_labels_dropped_total"}
    assert dropped["code"] >= 1 and dropped["tls"] >= 150


def test_a_cached_probe_answer_skips_bad_rows(tmp_path: Path) -> None:
    from prometheus_client import generate_latest

    from realprobe import ApiSpec, Catalog, Mode, TransportOptions
    from realprobe.monitor.blackbox import BlackboxProber

    api = ApiSpec.model_validate({
        "id": "local", "name": "Local", "docs_url": "https://example.org", "category": "Test",
        "base_url": "http://127.0.0.1:9", "https": False,
        "politeness": {"min_interval_s": 3600, "jitter_s": 0, "daily_budget": 5},
        "tools": [{"name": "local_get", "title": "t", "description": "d", "path": "/v",
                   "output": {"v": {"from": "v", "type": "integer"}}, "examples": [{}],
                   "fixtures": [{"body": '{"v": 1}', "source": "test"}]}],
    })
    db = tmp_path / "p.db"
    Store(db).close()
    prober = BlackboxProber(Catalog([api]), TransportOptions(mode=Mode.LIVE), open_db(db),
                            timeout_s=2)
    assert prober.probe("local_get").cached is None  # refused at connect, stored
    base = {"run_id": "evil", "tool": "local_get", "api": "local", "vantage": "evil"}
    _raw(db, [
        {**base, "started_ts": 32503680000.0, "outcome": "ok", "latency_ms": 1.0},
        {**base, "started_ts": "zzz", "outcome": "ok", "latency_ms": 1.0},
        {**base, "started_ts": time.time(), "outcome": "error", "latency_ms": "slow",
         "error_code": "MADE_UP", "http_status": "x", "redirects": "{not json"},
    ])
    answer = prober.probe("local_get")
    text = generate_latest(answer.registry).decode()
    assert answer.cached == "politeness" and "probe_success 0.0" in text
    assert 'realprobe_probe_error{code="OPERATION_FAILED"} 1.0' in text
