"""The worker process's heartbeat: its ``jobs_worker`` row, every few seconds.

A thread of its own upserts the row every ``JOB_WORKER_HEARTBEAT_SECONDS`` (host, pid, start,
mode, threads, jobs done, the job types it has handlers for, the queues it claims from
(``--queues``; none named: every queue), and what each thread is doing:
idle, or the job, attempt, start and lease of the attempt its handler runs, from the process's
own running attempts, ``attempts.PROCESS``) and, on a clean exit, marks it stopped. Busy
threads are the threads inside a handler, whether or not their job is still theirs in the
database: a handler that hangs past its lease keeps its thread busy. A database outage only
delays the next beat: the page then shows the process as stale, which is what it is to the
queue. ``jobs done`` counts attempts this process finished (any outcome), from
:func:`job_done`, called by the runner.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from datetime import datetime
from importlib import metadata
from typing import Any

from flask import Flask
from sqlalchemy.exc import SQLAlchemyError

from ..config import WorkerSettings
from ..store import workers
from ..store.values import utcnow
from .attempts import PROCESS, RunningAttempts
from .handlers import JobContext, registered_types

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
        queues=settings.queues or None,
    )


def thread_name(worker_id: str) -> str:
    """``thread-N`` of a worker id ``host:pid:thread-N:random`` (the id itself otherwise)."""
    parts = worker_id.rsplit(":", 2)
    return parts[1] if len(parts) == 3 else worker_id


def _attempt(name: str, ctx: JobContext, now: datetime) -> dict[str, Any]:
    """A busy thread: its attempt, and whether that attempt is past its lease by this process's
    clock (lost to a rescue, still in its handler)."""
    return {
        "thread": name,
        "job_id": str(ctx.job_id),
        "type": ctx.job_type,
        "attempt": ctx.attempt,
        "since": ctx.started_at.isoformat(),
        "lease_until": ctx.locked_until.isoformat() if ctx.locked_until else None,
        "past_lease": ctx.locked_until is not None and ctx.locked_until < now,
    }


def activity(
    settings: WorkerSettings, attempts: RunningAttempts, now: datetime | None = None
) -> dict[str, Any]:
    """What the row says each thread does: ``thread-1`` to ``thread-N`` (the handler threads),
    idle or running an attempt, and the rescuer's interval (the job page's estimate of the rescue)."""
    now = now or utcnow()
    running = {thread_name(thread or ctx.worker_id): ctx for thread, ctx in attempts.by_thread()}
    threads = []
    for number in range(1, settings.threads + 1):
        name = f"thread-{number}"
        ctx = running.pop(name, None)
        threads.append(_attempt(name, ctx, now) if ctx is not None else {"thread": name})
    threads += [_attempt(name, ctx, now) for name, ctx in sorted(running.items())]  # none expected
    return {"threads": threads, "cleanup_interval_seconds": settings.cleanup_interval_seconds}


class Heartbeat:
    """A worker service: ``run()`` beats until ``stop()``, which marks the row stopped."""

    name = "heartbeat"

    def __init__(
        self,
        app: Flask,
        settings: WorkerSettings,
        attempts: RunningAttempts | None = None,
        *,
        details: dict[str, Any] | None = None,
    ) -> None:
        """``details``: what the row's ``activity`` says of the process besides its threads,
        under ``process`` (a supervisor's child: its index, the number of processes, the
        supervisor's pid)."""
        self.app = app
        self.settings = settings
        self.attempts = attempts or PROCESS
        self.details = details
        self.me = identity(settings)
        self.interval = settings.heartbeat_seconds
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def beat(self) -> bool:
        try:
            with self.app.app_context():
                doing = activity(self.settings, self.attempts)
                if self.details is not None:
                    doing["process"] = self.details
                workers.beat(self.me, jobs_done=jobs_done(), now=utcnow(), activity=doing)
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
        self.thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self.thread.start()
        log.info("heartbeat every %gs as %s", self.interval, self.me.id)

    def stop(self) -> None:
        """End the beats and mark the row stopped (a clean exit, or one after a second signal);
        waits for a beat under way at most 10 s."""
        if self.done.is_set():
            return
        self.done.set()
        if self.thread is not None:
            self.thread.join(10)
        try:
            with self.app.app_context():
                workers.mark_stopped(self.me, jobs_done=jobs_done(), now=utcnow())
        except SQLAlchemyError as error:
            log.warning("could not mark this worker stopped: %s", str(error).splitlines()[0])
