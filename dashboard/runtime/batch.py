"""Batch mode (``JOB_WORKER_BATCH_SIZE`` > 1): one statement claims, one statement completes.

The :class:`Dispatcher` is the process's producer. It collects the *lanes* that want a job,
claims up to ``batch_size`` jobs in one statement (``service.claim_batch``: each job locked by
the lane that asked, with its own attempt and lease), and puts each job in its executor's
inbox. Executors run their handlers exactly as in one-job mode (``execution.JobRunner``);
failures are recorded at once, successes go to the :class:`Completer`, which records
everything that arrived meanwhile in one statement (``service.complete_jobs``), each row
fenced by its own owner and attempt. Expired leases are recovered by the process's rescuer
(``rescuer.py``).

Lanes (issue 20): each executor thread has several worker ids (``host:pid:thread-N:…``, each
with its own random tail; :func:`lanes_per_thread`: one, plus the thread's share of
``batch_size``), and each lane holds at most one attempt. A lane asks for its next job only
once its last attempt's outcome is written (the completer hands the lane back after its
statement), so each worker id's events read ``claimed``, then that job's outcome, then the next
``claimed`` (in id and in ``created_at``), as in one-job mode. An executor thus has its next
jobs in hand while its last successes are being written, and the dispatcher claims for it
meanwhile: no executor waits on the completer's or the dispatcher's round trip, and the claim
and completion statements run side by side on their own connections. The process holds at
most ``threads + batch_size`` (rounded up to whole threads) attempts.

A job waiting in an inbox holds its lease from its claim: before its handler starts, the
executor renews the lease if less than half is left (``JobContext.renew``, nothing sent
otherwise), and skips the job if it is no longer this lane's. On shutdown, jobs already in an
inbox run like the job one-job mode claims with a success; once the shutdown time is up they
are handed back with the running ones (``Worker.hand_back``).
"""

from __future__ import annotations

import logging
import queue
import secrets
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


