"""The worker process's heartbeat (issue 17): its ``jobs_worker`` row, every few seconds.

A thread of its own upserts the row every ``JOB_WORKER_HEARTBEAT_SECONDS`` (host, pid, start,
mode, threads, busy threads, jobs done, the job types it has handlers for) and, on a clean
exit, marks it stopped. A database outage only delays the next beat: the page then shows the
process as stale, which is what it is to the queue. ``jobs done`` counts attempts this process
finished (any outcome), from :func:`job_done`, called by the runner.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from importlib import metadata

from flask import Flask
from sqlalchemy.exc import SQLAlchemyError

from ..config import WorkerSettings
from ..store import workers
from ..store.values import utcnow
from .handlers import registered_types

log = logging.getLogger(__name__)

_done = 0
_done_lock = threading.Lock()


def job_done() -> None:
    global _done
    with _done_lock:
        _done += 1


def jobs_done() -> int:
    with _done_lock:
        return _done


def version() -> str:
    try:
        return metadata.version("jobqueue-dashboard")
    except metadata.PackageNotFoundError:
        return "dev"


def identity(settings: WorkerSettings) -> workers.Identity:
    host, pid = socket.gethostname(), os.getpid()
    return workers.Identity(
        id=f"{host}:{pid}:{secrets.token_hex(4)}",
        host=host,
        pid=pid,
        started_at=utcnow(),
        mode="one-job" if settings.batch_size <= 1 else f"batch of {settings.batch_size}",
        threads=settings.threads,
        version=version(),
        interval_seconds=settings.heartbeat_seconds,
        job_types=tuple(registered_types()),
    )


class Heartbeat:
    """``run()`` beats until ``stop()``; the row is marked stopped when it ends."""

    def __init__(self, app: Flask, settings: WorkerSettings) -> None:
        self.app = app
        self.me = identity(settings)
        self.interval = settings.heartbeat_seconds
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def beat(self) -> bool:
        try:
            with self.app.app_context():
                workers.beat(self.me, jobs_done=jobs_done(), now=utcnow())
            return True
        except SQLAlchemyError as error:
            log.warning("heartbeat not recorded (the next one tries again): %s", str(error).splitlines()[0])
            return False

    def run(self) -> None:
        while True:
            self.beat()
            if self.done.wait(self.interval):
                return

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name="heartbeat", daemon=True)
        self.thread.start()
        log.info("heartbeat every %gs as %s", self.interval, self.me.id)

    def stop(self) -> None:
        """End the beats and mark the row stopped (a clean exit)."""
        self.done.set()
        if self.thread is not None:
            self.thread.join(10)
        try:
            with self.app.app_context():
                workers.mark_stopped(self.me, jobs_done=jobs_done(), now=utcnow())
        except SQLAlchemyError as error:
            log.warning("could not mark this worker stopped: %s", str(error).splitlines()[0])
