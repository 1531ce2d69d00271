"""How long a SQLite connection waits on another process's lock before it gives up (its own
module so that readers get the default without importing the store and sqlite-utils)."""

BUSY_TIMEOUT_MS = 30_000
