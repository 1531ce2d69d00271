"""One import: read a monitor's history (by the source's kind), then store it in one
transaction (or, on a dry run, store nothing), and say what was imported and implied."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from realprobe.errors import BadArgument, RealprobeError
from realprobe.history.gatus import read_gatus
from realprobe.history.kuma import read_kuma
from realprobe.history.prometheus import read_prometheus
from realprobe.history.records import History, HistoryError, duration_words, rows
from realprobe.history.statuspage import read_statuspage
from realprobe.history.upptime import read_upptime
from realprobe.limits import read_document
from realprobe.secrets import scrub_text, scrub_url
from realprobe.store import Database, insert_history, open_db

#: the kinds of source, as written before the colon
SOURCE_KINDS = ("upptime", "kuma", "gatus", "prometheus", "statuspage")
SOURCE_FORMS = ("upptime:PATH, kuma:FILE, gatus:FILE, prometheus:FILE|URL or "
                "statuspage:FILE|URL")


class MonitorImport(BaseModel):
    """What one import read of one monitor."""

    monitor: str
    key: str
    name: str
    url: str | None = None
    vantage: str
    checks: int = 0
    observed_intervals: int = 0
    implied_checks: int = 0
    censored_intervals: int = 0
    censored_s: float = 0.0
    incidents: int = 0
    first: str | None = None
    last: str | None = None
    cadence_configured_s: float | None = None
    cadence_s: float | None = None
    cadence_how: str = ""
    published: dict[str, Any] | None = None
    notes: list[str] = Field(default_factory=list)


class HistoryImport(BaseModel):
    """What `realprobe history import` did."""

    source: str
    monitor_kind: str
    db: str | None = None
    dry_run: bool = False
    monitors: list[MonitorImport] = Field(default_factory=list)
    checks_read: int = 0
    checks_added: int = 0
    intervals_read: int = 0
    intervals_added: int = 0
    implied_checks: int = 0
    censored_s: float = 0.0
    skipped: dict[str, int] = Field(default_factory=dict)
    seconds: float = 0.0

    def headline(self) -> str:
        """The answer first: monitors, checks recorded and implied, what was new."""
        verb = "read (dry run, nothing written)" if self.dry_run else "imported"
        n = len(self.monitors)
        line = (f"{verb} {n} monitor{'s' * (n != 1)} from {self.source}: "
                f"{self.checks_read:,} recorded checks")
        if self.implied_checks:
            line += f", {self.implied_checks:,} more implied between records (held as intervals)"
        incidents = sum(m.incidents for m in self.monitors)
        if incidents:
            line += f", {incidents:,} declared incidents"
        if self.censored_s:
            line += f"; {duration_words(self.censored_s)} censored (not watched)"
        if not self.dry_run:
            line += (f"; new: {self.checks_added:,} checks, {self.intervals_added:,} intervals"
                     + (" (all already stored)" if not self.checks_added
                        and not self.intervals_added else ""))
        if self.skipped:
            line += f"; skipped {sum(self.skipped.values()):,} odd records"
        return line


def _split(spec: str) -> tuple[str, str]:
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in SOURCE_KINDS or not rest:
        raise HistoryError(f"source {spec[:80]!r}: expected {SOURCE_FORMS}")
    return kind, rest


def _is_url(rest: str) -> bool:
    return rest.startswith(("http://", "https://"))


def read_source(spec: str, *, now: float, since: float | None = None,
                until: float | None = None,
                fetch: Callable[[str], bytes] | None = None) -> History:
    """The history a source holds. `fetch` reads a URL source (the front door's client)."""
    kind, rest = _split(spec)
    if kind in ("upptime", "kuma", "gatus"):
        reader = {"upptime": read_upptime, "kuma": read_kuma, "gatus": read_gatus}[kind]
        return reader(rest, now=now, since=since, until=until)
    doc = _document(spec, kind, rest, fetch)
    parse = read_prometheus if kind == "prometheus" else read_statuspage
    return parse(doc, spec, now=now, since=since, until=until)


def _document(spec: str, kind: str, rest: str, fetch: Callable[[str], bytes] | None) -> Any:
    from realprobe.limits import DEFAULT_INPUT_MB, INPUT_MB_ENV, load_json_text, max_bytes

    what = "Prometheus query answer" if kind == "prometheus" else "Statuspage incidents.json"
    try:
        if _is_url(rest):
            if fetch is None:
                raise HistoryError(f"{spec}: a URL source needs the front door's client")
            return load_json_text(fetch(rest), spec,
                                  max_bytes=max_bytes(INPUT_MB_ENV, DEFAULT_INPUT_MB))
        return read_document(rest, what, "json")
    except (HistoryError, BadArgument):
        raise
    except RealprobeError as exc:  # one line that starts with the source as the user gave it
        msg = str(exc)
        if not msg.startswith(spec):
            msg = f"{kind}:{msg}" if msg.startswith(rest) else f"{spec}: {msg}"
        raise HistoryError(msg) from None


def _scrubbed(monitors: list[dict[str, Any]], checks: list[dict[str, Any]]) -> None:
    """Credentials out of what is written: a monitor's URL (userinfo, key parameters), and
    the monitors' messages (each distinct message scrubbed once)."""
    for m in monitors:
        if m.get("url"):
            m["url"] = scrub_url(m["url"])
        if m.get("detail"):
            m["detail"] = scrub_text(m["detail"])
    seen: dict[str, str] = {}
    for c in checks:
        d = c.get("detail")
        if d:
            got = seen.get(d)
            if got is None:
                got = seen[d] = scrub_text(d)
            c["detail"] = got


def summary(hist: History) -> list[MonitorImport]:
    from realprobe.store import iso_utc

    out = []
    for m in hist.monitors:
        ts = [c.ts for c in m.checks] + [i.start for i in m.observed + m.censored]
        out.append(MonitorImport(
            monitor=m.monitor, key=m.key, name=m.name, url=scrub_url(m.url) if m.url else None,
            vantage=m.vantage, checks=len(m.checks),
            observed_intervals=sum(i.kind == "observed" for i in m.observed),
            implied_checks=sum(i.count for i in m.observed if not i.recorded),
            censored_intervals=len(m.censored),
            censored_s=sum((i.end or i.start) - i.start for i in m.censored),
            incidents=sum(i.kind == "incident" for i in m.observed),
            first=iso_utc(min(ts)) if ts else None, last=iso_utc(max(ts)) if ts else None,
            cadence_configured_s=m.cadence_configured_s, cadence_s=m.cadence_s,
            cadence_how=m.cadence_how, published=m.published, notes=m.notes,
        ))
    return out


def import_history(
    spec: str,
    db: str | Path | Database | None = None,
    *,
    dry_run: bool = False,
    since: float | None = None,
    until: float | None = None,
    fetch: Callable[[str], bytes] | None = None,
    now: float | None = None,
) -> HistoryImport:
    """Read `spec` and store it in the database (one transaction: nothing half-written);
    a second import of the same history adds nothing."""
    started = time.perf_counter()
    now = time.time() if now is None else now
    path = None if dry_run else open_db(db)
    hist = read_source(spec, now=now, since=since, until=until, fetch=fetch)
    monitors, checks, intervals = rows(hist, now)
    _scrubbed(monitors, checks)
    report = HistoryImport(
        source=hist.source, monitor_kind=hist.monitor_kind, dry_run=dry_run,
        db=str(path) if path is not None else None, monitors=summary(hist),
        checks_read=len(checks), intervals_read=len(intervals),
        skipped=dict(hist.skipped.most_common()),
    )
    report.implied_checks = sum(m.implied_checks for m in report.monitors)
    report.censored_s = sum(m.censored_s for m in report.monitors)
    if path is not None:
        with path.write() as store:
            report.checks_added, report.intervals_added = insert_history(
                store, monitors, checks, intervals)
    report.seconds = round(time.perf_counter() - started, 3)
    return report
