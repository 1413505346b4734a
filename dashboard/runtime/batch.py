"""Batch mode (``JOB_WORKER_BATCH_SIZE`` > 1): one statement claims, one statement completes.

The :class:`Dispatcher` is the process's producer. It collects the *lanes* that want a job,
claims up to ``batch_size`` jobs in one statement (``service.claim_batch``: each job locked by
the lane that asked, with its own attempt and lease), and puts them, in claim order, in the
:class:`Ready` queue that every :class:`BatchExecutor` takes from. Executors run their
handlers exactly as in one-job mode (``execution.JobRunner``); failures are recorded at once,
successes go to the :class:`Completer`, which records everything that arrived meanwhile in one
statement (``service.complete_jobs``), each row fenced by its own owner and attempt. Expired
leases are recovered by the process's rescuer (``rescuer.py``).

Lanes (issue 20): a lane is a worker id (``host:pid:thread-N:random``, :func:`lane_ids`), and
holds at most one attempt; a process has ``threads + CLAIM_AHEAD * batch_size`` of them. A
lane asks for its next job only once its last attempt's outcome is written (the completer
hands it back after its statement), so each worker id's events read ``claimed``, then that
job's outcome, then the next ``claimed`` (in id and in ``created_at``), as in one-job mode.
The bound: a process holds at most one attempt per lane, so while every thread runs a
handler at most ``CLAIM_AHEAD * batch_size`` jobs wait claimed and not started. Each claim
statement still claims at most ``batch_size`` jobs; the lanes beyond one batch keep the
dispatcher claiming while the completer writes the last ones' outcomes. An executor finds its
next job waiting instead of waiting on the completer's or the dispatcher's round trip, and
claim and completion statements run side by side on their own connections. Any idle executor
takes the next job, so a thread stuck in a long handler holds no other job.

A job claimed ahead holds its lease from its claim: while it waits for a thread, the
dispatcher renews its lease whenever less than half is left (:meth:`Dispatcher.keep_leases`), so
a job waiting behind long handlers never expires unstarted; before its handler starts, the
executor renews it the same way (``JobContext.renew``, nothing sent otherwise), and skips the
job if it is no longer this lane's. On shutdown the executors still run the jobs
already claimed, like the job one-job mode claims with a success; once the shutdown time is up
those not started are handed back with the running ones (``Worker.hand_back``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import exc as sa_exc

from ..config import WorkerSettings
from ..ops import worker_metrics  # issue 19
from ..store import service
from ..store.records import JobRecord
from .execution import JobRunner, Outcome
from .handlers import JobContext
from .threads import ThreadRuntime, make_worker_id
from .wakeup import Doorbell

log = logging.getLogger(__name__)


# How many batches of lanes a process has beyond its threads (issue 20): with one, the
# dispatcher waited for lanes to come back from the completer between claims; with two it has
# lanes to claim for while the completer writes the last batch's outcomes (docs/benchmarks.md).
CLAIM_AHEAD = 2


def lane_ids(settings: WorkerSettings) -> list[str]:
    """The process's lanes: one per thread, and ``CLAIM_AHEAD * batch_size`` more for jobs
    claimed ahead; at most one attempt each, so at most this many attempts held per process.

    Their ids keep the contract's format, ``host:pid:thread-N:random``, numbered after the
    process's real threads (``thread-0`` the rescuer, ``1..threads`` the executors, then the
    dispatcher and the completer), so a number never names two things in one process.
    """
    first = settings.threads + 3
    count = settings.threads + CLAIM_AHEAD * settings.batch_size
    return [make_worker_id(n) for n in range(first, first + count)]


class Ready:
    """Claimed jobs not started yet, in claim order; any executor takes the next one.

    It also knows each waiting job's lease (``locked_until``, as last claimed or renewed), so
    the dispatcher keeps the leases of jobs that wait long (:meth:`Dispatcher.keep_leases`)
    and an executor starts a job with the lease it really has. Entries are keyed by job and
    attempt: a job recovered from here and claimed again is a second entry, not the first one
    overwritten.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[JobRecord | None] = queue.SimpleQueue()
        self._held: dict[tuple[Any, int], JobRecord] = {}
        self._until: dict[tuple[Any, int], datetime] = {}
        self._lock = threading.Lock()

    def put(self, job: JobRecord) -> None:
        key = (job.id, job.attempts)
        with self._lock:
            self._held[key] = job
            if job.locked_until is not None:
                self._until[key] = job.locked_until
        self._queue.put(job)

    def expiring(self, before: datetime) -> list[JobRecord]:
        """Waiting jobs, still ours as far as known, whose lease ends before ``before``."""
        with self._lock:
            return [job for key, job in self._held.items() if self._until.get(key, before) < before]

    def renewed(self, job: JobRecord, locked_until: datetime | None) -> None:
        """A renewal's answer: the new lease, or ``None`` (lost: never renewed again)."""
        key = (job.id, job.attempts)
        with self._lock:
            if key not in self._held:
                return
            if locked_until is None:
                self._until.pop(key, None)
            else:
                self._until[key] = locked_until

    def end(self, executors: int) -> None:
        """After the jobs already queued, each executor takes a ``None`` and stops."""
        for _ in range(executors):
            self._queue.put(None)

    def take(self) -> JobRecord | None:
        job = self._queue.get()
        if job is not None:
            key = (job.id, job.attempts)
            with self._lock:
                self._held.pop(key, None)
                until = self._until.pop(key, None)
            if until is not None and until != job.locked_until:  # renewed while it waited
                job = replace(job, locked_until=until)
        return job

    def waiting(self) -> list[JobRecord]:
        """Jobs claimed and not started (``Worker.hand_back``)."""
        with self._lock:
            return list(self._held.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)


