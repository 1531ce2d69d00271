"""The probe database as Prometheus metric families (a `prometheus_client` collector).

Metric names (all prefixed `realprobe_`), labelled by `tool`, `api`, `target_kind`,
`vantage` (and `code` for calls):

- `calls_total{outcome, code}`: every stored call the exporter has counted (counter; calls
  of a run marked a local network failure later stay counted, so it never goes down),
- `calls_excluded_total`: of those, the calls whose run was marked excluded afterwards,
- `latency_seconds`: histogram of successful calls' latency,
- `success_ratio`, `success_ratio_lower`, `success_ratio_upper`, `window_calls`: success
  over the exporter's window with the 95% interval `realprobe stats` quotes (burst-adjusted
  Wilson; alert on the bound, not the point),
- `last_call_timestamp_seconds`, `last_success_timestamp_seconds`,
- `latency_p95_seconds{tool, target_kind}`: p95 latency over the window, computed by the
  same statistics code as `realprobe stats` and the `p95_above` alert rule (the censored
  fit when the deadline bites),
- `tls_expiry_days{api}`, `tls_expiry_timestamp_seconds{api, issuer}`: the last certificate
  seen on a new HTTPS connection to the API,
- `labels_dropped_total{label}`: label values folded into `other` (and rows left out) to keep
  the number of series bounded,
- `budget_used{api}` / `budget_limit{api}`: today's daily budget of live calls,
- `exporter_*`: the exporter's own health (refresh duration, rows seen, errors).
"""

from __future__ import annotations

import itertools
import sqlite3
import time
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from realprobe.clock import utc_day
from realprobe.errors import RealprobeError
from realprobe.monitor.aggregate import (
    LATENCY_BUCKETS_S,
    TARGET_KINDS,
    Aggregator,
    Series,
    label,
)
from realprobe.probes.loading import load_probes
from realprobe.probes.stats import latency_stats

SERIES_LABELS = ["tool", "api", "target_kind", "vantage"]


