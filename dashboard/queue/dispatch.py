"""Batch mode (``JOB_WORKER_BATCH_SIZE`` > 1): one claim statement for every idle thread.

The :class:`Dispatcher` is the process's producer. It waits until executor threads are idle,
claims up to ``batch_size`` jobs in one statement (``service.claim_batch``: each job locked
by the executor that will run it, with its own attempt and lease), and hands each job to its
executor. Executors run and settle their jobs exactly as in one-job mode (``WorkerLoop``), so
fencing is per job. The dispatcher also runs the cleanup tick, once per process instead of
once per thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import TYPE_CHECKING

from flask import Flask

from ..config import WorkerSettings
from . import service
from .wakeup import Doorbell

if TYPE_CHECKING:
    from .worker import WorkerLoop

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(
        self,
        app: Flask,
        settings: WorkerSettings,
        housekeeper: WorkerLoop,
        executors: list[WorkerLoop],
        stopping: threading.Event,
        doorbell: Doorbell,
    ) -> None:
        self.app = app
        self.settings = settings
        self.housekeeper = housekeeper  # a loop that is never an executor: cleanup, connection
        self.executors = executors
        self.stopping = stopping
        self.doorbell = doorbell
        self.idle: queue.SimpleQueue[WorkerLoop] = queue.SimpleQueue()

    def run(self) -> None:
        """Claim for idle executors until the worker stops, then release the executors."""
        loop = self.housekeeper
        loop._running = True
        with self.app.app_context():
            try:
                while not self.stopping.is_set():
                    try:
                        if time.monotonic() >= loop._next_cleanup:
                            loop.cleanup()
                        self._dispatch()
                        loop.backoff.reset()
                    except Exception as error:
                        loop.drop_connection()
                        loop._wait_after(error)
            finally:
                for executor in self.executors:
                    executor.inbox.put(None)
                loop._running = False
                loop.close()

    def _dispatch(self) -> None:
        idle = self._take_idle()
        if not idle:
            return
        seen = self.doorbell.rings
        try:
            jobs = service.claim_batch(
                [executor.worker_id for executor in idle],
                lease_seconds=self.settings.lease_seconds,
                conn=self.housekeeper.connection,
            )
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