class BatchExecutor(JobRunner):
    """A batch-mode thread: runs the jobs the dispatcher claims, each under the lane it was
    claimed for; successes go to the completer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.completer: Completer | None = None

    def serve(self, ready: Ready, wants: queue.SimpleQueue[str]) -> None:
        """Run the jobs the dispatcher claims until it sends ``None``."""
        log.debug("%s: started (batch mode)", self.worker_id)
        with self.holding_connection():
            while (job := ready.take()) is not None:
                submitted = False
                try:
                    submitted = self.execute(job).status == "submitted"
                except Exception:  # execute() settles every handler outcome; this is the database
                    self.drop_connection()
                    log.exception("%s: could not settle job %s; lease recovery will", self.worker_id, job.id)
                if not submitted and job.locked_by:  # its outcome is written (or given up on)
                    wants.put(job.locked_by)
        if self.completer is not None:
            self.completer.executor_done()
        log.debug("%s: stopped", self.worker_id)

    def _execute(self, ctx: JobContext, job: JobRecord, started: float) -> Outcome:
        # Claimed ahead, it may have waited for a free thread: keep its lease first.
        if not ctx.renew():  # lost, or the database unreachable until its lease ran out
            return self.finish(ctx, "lost" if ctx.lost else "abandoned", "", started)
        return super()._execute(ctx, job, started)

    def record_success(self, ctx: JobContext, result: Any, started: float) -> Outcome:
        """Recorded with other successes in one statement by the completer, which then hands
        the lane back to the dispatcher."""
        if self.completer is None:
            return self.complete_now(ctx, result, started)
        self.completer.submit(ctx, result, started)
        return Outcome(ctx.job_id, ctx.job_type, ctx.attempt, "submitted", "", time.monotonic() - started)


class Dispatcher:
    """Batch mode's producer: one claim statement for the lanes that want a job."""

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
        self.ready = Ready()
        self.wants: queue.SimpleQueue[str] = queue.SimpleQueue()
        for lane in lane_ids(settings):
            self.wants.put(lane)

    def run(self) -> None:
        """Claim for the lanes that want a job until the worker stops, then end the executors."""
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
                self.ready.end(len(self.executors))
                self._keep_leases_until_started()

    def _keep_leases_until_started(self) -> None:
        """After the stop: the executors still start the jobs already claimed (no new claim),
        so keep those jobs' leases until every one has been taken, or the process exits
        (``Worker.hand_back`` at the shutdown timeout)."""
        while len(self.ready):
            try:
                self.keep_leases(self.runtime.attempts.any_overdue())
            except Exception as error:  # an outage: the leases lapse and recovery takes over
                log.warning("could not renew the leases of jobs claimed ahead: %s", error)
                return
            time.sleep(min(0.1, self.settings.lease_seconds / 4))

    def keep_leases(self, overdue: bool) -> None:
        """Renew the lease of every job still waiting for a thread with less than half of it
        left (fenced, each with its ``lease_renewed`` event, as a handler's ``renew()``): when
        every thread runs a long handler, the jobs claimed ahead of them would otherwise expire
        before they start and be recovered, an attempt spent on a job that never ran.

        Only while no attempt of this process is past its lease (``overdue``, read once per
        dispatcher pass): a thread stuck in a handler that stopped renewing must not hold the
        jobs claimed ahead of it forever. Those then expire and lease recovery hands them to any
        worker, as if this process had died. A job found no longer ours is not renewed again:
        its executor finds that out and skips it.
        """
        if overdue:
            return
        lease = self.settings.lease_seconds
        for job in self.ready.expiring(service.utcnow() + timedelta(seconds=lease / 2)):
            until = service.renew_lease(
                job.id, job.locked_by or "", job.attempts, lease_seconds=lease, conn=self.runtime.connection
            )
            self.ready.renewed(job, until)

    def _dispatch(self) -> None:
        overdue = self.runtime.attempts.any_overdue()
        self.keep_leases(overdue)
        wants = self._take_wants()
        if not wants:
            return
        seen = self.doorbell.rings
        try:
            claim_started = time.monotonic()
            jobs = service.claim_batch(
                wants,
                lease_seconds=self.settings.lease_seconds,
                conn=self.runtime.connection,
                avoid_expired=overdue,
            )
            worker_metrics.claimed("batch", claim_started)
        except BaseException:
            for want in wants:
                self.wants.put(want)
            raise
        for job in jobs:
            log.debug("claimed job %s (%s) attempt %d for %s", job.id, job.type, job.attempts, job.locked_by)
            self.ready.put(job)
        taken = {job.locked_by for job in jobs}
        for lane in wants:
            if lane not in taken:
                self.wants.put(lane)
        if len(jobs) < len(wants):  # the queue is drained: wait for a ring or the poll interval
            log.debug(
                "%s: nothing to claim for %d lane(s), sleeping %g ms",
                self.runtime.worker_id,
                len(wants) - len(jobs),
                self.settings.poll_interval_ms,
            )
            self.doorbell.wait(seen, self.settings.poll_interval_ms / 1000)

    def _take_wants(self) -> list[str]:
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


