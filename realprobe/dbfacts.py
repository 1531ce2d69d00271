"""Facts about the probe database that readers need without importing the store (and with it
sqlite-utils and the adapters): how long to wait on a lock, the schema version and where it is
kept, the status of a run still going, the phase columns."""

import os

#: how long a SQLite connection waits on another process's lock before it gives up
BUSY_TIMEOUT_MS = 30_000


def busy_timeout_s() -> float:
    """How long a connection waits on a lock: `$REALPROBE_BUSY_TIMEOUT_S`, else 30 s (a WAL
    reader waits only on a writer that is not in WAL mode)."""
    env = os.environ.get("REALPROBE_BUSY_TIMEOUT_S")
    try:
        return float(env) if env else BUSY_TIMEOUT_MS / 1000
    except ValueError:
        return BUSY_TIMEOUT_MS / 1000

#: version of the probe tables, kept in `realprobe_meta`; 1 is the schema before the
#: provenance columns (no meta table), 3 added the phase timing and TLS columns, 4 the row key
#: (every row's idempotency key, unique), 5 the request id a sandbox echoes, 6 the implicit-fault
#: signs of successful calls, 7 the column-wise chunks of the rows (`chunks.py`)
SCHEMA_VERSION = 7
META_TABLE = "realprobe_meta"

RUN_RUNNING = "running"  # still going, or the process was killed (no end time)

#: the per-call phase timing columns of `probes`, in the order a call goes through them; the
#: one list every reader and writer uses (with the names people read, for tables and reports)
PHASE_COLUMNS = ("dns_ms", "connect_ms", "tls_ms", "ttfb_ms", "transfer_ms")
PHASE_LABELS = {
    "dns_ms": "DNS", "connect_ms": "connect", "tls_ms": "TLS", "ttfb_ms": "first byte",
    "transfer_ms": "transfer",
}
#: the kinds of implicit fault a successful call's `implicit` column lists (comma-joined)
IMPLICIT_KINDS = ("drift", "empty", "stale")
#: the phases only a call that opened a new connection goes through
CONNECTION_PHASES = PHASE_COLUMNS[:3]
