"""One-job mode (``JOB_WORKER_BATCH_SIZE=1``): each thread claims, runs and settles its own jobs.

One :meth:`OneJobLoop.step`:

1. the **rescue tick**: every ``cleanup_interval_seconds``, rescue up to
   ``cleanup_batch_size`` expired leases (any worker's);
2. the **claim**: one short transaction (``FOR UPDATE SKIP LOCKED``) takes the next job;
3. the **run** (:class:`~.runner.Runner`): the handler, then ``complete_job`` or ``fail_job``,
   both fenced by ownership, so an attempt whose lease was rescued meanwhile changes nothing.

Inside :meth:`OneJobLoop.run` a success also claims the thread's next job in the same
statement (the runner's :class:`~.completers.CarryingCompleter`), and the next step runs that
job instead of claiming. Nothing a job or the database does ends the thread: handler errors
fail the attempt; database errors are logged and the loop waits (capped backoff) and tries
again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..ops import worker_metrics
from ..store import lifecycle
from ..store.records import JobRecord, RescueResult
from .completers import CarryingCompleter
from .handlers import Handler, get_handler
from .progress import Flusher
from .rescuer import rescue
from .runner import Runner, log_claim
from .threads import ThreadRuntime
from .wakeup import Doorbell

log = logging.getLogger(__name__)


class OneJobLoop:
    """One worker thread of one-job mode: rescue tick, claim, run, settle, and again."""

    def __init__(
        self,
        runtime: ThreadRuntime,
        *,
        lookup: Callable[[str], Handler | None] = get_handler,
        doorbell: Doorbell | None = None,
        flusher: Flusher | None = None,
    ) -> None:
        """``runtime``: the thread's id, settings, connection and outage backoff; ``lookup``:
        the handler registry; ``doorbell``: what wakes the thread when jobs arrive; ``flusher``:
        the worker's progress timer."""
        self.runtime = runtime
        self.carry = CarryingCompleter()
        self.runner = Runner(runtime, self.carry, lookup=lookup, flusher=flusher)
        self.doorbell = doorbell or Doorbell()
        self._next_rescue = 0.0  # monotonic time; 0 = rescue on the first step

    @property
    def worker_id(self) -> str:
        return self.runtime.worker_id

    def run(self) -> None:
        """Loop until the worker stops; survive every error by waiting and trying again."""
        runtime = self.runtime
        log.debug("%s: started", runtime.worker_id)
        with runtime.holding_connection():
            waited = False  # the last pass found nothing and the loop waited since
            while not runtime.stopping.is_set() or self.carry.carried is not None:
                seen = self.doorbell.rings
                try:
                    worked = self.step()
                except Exception as error:
                    runtime.back_off(error)
                    continue
                runtime.backoff.reset()
                if worked and waited:  # woken (or polled) into work: wake the next idle loop
                    self.doorbell.pass_on()
                waited = not worked
                if not worked:
                    idle = runtime.idle_seconds()
                    log.debug("%s: nothing to claim, sleeping %g ms", runtime.worker_id, idle * 1000)
                    self.doorbell.wait(seen, idle)
        log.debug("%s: stopped", runtime.worker_id)

    def step(self) -> bool:
        """One pass: the rescue tick if due, then claim and run at most one job.

        The job may already be claimed: inside :meth:`run`, recording a success claims the
        loop's next job in the same statement, and that job runs on the next pass, even once
        the worker is stopping, since it is already ours. Returns whether a job was run.
        Needs an application context.
        """
        runtime = self.runtime
        try:
            if time.monotonic() >= self._next_rescue:
                self.rescue()
            carried = self.carry.take()
            if carried is not None:
                jobs = [carried]
            elif runtime.stopping.is_set():
                return False
            else:
                jobs = self.claim(limit=1)
            for job in jobs:
                self.runner.run(job)
            return bool(jobs)
        finally:
            if not runtime.holding:  # a single step from outside run(): give the connection back
                runtime.close()

    def rescue(self) -> RescueResult:
        """Rescue expired leases (the rescue tick); schedules the next tick."""
        self._next_rescue = time.monotonic() + self.runtime.settings.cleanup_interval_seconds
        return rescue(self.runtime)

    def claim(self, limit: int = 1) -> list[JobRecord]:
        """Claim up to ``limit`` jobs for this thread (none past its lease while one of this
        process's attempts is overdue: ``attempts.py``)."""
        runtime = self.runtime
        started = time.monotonic()
        jobs = lifecycle.claim_jobs(
            runtime.worker_id,
            lease_seconds=runtime.settings.lease_seconds,
            limit=limit,
            conn=runtime.connection,
            avoid_expired=runtime.attempts.any_overdue(),
            queues=runtime.settings.queues,
            forms=runtime.claim_forms,
        )
        worker_metrics.claimed("claim", started)
        for job in jobs:
            log_claim(runtime.worker_id, job)
        return jobs
