"""Batch mode (``JOB_WORKER_BATCH_SIZE`` > 1): one statement claims, one statement completes.

The :class:`Dispatcher` is the process's producer. It waits until executor threads are idle,
claims up to ``batch_size`` jobs in one statement (``service.claim_batch``: each job locked
by the executor that will run it, with its own attempt and lease), and hands each job to its
executor. Executors run their handlers exactly as in one-job mode (``WorkerLoop``); failures
are recorded at once, successes go to the :class:`Completer`, which records everything that
arrived meanwhile in one statement (``service.complete_jobs``), each row fenced by its own
owner and attempt. Expired leases are recovered by the process's rescuer
(``rescuer.py``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import exc as sa_exc

from ..config import WorkerSettings
from ..ops import worker_metrics  # issue 19
from . import service
from .wakeup import Doorbell

if TYPE_CHECKING:
    from .handlers import JobContext
    from .worker import WorkerLoop

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(
        self,
        settings: WorkerSettings,
        housekeeper: WorkerLoop,
        executors: list[WorkerLoop],
        stopping: threading.Event,
        doorbell: Doorbell,
    ) -> None:
        self.settings = settings
        self.housekeeper = housekeeper  # a loop that is never an executor: its connection, backoff
        self.executors = executors
        self.stopping = stopping
        self.doorbell = doorbell
        self.idle: queue.SimpleQueue[WorkerLoop] = queue.SimpleQueue()

    def run(self) -> None:
        """Claim for idle executors until the worker stops, then release the executors."""
        loop = self.housekeeper
        with loop.holding_connection():
            try:
                while not self.stopping.is_set():
                    try:
                        self._dispatch()
                        loop.backoff.reset()
                    except Exception as error:
                        loop.recover(error)
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
                conn=self.housekeeper.connection,
                avoid_expired=self.housekeeper.attempts.any_overdue(),
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
                self.housekeeper.worker_id,
                len(idle) - len(jobs),
                self.settings.poll_interval_ms,
            )
            self.doorbell.wait(seen, self.settings.poll_interval_ms / 1000)

    def _take_idle(self) -> list[WorkerLoop]:
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


class Completer:
    """Batch mode: records the successes of every executor, many per statement."""

    MAX_PER_STATEMENT = 500

    def __init__(self, loop: WorkerLoop, *, executors: int) -> None:
        self.loop = loop  # its connection, logging and one-by-one fallback
        self.pending: queue.SimpleQueue[Success | None] = queue.SimpleQueue()
        self._executors = executors
        self._lock = threading.Lock()

    def submit(self, ctx: JobContext, result: Any, started: float) -> None:
        self.pending.put(Success(ctx, result, started))

    def executor_done(self) -> None:
        """The last executor to stop ends the completer once everything is recorded."""
        with self._lock:
            self._executors -= 1
            if self._executors == 0:
                self.pending.put(None)

    def run(self) -> None:
        with self.loop.holding_connection():
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
                    self._record(batch)

    def _record(self, batch: list[Success]) -> None:
        try:
            done = service.complete_jobs(
                [(s.ctx.job_id, s.ctx.worker_id, s.ctx.attempt, s.result) for s in batch],
                conn=self.loop.connection,
            )
        except sa_exc.SQLAlchemyError:
            # A database outage, or one result the database refuses spoiling the statement:
            # record them one by one, with the per-job retry and refusal handling.
            self.loop.drop_connection()
            for success in batch:
                try:
                    self.loop.complete_now(success.ctx, success.result, success.started)
                except Exception:
                    log.exception("could not record job %s; lease recovery will", success.ctx.job_id)
            return
        for success in batch:
            status = "succeeded" if success.ctx.job_id in done else "lost"
            self.loop.finish(success.ctx, status, "", success.started)