class Completer:
    """Batch mode: records the successes of every executor, many per statement."""

    MAX_PER_STATEMENT = 500

    def __init__(self, runner: JobRunner, *, executors: int, wants: queue.SimpleQueue[str]) -> None:
        self.runner = runner  # its own connection, and the one-by-one fallback
        self.wants = wants  # the dispatcher's: a lane goes back once its success is written
        self.pending: queue.SimpleQueue[Success | None] = queue.SimpleQueue()
        self._executors = executors
        self._lock = threading.Lock()

    def submit(self, ctx: JobContext, result: Any, started: float) -> None:
        ctx.settle_progress()  # the handler is done: its pending report now waits for the completer
        self.pending.put(Success(ctx, result, started))

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
                    except Exception:  # never the end of the completer: lanes would stop coming back
                        log.exception("could not record %d successes; lease recovery will", len(batch))
                    finally:
                        for success in batch:  # the lanes' next claims follow these events
                            self.wants.put(success.ctx.worker_id)

    def _record(self, batch: list[Success]) -> None:
        try:
            done = service.complete_jobs(
                [(s.ctx.job_id, s.ctx.worker_id, s.ctx.attempt, s.result) for s in batch],
                progress={s.ctx.job_id: p for s in batch if (p := s.ctx.settle_progress())},
                started_at={s.ctx.job_id: s.ctx.started_at for s in batch},  # run_ms from its start
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
