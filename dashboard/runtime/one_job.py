"""One-job mode (``JOB_WORKER_BATCH_SIZE=1``): each thread claims, runs and settles its own jobs.

One :meth:`OneJobLoop.step`:

1. the **cleanup tick**: every ``cleanup_interval_seconds``, recover up to
   ``cleanup_batch_size`` expired leases (any worker's);
2. the **claim**: one short transaction (``FOR UPDATE SKIP LOCKED``) takes the next job;
3. the **run** and the **settle** (:class:`~.execution.JobRunner`): ``complete_job`` or
   ``fail_job``, both fenced by ownership, so an attempt whose lease was recovered meanwhile
   changes nothing.

Inside :meth:`OneJobLoop.run` a success also claims the thread's next job in the same
statement (``service.complete_and_claim``), and the next step runs that job instead of
claiming. Nothing a job or the database does ends the thread: handler errors fail the
attempt; database errors are logged and the loop waits (capped backoff) and tries again.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..ops import worker_metrics  # issue 19: claim round trips
from ..store import service
from ..store.records import CleanupResult, JobRecord
from .execution import JobRunner
from .handlers import JobContext
from .rescuer import recover_expired
from .wakeup import Doorbell

log = logging.getLogger(__name__)


class OneJobLoop(JobRunner):
    """One worker thread of one-job mode: cleanup tick, claim, run, settle, and again."""

    def __init__(self, *args: Any, doorbell: Doorbell | None = None, **kwargs: Any) -> None:
        """``JobRunner``'s arguments, and ``doorbell``: what wakes the thread when jobs arrive."""
        super().__init__(*args, **kwargs)
        self.doorbell = doorbell or Doorbell()
        self._next_cleanup = 0.0  # monotonic time; 0 = clean up on the first step
        self._carried: JobRecord | None = None  # claimed with the last success, not yet run

    def run(self) -> None:
        """Loop until the worker stops; survive every error by waiting and trying again."""
        log.debug("%s: started", self.worker_id)
        with self.holding_connection():
            while not self.stopping.is_set() or self._carried is not None:
                seen = self.doorbell.rings
                try:
                    worked = self.step()
                except Exception as error:
                    self.recover(error)
                    continue
                self.backoff.reset()
                if not worked:
                    log.debug(
                        "%s: nothing to claim, sleeping %g ms", self.worker_id, self.settings.poll_interval_ms
                    )
                    self.doorbell.wait(seen, self.settings.poll_interval_ms / 1000)
        log.debug("%s: stopped", self.worker_id)

    def step(self) -> bool:
        """One pass: the cleanup tick if due, then claim and run at most one job.

        The job may already be claimed: inside :meth:`run`, recording a success claims the
        loop's next job in the same statement, and that job runs on the next pass, even once
        the worker is stopping, since it is already ours. Returns whether a job was run.
        Needs an application context.
        """
        try:
            if time.monotonic() >= self._next_cleanup:
                self.cleanup()
            if self._carried is not None:
                jobs, self._carried = [self._carried], None
            elif self.stopping.is_set():
                return False
            else:
                jobs = self.claim(limit=1)
            for job in jobs:
                self.execute(job)
            return bool(jobs)
        finally:
            if not self.holding:  # a single step from outside run(): give the connection back
                self.close()

    def cleanup(self) -> CleanupResult:
        """Recover expired leases (the cleanup tick); schedules the next tick."""
        self._next_cleanup = time.monotonic() + self.settings.cleanup_interval_seconds
        return recover_expired(self)

    def claim(self, limit: int = 1) -> list[JobRecord]:
        started = time.monotonic()
        jobs = service.claim_jobs(
            self.worker_id,
            lease_seconds=self.settings.lease_seconds,
            limit=limit,
            conn=self.connection,
            avoid_expired=self.attempts.any_overdue(),
        )
        worker_metrics.claimed("claim", started)
        for job in jobs:
            self.log_claim(job)
        return jobs

    def complete_once(self, ctx: JobContext, result: Any, first_try: bool) -> object | None:
        """Inside :meth:`run` (until the worker stops) the first try also claims this loop's
        next job, one round trip for both. A retry after an outage only completes: whether the
        first try's claim committed is unknown, and a job claimed but never run is left to
        lease recovery, like any claim whose answer was lost."""
        if not (first_try and self.holding and not self.stopping.is_set()):
            return super().complete_once(ctx, result, first_try)
        claim_started = time.monotonic()
        completed, self._carried = service.complete_and_claim(
            ctx.job_id,
            ctx.worker_id,
            ctx.attempt,
            result,
            lease_seconds=self.settings.lease_seconds,
            progress=ctx.settle_progress(),
            started_at=ctx.started_at,
            conn=self.connection,
            avoid_expired=self.attempts.any_overdue(),
        )
        worker_metrics.claimed("complete_and_claim", claim_started)
        if self._carried is not None:
            self.log_claim(self._carried)
        return completed or None
