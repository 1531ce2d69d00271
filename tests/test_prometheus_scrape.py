"""A real Prometheus server scrapes the exporter; PromQL over its HTTP API sees our numbers.

Needs Debian's `prometheus` package (`.ci/run` installs it); skipped with the reason when
the binary is missing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from monitor_helpers import write_rows

from realprobe import Catalog, Mode, TransportOptions, open_db
from realprobe.monitor.blackbox import BlackboxProber
from realprobe.monitor.exporter import Exporter, ExporterServer

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="Debian's prometheus package is not installed (apt-get install prometheus)",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def query(base: str, promql: str, deadline_s: float = 45.0) -> list[dict[str, Any]]:
    """Poll an instant query until it returns a non-empty vector."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            r = httpx.get(f"{base}/api/v1/query", params={"query": promql}, timeout=5)
            result = r.json()["data"]["result"]
            if result:
                return list(result)
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        if time.monotonic() > end:
            raise AssertionError(f"no result for {promql!r} within {deadline_s:g}s")
        time.sleep(0.5)


def test_prometheus_scrapes_metrics_and_the_multi_target_probe(
    tmp_path: Path, catalog: Catalog, calm_sandbox: str
) -> None:
    db = tmp_path / "p.db"
    write_rows(db, "agify_age", "ooxo")  # 3 of 4
    write_rows(db, "catfact_fact", "ox", run_id="r2")  # 1 of 2
    prober = BlackboxProber(catalog, TransportOptions(mode=Mode.LIVE, sandbox=calm_sandbox),
                            open_db(db), timeout_s=5)
    server = ExporterServer(Exporter(open_db(db), prober=prober), port=0)
    exporter_url = server.start()
    exporter_addr = exporter_url.removeprefix("http://")
    web = f"127.0.0.1:{free_port()}"
    config = tmp_path / "prometheus.yml"
    # the blackbox_exporter multi-target pattern, as users already write it
    config.write_text(f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: realprobe
    static_configs:
      - targets: ["{exporter_addr}"]
  - job_name: realprobe-probe
    metrics_path: /probe
    static_configs:
      - targets: ["dogceo_random_image"]
    relabel_configs:
      - source_labels: [__address__]
        target_label: __param_target
      - source_labels: [__param_target]
        target_label: instance
      - target_label: __address__
        replacement: "{exporter_addr}"
""")
    assert PROMETHEUS is not None
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address={web}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )
    try:
        base = f"http://{web}"
        ratio = query(base, 'realprobe_success_ratio{tool="agify_age"}')
        assert float(ratio[0]["value"][1]) == pytest.approx(0.75)
        assert ratio[0]["metric"]["target_kind"] == "live"
        other = query(base, 'realprobe_success_ratio{tool="catfact_fact"}')
        assert float(other[0]["value"][1]) == pytest.approx(0.5)
        total = query(base, 'sum(realprobe_calls_total{tool="agify_age"})')
        assert float(total[0]["value"][1]) == 4
        probe = query(base, 'probe_success{job="realprobe-probe",instance="dogceo_random_image"}')
        assert float(probe[0]["value"][1]) == 1
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        server.stop()
