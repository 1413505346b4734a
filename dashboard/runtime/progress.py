"""Coalesced progress reports: the timer that writes a slow handler's pending report.

``JobContext.progress()`` does not write its event at once. It keeps the latest report of the
attempt (coalescing: a newer report replaces an older one that is still pending) and hands the
context to the worker's :class:`Flusher`, due ``JOB_WORKER_PROGRESS_FLUSH_MS`` later. A
handler that finishes before then has its pending report written by the attempt's settle
statement, before the terminal event, fenced like it, and its settle takes the context back
from the flusher; a handler still running then has it written by the flusher with the fenced
``record_progress``, exactly as before. So a fast handler's reports cost no statement of their
own and no wake-up of the flusher, and a slow handler's appear on the job's timeline at most
about one flush interval late.

The flusher is one of the worker's services (``worker.py``): the worker starts its thread
before the first attempt and stops it after the last settle. A context made without a flusher
(outside a worker) keeps its report pending until its next renewal or its settle.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Protocol

from flask import Flask, has_app_context
from flask.globals import app_ctx


class Flushable(Protocol):
    """What the flusher needs of ``handlers.JobContext``."""

    @property
    def job_id(self) -> Any: ...

    @property
    def needs_app(self) -> bool: ...

    def flush(self) -> bool: ...


log = logging.getLogger(__name__)

SLACK_SECONDS = 0.02  # contexts due within this much are flushed together, one wake-up
RETRY_SECONDS = 1.0  # a report the database could not take is tried again this much later


class Flusher:
    """One daemon thread per worker process that flushes due contexts (:meth:`start`, :meth:`stop`).

    The contexts waiting for it are a dict, context -> (due time, app): at most one entry per
    attempt that has a pending report, so no more than the process's running attempts. A
    context enters with its first pending report (:meth:`schedule`) and leaves when the thread
    takes it, due, or when its settle takes the report (:meth:`cancel`): the settled attempts
    of fast handlers never reach the thread. The thread sleeps while the dict is empty, and
    otherwise until its earliest entry is due (a new entry due earlier wakes it). Entries that
    arrive while it is not running wait for :meth:`start` (or for their settle).
    """

    name = "progress-flusher"

    def __init__(self) -> None:
        self._waiting: dict[Flushable, tuple[float, Flask | None]] = {}
        self._cond = threading.Condition(threading.Lock())
        self._wakes_at: float | None = 0.0  # the sleeping thread's wake-up; None: until notified
        self._thread: threading.Thread | None = None
        self._stopped = False

    def start(self) -> None:
        """Start the thread (once; a second call while it runs does nothing)."""
        with self._cond:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stopped = False
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """End the thread after the flush it is doing, if any (reports still pending stay with
        their contexts: a settle writes them). Waits for it at most a second."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(1.0)

    def schedule(self, ctx: Flushable, delay: float) -> None:
        """Flush ``ctx`` after ``delay`` seconds, unless its settle has taken the report by then.

        The flush runs in the application context of the caller (a write may have to connect
        again, or take a connection from the pool).
        """
        app = app_ctx.app if ctx.needs_app and has_app_context() else None  # the app itself, not the proxy
        self._put(ctx, delay, app)

    def _put(self, ctx: Flushable, delay: float, app: Flask | None) -> None:
        due = time.monotonic() + delay
        with self._cond:
            self._waiting[ctx] = (due, app)
            if self._wakes_at is None or due < self._wakes_at:
                self._cond.notify()

    def cancel(self, ctx: Flushable) -> None:
        """Forget ``ctx``: its settle has taken the pending report."""
        with self._cond:
            self._waiting.pop(ctx, None)

    def is_waiting(self, ctx: Flushable) -> bool:
        """Whether ``ctx`` waits for the thread (a settled context no longer does)."""
        with self._cond:
            return ctx in self._waiting

    def _take_due(self) -> list[tuple[Flushable, Flask | None]] | None:
        """The contexts due now (waiting until one is), or ``None`` once stopped."""
        with self._cond:
            while True:
                if self._stopped:
                    return None
                now = time.monotonic()
                earliest = min((due for due, _ in self._waiting.values()), default=None)
                if earliest is not None and earliest <= now:
                    break
                self._wakes_at = earliest
                self._cond.wait(None if earliest is None else earliest - now)
            self._wakes_at = 0.0  # awake: it looks at every entry before it sleeps again
            horizon = now + SLACK_SECONDS
            due = [(ctx, app) for ctx, (at, app) in self._waiting.items() if at <= horizon]
            for ctx, _ in due:
                del self._waiting[ctx]
            return due

    def _run(self) -> None:
        while (due := self._take_due()) is not None:
            for ctx, app in due:
                try:
                    if app is None:
                        done = ctx.flush()
                    else:
                        with app.app_context():
                            done = ctx.flush()
                    if not done:  # its handler is writing it (a renewal): look again later
                        self._put(ctx, RETRY_SECONDS, app)
                except Exception as error:  # the report stays pending: try again, or the settle writes it
                    log.warning(
                        "could not write the progress of job %s yet (%s); trying again in %gs",
                        ctx.job_id,
                        str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__,
                        RETRY_SECONDS,
                    )
                    self._put(ctx, RETRY_SECONDS, app)
