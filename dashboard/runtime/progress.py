"""Coalesced progress reports: the timer that writes a slow handler's pending report.

``JobContext.progress()`` does not write its event at once. It keeps the latest report of the
attempt (coalescing: a newer report replaces an older one that is still pending) and asks the
process's :class:`Flusher` to look at the context after ``JOB_WORKER_PROGRESS_FLUSH_MS``. A
handler that finishes before then has its pending report written by the attempt's settle
statement, before the terminal event, fenced like it; a handler still running then has it
written by the flusher with the fenced ``record_progress``, exactly as before. So a fast
handler's reports cost no statement of their own, and a slow handler's appear on the job's
timeline at most about one flush interval late.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Any, Protocol

from flask import Flask, current_app, has_app_context


class JobContext(Protocol):
    """What the flusher needs of ``handlers.JobContext``."""

    job_id: Any

    @property
    def needs_app(self) -> bool: ...

    def flush(self) -> None: ...


log = logging.getLogger(__name__)

SLACK_SECONDS = 0.02  # contexts due within this much are flushed together, one wake-up


class Flusher:
    """One daemon thread per process, started on first use, that flushes due contexts."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, JobContext, Flask | None]] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def schedule(self, ctx: JobContext, delay: float) -> None:
        """Flush ``ctx`` after ``delay`` seconds, unless its settle has taken the report by then.

        A context without a connection of its own flushes in the application context of the
        caller (``record_progress`` then takes a connection from the pool).
        """
        app = current_app._get_current_object() if ctx.needs_app and has_app_context() else None  # type: ignore[attr-defined]
        entry = (time.monotonic() + delay, next(self._order), ctx, app)
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="progress-flusher", daemon=True)
                self._thread.start()
            heapq.heappush(self._due, entry)
            if self._due[0] is entry:
                self._cond.notify()

    def _take_due(self) -> list[tuple[float, int, JobContext, Flask | None]]:
        with self._cond:
            while True:
                wait = self._due[0][0] - time.monotonic() if self._due else None
                if wait is not None and wait <= 0:
                    break
                self._cond.wait(wait)
            horizon = time.monotonic() + SLACK_SECONDS
            due = []
            while self._due and self._due[0][0] <= horizon:
                due.append(heapq.heappop(self._due))
            return due

    def _run(self) -> None:
        while True:
            for _, _, ctx, app in self._take_due():
                try:
                    if app is None:
                        ctx.flush()
                    else:
                        with app.app_context():
                            ctx.flush()
                except Exception as error:  # the report stays pending: the settle writes it
                    log.warning("could not write the progress of job %s yet: %s", ctx.job_id, error)


flusher = Flusher()
