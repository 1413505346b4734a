"""Batch mode (``JOB_WORKER_BATCH_SIZE`` > 1): one statement claims ahead for idle threads.

The :class:`Dispatcher` is the process's producer. It collects the *lanes* that want a job,
claims up to ``batch_size`` jobs in one statement (``lifecycle.claim_batch``: each job locked by
the lane that asked, with its own attempt and lease), and puts them, in claim order, in the
:class:`Ready` queue that every :class:`Executor` takes from. An executor runs each job with
its runner (``runner.py``) exactly as in one-job mode; failures are recorded at once, and
successes go to the ``completers.BatchCompleter``, which records everything that arrived
meanwhile in one statement, each row fenced by its own owner and attempt. Expired leases are
rescued by the process's rescuer (``rescuer.py``).

Lanes: a lane is a worker id (``host:pid:thread-N:random``, :func:`lane_ids`), and holds at
most one attempt; a process has ``threads + CLAIM_AHEAD * batch_size`` of them. A lane asks
for its next job only once its last attempt's outcome is written (the completer hands it back
after its statement), so each worker id's events read ``claimed``, then that job's outcome,
then the next ``claimed`` (in id and in ``created_at``), as in one-job mode. The bound: a
process holds at most one attempt per lane, so while every thread runs a handler at most
``CLAIM_AHEAD * batch_size`` jobs wait claimed and not started. Each claim statement still
claims at most ``batch_size`` jobs; the lanes beyond one batch keep the dispatcher claiming
while the completer writes the last ones' outcomes. An executor finds its next job waiting
instead of waiting on the completer's or the dispatcher's round trip, and claim and
completion statements run side by side on their own connections. Any idle executor takes the
next job, so a thread stuck in a long handler holds no other job.

A job claimed ahead holds its lease from its claim: while it waits for a thread, the
dispatcher renews its lease whenever less than half is left (:meth:`Dispatcher.keep_leases`), so
a job waiting behind long handlers never expires unstarted; before its handler starts, the
runner renews it the same way (``JobContext.renew``, nothing sent otherwise), and skips the
job if it is no longer this lane's. On shutdown the executors still run the jobs
already claimed, like the job one-job mode claims with a success; once the shutdown time is up
those not started are handed back with the running ones (``Worker.hand_back``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from ..config import WorkerSettings
from ..ops import worker_metrics
from ..store import lifecycle
from ..store.records import JobRecord
from .runner import Runner
from .threads import ThreadRuntime, make_worker_id
from .wakeup import Doorbell

log = logging.getLogger(__name__)


# How many batches of lanes a process has beyond its threads: with one, the dispatcher waits
# for lanes to come back from the completer between claims; with two it has lanes to claim for
# while the completer writes the last batch's outcomes (measured in docs/benchmarks.md).
CLAIM_AHEAD = 2


def lane_ids(settings: WorkerSettings) -> list[str]:
    """The process's lanes: one per thread, and ``CLAIM_AHEAD * batch_size`` more for jobs
    claimed ahead; at most one attempt each, so at most this many attempts held per process.

    Their ids keep the contract's format, ``host:pid:thread-N:random``, numbered after the
    process's real threads (``thread-0`` the periodic services, ``1..threads`` the executors,
    then the dispatcher and the completer), so a lane's number names no other thread.
    """
    first = settings.threads + 3
    count = settings.threads + CLAIM_AHEAD * settings.batch_size
    return [make_worker_id(n) for n in range(first, first + count)]


class Ready:
    """Claimed jobs not started yet, in claim order; any executor takes the next one.

    It also knows each waiting job's lease (``locked_until``, as last claimed or renewed), so
    the dispatcher keeps the leases of jobs that wait long (:meth:`Dispatcher.keep_leases`)
    and an executor starts a job with the lease it really has. Entries are keyed by job and
    attempt: a job rescued from here and claimed again is a second entry, not the first one
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


