"""How a runner records a handler's success: three strategies behind one ``complete()``.

- :class:`InlineCompleter`: one fenced ``complete_job`` at once, on the runner's connection;
- :class:`CarryingCompleter` (one-job mode): the success and the thread's next claim in one
  statement (``complete_and_claim``); the loop runs the claimed job next;
- :class:`BatchCompleter` (batch mode): every executor's successes, many per statement
  (``complete_jobs``), recorded by a thread of its own, which then hands each lane back to
  the dispatcher.

Each success is fenced by its own owner and attempt, whatever the statement. A failure is
never a completer's: the runner records it at once (``Runner.fail``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import exc as sa_exc

from ..ops import worker_metrics
from ..store import lifecycle
from ..store.records import JobRecord
from .failures import ResultRejected, describe, first_line
from .handlers import JobContext
from .runner import End, Outcome, Runner, Unrecorded, log_claim

log = logging.getLogger(__name__)


def record_success(
    runner: Runner, ctx: JobContext, started: float, one_try: Callable[[bool], object | None]
) -> Outcome:
    """Record one success with ``one_try(first_try)`` (truthy: completed; ``None``: no longer
    ours), retrying through an outage while the lease lasts (``Runner.settle``). A result the
    database refuses fails the attempt instead (``ResultRejected``)."""
    first = True

    def call() -> object | None:
        nonlocal first
        try:
            return one_try(first)
        finally:
            first = False

    try:
        settled = runner.settle(ctx, call)
    except sa_exc.SQLAlchemyError as error:  # refused, not unreachable: settle() retries those
        refusal = ResultRejected(f"the database refused the result: {first_line(error)}")
        return runner.fail(ctx, describe(refusal), {"exception_type": type(refusal).__name__}, started)
    if settled is Unrecorded.LEASE_OVER:
        return runner.finish(ctx, End.ABANDONED, "", started)
    if settled is None:
        return runner.finish(ctx, End.LOST, "", started)
    return runner.finish(ctx, End.SUCCEEDED, "", started)


def complete_alone(runner: Runner, ctx: JobContext, result: Any) -> JobRecord | None:
    """One try of a success on its own: ``complete_job``, fenced by owner and attempt."""
    return lifecycle.complete_job(
        ctx.job_id,
        ctx.worker_id,
        ctx.attempt,
        result,
        progress=ctx.settle_progress(),
        started_at=ctx.started_at,  # run_ms from it, reading no event
        conn=runner.runtime.connection,
    )


class InlineCompleter:
    """Each success recorded at once, one statement each."""

    def complete(self, runner: Runner, ctx: JobContext, result: Any, started: float) -> Outcome:
        return record_success(runner, ctx, started, lambda _first: complete_alone(runner, ctx, result))


class CarryingCompleter:
    """One-job mode: a success also claims the thread's next job, one round trip for both.

    Only on the first try, and only inside the loop's run (``runtime.holding``) until the
    worker stops; otherwise it completes alone. A retry after an outage only completes: whether
    the first try's claim committed is unknown, and a job claimed but never run is left to the
    rescuer, like any claim whose answer was lost. The job claimed is :attr:`carried` until the
    loop takes it (:meth:`take`).
    """

    def __init__(self) -> None:
        self.carried: JobRecord | None = None

    def take(self) -> JobRecord | None:
        """The job claimed with the last success, if any, now the loop's to run."""
        job, self.carried = self.carried, None
        return job

    def complete(self, runner: Runner, ctx: JobContext, result: Any, started: float) -> Outcome:
        runtime = runner.runtime

        def one_try(first: bool) -> object | None:
            if not (first and runtime.holding and not runtime.stopping.is_set()):
                return complete_alone(runner, ctx, result)
            claim_started = time.monotonic()
            completed, self.carried = lifecycle.complete_and_claim(
                ctx.job_id,
                ctx.worker_id,
                ctx.attempt,
                result,
                lease_seconds=runtime.settings.lease_seconds,
                progress=ctx.settle_progress(),
                started_at=ctx.started_at,
                conn=runtime.connection,
                avoid_expired=runtime.attempts.any_overdue(),
                queues=runtime.settings.queues,
                job_queue=ctx.job.queue,
                forms=runtime.claim_forms,
            )
            worker_metrics.claimed("complete_and_claim", claim_started)
            if self.carried is not None:
                log_claim(runtime.worker_id, self.carried)
            return completed or None

        return record_success(runner, ctx, started, one_try)


