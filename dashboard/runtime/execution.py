"""Running one claimed job, the same in both modes: look up the handler, run it outside any
transaction, classify how it ended, and settle the attempt (fenced by owner and attempt).

:class:`JobRunner` is a :class:`~.threads.ThreadRuntime` that can run and settle jobs. The
one-job loop and the batch executors are JobRunners; they differ only in how a job reaches
them and in how a success is recorded (:meth:`JobRunner.record_success`).
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import exc as sa_exc

from ..ops import worker_metrics  # issue 19: metrics, log ids
from ..store import service
from ..store.jsonb import UnreadableJson
from ..store.records import JobRecord
from . import heartbeat
from .failures import (
    ResultRejected,
    UnknownJobType,
    UnreadablePayload,
    cap_traceback,
    check_result,
    describe,
    first_line,
    is_connection_error,
)
from .handlers import Handler, JobContext, get_handler
from .threads import Backoff, ThreadRuntime

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended, from the worker's side."""

    job_id: Any
    job_type: str
    attempt: int
    # "succeeded" | "queued" (retry scheduled) | "failed" | "lost" | "abandoned" | "submitted"
    status: str
    error: str = ""
    seconds: float = 0.0


_ABANDONED = object()


class JobRunner(ThreadRuntime):
    """A thread that runs handlers and records how each attempt ended."""

    def __init__(
        self, *args: Any, lookup: Callable[[str], Handler | None] = get_handler, **kwargs: Any
    ) -> None:
        """``ThreadRuntime``'s arguments, and ``lookup``: the handler registry to run jobs with."""
        super().__init__(*args, **kwargs)
        self.lookup = lookup
        self.current: JobContext | None = None  # the attempt this thread runs or settles now

    def log_claim(self, job: JobRecord) -> None:
        log.debug(
            "%s: claimed job %s (%s) attempt %d/%d",
            self.worker_id,
            job.id,
            job.type,
            job.attempts,
            job.max_attempts,
        )

    def execute(self, job: JobRecord) -> Outcome:
        """Run the job's handler outside any transaction and settle the attempt.

        The owner is the claimed row's ``locked_by``. Handler errors (anything raised, even
        ``SystemExit``), an unknown job type and an unreadable payload fail the attempt;
        database errors while settling propagate. An error that a write of the context raised
        (``ctx.renew()``, ``ctx.progress()``: the worker's connection, not the handler's own
        database use) is no failure of the handler: the attempt is left to lease recovery
        (connection errors never get that far: the context retries them while the lease lasts).

        The attempt counts among the process's running attempts meanwhile (:mod:`.attempts`):
        once past its lease, this process's claims skip jobs whose lease expired.
        While it runs, :attr:`current` holds the attempt, so a worker whose shutdown time is
        up can hand it back (``Worker.hand_back`` in ``worker.py``).
        """
        label = worker_metrics.type_label(job.type, self.lookup(job.type) is not None)
        with worker_metrics.attempt(job, self.worker_id, label):  # issue 19: counters, busy gauge, log ids
            return self._attempt(job)

    def _attempt(self, job: JobRecord) -> Outcome:
        started = time.monotonic()
        ctx = JobContext(
            job,
            worker_id=job.locked_by or self.worker_id,
            lease_seconds=self.settings.lease_seconds,
            stopping=self.stopping,
            thread=self,
            progress_flush_ms=self.settings.progress_flush_ms,
        )
        self.current = ctx
        try:
            with self.attempts.running(ctx, self.worker_id):
                return self._execute(ctx, job, started)
        finally:
            self.current = None

    def _execute(self, ctx: JobContext, job: JobRecord, started: float) -> Outcome:
        fn = self.lookup(job.type)
        if fn is None:
            error = UnknownJobType(f"job type {job.type!r}: no handler is registered in this worker")
            return self.fail(ctx, describe(error), {"exception_type": type(error).__name__}, started)
        if isinstance(job.payload, UnreadableJson):  # a handler must never see the stand-in
            error = UnreadablePayload("the payload is JSON nested too deeply to decode; no handler ran")
            return self.fail(ctx, describe(error), {"exception_type": type(error).__name__}, started)
        log.debug("%s: executing job %s (%s) attempt %d", ctx.worker_id, job.id, job.type, job.attempts)
        try:
            result = fn(ctx)
            check_result(result)
        except BaseException as error:  # a handler calling sys.exit() must not end the thread
            if ctx.raised_by_worker(error):  # the worker's own write failed, not the handler
                log.error(
                    "%s: job %s attempt %d: the worker's own write failed inside the handler; "
                    "leaving the attempt to lease recovery",
                    ctx.worker_id,
                    job.id,
                    job.attempts,
                    exc_info=error,
                )
                return self.finish(ctx, "abandoned", describe(error), started)
            data = {
                "exception_type": type(error).__name__,
                "traceback": cap_traceback("".join(traceback.format_exception(error))),
            }
            return self.fail(ctx, describe(error), data, started)
        return self.record_success(ctx, result, started)

    def record_success(self, ctx: JobContext, result: Any, started: float) -> Outcome:
        """Record a handler's success; here at once (batch executors hand it to the completer)."""
        return self.complete_now(ctx, result, started)

    def complete_once(self, ctx: JobContext, result: Any, first_try: bool) -> object | None:
        """One try at recording a success: the completed job, or None if the attempt is no
        longer this worker's. The one-job loop also claims its next job on the first try."""
        return service.complete_job(
            ctx.job_id,
            ctx.worker_id,
            ctx.attempt,
            result,
            progress=ctx.settle_progress(),
            started_at=ctx.started_at,  # run_ms from it, reading no event
            conn=self.connection,
        )

    def complete_now(self, ctx: JobContext, result: Any, started: float) -> Outcome:
        """Record one success (fenced), retrying through an outage while the lease lasts.

        A result the database refuses fails the attempt instead (``ResultRejected``).
        """
        first = True

        def call() -> object | None:
            nonlocal first
            try:
                return self.complete_once(ctx, result, first)
            finally:
                first = False

        try:
            settled = self.settle(ctx, call)
        except sa_exc.SQLAlchemyError as error:  # refused, not unreachable: settle() retries those
            refusal = ResultRejected(f"the database refused the result: {first_line(error)}")
            return self.fail(ctx, describe(refusal), {"exception_type": type(refusal).__name__}, started)
        if settled is _ABANDONED:
            return self.finish(ctx, "abandoned", "", started)
        if settled is None:
            return self.finish(ctx, "lost", "", started)
        return self.finish(ctx, "succeeded", "", started)

    def fail(self, ctx: JobContext, error: str, data: dict[str, Any], started: float) -> Outcome:
        """Record a failed attempt: back to queued with a backoff, or failed for good."""
        settings = self.settings

        def call() -> JobRecord | None:
            return service.fail_job(
                ctx.job_id,
                ctx.worker_id,
                ctx.attempt,
                error,
                backoff_base_seconds=settings.backoff_base_seconds,
                backoff_max_seconds=settings.backoff_max_seconds,
                event_data=data,
                progress=ctx.settle_progress(),
                started_at=ctx.started_at,
                conn=self.connection,
            )

        settled = self.settle(ctx, call)
        if settled is _ABANDONED:
            return self.finish(ctx, "abandoned", error, started)
        if settled is None:
            return self.finish(ctx, "lost", error, started)
        return self.finish(ctx, settled.status, error, started, retry_at=settled)

    def settle(self, ctx: JobContext, call: Callable[[], T]) -> T | object:
        """Record the attempt's end, retrying through a database outage while the lease lasts.

        The call is fenced by ownership, so repeating it is safe: if an earlier try committed
        and only the answer was lost, the repeat matches nothing and reports a lost attempt.
        Once the lease is over (or the worker is forced to stop) the attempt is left to lease
        recovery: :data:`_ABANDONED`.
        """
        backoff = Backoff(self.backoff.base, self.backoff.cap)
        while True:
            try:
                return call()
            except sa_exc.SQLAlchemyError as error:
                if not is_connection_error(error):
                    raise
                self.drop_connection()
                lease_left = (
                    (ctx.locked_until - service.utcnow()).total_seconds() if ctx.locked_until else 0.0
                )
                delay = backoff.next()
                if lease_left <= 0:
                    log.warning(
                        "%s: cannot record the end of job %s attempt %d (%s) and its lease is over; "
                        "leaving it to lease recovery",
                        ctx.worker_id,
                        ctx.job_id,
                        ctx.attempt,
                        first_line(error),
                    )
                    return _ABANDONED
                log.warning(
                    "%s: cannot record the end of job %s attempt %d (%s); retrying in %gs",
                    ctx.worker_id,
                    ctx.job_id,
                    ctx.attempt,
                    first_line(error),
                    min(delay, lease_left),
                )
                time.sleep(min(delay, lease_left))

    def finish(
        self, ctx: JobContext, status: str, error: str, started: float, retry_at: JobRecord | None = None
    ) -> Outcome:
        """Log how the attempt ended and return it as an :class:`Outcome`."""
        heartbeat.job_done()
        seconds = time.monotonic() - started
        worker_metrics.finished(
            worker_metrics.type_label(ctx.job_type, self.lookup(ctx.job_type) is not None), status, seconds
        )
        what = f"job {ctx.job_id} ({ctx.job_type}) attempt {ctx.attempt}/{ctx.max_attempts}"
        if status == "succeeded":
            log.info("%s: %s succeeded in %.2fs", ctx.worker_id, what, seconds)
        elif status == "queued" and retry_at is not None:
            delay = (retry_at.available_at - retry_at.updated_at).total_seconds()
            log.info("%s: %s failed in %.2fs, retry in %gs: %s", ctx.worker_id, what, seconds, delay, error)
        elif status == "failed":
            log.info("%s: %s failed for good in %.2fs: %s", ctx.worker_id, what, seconds, error)
        elif status == "lost":
            log.warning(
                "%s: %s ended after %.2fs but the attempt is no longer ours "
                "(lease expired and recovered); nothing recorded",
                ctx.worker_id,
                what,
                seconds,
            )
        else:
            log.warning(
                "%s: %s abandoned after %.2fs; lease recovery will requeue it", ctx.worker_id, what, seconds
            )
        return Outcome(ctx.job_id, ctx.job_type, ctx.attempt, status, error, seconds)
