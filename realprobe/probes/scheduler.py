"""Scheduled probe rounds (APScheduler 3.x on the asyncio loop).

- `--every 30m`: the first round starts at once, then one every 30 minutes.
- `--cron "0 2 * * *"` (local time, like cron): waits for its first fire time; nothing runs
  before it. The first fire time is computed on an injectable clock (`now`), so it is tested
  without waiting for real; later fire times come from APScheduler on the real clock.
- Rounds never overlap: `max_instances=1`, and `coalesce=True` folds a backlog of missed fire
  times into one round. A fire time that comes while a round is still running is logged as
  `skipped_overlap`; one that comes later than the grace time is logged as `missed`.
- A failing round is logged as `round_failed` and the schedule goes on.
- `stop()` (SIGINT/SIGTERM in the CLI) ends the running round after its calls in flight, so
  nothing started is lost, and then the scheduler shuts down; a second `stop()` abandons
  the calls in flight (each is bounded by its deadline anyway).
Every event is written to the store's `schedule_events` table and passed to `on_event`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from pydantic import BaseModel, Field

from realprobe.errors import RealprobeError
from realprobe.probes.runner import RunSummary, iso
from realprobe.ranges import parse_duration
from realprobe.store import RUN_LOCAL_NETWORK_FAILURE, Store

# APScheduler says a skipped or missed fire time on its own logger, and the schedule's events
# say it too (`skipped_overlap`, `missed`): without a logging set-up of the user's own its
# lines go nowhere (Python's last-resort printer would put them on the console); with one,
# they reach it as before
logging.getLogger("apscheduler").addHandler(logging.NullHandler())

#: a round: (round number from 1, stop event) -> the run's summary
RoundFn = Callable[[int, asyncio.Event], Awaitable[RunSummary]]
EventFn = Callable[[dict[str, Any]], None]


def make_trigger(
    every: str | None, cron: str | None, *, jitter_s: float | None = None
) -> tuple[BaseTrigger, float | None]:
    """(trigger, interval in seconds or None for cron). Exactly one of every/cron."""
    if (every is None) == (cron is None):
        raise RealprobeError(
            'pick one of every=DURATION or cron="MIN HOUR DOM MON DOW"', param=("every", "cron")
        )
    jitter = jitter_s if jitter_s else None
    if every is not None:
        try:
            seconds = parse_duration(every, "every")
        except RealprobeError as exc:
            raise RealprobeError(str(exc), param="every") from None
        return IntervalTrigger(seconds=seconds, jitter=jitter), seconds
    assert cron is not None
    try:
        trigger = CronTrigger.from_crontab(cron.strip(), timezone=None)
    except ValueError as exc:
        raise RealprobeError(
            f'cron {cron!r}: not a crontab expression ({exc}); e.g. "0 2 * * *" = 02:00 daily',
            param="cron",
        ) from None
    trigger.jitter = jitter  # from_crontab takes no jitter; the trigger reads the attribute
    return trigger, None


def first_fire_time(
    trigger: BaseTrigger, now: dt.datetime, start_now: bool
) -> dt.datetime | None:
    """When the first round runs: `now` when starting at once, else the trigger's next fire
    time after `now` (None: it never fires)."""
    if start_now:
        return now
    fire: dt.datetime | None = trigger.get_next_fire_time(None, now)
    return fire


class ScheduleResult(BaseModel):
    schedule_id: str
    runs: int
    rounds_ok: int
    rounds_failed: int
    stopped_by: str  # max_runs | signal
    #: rounds in which nothing was reachable (the prober's own network was down)
    rounds_unreachable: int = 0
    run_ids: list[str] = Field(default_factory=list)
    events: list[dict[str, Any]] = Field(default_factory=list)


class ProbeSchedule:
    def __init__(
        self,
        trigger: BaseTrigger,
        round_fn: RoundFn,
        store: Store,
        *,
        interval_s: float | None = None,
        max_runs: int | None = None,
        start_now: bool | None = None,
        misfire_grace_s: float | None = None,
        schedule_id: str | None = None,
        on_event: EventFn | None = None,
        now: Callable[[], dt.datetime] | None = None,
    ) -> None:
        """`start_now`: None fires an interval trigger at once and waits for a cron trigger's
        first fire time. `now`: the clock the first fire time is computed on (local, aware)."""
        if max_runs is not None and max_runs < 1:
            raise RealprobeError(f"max_runs must be at least 1 (got {max_runs})", param="max_runs")
        self.trigger = trigger
        self.round_fn = round_fn
        self.store = store
        self.max_runs = max_runs
        self.start_now = start_now if start_now is not None else not isinstance(
            trigger, CronTrigger
        )
        self.now = now or (lambda: dt.datetime.now().astimezone())
        self.first_fire: dt.datetime | None = None
        if misfire_grace_s is None:
            misfire_grace_s = max(1.0, interval_s) if interval_s is not None else 3600.0
        self.misfire_grace_s = misfire_grace_s
        self.schedule_id = schedule_id or uuid.uuid4().hex[:12]
        self.on_event = on_event
        self.stop_event = asyncio.Event()
        self._done = asyncio.Event()
        self._busy = False
        self._round_task: asyncio.Task[Any] | None = None
        self.runs = 0
        self.ok = 0
        self.failed = 0
        self.unreachable = 0
        self.run_ids: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.stopped_by = "max_runs"

    # -- events -------------------------------------------------------------------------

    def log(self, kind: str, detail: str = "", run_id: str | None = None) -> None:
        now = time.time()
        event = {
            "schedule_id": self.schedule_id,
            "ts": now,
            "at": iso(now),
            "kind": kind,
            "run_id": run_id,
            "detail": detail,
        }
        self.events.append(event)
        try:
            self.store.log_event(event)
        except RealprobeError as exc:  # logging must never take the schedule down
            event["detail"] = f"{detail} (not stored: {exc})"
        if self.on_event is not None:
            with contextlib.suppress(Exception):  # a broken printer must not stop probing
                self.on_event(event)

    def _on_apscheduler(self, event: JobEvent) -> None:
        when = getattr(event, "scheduled_run_time", None)
        at = when.isoformat() if isinstance(when, dt.datetime) else "?"
        if event.code == EVENT_JOB_MISSED:
            self.log("missed", f"fire time {at} passed more than {self.misfire_grace_s:g}s ago")
        elif event.code == EVENT_JOB_MAX_INSTANCES:
            self.log("skipped_overlap", f"fire time {at}: the previous round is still running")

    # -- the job ------------------------------------------------------------------------

    async def _round(self) -> None:
        if self.stop_event.is_set() or self._done.is_set():
            return
        self._busy = True
        self._round_task = asyncio.current_task()
        number = self.runs + 1
        try:
            summary = await self.round_fn(number, self.stop_event)
        except asyncio.CancelledError:  # stop() twice: the calls in flight are abandoned
            self.failed += 1
            self.log("round_abandoned", f"round {number}: calls in flight abandoned")
        except Exception as exc:  # a failing round never stops the schedule
            self.failed += 1
            self.log("round_failed", f"round {number}: {type(exc).__name__}: {exc}")
        else:
            self.ok += 1
            self.unreachable += int(summary.status == RUN_LOCAL_NETWORK_FAILURE)
            self.run_ids.append(summary.run_id)
            self.log(
                "round_ok",
                f"round {number}: {summary.status}, {summary.n_calls} calls, "
                f"{summary.n_ok} ok, {summary.n_error} errors, {summary.n_skipped} skipped",
                run_id=summary.run_id,
            )
        finally:
            self.runs += 1
            self._busy = False
            self._round_task = None
            if self.stop_event.is_set() or (
                self.max_runs is not None and self.runs >= self.max_runs
            ):
                self._done.set()

    def stop(self, why: str = "signal") -> None:
        """Stop after the calls in flight (safe to call from a signal handler); called
        again while a round is still running, abandon its calls in flight."""
        if self.stop_event.is_set():
            if self._round_task is not None and not self._round_task.done():
                self._round_task.cancel()
            return
        self.stopped_by = why
        self.stop_event.set()
        self.log("stopping", f"{why}: finishing the calls in flight")
        if not self._busy:
            self._done.set()

    async def run(self) -> ScheduleResult:
        scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop())
        scheduler.add_listener(self._on_apscheduler, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES)
        now = self.now()
        first = first_fire_time(self.trigger, now, self.start_now)
        if first is None:
            raise RealprobeError(f"the schedule {self.trigger} never fires")
        self.first_fire = first
        scheduler.add_job(
            self._round,
            self.trigger,
            id="probe-round",
            coalesce=True,
            max_instances=1,
            misfire_grace_time=max(1, int(self.misfire_grace_s)),
            # the wait until the first fire time, measured on the injected clock, from now
            next_run_time=dt.datetime.now().astimezone() + (first - now),
        )
        when = "at once" if self.start_now else f"at {first.isoformat(timespec='seconds')}"
        self.log(
            "started",
            f"trigger {self.trigger}; first round {when}; max runs {self.max_runs or 'unlimited'}",
        )
        scheduler.start()
        try:
            await self._done.wait()
        finally:
            scheduler.shutdown(wait=False)
        self.log("stopped", f"after {self.runs} rounds ({self.stopped_by})")
        return ScheduleResult(
            schedule_id=self.schedule_id,
            runs=self.runs,
            rounds_ok=self.ok,
            rounds_failed=self.failed,
            stopped_by=self.stopped_by,
            rounds_unreachable=self.unreachable,
            run_ids=self.run_ids,
            events=self.events,
        )
