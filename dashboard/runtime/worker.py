"""The worker process: starts the chosen mode's threads, handles signals, shuts down.

- one-job mode (``batch_size`` 1): one :class:`~.one_job.OneJobLoop` per thread;
- batch mode: :class:`~.batch.BatchExecutor` threads fed by a :class:`~.batch.Dispatcher`, their
  successes recorded by a :class:`~.batch.Completer`;
- in both, a :class:`~.rescuer.Rescuer` recovers expired leases on schedule, and with
  ``listen`` a :class:`~.wakeup.Listener` rings the doorbell when jobs arrive.

The first SIGINT/SIGTERM stops claiming and lets running handlers finish, and any job already
claimed with a success (exit 0), for at most ``shutdown_timeout_seconds``
(``JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS``; 0: no limit): then the attempts still running are
handed back, requeued at once (:meth:`Worker.hand_back`), and the process exits 0. A second
signal exits at once, leaving unfinished attempts to lease recovery.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from types import FrameType
from typing import NamedTuple

from flask import Flask
from sqlalchemy import exc as sa_exc

from ..config import WorkerSettings, settings_of
from ..database import tcp_connect_args
from ..ops import pooling  # issue 19: the pooler
from ..store import service
from .batch import BatchExecutor, Completer, Dispatcher
from .execution import JobRunner
from .failures import first_line
from .handlers import Handler, JobContext, get_handler
from .heartbeat import Heartbeat
from .one_job import OneJobLoop
from .rescuer import Rescuer
from .threads import RECONNECT_BASE_SECONDS, RECONNECT_MAX_SECONDS, Backoff, ThreadRuntime, make_worker_id
from .wakeup import Doorbell, Listener

log = logging.getLogger(__name__)


class Held(NamedTuple):
    """An attempt this process holds, for ``Worker.hand_back``."""

    job_id: uuid.UUID
    job_type: str
    worker_id: str
    attempt: int
    started_at: datetime  # when its attempt started (now, for one never started): its run_ms


class Worker:
    """A worker process's threads and its shutdown."""

    def __init__(
        self,
        app: Flask,
        settings: WorkerSettings,
        *,
        lookup: Callable[[str], Handler | None] = get_handler,
        reconnect_base_seconds: float = RECONNECT_BASE_SECONDS,
        reconnect_max_seconds: float = RECONNECT_MAX_SECONDS,
    ) -> None:
        self.app = app
        self.settings = settings
        self.stopping = threading.Event()
        self.doorbell = Doorbell()

        def backoff() -> Backoff:
            return Backoff(reconnect_base_seconds, reconnect_max_seconds)

        def runtime(n: int) -> ThreadRuntime:
            return ThreadRuntime(app, settings, make_worker_id(n), self.stopping, reconnect=backoff())

        threads = range(1, settings.threads + 1)
        # thread-0 recovers expired leases on schedule; in batch mode two more threads claim
        # for the executors and record their successes.
        self.rescuer = Rescuer(runtime(0), self.stopping)
        self.dispatcher: Dispatcher | None = None
        self.completer: Completer | None = None
        self.loops: list[OneJobLoop] | list[BatchExecutor]
        if settings.batch_size <= 1:
            self.loops = [
                OneJobLoop(
                    app,
                    settings,
                    make_worker_id(n),
                    self.stopping,
                    lookup=lookup,
                    reconnect=backoff(),
                    doorbell=self.doorbell,
                    generic_plans=pooling.session_settings_ok(app),  # no session SET through a pooler
                )
                for n in threads
            ]
        else:
            executors = [
                BatchExecutor(
                    app, settings, make_worker_id(n), self.stopping, lookup=lookup, reconnect=backoff()
                )
                for n in threads
            ]
            self.loops = executors
            self.dispatcher = Dispatcher(
                settings, runtime(settings.threads + 1), executors, self.stopping, self.doorbell
            )
            completer_runner = JobRunner(
                app,
                settings,
                make_worker_id(settings.threads + 2),
                self.stopping,
                lookup=lookup,
                reconnect=backoff(),
            )
            self.completer = Completer(
                completer_runner, executors=len(executors), wants=self.dispatcher.wants
            )
            for executor in executors:
                executor.completer = self.completer
        self.listener: Listener | None = None
        self.heartbeat = Heartbeat(app, settings)  # the jobs_worker row (issue 17)
        self.threads: list[threading.Thread] = []
        self._forced_by: int | None = None
        self._give_up_at: float | None = None  # monotonic; set by the first signal

    def make_listener(self) -> Listener | None:
        """The LISTEN connection's thread body (not started), or ``None`` to poll: ``listen``
        off, or behind a pooler without ``DATABASE_DIRECT_URL``. Its connection has the pool's
        TCP options (keepalives, ``tcp_user_timeout``)."""
        url = pooling.listen_url(self.app) if self.settings.listen else None  # direct URL behind a pooler
        if url is None:
            return None
        ops = settings_of(self.app).ops
        return Listener(url, self.doorbell, self.stopping, connect_args=tcp_connect_args(ops))

    def start(self) -> None:
        # Daemon threads: after a second signal the process exits without waiting for them.
        targets: list[tuple[Callable[..., None], tuple[object, ...]]]
        if self.dispatcher is None or self.completer is None:
            targets = [(loop.run, ()) for loop in self.loops if isinstance(loop, OneJobLoop)]
        else:
            lanes = (self.dispatcher.ready, self.dispatcher.wants)
            targets = [(executor.serve, lanes) for executor in self.loops]
            targets.append((self.dispatcher.run, ()))
            targets.append((self.completer.run, ()))
        # Python thread names follow the worker ids: thread-1.. the loops (then the dispatcher
        # and the completer), thread-0 the rescuer; batch mode's lanes are numbered after them.
        named = [(f"thread-{n}", target, args) for n, (target, args) in enumerate(targets, start=1)]
        named.append(("thread-0", self.rescuer.run, ()))
        self.threads = [
            threading.Thread(target=target, args=args, name=name, daemon=True) for name, target, args in named
        ]
        self.listener = self.make_listener()
        if self.listener is not None:
            threading.Thread(target=self.listener.run, name="listener", daemon=True).start()
        for thread in self.threads:
            thread.start()
        self.heartbeat.start()
        for loop in self.loops:
            log.info("started %s", loop.worker_id)
        if self.dispatcher is not None:
            log.info(
                "batch mode: %s claims up to %d jobs at once",
                self.dispatcher.runtime.worker_id,
                self.settings.batch_size,
            )

    def stop(self) -> None:
        """Stop claiming; running handlers finish and their threads then end."""
        self.stopping.set()
        self.doorbell.ring()  # idle loops stop waiting at once

    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self.threads)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every thread to end; ``True`` if they all did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self.threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if self.alive():
            return False
        self.heartbeat.stop()
        return True

    def run_until_signalled(self) -> int:
        """Run until SIGINT/SIGTERM; return the process exit status.

        First signal: stop claiming, let running handlers finish, return 0; once
        ``shutdown_timeout_seconds`` have passed, hand back what still runs and return 0. Second signal:
        return ``128 + signal`` at once (130 for SIGINT, 143 for SIGTERM); the caller exits
        and the daemon threads die with the process, their attempts left to lease recovery.
        Must run in the main thread (signal handlers).
        """
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start()
            while self.alive():
                if self._forced_by is not None:
                    log.warning("second signal: exiting now, unfinished jobs are left to lease recovery")
                    return 128 + self._forced_by
                if self._give_up_at is not None and time.monotonic() >= self._give_up_at:
                    self.hand_back()
                    return 0
                time.sleep(0.05)
            log.info("worker stopped")
            return 0
        finally:
            self.heartbeat.stop()  # the row says stopped: a clean exit, or a forced one
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def hand_back(self) -> int:
        """The shutdown time is up: requeue every attempt still running here, at once.

        Each is recorded as a failed attempt with no backoff (``retry_scheduled``, or
        ``failed`` on its last attempt, exactly as lease recovery would), fenced by owner and
        attempt and written with its event in one statement (``service.fail_job``): an attempt
        that finished or was recovered meanwhile changes nothing. A handler still running in
        this process is not interrupted; the process exits right after. In batch mode the jobs
        claimed for an executor that has not started them yet are handed back the same way.
        Returns how many attempts were handed back; one that cannot be recorded is left to
        lease recovery.
        """
        limit = self.settings.shutdown_timeout_seconds
        handed = 0
        # Waiting jobs first: one taken by a thread between the two reads is then seen running
        # (and handed back once; the second, fenced try changes nothing), never missed.
        ahead = self.dispatcher.ready.waiting() if self.dispatcher is not None else []
        now = service.utcnow()
        held = [Held(j.id, j.type, j.locked_by or "", j.attempts, now) for j in ahead]
        held += [Held(c.job_id, c.job_type, c.worker_id, c.attempt, c.started_at) for c in self._running()]
        with self.app.app_context():
            for ctx in held:
                error = (
                    f"WorkerStopped: the worker stopped ({limit:g} s after the signal, "
                    "JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS) before the handler finished; handed back"
                )
                try:
                    back = service.fail_job(
                        ctx.job_id,
                        ctx.worker_id,
                        ctx.attempt,
                        error,
                        backoff_base_seconds=0,
                        backoff_max_seconds=0,
                        event_data={"exception_type": "WorkerStopped", "handed_back": True},
                        started_at=ctx.started_at,
                    )
                except sa_exc.SQLAlchemyError as db_error:
                    log.warning(
                        "%s: could not hand back job %s (%s); lease recovery will",
                        ctx.worker_id,
                        ctx.job_id,
                        first_line(db_error),
                    )
                    continue
                if back is not None:
                    handed += 1
                    log.warning(
                        "%s: job %s (%s) attempt %d still running after %gs: handed back, now %s",
                        ctx.worker_id,
                        ctx.job_id,
                        ctx.job_type,
                        ctx.attempt,
                        limit,
                        back.status,
                    )
        log.info("worker stopped after its shutdown timeout; %d running job(s) handed back", handed)
        return handed

    def _running(self) -> list[JobContext]:
        return [loop.current for loop in self.loops if loop.current is not None]

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.stopping.is_set():
            self._forced_by = signum
            return
        running = sum(1 for t in self.threads if t.is_alive())
        limit = self.settings.shutdown_timeout_seconds
        log.info(
            "%s received: no new claims; waiting %s for running jobs (%d thread(s)) to finish",
            name,
            f"up to {limit:g}s" if limit > 0 else "without limit",
            running,
        )
        if limit > 0:
            self._give_up_at = time.monotonic() + limit
        self.stop()


def settings_banner(settings: WorkerSettings, job_types: list[str]) -> str:
    """The start banner: every setting in force, and the job types this worker runs."""
    values = ", ".join(f"{name}={value}" for name, value in settings.as_dict().items())
    return f"worker starting (pid {os.getpid()}): {values}; job types: {', '.join(job_types) or 'none'}"
