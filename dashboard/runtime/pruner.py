"""A worker process's retention service: a pass of ``store.retention.prune`` on schedule.

``JOB_RETENTION_INTERVAL_SECONDS`` apart, until the worker stops claiming; an outage only
delays the next pass. The worker starts it with its other services (``worker.py``); the SQL,
the batches, the pauses and the one-pruner-at-a-time lock are :mod:`dashboard.store.lifecycle.retention`.
"""

from __future__ import annotations

import logging
import threading

from flask import Flask

from ..config import OpsSettings
from ..store.lifecycle.retention import cutoffs, prune

log = logging.getLogger(__name__)


class Pruner:
    """A pass every ``interval`` seconds until ``stopping`` (the worker's stop signal) is set."""

    name = "retention"

    def __init__(
        self, app: Flask, retention_days: dict[str, float], interval: float, stopping: threading.Event
    ) -> None:
        self.app, self.retention_days, self.interval, self.stopping = app, retention_days, interval, stopping
        self.thread: threading.Thread | None = None

    @classmethod
    def from_settings(cls, app: Flask, ops: OpsSettings, stopping: threading.Event) -> Pruner:
        """The ``JOB_RETENTION_*`` passes of these settings."""
        days = {"succeeded": ops.retention_succeeded_days, "failed": ops.retention_failed_days}
        return cls(app, days, ops.retention_interval_seconds, stopping)

    def start(self) -> None:
        """Start the thread, unless retention is off (both retentions 0: nothing to prune)."""
        if not cutoffs(self.retention_days):
            log.info("retention off (JOB_RETENTION_SUCCEEDED and JOB_RETENTION_FAILED are 0)")
            return
        self.thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """End after the batch under way (``prune`` checks the signal between batches); not
        waited for: its deletes are batches of their own, each committed or rolled back."""
        self.stopping.set()

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
