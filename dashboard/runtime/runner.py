"""Running one attempt, the same in both modes: the one place an attempt runs.

:meth:`Runner.run` looks up the job's handler, runs it outside any transaction, classifies how
it ended, and records the end, fenced by owner and attempt: a failure at once
(:meth:`Runner.fail`), a success through the runner's :class:`Completer` (``completers.py``:
at once, together with the thread's next claim, or batched with other successes). How the
attempt ended is an :class:`End`; :meth:`Runner.finish` logs it and counts it.

A runner belongs to one thread and uses that thread's connection (its ``runtime``, a
:class:`~.threads.ThreadRuntime`). The one-job loops, the batch executors and the batch
completer each hold one.
"""

from __future__ import annotations

import logging
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, Protocol, TypeVar

from sqlalchemy import exc as sa_exc

import dashboard.tracing as tracing

from ..ops import worker_metrics
from ..store import lifecycle
from ..store.jsonb import UnreadableJson
from ..store.lifecycle import attempt
from ..store.records import JobRecord
from . import heartbeat
from .deadline import Deadline
from .failures import (
    UnknownJobType,
    UnreadablePayload,
    cap_traceback,
    check_result,
    describe,
    first_line,
    is_connection_error,
)
from .handlers import Handler, JobContext, declared_defaults, get_handler
from .progress import Flusher
from .snooze import Snooze, cap_error
from .threads import Backoff, ThreadRuntime

log = logging.getLogger(__name__)

T = TypeVar("T")


class End(StrEnum):
    """How an attempt ended, from the worker's side; the value is the worker metrics' outcome."""

    SUCCEEDED = "succeeded"
    RETRIED = "retried"  # failed, queued again after its backoff (``retry_scheduled``)
    FAILED = "failed"  # failed for good
    SNOOZED = "snoozed"  # the handler raised Snooze: queued again later, the attempt not counted
    LOST = "lost"  # no longer this worker's (lease rescued, or failed by its timeout): nothing recorded
    ABANDONED = "abandoned"  # its end could not be recorded before the lease ran out: the rescuer's


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended, and after how long (handler and recording its end)."""

    job_id: uuid.UUID
    job_type: str
    attempt: int
    end: End
    error: str = ""
    seconds: float = 0.0


class Unrecorded(Enum):
    """What :meth:`Runner.settle` returns when it gives up: the lease is over."""

    LEASE_OVER = "lease over"


class Completer(Protocol):
    """How a runner records a handler's success (``completers.py``)."""

    def complete(self, runner: Runner, ctx: JobContext, result: Any, started: float) -> Outcome | None:
        """Record the success of ``ctx``'s attempt (``started``: its ``time.monotonic()``).

        Returns its :class:`Outcome`, or ``None`` when it is recorded later, by another thread
        (batched), which then finishes it."""
        ...


def log_claim(worker_id: str, job: JobRecord) -> None:
    """The DEBUG line of a claim."""
    log.debug(
        "%s: claimed job %s (%s) attempt %d/%d", worker_id, job.id, job.type, job.attempts, job.max_attempts
    )


