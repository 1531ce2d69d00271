"""blackbox_exporter series (Prometheus's query API answers) and Statuspage incidents, from
files and from loopback servers, in their real formats."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import realprobe
from tests.loopback_http import serving

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
CLI = [str(Path(sys.executable).parent / "realprobe")]
LABELS = {"instance": "https://api.example.org", "job": "blackbox", "module": "http_2xx"}


def _series(name: str, values: list[tuple[float, str]], **extra: str) -> dict[str, Any]:
    return {"metric": {"__name__": name, **LABELS, **extra},
            "values": [[t, v] for t, v in values]}


def _answer(n: int = 120, nan_at: int | None = None) -> dict[str, Any]:
    """Scrapes every 15 s; probe_success 0 from scrape 50 to 57 (no answer: status 0)."""
    ts = [T0 + 15 * i for i in range(n)]
    down = set(range(50, 58))
    ok = [(t, "NaN" if i == nan_at else "0" if i in down else "1") for i, t in enumerate(ts)]
    return {"status": "success", "data": {"resultType": "matrix", "result": [
        _series("probe_success", ok),
        _series("probe_duration_seconds", [(t, f"{0.1 + (i % 5) / 100:.2f}")
                                           for i, t in enumerate(ts)]),
        _series("probe_http_status_code", [(t, "0" if i in down else "200")
                                           for i, t in enumerate(ts)]),
        _series("probe_http_duration_seconds", [(t, "0.02") for t in ts], phase="connect"),
    ]}}


def test_blackbox_series_from_a_file_give_availability_and_measured_latency(
        tmp_path: Path) -> None:
    src = tmp_path / "range.json"
    src.write_text(json.dumps(_answer(nan_at=7)))
    db = tmp_path / "h.db"
    rep = realprobe.import_history(f"prometheus:{src}", db)
    assert rep.skipped == {"sample not a finite number (NaN or infinity)": 1}
    (mon,) = rep.monitors
    assert mon.checks == 119 and mon.cadence_s == 15
    m = realprobe.stats(db, kinds="imported").monitors[0]
    assert m.down_s == pytest.approx(8 * 15)
    assert m.outages.durations_s == pytest.approx([120])
    assert m.errors == {"NETWORK_ERROR": 1.0} and m.http_codes_down == {"0": 8}
    assert m.latency_ms is not None and m.latency_ms.n == 111
    assert m.latency_ms.p50 == pytest.approx(120, abs=10)


def test_blackbox_series_from_a_prometheus_on_loopback(tmp_path: Path) -> None:
    body = json.dumps(_answer()).encode()
    with serving({"/api/v1/query": (200, "application/json", body)}) as served:
        rep = realprobe.import_history(f"prometheus:{served.url}", tmp_path / "h.db",
                                       since=T0 - 60, until=T0 + 3600)
    asked = " ".join(served.requests)
    for name in ("probe_success", "probe_duration_seconds", "probe_http_status_code"):
        assert name in asked
    assert rep.monitors[0].checks == 120


def test_a_prometheus_off_loopback_is_refused_before_any_call(tmp_path: Path) -> None:
    with pytest.raises(realprobe.BadArgument, match="only a Prometheus on loopback"):
        realprobe.import_history("prometheus:http://prometheus.example.org:9090",
                                 tmp_path / "h.db")


INCIDENTS = {
    "page": {"id": "y2j98763l443", "name": "Example API", "url": "https://status.example.org",
             "time_zone": "Etc/UTC", "updated_at": "2026-01-03T10:00:00.000Z"},
    "incidents": [
        {"id": "p31zjtct2jer", "name": "Elevated error rates on the REST API",
         "status": "resolved", "impact": "major", "created_at": "2026-01-02T10:05:00.000Z",
         "started_at": "2026-01-02T10:00:00.000Z", "resolved_at": "2026-01-02T11:30:00.000Z",
         "monitoring_at": None, "shortlink": "https://stspg.io/p31zjtct2jer",
         "page_id": "y2j98763l443", "incident_updates": [],
         "components": [{"name": "REST API"}]},
        {"id": "m0z0wsq5x4cq", "name": "Degraded webhooks", "status": "investigating",
         "impact": "minor", "created_at": "2026-01-03T08:00:00.000-06:00",
         "started_at": "2026-01-03T08:00:00.000-06:00", "resolved_at": None,
         "monitoring_at": None, "shortlink": "https://stspg.io/m0z0wsq5x4cq",
         "page_id": "y2j98763l443", "incident_updates": [], "components": []},
        {"id": 7, "name": "an incident of the wrong types"},
    ]}


def test_statuspage_incidents_are_declared_windows_never_checks(tmp_path: Path) -> None:
    src = tmp_path / "incidents.json"
    src.write_text(json.dumps(INCIDENTS))
    db = tmp_path / "h.db"
    rep = realprobe.import_history(f"statuspage:{src}", db)
    assert rep.checks_read == 0 and rep.skipped == {"incident of the wrong types": 1}
    m = realprobe.stats(db, kinds="imported").monitors[0]
    assert m.availability is None and m.checks_recorded == 0
    assert [(i["id"], i["impact"], i["start"], i["end"]) for i in m.incidents] == [
        ("p31zjtct2jer", "major", "2026-01-02T10:00:00Z", "2026-01-02T11:30:00Z"),
        ("m0z0wsq5x4cq", "minor", "2026-01-03T14:00:00Z", None)]
    body = json.dumps(INCIDENTS).encode()
    with serving({"/api/v2/incidents.json": (200, "application/json", body)}) as served:
        again = realprobe.import_history(f"statuspage:{served.url}/api/v2/incidents.json", db)
    assert again.intervals_read == 2


@pytest.mark.parametrize("kind, content, says", [
    ("prometheus", json.dumps(_answer(n=3, nan_at=None)).replace('"1"', '"NaN"')
     .replace('"0"', '"+Inf"'), "no usable probe_success sample"),
    ("prometheus", '{"status": "error", "error": "bad query"}', "not a Prometheus query answer"),
    ("prometheus", "[1, 2", "not valid JSON"),
    ("statuspage", '{"page": {}}', "not a Statuspage incidents.json"),
])
def test_a_bad_file_is_one_line_and_writes_nothing(tmp_path: Path, kind: str, content: str,
                                                   says: str) -> None:
    src = tmp_path / "in.json"
    src.write_text(content)
    db = tmp_path / "h.db"
    out = subprocess.run([*CLI, "history", "import", f"{kind}:{src}", "--db", str(db)],
                         capture_output=True, text=True)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and str(src) in lines[0], lines
    assert not db.exists()