def lanes_per_thread(settings: WorkerSettings) -> int:
    """Worker ids per executor thread: one for the attempt it runs, and its share of the
    ``batch_size`` jobs the process may hold claimed ahead of its threads (at least one)."""
    return 1 + -(-settings.batch_size // settings.threads)


Want = tuple["BatchExecutor", str]  # an executor's lane that wants a job


class BatchExecutor(JobRunner):
    """A batch-mode thread: runs the jobs the dispatcher hands over, for worker ids (lanes) of
    its own (:func:`lanes_per_thread`); successes go to the completer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inbox: queue.SimpleQueue[JobRecord | None] = queue.SimpleQueue()
        self.completer: Completer | None = None
        prefix = self.worker_id.rsplit(":", 1)[0]  # host:pid:thread-N
        ahead = lanes_per_thread(self.settings) - 1
        self.lanes = [self.worker_id] + [f"{prefix}:{secrets.token_hex(4)}" for _ in range(ahead)]
        self._wants: queue.SimpleQueue[Want] | None = None
        self._held: dict[Any, JobRecord] = {}  # claimed for this thread, not started yet
        self._held_lock = threading.Lock()

    def give(self, job: JobRecord) -> None:
        """The dispatcher hands over a job claimed for one of this thread's lanes."""
        with self._held_lock:
            self._held[job.id] = job
        self.inbox.put(job)

    def waiting(self) -> list[JobRecord]:
        """Jobs claimed for this thread that it has not started (``Worker.hand_back``)."""
        with self._held_lock:
            return list(self._held.values())

    def serve(self, wants: queue.SimpleQueue[Want]) -> None:
        """Run the jobs the dispatcher hands over until it sends ``None``."""
        log.debug("%s: started (batch mode)", self.worker_id)
        self._wants = wants
        with self.holding_connection():
            for lane in self.lanes:
                wants.put((self, lane))
            while True:
                job = self.inbox.get()
                if job is None:
                    break
                with self._held_lock:
                    self._held.pop(job.id, None)
                submitted = False
                try:
                    submitted = self.execute(job).status == "submitted"
                except Exception:  # execute() settles every handler outcome; this is the database
                    self.drop_connection()
                    log.exception("%s: could not settle job %s; lease recovery will", self.worker_id, job.id)
                if not submitted:  # the outcome is written (or given up on): the lane is free
                    wants.put((self, job.locked_by or self.worker_id))
        if self.completer is not None:
            self.completer.executor_done()
        log.debug("%s: stopped", self.worker_id)

    def _execute(self, ctx: JobContext, job: JobRecord, started: float) -> Outcome:
        # It may have waited in the inbox behind the previous job: keep its lease first.
        if not ctx.renew():
            return self.finish(ctx, "lost", "", started)
        return super()._execute(ctx, job, started)

    def record_success(self, ctx: JobContext, result: Any, started: float) -> Outcome:
        """Recorded with other successes in one statement by the completer, which then hands
        the lane back to the dispatcher."""
        if self.completer is None or self._wants is None:
            return self.complete_now(ctx, result, started)
        self.completer.submit(ctx, result, started, self._wants, (self, ctx.worker_id))
        return Outcome(ctx.job_id, ctx.job_type, ctx.attempt, "submitted", "", time.monotonic() - started)


class Dispatcher:
    """Batch mode's producer: one claim statement for every lane that wants a job."""

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
        self.wants: queue.SimpleQueue[Want] = queue.SimpleQueue()

    def run(self) -> None:
        """Claim for the lanes that want a job until the worker stops, then release the executors."""
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
        wants = self._take_wants()
        if not wants:
            return
        seen = self.doorbell.rings
        try:
            claim_started = time.monotonic()
            jobs = service.claim_batch(
                [lane for _, lane in wants],
                lease_seconds=self.settings.lease_seconds,
                conn=self.runtime.connection,
                avoid_expired=self.runtime.attempts.any_overdue(),
            )
            worker_metrics.claimed("batch", claim_started)
        except BaseException:
            for want in wants:
                self.wants.put(want)
            raise
        by_lane = {lane: executor for executor, lane in wants}
        for job in jobs:
            log.debug("claimed job %s (%s) attempt %d for %s", job.id, job.type, job.attempts, job.locked_by)
            by_lane.pop(job.locked_by).give(job)
        for lane, executor in by_lane.items():
            self.wants.put((executor, lane))
        if len(jobs) < len(wants):  # the queue is drained: wait for a ring or the poll interval
            log.debug(
                "%s: nothing to claim for %d lane(s), sleeping %g ms",
                self.runtime.worker_id,
                len(wants) - len(jobs),
                self.settings.poll_interval_ms,
            )
            self.doorbell.wait(seen, self.settings.poll_interval_ms / 1000)

    def _take_wants(self) -> list[Want]:
        """Lanes that want a job, up to the batch size; waits briefly for the first one."""
        try:
            first = self.wants.get(timeout=0.1)
        except queue.Empty:
            return []
        wants = [first]
        while len(wants) < self.settings.batch_size:
            try:
                wants.append(self.wants.get_nowait())
            except queue.Empty:
                break
        return wants


@dataclass(frozen=True, slots=True)
class Success:
    ctx: JobContext
    result: Any
    started: float
    wants: queue.SimpleQueue[Want]  # where the lane goes once the success is written (or given up on)
    lane: Want


class Completer:
    """Batch mode: records the successes of every executor, many per statement."""

    MAX_PER_STATEMENT = 500

    def __init__(self, runner: JobRunner, *, executors: int) -> None:
        self.runner = runner  # its own connection, and the one-by-one fallback
        self.pending: queue.SimpleQueue[Success | None] = queue.SimpleQueue()
        self._executors = executors
        self._lock = threading.Lock()

    def submit(
        self, ctx: JobContext, result: Any, started: float, wants: queue.SimpleQueue[Want], lane: Want
    ) -> None:
        ctx.settle_progress()  # the handler is done: its pending report now waits for the completer
        self.pending.put(Success(ctx, result, started, wants, lane))

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
                        for success in batch:  # the lanes' next claims follow these events
                            success.wants.put(success.lane)

    def _record(self, batch: list[Success]) -> None:
        try:
            done = service.complete_jobs(
                [(s.ctx.job_id, s.ctx.worker_id, s.ctx.attempt, s.result) for s in batch],
                progress={s.ctx.job_id: p for s in batch if (p := s.ctx.settle_progress())},
                claimed_at={s.ctx.job_id: s.ctx.job.updated_at for s in batch},  # the claim's :now
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