class Executor:
    """A batch-mode thread: runs the jobs the dispatcher claims, each under the lane it was
    claimed for, until the dispatcher ends the :class:`Ready` queue."""

    def __init__(
        self, runner: Runner, ready: Ready, lanes: queue.SimpleQueue[str], done: Callable[[], None]
    ) -> None:
        """``runner``: this thread's (its completer the batch completer); ``lanes``: where a
        lane goes back once its outcome is written; ``done``: called when the thread stops."""
        self.runner = runner
        self.ready = ready
        self.lanes = lanes
        self.done = done

    @property
    def worker_id(self) -> str:
        return self.runner.worker_id

    def run(self) -> None:
        runtime = self.runner.runtime
        log.debug("%s: started (batch mode)", runtime.worker_id)
        with runtime.holding_connection():
            while (job := self.ready.take()) is not None:
                pending = False
                try:
                    pending = self.runner.run(job, claimed_ahead=True) is None  # with the completer
                except Exception:  # run() records every handler outcome; this is the database
                    runtime.drop_connection()
                    log.exception("%s: could not settle job %s; the rescuer will", runtime.worker_id, job.id)
                if not pending and job.locked_by:  # its outcome is written (or given up on)
                    self.lanes.put(job.locked_by)
        self.done()
        log.debug("%s: stopped", runtime.worker_id)


class Dispatcher:
    """Batch mode's producer: one claim statement for the lanes that want a job."""

    def __init__(self, runtime: ThreadRuntime, *, executors: int, doorbell: Doorbell) -> None:
        """``runtime``: its own worker id, settings, connection and outage backoff;
        ``executors``: how many threads take from :attr:`ready` (each gets an end mark)."""
        self.settings = runtime.settings
        self.runtime = runtime
        self.executors = executors
        self.stopping = runtime.stopping
        self.doorbell = doorbell
        self.ready = Ready()
        self.wants: queue.SimpleQueue[str] = queue.SimpleQueue()
        for lane in lane_ids(self.settings):
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
                        runtime.back_off(error)
            finally:
                self.ready.end(self.executors)
                self._keep_leases_until_started()

    def _keep_leases_until_started(self) -> None:
        """After the stop: the executors still start the jobs already claimed (no new claim),
        so keep those jobs' leases until every one has been taken, or the process exits
        (``Worker.hand_back`` at the shutdown timeout)."""
        while len(self.ready):
            try:
                self.keep_leases(self.runtime.attempts.any_overdue())
            except Exception as error:  # an outage: the leases lapse and the rescuers take over
                log.warning("could not renew the leases of jobs claimed ahead: %s", error)
                return
            time.sleep(min(0.1, self.settings.lease_seconds / 4))

    def keep_leases(self, overdue: bool) -> None:
        """Renew the lease of every job still waiting for a thread with less than half of it
        left (fenced, each with its ``lease_renewed`` event, as a handler's ``renew()``): when
        every thread runs a long handler, the jobs claimed ahead of them would otherwise expire
        before they start and be rescued, an attempt spent on a job that never ran.

        Only while no attempt of this process is past its lease (``overdue``, read once per
        dispatcher pass): a thread stuck in a handler that stopped renewing must not hold the
        jobs claimed ahead of it forever. Those then expire and a rescue hands them to any
        worker, as if this process had died. A job found no longer ours is not renewed again:
        its executor finds that out and skips it.
        """
        if overdue:
            return
        lease = self.settings.lease_seconds
        for job in self.ready.expiring(lifecycle.utcnow() + timedelta(seconds=lease / 2)):
            until = lifecycle.renew_lease(
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
            jobs = lifecycle.claim_batch(
                wants,
                lease_seconds=self.settings.lease_seconds,
                conn=self.runtime.connection,
                avoid_expired=overdue,
                queues=self.settings.queues,
                forms=self.runtime.claim_forms,
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
        if len(jobs) < len(wants):  # drained or held by a limit: wait for a ring, a window or a poll
            idle = self.runtime.idle_seconds()
            log.debug(
                "%s: nothing to claim for %d lane(s), sleeping %g ms",
                self.runtime.worker_id,
                len(wants) - len(jobs),
                idle * 1000,
            )
            self.doorbell.wait(seen, idle)

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