@dataclass(frozen=True, slots=True)
class Success:
    ctx: JobContext
    result: Any
    started: float


class BatchCompleter:
    """Batch mode: the successes of every executor, many per statement, on a thread of its own.

    :meth:`complete` (an executor's call) queues the success and returns ``None``; :meth:`run`
    (the completer's thread) records what arrived meanwhile in one ``complete_jobs``, finishes
    each attempt, and hands each lane back (``lanes``, the dispatcher's): a lane asks for its
    next job only once its last outcome is written. A statement that fails (an outage, or one
    result the database refuses spoiling it) is redone one success at a time with
    ``runner``'s inline recording. The last executor to stop (:meth:`executor_done`) ends the
    thread once everything is recorded.
    """

    MAX_PER_STATEMENT = 500

    def __init__(self, runner: Runner, *, executors: int, lanes: queue.SimpleQueue[str]) -> None:
        """``runner``: the completer thread's own (connection, logs, the one-by-one fallback)."""
        self.runner = runner
        self.lanes = lanes
        self.pending: queue.SimpleQueue[Success | None] = queue.SimpleQueue()
        self._inline = InlineCompleter()
        self._executors = executors
        self._lock = threading.Lock()

    def complete(self, runner: Runner, ctx: JobContext, result: Any, started: float) -> None:
        ctx.settle_progress()  # the handler is done: its pending report now waits for the statement
        self.pending.put(Success(ctx, result, started))

    def executor_done(self) -> None:
        """The last executor to stop ends the completer once everything is recorded."""
        with self._lock:
            self._executors -= 1
            if self._executors == 0:
                self.pending.put(None)

    def run(self) -> None:
        """Record successes until the last executor is done."""
        with self.runner.runtime.holding_connection():
            finished = False
            while not finished:
                first = self.pending.get()
                batch = [] if first is None else [first]
                finished = first is None
                while not finished and len(batch) < self.MAX_PER_STATEMENT:
                    try:
                        item = self.pending.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        finished = True
                    else:
                        batch.append(item)
                if batch:
                    try:
                        self._record(batch)
                    except Exception:  # never the end of the completer: lanes would stop coming back
                        log.exception("could not record %d successes; the rescuer will", len(batch))
                    finally:
                        for success in batch:  # the lanes' next claims follow these events
                            self.lanes.put(success.ctx.worker_id)

    def _record(self, batch: list[Success]) -> None:
        runner = self.runner
        try:
            done = lifecycle.complete_jobs(
                [(s.ctx.job_id, s.ctx.worker_id, s.ctx.attempt, s.result) for s in batch],
                progress={s.ctx.job_id: p for s in batch if (p := s.ctx.settle_progress())},
                started_at={s.ctx.job_id: s.ctx.started_at for s in batch},  # run_ms from its start
                conn=runner.runtime.connection,
            )
        except sa_exc.SQLAlchemyError:
            # A database outage, or one result the database refuses spoiling the statement:
            # record them one by one, with the per-job retry and refusal handling.
            runner.runtime.drop_connection()
            for success in batch:
                try:
                    self._inline.complete(runner, success.ctx, success.result, success.started)
                except Exception:
                    log.exception("could not record job %s; the rescuer will", success.ctx.job_id)
            return
        for success in batch:
            end = End.SUCCEEDED if success.ctx.job_id in done else End.LOST
            runner.finish(success.ctx, end, "", success.started)
