"""Statuspage: `/api/v2/incidents.json`, the incidents people declared on a status page.

Each incident is kept as a declared window (from when it started to when it was resolved, or
still open), with its impact and components: never as checks, and never in an availability,
because nobody measured it. The page shows at most its 50 most recent incidents.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from realprobe.history.records import History, HistoryError, Interval, Monitor, monitor_time

VANTAGE = "statuspage (declared by people)"


def read_statuspage(doc: Any, where: str, *, now: float, since: float | None = None,
                    until: float | None = None) -> History:
    if not isinstance(doc, dict) or not isinstance(doc.get("incidents"), list):
        raise HistoryError(f"{where}: not a Statuspage incidents.json (no `incidents` list)")
    page: dict[str, Any] = doc["page"] if isinstance(doc.get("page"), dict) else {}
    label = str(page.get("id") or page.get("name") or "statuspage")
    hist = History(source=where, monitor_kind="statuspage")
    skipped: Counter[str] = hist.skipped
    m = Monitor(key=f"statuspage:{label}", monitor=str(page.get("name") or label),
                kind="statuspage", name=str(page.get("name") or label),
                url=str(page["url"]) if page.get("url") else None, vantage=VANTAGE,
                source=where, gap_limit_s=0.0)
    m.cadence_how = "none: declared incidents, not checks"
    for inc in doc["incidents"]:
        got = _incident(inc, where)
        if got is None:
            skipped["incident of the wrong types"] += 1
        elif got.start > now:
            skipped["future time"] += 1
        elif (since is None or (got.end or now) >= since) and (until is None or got.start < until):
            m.observed.append(got)
    if not m.observed:
        why = ", ".join(f"{n} {k}" for k, n in skipped.most_common()) or "none listed"
        raise HistoryError(f"{where}: no incident in the window ({why})")
    hist.monitors.append(m)
    return hist


def _incident(inc: Any, where: str) -> Interval | None:
    if not isinstance(inc, dict) or not isinstance(inc.get("id"), str):
        return None
    start = monitor_time(inc.get("started_at") or inc.get("created_at"))
    end = monitor_time(inc["resolved_at"]) if inc.get("resolved_at") else None
    if start is None or (inc.get("resolved_at") and end is None) or (end is not None
                                                                    and end < start):
        return None
    comps = [c.get("name") for c in inc.get("components") or [] if isinstance(c, dict)]
    name = str(inc.get("name") or "")[:200]
    impact = str(inc.get("impact") or "none")[:40]
    reason = name + (f" [{', '.join(str(c) for c in comps[:5])}]" if comps else "")
    return Interval(start, end, "incident", state=impact, reason=reason, ref=inc["id"][:80],
                    source=where)
