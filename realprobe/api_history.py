"""The front door of imported histories: import what an uptime monitor recorded, its
statistics in time, and a profile calibrated from it.

Times and durations (`since`, `until`, `spacing`) are read by the one grammar (ISO times,
ages like `30d`, epoch seconds); a URL source is read through the one client, and a
Prometheus only on loopback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from realprobe.addresses import ip_literal
from realprobe.errors import BadArgument
from realprobe.ranges import checked

if TYPE_CHECKING:
    from realprobe.history import HistoryImport
    from realprobe.probes.availability import ImportedStats
    from realprobe.simulator.profile import Profile
    from realprobe.store import Database

TimeSpec = str | float | None
#: how far back a Prometheus is asked when no `since` is given
PROMETHEUS_DEFAULT_RANGE_S = 30 * 86400
_BLACKBOX_SERIES = ("probe_success", "probe_duration_seconds", "probe_http_status_code",
                    "probe_http_duration_seconds")


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    address = ip_literal(host)
    return host == "localhost" or (address is not None and address.is_loopback)


def _fetch(url: str) -> bytes:
    from realprobe.clients import fetch_document
    from realprobe.limits import DEFAULT_INPUT_MB, INPUT_MB_ENV, max_bytes

    return fetch_document(url, max_bytes(INPUT_MB_ENV, DEFAULT_INPUT_MB)).encode()


def _prometheus(url: str, since: float | None, until: float | None) -> Any:
    """The raw samples of the blackbox series over the window, by range-vector selectors
    (`probe_success[30d]` answers every scrape, unresampled), from a Prometheus on loopback."""
    import time

    from realprobe.limits import DEFAULT_INPUT_MB, INPUT_MB_ENV, load_json_text, max_bytes

    if not _loopback(url):
        raise BadArgument("source", f"prometheus:{url}: only a Prometheus on loopback "
                                    "(127.0.0.1, ::1, localhost) is read; export the range "
                                    "query to a file for another host")
    end = until if until is not None else time.time()
    start = since if since is not None else end - PROMETHEUS_DEFAULT_RANGE_S
    base = url.rstrip("/")
    cap = max_bytes(INPUT_MB_ENV, DEFAULT_INPUT_MB)
    if "/api/v1/" in base:
        return [load_json_text(_fetch(url), f"prometheus:{url}", max_bytes=cap)]
    out = []
    for name in _BLACKBOX_SERIES:
        query = urlencode({"query": f"{name}[{max(1, int(end - start))}s]", "time": f"{end:.3f}"})
        out.append(load_json_text(_fetch(f"{base}/api/v1/query?{query}"),
                                  f"prometheus:{url}", max_bytes=cap))
    return out


@checked
def import_history(
    history_source: str,
    db: str | Path | Database | None = None,
    *,
    dry_run: bool = False,
    since: TimeSpec = None,
    until: TimeSpec = None,
) -> HistoryImport:
    """Import what an uptime monitor recorded (`history_source`): `upptime:PATH` (a status
    repository's git history), `kuma:FILE`, `gatus:FILE`, `prometheus:FILE|URL` (blackbox
    series; a URL only on loopback) or `statuspage:FILE|URL` (declared incidents). Recorded
    checks become rows of the imported kind, checks implied between records and unwatched
    time intervals; nothing pools with realprobe's own probes. Importing again adds nothing;
    `dry_run` writes nothing."""
    from realprobe.api_rows import window
    from realprobe.history import import_history as run

    a, b = window(since, until)
    source = history_source  # (a `source=` keyword is a profile file at every other door)
    kind = source.partition(":")[0]

    def fetch(url: str) -> bytes:
        if kind == "prometheus":  # the answers of its queries, read under the limits, as one
            return json.dumps(_prometheus(url, a, b)).encode()
        return _fetch(url)

    return run(source, db, dry_run=dry_run, since=a, until=b, fetch=fetch)


@checked
def imported_stats(
    db: str | Path | Database | None = None,
    *,
    since: TimeSpec = None,
    until: TimeSpec = None,
    monitors: str | list[str] | None = None,
) -> ImportedStats:
    """Statistics in time of the imported histories: availability (share of observed time
    up, with a 95% interval), outages, downtime per UTC day, the error mix while down,
    latency where the monitor measured it per check, and the cadence it really had; beside
    them, the monitor's own published figures, labelled."""
    from realprobe.api_rows import _db, window
    from realprobe.probes.availability import imported_stats as compute

    a, b = window(since, until)
    names = monitors.split(",") if isinstance(monitors, str) else monitors
    return compute(_db(db), a, b, names)


@checked
def calibrate_imported(
    db: str | Path | Database | None = None,
    *,
    since: TimeSpec = None,
    until: TimeSpec = None,
    monitors: str | list[str] | None = None,
    spacing: str | float | None = None,
    name: str | None = None,
    output: str | Path | None = None,
) -> Profile:
    """A simulator profile from imported histories: per monitor, success per call at
    `spacing` (default: the cadence the monitor really had) equal to its availability, and a
    burst chain whose failure runs last as long as its outages did. The profile says it was
    calibrated from an import (monitor, source, window, spacing); written to `output` when
    given (the file `load_profile`, the sandbox and the simulator read)."""
    from realprobe.api_rows import period_arg
    from realprobe.probes.availability_profile import profile_from_imported

    every = None if spacing is None else period_arg(spacing, "spacing")
    stats = imported_stats(db, since=since, until=until, monitors=monitors)
    profile = profile_from_imported(stats, spacing_s=every, name=name)
    if not profile.tools:
        raise BadArgument("monitors", "no imported monitor with observed time in the window "
                                      "(declared incidents alone give no profile)")
    if output is not None:
        profile.save(output)
    return profile


def asks_imported(kinds: object) -> bool:
    """Whether a `kinds` selection asks for imported histories (`kinds="imported"`)."""
    if isinstance(kinds, str):
        parts = [p.strip().lower() for p in kinds.split(",")]
    elif isinstance(kinds, list | tuple):
        parts = [str(p).strip().lower() for p in kinds]
    else:
        return False
    if "imported" in parts and len([p for p in parts if p]) > 1:
        raise BadArgument("kinds", "kinds imported: imported histories never pool with "
                                   "realprobe's own rows; ask for them alone")
    return "imported" in parts
