"""A worker process's retention thread: a pass of ``store.retention.prune`` on schedule.

``JOB_RETENTION_INTERVAL_SECONDS`` apart, until the worker stops; an outage only delays the
next pass. ``flask worker`` starts it (``ops.init_worker``'s caller, ``cli.py``); the SQL,
the batches, the pauses and the one-pruner-at-a-time lock are :mod:`dashboard.store.retention`.
"""

from __future__ import annotations

import logging
import threading

from flask import Flask

from ..config import settings_of
from ..store.retention import cutoffs, prune

log = logging.getLogger(__name__)


class Pruner:
    """A worker process's retention thread: a pass every ``interval`` seconds until stopped."""

    def __init__(
        self, app: Flask, retention_days: dict[str, float], interval: float, stopping: threading.Event
    ) -> None:
        self.app, self.retention_days, self.interval, self.stopping = app, retention_days, interval, stopping

    def start(self) -> threading.Thread | None:
        if not cutoffs(self.retention_days):
            log.info("retention off (JOB_RETENTION_SUCCEEDED and JOB_RETENTION_FAILED are 0)")
            return None
        thread = threading.Thread(target=self.run, name="retention", daemon=True)
        thread.start()
        return thread

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                with self.app.app_context():
                    removed = prune(cutoffs(self.retention_days), stopping=self.stopping)
                if removed.total_jobs:
                    log.info("retention: %s", removed.describe())
            except Exception as error:  # an outage: the next pass tries again
                log.warning(
                    "retention pass failed (%s: %s); next pass in %gs",
                    type(error).__name__,
                    str(error).strip().splitlines()[:1],
                    self.interval,
                )
            self.stopping.wait(self.interval)


def start_retention(app: Flask, stopping: threading.Event) -> threading.Thread | None:
    """The app's ``JOB_RETENTION_*`` pass on its own thread (``None``: retention is off)."""
    ops = settings_of(app).ops
    days = {"succeeded": ops.retention_succeeded_days, "failed": ops.retention_failed_days}
    return Pruner(app, days, ops.retention_interval_seconds, stopping).start()
