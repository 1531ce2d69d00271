"""What a probe run or a schedule needs around it: the store and client opened and closed
together, and SIGINT/SIGTERM turned into a graceful stop.

The first signal stops after the calls in flight (every finished call is already stored);
a second one abandons them (each is bounded by its deadline anyway).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

from realprobe.adapters.catalog import Catalog
from realprobe.clients import TransportOptions, make_client
from realprobe.errors import RealprobeError
from realprobe.http.client import ClientConfig, HttpClient
from realprobe.store import Database, Store


def client_config(timeout_s: float, concurrency: int | None = None) -> ClientConfig:
    """A probe's client: `timeout_s` is the whole call's deadline; the connection pool holds
    (and keeps alive) as many connections as calls may be in flight (`concurrency`), so a
    call never waits for a connection and more concurrency never makes a probe slower."""
    if not timeout_s > 0:
        raise RealprobeError(f"timeout must be positive (got {timeout_s:g})")
    pool = ClientConfig().max_connections if concurrency is None else max(1, concurrency)
    return ClientConfig(
        deadline_s=timeout_s,
        read_timeout_s=min(10.0, timeout_s),
        connect_timeout_s=min(5.0, timeout_s),
        max_connections=pool,
    )


@asynccontextmanager
async def probe_session(
    catalog: Catalog,
    target: TransportOptions,
    db: Database,
    timeout_s: float,
    *,
    lock_timeout_s: float = 30.0,
    force: bool = False,
    concurrency: int | None = None,
) -> AsyncIterator[tuple[Store, HttpClient]]:
    """The store (a foreign SQLite file is refused unless `force`) and a client for
    `target` with a pool for `concurrency` calls in flight; both closed on the way out."""
    config = client_config(timeout_s, concurrency)
    store = db.write(busy_timeout_s=lock_timeout_s, force=force)
    try:
        client = make_client(catalog, target, config=config)
        try:
            yield store, client
        finally:
            await client.aclose()
    finally:
        store.close()


_RECEIVED: list[int] = []  # the stop signals this process got, in order


def note_signal(sig: int) -> None:
    """Remember a stop signal, so the command line can tell Ctrl-C (exit 130) from SIGTERM."""
    _RECEIVED.append(sig)


def last_signal() -> int | None:
    """The last stop signal noted in this process (None: none)."""
    return _RECEIVED[-1] if _RECEIVED else None


@contextmanager
def on_signals(stop: Callable[[], None]) -> Iterator[None]:
    """SIGINT/SIGTERM call `stop` instead of killing the process (main thread only)."""
    loop = asyncio.get_running_loop()
    installed = []

    def noted(sig: int) -> None:
        note_signal(sig)
        stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, noted, sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            pass
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


@contextmanager
def graceful_stop(
    stop: asyncio.Event, notify: Callable[[str], None] | None = None
) -> Iterator[None]:
    """First signal: set `stop` (end after the calls in flight). Second: cancel the task
    (the calls in flight are abandoned; the caller sees CancelledError)."""
    main = asyncio.current_task()

    def on_signal() -> None:
        if not stop.is_set():
            if notify is not None:
                notify(
                    "stopping after the calls in flight (their rows are kept); "
                    "press Ctrl-C again to abandon them..."
                )
            stop.set()
        elif main is not None:
            main.cancel()

    with on_signals(on_signal):
        yield
