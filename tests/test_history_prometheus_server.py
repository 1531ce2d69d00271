"""blackbox_exporter series imported from a real Prometheus server on loopback.

The series are backfilled into a fresh TSDB with `promtool tsdb create-blocks-from openmetrics`
(the way users load old samples), then Prometheus serves them over its HTTP API and
`history import prometheus:URL` reads them like any user's server. Needs Debian's
`prometheus` package (`.ci/run` installs it); skipped with the reason when it is missing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

import realprobe

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="Debian's prometheus package is not installed (apt-get install prometheus)",
)

STEP = 15  # seconds between scrapes
N = 240  # one hour of scrapes
DOWN = range(100, 112)  # 12 scrapes (180 s) without an answer
LABELS = 'instance="https://api.example.org",job="blackbox",module="http_2xx"'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openmetrics(t0: int) -> str:
    lines = []
    for name, value in (
        ("probe_success", lambda i: "0" if i in DOWN else "1"),
        ("probe_http_status_code", lambda i: "0" if i in DOWN else "200"),
        ("probe_duration_seconds", lambda i: f"{0.1 + (i % 5) / 100:.2f}"),
    ):
        lines.append(f"# TYPE {name} gauge")
        lines += [f"{name}{{{LABELS}}} {value(i)} {t0 + STEP * i}" for i in range(N)]
    return "\n".join(lines) + "\n# EOF\n"


def _serve(tmp_path: Path, t0: int) -> tuple[subprocess.Popen[bytes], str]:
    data = tmp_path / "tsdb"
    source = tmp_path / "series.om"
    source.write_text(_openmetrics(t0))
    subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source),
                    str(data)], check=True, capture_output=True, timeout=120)
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
    address = f"127.0.0.1:{_free_port()}"
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={data}",
         "--storage.tsdb.retention.time=100y", f"--web.listen-address={address}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, f"http://{address}"


def _ready(base: str, proc: subprocess.Popen[bytes], deadline_s: float = 60.0) -> None:
    """Wait until the server answers and its TSDB holds the backfilled series."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        assert proc.poll() is None, "prometheus exited"
        try:
            got = httpx.get(f"{base}/api/v1/series", params={"match[]": "probe_success",
                                                             "start": "0"}, timeout=5)
            if got.status_code == 200 and got.json()["data"]:
                return
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"prometheus at {base} did not load the backfilled series")


def test_blackbox_history_from_a_real_prometheus(tmp_path: Path) -> None:
    t0 = (int(time.time()) - 3 * 86400) // 3600 * 3600  # three days ago, on the hour
    proc, base = _serve(tmp_path, t0)
    try:
        _ready(base, proc)
        db = tmp_path / "h.db"
        rep = realprobe.import_history(f"prometheus:{base}", db,
                                       since=t0 - 60, until=t0 + STEP * N + 60)
        again = realprobe.import_history(f"prometheus:{base}", db,
                                         since=t0 - 60, until=t0 + STEP * N + 60)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    (mon,) = rep.monitors
    assert mon.checks == N and mon.cadence_s == STEP
    assert again.checks_added == 0  # importing again adds nothing
    m = realprobe.stats(db, kinds="imported").monitors[0]
    assert m.down_s == pytest.approx(len(DOWN) * STEP)
    assert m.outages.durations_s == pytest.approx([len(DOWN) * STEP])
    assert m.http_codes_down == {"0": len(DOWN)}
    assert m.latency_ms is not None and m.latency_ms.n == N - len(DOWN)
    # plain stats keeps imported history apart from realprobe's own probes
    with pytest.raises(realprobe.RealprobeError, match="no probe rows"):
        realprobe.stats(db)
