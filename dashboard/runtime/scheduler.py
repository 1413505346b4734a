"""The scheduler: the worker service that fires due schedules (``store/schedules.fire_due``).

Every worker process runs one (unless ``--no-schedules`` / ``JOB_WORKER_SCHEDULES=false``),
with no leader among them: each fire locks the due rows ``FOR UPDATE SKIP LOCKED`` and creates
their runs in the transaction that advances them, so two processes never fire one slot, and a
process that dies mid-fire leaves it to the others. Between fires it sleeps until the earliest
schedule is due by the database's clock (``seconds_until_due``, one statement: the whole cost
of an idle tick), at most :data:`WAKE_MAX_SECONDS`, so a schedule resumed or declared by
another process is seen within that; a schedule due but locked by another fire is looked at
again after :data:`WAKE_MIN_SECONDS`.

:func:`sync_declared` writes this process's declarations into ``jobs_schedule`` (and retires
the rest); ``flask worker`` calls it at start, before any thread runs.
"""

from __future__ import annotations

import logging
from datetime import datetime

from flask import Flask

from ..config import WorkerSettings, settings_of
from ..store.flow import schedules as store
from .schedules import declarations
from .threads import PeriodicService, ThreadRuntime

log = logging.getLogger(__name__)

WAKE_MAX_SECONDS = 1.0
WAKE_MIN_SECONDS = 0.1


def sync_declared(app: Flask, settings: WorkerSettings) -> store.SyncResult:
    """Sync the declared schedules (their types' ``@handler`` defaults, then ``TIME_ZONE`` and
    ``JOB_WORKER_MAX_ATTEMPTS_DEFAULT``, for what they leave unset); a ``ValueError`` naming a
    schedule that cannot be synced."""
    with app.app_context():  # the app's handlers: the demo types only where they are on
        resolved = declarations(settings_of(app).time_zone, settings.max_attempts_default)
        result = store.sync(resolved)
    if resolved or result.retired:
        log.info(
            "schedules: %d declared (%s)%s",
            len(result.declared),
            ", ".join(result.declared) or "none",
            f"; retired {', '.join(result.retired)}" if result.retired else "",
        )
    return result


def fire(
    runtime: ThreadRuntime, reported: set[str] | None = None, *, now: datetime | None = None
) -> list[store.Fired]:
    """One fire on ``runtime``'s connection: up to ``store.FIRE_BATCH`` due schedules. A
    schedule that cannot be fired (an expression this code cannot read, declared by other code)
    is logged once per process (``reported``). ``now``: the database's clock unless a test
    moves it."""
    fired = store.fire_due(worker_id=runtime.worker_id, conn=runtime.connection, now=now)
    reported = set() if reported is None else reported
    for one in fired:
        if one.error is not None:
            if one.name not in reported:
                reported.add(one.name)
                log.error("schedule %r cannot be fired: %s", one.name, one.error)
            continue
        made = [run for run in one.runs if run.created]
        if made or one.skipped:
            log.info(
                "schedule %r: %d run(s) enqueued (%s)%s",
                one.name,
                len(made),
                ", ".join(store.run_key(one.name, run.slot) for run in made) or "none new",
                f", {one.skipped} missed slot(s) skipped" if one.skipped else "",
            )
    return fired


class Scheduler(PeriodicService):
    """The process's scheduler thread (a worker service). It ends with the claims: the worker's
    stop signal (``runtime.stopping``) ends its loop after the fire under way."""

    name = "scheduler"
    thread_name = "scheduler"

    def __init__(self, runtime: ThreadRuntime) -> None:
        super().__init__(runtime)
        self.reported: set[str] = set()  # schedules whose fire error was logged

    def step(self, now: datetime | None = None) -> float:
        """One look at the schedules: fire if one is due; returns how long to sleep (0: look
        again at once, more may be due). An idle tick is one statement (``seconds_until_due``);
        the fire's transaction is opened only when a schedule is due. ``now``: the database's
        clock unless a test moves it."""
        runtime = self.runtime
        seconds = store.seconds_until_due(now=now, conn=runtime.connection)
        if seconds is None:
            return WAKE_MAX_SECONDS
        if seconds > 0:
            return min(max(seconds, WAKE_MIN_SECONDS), WAKE_MAX_SECONDS)
        fired = fire(runtime, self.reported, now=now)
        if any(one.error is None for one in fired):
            return 0.0  # progress was made: what is still due is fired at once
        return WAKE_MIN_SECONDS  # due but locked by another fire, or not fireable here
