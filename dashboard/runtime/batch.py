"""Batch mode (``JOB_WORKER_BATCH_SIZE`` > 1): one statement claims, one statement completes.

The :class:`Dispatcher` is the process's producer. It waits until executor threads are idle,
claims up to ``batch_size`` jobs in one statement (``service.claim_batch``: each job locked
by the executor that will run it, with its own attempt and lease), and hands each job to its
:class:`BatchExecutor`. Executors run their handlers exactly as in one-job mode
(``execution.JobRunner``); failures are recorded at once, successes go to the
:class:`Completer`, which records everything that arrived meanwhile in one statement
(``service.complete_jobs``), each row fenced by its own owner and attempt. Expired leases are
recovered by the process's rescuer (``rescuer.py``).

Causal order: an executor asks for its next job only once the completer has recorded its last
success, so each worker id's events read ``claimed``, then that job's outcome, then the next
``claimed`` (in id and in ``created_at``), as in one-job mode.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import exc as sa_exc

from ..config import WorkerSettings
from ..ops import worker_metrics  # issue 19
from ..store import service
from ..store.records import JobRecord
from .execution import JobRunner, Outcome
from .handlers import JobContext
from .threads import ThreadRuntime
from .wakeup import Doorbell

log = logging.getLogger(__name__)


class BatchExecutor(JobRunner):
    """A batch-mode thread: runs the jobs the dispatcher hands over; successes go to the
    completer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inbox: queue.SimpleQueue[JobRecord | None] = queue.SimpleQueue()
        self.completer: Completer | None = None
        self.recorded = threading.Event()  # cleared while a success waits for the completer
        self.recorded.set()

    def serve(self, idle: queue.SimpleQueue[BatchExecutor]) -> None:
        """Run the jobs the dispatcher hands over until it sends ``None``."""
        log.debug("%s: started (batch mode)", self.worker_id)
        with self.holding_connection():
            while True:
                idle.put(self)
                job = self.inbox.get()
                if job is None:
                    break
                try:
                    self.execute(job)
                except Exception:  # execute() settles every handler outcome; this is the database
                    self.drop_connection()
                    log.exception("%s: could not settle job %s; lease recovery will", self.worker_id, job.id)
                # The next claim's event must follow this job's outcome; a completer that cannot
                # write within a lease leaves the job to lease recovery anyway.
                self.recorded.wait(self.settings.lease_seconds)
        if self.completer is not None:
            self.completer.executor_done()
        log.debug("%s: stopped", self.worker_id)

    def record_success(self, ctx: JobContext, result: Any, started: float) -> Outcome:
        """Recorded with other successes in one statement by the completer."""
        if self.completer is None:
            return self.complete_now(ctx, result, started)
        self.recorded.clear()
        self.completer.submit(ctx, result, started, self.recorded)
        return Outcome(ctx.job_id, ctx.job_type, ctx.attempt, "submitted", "", time.monotonic() - started)


class Dispatcher:
    """Batch mode's producer: one claim statement for every idle executor."""

    def __init__(
        self,
        settings: WorkerSettings,
        runtime: ThreadRuntime,
        executors: list[BatchExecutor],
        stopping: threading.Event,
        doorbell: Doorbell,
    ) -> None:
        self.settings = settings
        self.runtime = runtime  # its own worker id, connection and outage backoff
        self.executors = executors
        self.stopping = stopping
        self.doorbell = doorbell
        self.idle: queue.SimpleQueue[BatchExecutor] = queue.SimpleQueue()

    def run(self) -> None:
        """Claim for idle executors until the worker stops, then release the executors."""
        runtime = self.runtime
        with runtime.holding_connection():
            try:
                while not self.stopping.is_set():
                    try:
                        self._dispatch()
                        runtime.backoff.reset()
                    except Exception as error:
                        runtime.recover(error)
            finally:
                for executor in self.executors:
                    executor.inbox.put(None)

    def _dispatch(self) -> None:
        idle = self._take_idle()
        if not idle:
            return
        seen = self.doorbell.rings
        try:
            claim_started = time.monotonic()
            jobs = service.claim_batch(
                [executor.worker_id for executor in idle],
                lease_seconds=self.settings.lease_seconds,
                conn=self.runtime.connection,
                avoid_expired=self.runtime.attempts.any_overdue(),
            )
            worker_metrics.claimed("batch", claim_started)
        except BaseException:
            for executor in idle:
                self.idle.put(executor)
            raise
        by_id = {executor.worker_id: executor for executor in idle}
        for job in jobs:
            log.debug("claimed job %s (%s) attempt %d for %s", job.id, job.type, job.attempts, job.locked_by)
            by_id.pop(job.locked_by).inbox.put(job)
        for executor in by_id.values():
            self.idle.put(executor)
        if len(jobs) < len(idle):  # the queue is drained: wait for a ring or the poll interval
            log.debug(
                "%s: nothing to claim for %d idle thread(s), sleeping %g ms",
                self.runtime.worker_id,
                len(idle) - len(jobs),
                self.settings.poll_interval_ms,
            )
            self.doorbell.wait(seen, self.settings.poll_interval_ms / 1000)

    def _take_idle(self) -> list[BatchExecutor]:
        """Idle executors, up to the batch size; waits briefly for the first one."""
        try:
            first = self.idle.get(timeout=0.1)
        except queue.Empty:
            return []
        idle = [first]
        while len(idle) < self.settings.batch_size:
            try:
                idle.append(self.idle.get_nowait())
            except queue.Empty:
                break
        return idle


@dataclass(frozen=True, slots=True)
class Success:
    ctx: JobContext
    result: Any
    started: float
    recorded: threading.Event  # set once the success is written (or given up on)


class Completer:
    """Batch mode: records the successes of every executor, many per statement."""

    MAX_PER_STATEMENT = 500

    def __init__(self, runner: JobRunner, *, executors: int) -> None:
        self.runner = runner  # its own connection, and the one-by-one fallback
        self.pending: queue.SimpleQueue[Success | None] = queue.SimpleQueue()
        self._executors = executors
        self._lock = threading.Lock()

    def submit(self, ctx: JobContext, result: Any, started: float, recorded: threading.Event) -> None:
        ctx.settle_progress()  # the handler is done: its pending report now waits for the completer
        self.pending.put(Success(ctx, result, started, recorded))

    def executor_done(self) -> None:
        """The last executor to stop ends the completer once everything is recorded."""
        with self._lock:
            self._executors -= 1
            if self._executors == 0:
                self.pending.put(None)

    def run(self) -> None:
        with self.runner.holding_connection():
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
                    finally:
                        for success in batch:
                            success.recorded.set()

    def _record(self, batch: list[Success]) -> None:
        try:
            done = service.complete_jobs(
                [(s.ctx.job_id, s.ctx.worker_id, s.ctx.attempt, s.result) for s in batch],
                progress={s.ctx.job_id: p for s in batch if (p := s.ctx.settle_progress())},
                conn=self.runner.connection,
            )
        except sa_exc.SQLAlchemyError:
            # A database outage, or one result the database refuses spoiling the statement:
            # record them one by one, with the per-job retry and refusal handling.
            self.runner.drop_connection()
            for success in batch:
                try:
                    self.runner.complete_now(success.ctx, success.result, success.started)
                except Exception:
                    log.exception("could not record job %s; lease recovery will", success.ctx.job_id)
            return
        for success in batch:
            status = "succeeded" if success.ctx.job_id in done else "lost"
            self.runner.finish(success.ctx, status, "", success.started)
