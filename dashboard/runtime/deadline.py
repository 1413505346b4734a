"""The per-attempt deadline of a job type (``@handler(type, timeout=...)``).

Python cannot stop a thread, so the handler is not interrupted: when an attempt passes its
deadline, a timer fails it in the database (``lifecycle.fail_job``, fenced by owner and attempt
like every worker write, so a handler that settled just before wins), marks the context lost,
and leaves the handler running on its thread. From then on ``ctx.lost`` is true, ``renew()``
and ``progress()`` return ``False``, and whatever the handler returns or raises is refused by
the same fencing (the attempt is no longer running under this worker and attempt number): the
timed-out attempt's end is the one the timer recorded. The thread is busy until the handler
returns; a handler that checks ``ctx.lost`` in its loop gives it back at once.
"""

from __future__ import annotations

import logging
import threading

from flask import Flask
from sqlalchemy import exc as sa_exc

from ..config import WorkerSettings
from ..store import lifecycle
from .handlers import JobContext

log = logging.getLogger(__name__)


def timeout_error(seconds: float) -> str:
    """The attempt's ``last_error`` when it ran past its deadline."""
    return (
        f"TimeoutError: the attempt ran past its timeout of {seconds:g}s (@handler timeout); "
        "the worker failed it and refuses the handler's late result"
    )


class Deadline:
    """A timer that fails ``ctx``'s attempt ``seconds`` after it starts, unless cancelled first."""

    def __init__(self, app: Flask, ctx: JobContext, seconds: float, settings: WorkerSettings) -> None:
        self.app = app
        self.ctx = ctx
        self.seconds = seconds
        self.settings = settings
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.name = f"deadline-{ctx.job_id}"

    def start(self) -> Deadline:
        self._timer.start()
        return self

    def cancel(self) -> None:
        self._timer.cancel()

    def _expire(self) -> None:
        ctx = self.ctx
        if ctx.lost:
            return
        error = timeout_error(self.seconds)
        try:
            with self.app.app_context():
                settled = lifecycle.fail_job(
                    ctx.job_id,
                    ctx.worker_id,
                    ctx.attempt,
                    error,
                    backoff_base_seconds=self.settings.backoff_base_seconds,
                    backoff_max_seconds=self.settings.backoff_max_seconds,
                    event_data={"exception_type": "TimeoutError", "timeout_seconds": self.seconds},
                    progress=ctx.settle_progress(),
                    started_at=ctx.started_at,
                    snoozes=ctx.snoozes,
                )
        except sa_exc.SQLAlchemyError as problem:  # an outage: the lease decides instead
            log.warning("%s: could not fail job %s past its timeout: %s", ctx.worker_id, ctx.job_id, problem)
            return
        ctx.mark_lost()
        if settled is not None:
            log.warning(
                "%s: job %s attempt %d ran past its timeout of %gs: failed (%s); the handler runs on "
                "until it returns, and its result will be refused",
                ctx.worker_id,
                ctx.job_id,
                ctx.attempt,
                self.seconds,
                settled.status,
            )