class ProbeCollector(Collector):
    """Refreshes the aggregator on every scrape and yields its families."""

    def __init__(
        self,
        aggregator: Aggregator,
        *,
        window_s: float = 3600.0,
        budgets: dict[str, int] | None = None,
        clock: Any = time.time,
    ) -> None:
        self.agg = aggregator
        self.window_s = window_s
        self.budgets = budgets or {}
        self.clock = clock
        self._p95_cache: tuple[int, dict[tuple[str, str], float]] | None = None

    def describe(self) -> list[Any]:
        return []  # unchecked collector: families depend on the data

    def collect(self) -> Iterator[Any]:
        self.agg.refresh()
        now = float(self.clock())
        families = SeriesFamilies(self.window_s)
        quoted = self.agg.quoted(now - self.window_s)
        for key, series in sorted(self.agg.snapshot().items()):
            families.add(list(key), series, since=now - self.window_s,
                         ci=quoted.get((key[0], key[2], key[3])))
        yield from families.all()
        yield self._p95(now)
        yield from self._tls(now)
        yield from self._budgets(now)
        yield from self._health()

    def _p95(self, now: float) -> GaugeMetricFamily:
        """p95 per tool and kind over the window, from probes/stats.py (recomputed at most
        once a minute: a scrape stays a fold of the new rows, not a read of the window)."""
        key = int(now // 60)
        if self._p95_cache is None or self._p95_cache[0] != key:
            self._p95_cache = (key, window_p95(self.agg, now - self.window_s))
        family = GaugeMetricFamily(
            "realprobe_latency_p95_seconds",
            f"p95 latency of the last {self.window_s:g}s, as `realprobe stats` computes it.",
            labels=["tool", "target_kind"],
        )
        for (tool, kind), p95 in sorted(self._p95_cache[1].items()):
            family.add_metric([tool, kind], p95 / 1000.0)
        return family

    def _tls(self, now: float) -> Iterator[Any]:
        days = GaugeMetricFamily(
            "realprobe_tls_expiry_days",
            "Days until the API's certificate expires (last new HTTPS connection).",
            labels=["api"],
        )
        stamp = GaugeMetricFamily(
            "realprobe_tls_expiry_timestamp_seconds", "Certificate notAfter.",
            labels=["api", "issuer"],
        )
        for api, seen in sorted(self.agg.tls.items()):
            days.add_metric([api], (seen.expires_ts - now) / 86400.0)
            stamp.add_metric([api, seen.issuer[:120]], seen.expires_ts)
        yield days
        yield stamp

    def _budgets(self, now: float) -> Iterator[Any]:
        used = GaugeMetricFamily(
            "realprobe_budget_used", "Live calls counted against today's budget (UTC day).",
            labels=["api"],
        )
        limit = GaugeMetricFamily(
            "realprobe_budget_limit", "Daily budget of live calls.", labels=["api"]
        )
        day = utc_day(now)[0]
        for api, n in sorted(budget_used(self.agg, day).items()):
            used.add_metric([api], n)
        for api, n in sorted(self.budgets.items()):
            limit.add_metric([api], n)
        yield used
        yield limit

    def _health(self) -> Iterator[Any]:
        agg = self.agg
        yield GaugeMetricFamily("realprobe_exporter_database_up",
                                "1 when the last refresh read the database.",
                                value=0 if agg.last_error else 1)
        yield GaugeMetricFamily("realprobe_exporter_refresh_seconds",
                                "Time the last refresh took.", value=agg.last_refresh_s)
        yield GaugeMetricFamily("realprobe_exporter_rows",
                                "Rows currently aggregated (excluded runs taken out).",
                                value=agg.rows_seen)
        yield CounterMetricFamily("realprobe_exporter_refresh_errors",
                                  "Refreshes that failed to read the database.",
                                  value=agg.refresh_errors)
        yield GaugeMetricFamily("realprobe_exporter_series", "Distinct label sets.",
                                value=len(agg.series))
        dropped = CounterMetricFamily(
            "realprobe_labels_dropped",
            "Label values folded into `other`, and rows left out, to bound the series.",
            labels=["label"],
        )
        for what, n in sorted(agg.dropped.items()):
            dropped.add_metric([what], n)
        yield dropped


class SeriesFamilies:
    """The per-series families: calls, latency histogram, windowed success ratio with its
    quoted interval, and the last call and last success."""

    def __init__(self, window_s: float) -> None:
        self.calls = CounterMetricFamily(
            "realprobe_calls", "Stored calls by outcome and error code.",
            labels=[*SERIES_LABELS, "outcome", "code"],
        )
        self.excluded = CounterMetricFamily(
            "realprobe_calls_excluded",
            "Counted calls whose run was later marked a local network failure (still in "
            "calls_total: counters never go down).",
            labels=SERIES_LABELS,
        )
        self.latency = HistogramMetricFamily(
            "realprobe_latency_seconds", "Latency of successful calls.", labels=SERIES_LABELS
        )
        self.ratio = _gauge("success_ratio", f"Success ratio over the last {window_s:g}s.")
        self.lower = _gauge("success_ratio_lower", "Lower bound of the 95% interval "
                            "`realprobe stats` quotes (burst-adjusted).")
        self.upper = _gauge("success_ratio_upper", "Upper bound of the 95% interval "
                            "`realprobe stats` quotes (burst-adjusted).")
        self.window = _gauge("window_calls", "Calls in the success-ratio window.")
        self.last = _gauge("last_call_timestamp_seconds", "Start of the last stored call.")
        self.last_ok = _gauge("last_success_timestamp_seconds",
                              "Start of the last successful call.")

    def add(self, values: list[str], s: Series, *, since: float,
            ci: tuple[float, float] | None = None) -> None:
        """One series (its label values) into every family; the ratio counts calls after
        `since`; `ci` is its quoted interval (`Aggregator.quoted`)."""
        for (outcome, code), count in sorted(s.calls.items()):
            if count > 0:
                self.calls.add_metric([*values, outcome, code], count)
        if s.excluded:
            self.excluded.add_metric(values, s.excluded)
        self.latency.add_metric(values, _cumulative_buckets(s), max(s.latency_sum_s, 0.0))
        n, k = s.window(since)
        self.window.add_metric(values, n)
        if n > 0:
            self.ratio.add_metric(values, k / n)
        if n > 0 and ci is not None:
            self.lower.add_metric(values, ci[0])
            self.upper.add_metric(values, ci[1])
        if s.last_ts is not None:
            self.last.add_metric(values, s.last_ts)
        if s.last_ok_ts is not None:
            self.last_ok.add_metric(values, s.last_ok_ts)

    def all(self) -> tuple[Any, ...]:
        return (self.calls, self.excluded, self.latency, self.ratio, self.lower, self.upper,
                self.window, self.last, self.last_ok)  # fmt: skip


def _gauge(name: str, doc: str) -> GaugeMetricFamily:
    """A per-series gauge, `realprobe_<name>`."""
    return GaugeMetricFamily(f"realprobe_{name}", doc, labels=SERIES_LABELS)


def _cumulative_buckets(s: Series) -> list[tuple[str, float]]:
    """Prometheus histogram buckets: (upper bound, calls at or under it), +Inf last."""
    bounds = [*(f"{b:g}" for b in LATENCY_BUCKETS_S), "+Inf"]
    return list(zip(bounds, itertools.accumulate(map(float, s.buckets)), strict=True))


_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram", "summary": "summary"}
_OM_ONLY = ("_created", "_gsum", "_gcount")


class _One:
    def __init__(self, metric: Metric) -> None:
        self.metric = metric

    def collect(self) -> Iterator[Metric]:
        yield self.metric


def exposition(metrics: Iterable[Metric]) -> bytes:
    """The Prometheus text format, byte for byte what `generate_latest` writes, for families
    whose metric and label names are plain (all of the exporter's): names are not re-checked
    per sample, and a label value is escaped only when it holds a backslash, newline or
    quote. A family of another type, or with OpenMetrics-only samples, goes through
    `generate_latest` itself."""
    out: list[str] = []
    for m in metrics:
        kind = _TYPES.get(m.type)
        if kind is None or any(s.name.endswith(_OM_ONLY) for s in m.samples):
            out.append(generate_latest(_One(m)).decode())  # type: ignore[arg-type]
            continue
        name = m.name + "_total" if kind == "counter" else m.name
        doc = m.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {name} {doc}\n# TYPE {name} {kind}\n")
        for s in m.samples:
            labels = s.labels
            if labels:
                parts = []
                for k, v in sorted(labels.items()):
                    if "\\" in v or "\n" in v or '"' in v:
                        v = v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')
                    parts.append(f'{k}="{v}"')
                line = f"{s.name}{{{','.join(parts)}}} {floatToGoString(s.value)}"
            else:
                line = f"{s.name} {floatToGoString(s.value)}"
            if s.timestamp is not None:
                line += f" {int(float(s.timestamp) * 1000):d}"
            out.append(line + "\n")
    return "".join(out).encode()


def window_p95(agg: Aggregator, since: float) -> dict[tuple[str, str], float]:
    """{(tool, kind): p95 ms} of the rows since `since`, by `latency_stats` (the code behind
    `realprobe stats`); a database that cannot be read gives nothing."""
    out: dict[tuple[str, str], float] = {}
    try:
        conn = agg.db.read()
    except RealprobeError:
        return out
    try:
        for kind in sorted(TARGET_KINDS):
            arr = load_probes(conn, since, None, None, kinds=[kind])
            for i, tool in enumerate(arr.tools):
                part = arr.slice(i)
                p95 = latency_stats(part.latency_ms, part.code, part.timeout_s).p95
                if p95 is not None:
                    out[(agg.tools(label(tool), agg.dropped, "tool"), kind)] = p95
    except RealprobeError:
        return out
    finally:
        conn.close()
    return out


def budget_used(agg: Aggregator, day: str) -> dict[str, int]:
    """Today's live-call budget ledger (a small table: read whole)."""
    try:
        conn = agg.db.read(need="api_budget")
    except RealprobeError:
        return {}
    try:
        rows = conn.execute(
            "SELECT api, SUM(used) FROM api_budget WHERE day = ? GROUP BY api", [day]
        ).fetchall()
    except sqlite3.Error:
        return {}
    finally:
        conn.close()
    return {str(api): int(n or 0) for api, n in rows}
