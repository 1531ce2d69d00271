"""The front door for operating probes in production: one function behind `exporter`,
`alert check` and `merge`.

Each checks its arguments (errors name the parameter) and returns what the command prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from realprobe.errors import BadArgument, RealprobeError
from realprobe.ranges import checked

if TYPE_CHECKING:
    from realprobe.adapters.catalog import Catalog
    from realprobe.clients import TransportOptions
    from realprobe.monitor.alerts import AlertConfig, CheckResult
    from realprobe.monitor.exporter import ExporterServer
    from realprobe.monitor.merge import MergedSource, MergeReport
    from realprobe.store import Database


@checked
def check_alerts(
    rules: str | Path | AlertConfig,
    db: str | Path | Database | None = None,
    *,
    dry_run: bool = False,
    now: float | None = None,
) -> CheckResult:
    """Evaluate alert rules (a TOML, YAML or JSON file, or a loaded config) over the probe
    database and notify webhooks of alerts that started firing or resolved, one grouped
    notification per webhook (`dry_run`: evaluate only, send and store nothing)."""
    from realprobe.monitor.alerts import AlertConfig, check, load_rules

    config = rules if isinstance(rules, AlertConfig) else load_rules(rules)
    from realprobe.api_rows import _db

    now = time.time() if now is None else now
    return check(_db(db), config, now=now, dry_run=dry_run)


@checked
def merge_databases(
    sources: Sequence[str | Path],
    output: str | Path,
    *,
    on_source: Callable[[MergedSource], None] | None = None,
) -> MergeReport:
    """Merge probe databases from several vantage points into `output` (created if missing;
    safe to run again). Rows the store would refuse are kept apart in the output's
    `probes_quarantine` table and counted per reason in the report."""
    from realprobe.monitor.merge import merge
    from realprobe.store import open_db

    if not sources:
        raise BadArgument("sources", "sources: name at least one database to merge")
    out = Path(output)
    if not out.parent.is_dir():
        raise BadArgument("output", f"output {out}: directory {out.parent} does not exist")
    for s in sources:
        if Path(s).resolve() == out.resolve():
            raise RealprobeError(f"{s}: is the output; pass it only as -o")
        if not Path(s).is_file():
            raise RealprobeError(f"{s}: no such database file")
    return merge([open_db(s, read=True) for s in sources], open_db(out), on_source=on_source)


@checked
def serve_exporter(
    *,
    host: str = "127.0.0.1",
    port: int = 9469,
    db: str | Path | Database | None = None,
    window: str = "1h",
    target: TransportOptions | None = None,
    probe: bool = True,
    timeout: float = 10.0,
    vantage: str | None = None,
    reserve_for_schedule: float = 0.5,
    catalog: Catalog | None = None,
    allowed_hosts: Sequence[str] = (),
    auth_token: str | None = None,
    on_ready: Callable[[ExporterServer], None] | None = None,
    forever: bool = True,
) -> ExporterServer:
    """Serve Prometheus metrics from the probe database: /metrics, /status and (unless
    `probe=False`) /probe?tool=NAME, one call through the per-host gate to `target` (live by
    default), leaving `reserve_for_schedule` of each API's daily budget to scheduled probes.
    Binding off loopback keeps the Host/Origin checks; `auth_token` requires a bearer token.
    `forever`: serve until SIGINT/SIGTERM (the /probe run is then marked finished); else
    return the running server (its `stop()` ends it)."""
    from realprobe.adapters.catalog import Catalog
    from realprobe.clients import TransportOptions
    from realprobe.monitor.blackbox import BlackboxProber
    from realprobe.monitor.exporter import Exporter, ExporterServer
    from realprobe.ranges import parse_duration
    from realprobe.serving import Guard
    from realprobe.store import default_vantage, open_db

    window_s = parse_duration(window)
    Guard(host, tuple(allowed_hosts))  # a URL given as a host name is refused before binding
    opened = open_db(db)
    opened.write().close()  # create or check the schema before serving
    cat = catalog or Catalog.load([])
    prober = None
    if probe:
        opts = (target or TransportOptions()).normalised()
        prober = BlackboxProber(cat, opts, opened, timeout_s=timeout,
                                vantage=vantage or default_vantage(),
                                reserve_for_schedule=reserve_for_schedule)
    budgets = {api.id: api.politeness.daily_budget for api in cat.apis.values()}
    exporter = Exporter(opened, prober=prober, window_s=window_s, budgets=budgets)
    server = ExporterServer(exporter, host, port, allowed_hosts=tuple(allowed_hosts),
                            auth_token=auth_token)
    if on_ready is not None:
        on_ready(server)
    if forever:
        server.serve_forever()
    return server
