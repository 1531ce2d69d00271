"""Importers of what uptime monitors already recorded (Upptime's git history, Uptime Kuma,
Gatus, blackbox_exporter through Prometheus, Statuspage incidents) into the imported kind:
recorded checks as rows, implied checks as intervals, time not watched censored. Kept apart
from realprobe's own probes; only the kernel is imported here."""

from realprobe.history.importing import (
    SOURCE_KINDS,
    HistoryImport,
    MonitorImport,
    import_history,
    read_source,
)
from realprobe.history.records import HistoryError

__all__ = [
    "SOURCE_KINDS",
    "HistoryError",
    "HistoryImport",
    "MonitorImport",
    "import_history",
    "read_source",
]
