"""The front door for operating probes in production: one function behind `alert check` and
`merge` (the exporter is `realprobe.serve_exporter`).

Each checks its arguments (errors name the parameter) and returns what the command prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from realprobe.errors import BadArgument, NoDatabase

if TYPE_CHECKING:
    from realprobe.monitor.alerts import AlertConfig, CheckResult
    from realprobe.monitor.merge import MergedSource, MergeReport


def _db(db: str | Path | None) -> Path:
    from realprobe.dbfacts import default_db_path

    path = Path(db) if db is not None else default_db_path()
    if not path.exists():
        raise NoDatabase(path)
    return path


def check_alerts(
    rules: str | Path | AlertConfig,
    db: str | Path | None = None,
    *,
    dry_run: bool = False,
    now: float | None = None,
) -> CheckResult:
    """Evaluate alert rules (a TOML, YAML or JSON file, or a loaded config) over the probe
    database and notify webhooks of alerts that started firing or resolved, one grouped
    notification per webhook (`dry_run`: evaluate only, send and store nothing)."""
    from realprobe.monitor.alerts import AlertConfig, check, load_rules

    config = rules if isinstance(rules, AlertConfig) else load_rules(rules)
    return check(_db(db), config, now=time.time() if now is None else now, dry_run=dry_run)


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

    if not sources:
        raise BadArgument("sources", "sources: name at least one database to merge")
    out = Path(output)
    if not out.parent.is_dir():
        raise BadArgument("output", f"output {out}: directory {out.parent} does not exist")
    return merge(list(sources), out, on_source=on_source)