class Runner:
    """Runs the attempts a thread is given and records how each ended."""

    def __init__(
        self,
        runtime: ThreadRuntime,
        completer: Completer,
        *,
        lookup: Callable[[str], Handler | None] = get_handler,
        flusher: Flusher | None = None,
    ) -> None:
        """``runtime``: the thread's id, settings, connection and outage backoff; ``completer``:
        how a success is recorded; ``lookup``: the handler registry; ``flusher``: the worker's
        timer for the progress of handlers still running (``None``: reports wait for the settle)."""
        self.runtime = runtime
        self.completer = completer
        self.lookup = lookup
        self.flusher = flusher
        self.current: JobContext | None = None  # the attempt this thread runs or settles now

    @property
    def worker_id(self) -> str:
        return self.runtime.worker_id

    def run(self, job: JobRecord, *, claimed_ahead: bool = False) -> Outcome | None:
        """Run the job's handler outside any transaction and record how the attempt ended.

        The owner is the claimed row's ``locked_by``. Handler errors (anything raised, even
        ``SystemExit``), an unknown job type and an unreadable payload fail the attempt;
        database errors while recording propagate. An error that a write of the context raised
        (``ctx.renew()``, ``ctx.progress()``: the worker's connection, not the handler's own
        database use) is no failure of the handler: the attempt is left to the rescuer
        (connection errors never get that far: the context retries them while the lease lasts).
        ``claimed_ahead``: the job may have waited for a free thread (batch mode), so its lease
        is kept first, and a job no longer ours is not run.

        The attempt counts among the process's running attempts meanwhile (:mod:`.attempts`):
        once past its lease, this process's claims skip jobs whose lease expired. While it runs,
        :attr:`current` holds the attempt, so a worker whose shutdown time is up can hand it
        back (``Worker.hand_back``). Returns the outcome, or ``None`` if the completer records
        the success later.
        """
        label = worker_metrics.type_label(job.type, self.lookup(job.type) is not None)
        with worker_metrics.attempt(job, self.worker_id, label):  # counters, busy gauge, log ids
            started = time.monotonic()
            runtime = self.runtime
            ctx = JobContext(
                job,
                worker_id=job.locked_by or runtime.worker_id,
                lease_seconds=runtime.settings.lease_seconds,
                stopping=runtime.stopping,
                thread=runtime,
                progress_flush_ms=runtime.settings.progress_flush_ms,
                flusher=self.flusher,
            )
            self.current = ctx
            try:
                with runtime.attempts.running(ctx, runtime.worker_id):
                    if claimed_ahead and not ctx.renew():  # lost, or unreachable until its lease ran out
                        return self.finish(ctx, End.LOST if ctx.lost else End.ABANDONED, "", started)
                    if tracing.active():  # OpenTelemetry there and set up: the attempt's span
                        with tracing.attempt_span(job) as span:
                            outcome = self._handle(ctx, job, started)
                            tracing.outcome(
                                span, outcome.end if outcome else None, outcome.error if outcome else ""
                            )
                            return outcome
                    return self._handle(ctx, job, started)
            finally:
                self.current = None

    def _handle(self, ctx: JobContext, job: JobRecord, started: float) -> Outcome | None:
        fn = self.lookup(job.type)
        if fn is None:
            error: Exception = UnknownJobType(
                f"job type {job.type!r}: no handler is registered in this worker"
            )
            return self.fail(ctx, describe(error), {"exception_type": type(error).__name__}, started)
        if isinstance(job.payload, UnreadableJson):  # a handler must never see the stand-in
            error = UnreadablePayload("the payload is JSON nested too deeply to decode; no handler ran")
            return self.fail(ctx, describe(error), {"exception_type": type(error).__name__}, started)
        if job.depends_on and not self._hand_on_results(ctx, job):
            return self.finish(ctx, End.ABANDONED, "", started)
        log.debug("%s: executing job %s (%s) attempt %d", ctx.worker_id, job.id, job.type, job.attempts)
        timeout = declared_defaults(job.type).timeout  # fn found: no second registry lookup
        deadline = None
        if timeout is not None:
            deadline = Deadline(self.runtime.app, ctx, timeout, self.runtime.settings).start()
        try:
            result = fn(ctx)
            check_result(result)
        except BaseException as raised:  # a handler calling sys.exit() must not end the thread
            if isinstance(raised, Snooze):
                return self.snooze(ctx, raised.seconds, started)
            if ctx.raised_by_worker(raised):  # the worker's own write failed, not the handler
                log.error(
                    "%s: job %s attempt %d: the worker's own write failed inside the handler; "
                    "leaving the attempt to the rescuer",
                    ctx.worker_id,
                    job.id,
                    job.attempts,
                    exc_info=raised,
                )
                return self.finish(ctx, End.ABANDONED, describe(raised), started)
            tracing.record_exception(raised)
            data = {
                "exception_type": type(raised).__name__,
                "traceback": cap_traceback("".join(traceback.format_exception(raised))),
            }
            return self.fail(ctx, describe(raised), data, started)
        finally:
            if deadline is not None:
                deadline.cancel()
        return self.completer.complete(self, ctx, result, started)

    def _hand_on_results(self, ctx: JobContext, job: JobRecord) -> bool:
        """Read the parents' results into ``ctx.parent_results`` (one query, on the thread's
        connection, retried through an outage while the lease lasts); ``False`` if the lease
        ran out first (the rescuer then takes the attempt)."""
        parents = job.depends_on or []
        read = self.settle(ctx, lambda: attempt.parent_results(parents, conn=self.runtime.connection))
        if isinstance(read, Unrecorded):
            return False
        ctx.parent_results, too_big = read
        for parent in too_big:
            log.warning(
                "%s: job %s: parent %s's result is over the size handed on; None instead",
                ctx.worker_id,
                job.id,
                parent,
            )
        return True

    def fail(self, ctx: JobContext, error: str, data: dict[str, Any], started: float) -> Outcome:
        """Record a failed attempt at once: back to queued with a backoff, or failed for good."""
        settings = self.runtime.settings

        def call() -> JobRecord | None:
            return lifecycle.fail_job(
                ctx.job_id,
                ctx.worker_id,
                ctx.attempt,
                error,
                backoff_base_seconds=settings.backoff_base_seconds,
                backoff_max_seconds=settings.backoff_max_seconds,
                event_data=data,
                progress=ctx.settle_progress(),
                started_at=ctx.started_at,
                conn=self.runtime.connection,
                snoozes=ctx.job.snoozes,
            )

        settled = self.settle(ctx, call)
        if settled is Unrecorded.LEASE_OVER:
            return self.finish(ctx, End.ABANDONED, error, started)
        if settled is None:
            return self.finish(ctx, End.LOST, error, started)
        end = End.RETRIED if settled.status == "queued" else End.FAILED
        return self.finish(ctx, end, error, started, retry_at=settled)

    def snooze(self, ctx: JobContext, seconds: float, started: float) -> Outcome:
        """Record a snooze at once: queued again in ``seconds``, the attempt not counted; or,
        past ``JOB_MAX_SNOOZES``, failed for good (``store/lifecycle/snooze.py``)."""
        cap = self.runtime.settings.max_snoozes

        def call() -> JobRecord | None:
            return lifecycle.snooze_job(
                ctx.job_id,
                ctx.worker_id,
                ctx.attempt,
                seconds,
                max_snoozes=cap,
                cap_error=cap_error(cap),
                message=f"Snoozed for {seconds:g}s",
                progress=ctx.settle_progress(),
                started_at=ctx.started_at,
                conn=self.runtime.connection,
            )

        settled = self.settle(ctx, call)
        if settled is Unrecorded.LEASE_OVER:
            return self.finish(ctx, End.ABANDONED, "", started)
        if settled is None:
            return self.finish(ctx, End.LOST, "", started)
        if settled.status == "queued":
            return self.finish(ctx, End.SNOOZED, "", started, retry_at=settled)
        return self.finish(ctx, End.FAILED, settled.last_error, started)

    def settle(self, ctx: JobContext, call: Callable[[], T]) -> T | Unrecorded:
        """Record the attempt's end, retrying through a database outage while the lease lasts.

        The call is fenced by ownership, so repeating it is safe: if an earlier try committed
        and only the answer was lost, the repeat matches nothing and reports a lost attempt.
        Once the lease is over the attempt is left to the rescuer: :attr:`Unrecorded.LEASE_OVER`.
        A refusal (any database error but a connection error) propagates.
        """
        runtime = self.runtime
        backoff = Backoff(runtime.backoff.base, runtime.backoff.cap)
        while True:
            try:
                return call()
            except sa_exc.SQLAlchemyError as error:
                if not is_connection_error(error):
                    raise
                runtime.drop_connection()
                lease_left = (
                    (ctx.locked_until - lifecycle.utcnow()).total_seconds() if ctx.locked_until else 0.0
                )
                delay = backoff.next()
                if lease_left <= 0:
                    log.warning(
                        "%s: cannot record the end of job %s attempt %d (%s) and its lease is over; "
                        "leaving it to the rescuer",
                        ctx.worker_id,
                        ctx.job_id,
                        ctx.attempt,
                        first_line(error),
                    )
                    return Unrecorded.LEASE_OVER
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
        self, ctx: JobContext, end: End, error: str, started: float, retry_at: JobRecord | None = None
    ) -> Outcome:
        """Log and count how the attempt ended (``retry_at``: the requeued job, for its delay)."""
        heartbeat.job_done()
        seconds = time.monotonic() - started
        label = worker_metrics.type_label(ctx.job_type, self.lookup(ctx.job_type) is not None)
        worker_metrics.finished(label, end, seconds)
        what = f"job {ctx.job_id} ({ctx.job_type}) attempt {ctx.attempt}/{ctx.max_attempts}"
        if end is End.SUCCEEDED:
            log.info("%s: %s succeeded in %.2fs", ctx.worker_id, what, seconds)
        elif end is End.RETRIED and retry_at is not None:
            delay = (retry_at.available_at - retry_at.updated_at).total_seconds()
            log.info("%s: %s failed in %.2fs, retry in %gs: %s", ctx.worker_id, what, seconds, delay, error)
        elif end is End.SNOOZED and retry_at is not None:
            delay = (retry_at.available_at - retry_at.updated_at).total_seconds()
            log.info("%s: %s snoozed after %.2fs, runs again in %gs", ctx.worker_id, what, seconds, delay)
        elif end is End.FAILED:
            log.info("%s: %s failed for good in %.2fs: %s", ctx.worker_id, what, seconds, error)
        elif end is End.LOST:
            log.warning(
                "%s: %s ended after %.2fs but the attempt is no longer ours "
                "(its lease was rescued, or its timeout failed it); nothing recorded",
                ctx.worker_id,
                what,
                seconds,
            )
        else:
            log.warning(
                "%s: %s abandoned after %.2fs; the rescuer will requeue it", ctx.worker_id, what, seconds
            )
        return Outcome(ctx.job_id, ctx.job_type, ctx.attempt, end, error, seconds)
