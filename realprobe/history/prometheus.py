"""blackbox_exporter through Prometheus: range-query JSON of its series.

`probe_success` (1 or 0) per scrape is a recorded check; `probe_duration_seconds` at the same
time its latency, `probe_http_status_code` its status (0: no answer) and
`probe_http_duration_seconds{phase=...}` its phases (kept in the check's detail). One
monitor per (job, instance, module). A sample that is NaN, infinite or not 0/1 is skipped and
counted. The answer is `{"status": "success", "data": {"resultType": "matrix", "result":
[...]}}`; a file may hold one answer or a list of them.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from realprobe.history.records import (
    Check,
    History,
    HistoryError,
    Monitor,
    censor_silences,
    keep,
    median_gap,
)

VANTAGE = "blackbox-exporter"
GAP_INTERVALS = 3.0
_SERIES = ("probe_success", "probe_duration_seconds", "probe_http_status_code",
           "probe_http_duration_seconds")


def _results(doc: Any, where: str) -> list[dict[str, Any]]:
    docs = doc if isinstance(doc, list) else [doc]
    out: list[dict[str, Any]] = []
    for d in docs:
        data = d.get("data") if isinstance(d, dict) else None
        if not isinstance(data, dict) or data.get("resultType") not in ("matrix", "vector") \
                or not isinstance(data.get("result"), list):
            raise HistoryError(f"{where}: not a Prometheus query answer (expected "
                               "data.resultType matrix and data.result)")
        out.extend(r for r in data["result"] if isinstance(r, dict))
    return out


def _number(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _samples(series: dict[str, Any], skipped: Counter[str]) -> dict[float, float]:
    values = series.get("values")
    if values is None and isinstance(series.get("value"), list):
        values = [series["value"]]
    out: dict[float, float] = {}
    for pair in values if isinstance(values, list) else []:
        if not isinstance(pair, list) or len(pair) != 2:
            skipped["sample of the wrong shape"] += 1
            continue
        ts, v = _number(pair[0]), _number(pair[1])
        if ts is None or v is None:
            skipped["sample not a finite number (NaN or infinity)"] += 1
            continue
        out[round(ts, 3)] = v
    return out


def read_prometheus(doc: Any, where: str, *, now: float, since: float | None = None,
                    until: float | None = None) -> History:
    """Monitors from one parsed answer (or a list of answers) of Prometheus's query API."""
    hist = History(source=where, monitor_kind="prometheus")
    skipped: Counter[str] = hist.skipped
    series: dict[tuple[str, str, str], dict[str, dict[float, float]]] = {}
    for r in _results(doc, where):
        metric: dict[str, Any] = r["metric"] if isinstance(r.get("metric"), dict) else {}
        name = metric.get("__name__")
        if name not in _SERIES:
            skipped["series that is no blackbox probe series"] += 1
            continue
        key = (str(metric.get("job", "")), str(metric.get("instance", "")),
               str(metric.get("module", "")))
        slot = name if name != "probe_http_duration_seconds" else f"phase:{metric.get('phase')}"
        series.setdefault(key, {})[slot] = _samples(r, skipped)
    if not any("probe_success" in s for s in series.values()):
        why = ", ".join(f"{n} {k}" for k, n in skipped.most_common())
        raise HistoryError(f"{where}: no probe_success series" + (f" ({why})" if why else ""))
    for (job, instance, module), named in series.items():
        m = _monitor(job, instance, module, named, hist, now, since, until)
        if m is not None:
            hist.monitors.append(m)
    if not hist.monitors:
        why = ", ".join(f"{n} {k}" for k, n in skipped.most_common()) or "no samples"
        raise HistoryError(f"{where}: no usable probe_success sample in the window ({why})")
    return hist


def _monitor(job: str, instance: str, module: str, named: dict[str, dict[float, float]],
             hist: History, now: float, since: float | None, until: float | None
             ) -> Monitor | None:
    success = named.get("probe_success")
    if not success:
        return None
    duration = named.get("probe_duration_seconds", {})
    status = named.get("probe_http_status_code", {})
    phases = {k.removeprefix("phase:"): v for k, v in named.items() if k.startswith("phase:")}
    checks: list[Check] = []
    for ts, v in success.items():
        if v not in (0.0, 1.0):
            hist.skipped["probe_success neither 0 nor 1"] += 1
            continue
        code = status.get(ts)
        parts = [f"{p}={1000 * s[ts]:.0f}ms" for p, s in sorted(phases.items()) if ts in s]
        lat = duration.get(ts)
        checks.append(Check(ts=ts, state="up" if v == 1.0 else "down",
                            http_status=int(code) if code is not None else None,
                            latency_ms=1000 * lat if lat is not None and lat >= 0 else None,
                            detail=" ".join(parts) or None))
    checks = keep(checks, hist.skipped, now, since, until)
    if not checks:
        return None
    spacing = median_gap(checks, float("inf")) or 60.0
    label = "/".join(x for x in (job, instance, module) if x) or "blackbox"
    m = Monitor(key=f"prometheus:{label}", monitor=instance or label, kind="prometheus",
                name=label, url=instance or None, vantage=VANTAGE, source=hist.source,
                gap_limit_s=GAP_INTERVALS * spacing, checks=checks)
    censor_silences(m)
    m.cadence_s = median_gap(checks, m.gap_limit_s)
    m.cadence_how = "the median spacing of its probe_success samples"
    return m
