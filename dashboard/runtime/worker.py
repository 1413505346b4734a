"""The worker process: its claiming threads, its services, signals and shutdown.

The **work** is the threads that claim and run jobs:

- one-job mode (``batch_size`` 1): one :class:`~.one_job.OneJobLoop` per thread;
- batch mode: :class:`~.dispatcher.Executor` threads fed by a :class:`~.dispatcher.Dispatcher`,
  their successes recorded by a :class:`~.completers.BatchCompleter`.

The **services** are the process's other parts, one list (:attr:`Worker.services`), each a
:class:`Service` the worker starts before the work and stops, in reverse order, after it: the
progress flusher, the metrics server (``JOB_WORKER_METRICS_PORT``), the LISTEN connection
that rings the doorbell, the rescuer (expired leases), the scheduler (due schedules, unless
``schedules`` is off), the pruner (``JOB_RETENTION_*``) and the heartbeat (the ``jobs_worker``
row). The listener, the rescuer, the scheduler and the pruner end with the claims: they watch
the worker's stop signal. The rescuer, the scheduler and the pruner are the process-wide
duties: a supervisor's children (``--processes N``, :mod:`.supervisor`) but the first run
without them.

The first SIGINT/SIGTERM stops claiming and lets running handlers finish, and any job already
claimed with a success (exit 0), for at most ``shutdown_timeout_seconds``
(``JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS``; 0: no limit): then the attempts still running are
handed back, requeued at once (:meth:`Worker.hand_back`), and the process exits 0. A second
signal exits at once, leaving unfinished attempts to the rescuer of another worker.
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
from typing import Any, NamedTuple, Protocol

from flask import Flask
from sqlalchemy import exc as sa_exc

from ..config import OpsSettings, WorkerSettings, settings_of
from ..database import tcp_connect_args
from ..ops import pooling
from ..ops.worker_metrics import MetricsServer
from ..store import lifecycle
from ..store.lifecycle.claim_form import ClaimForms
from .completers import BatchCompleter, InlineCompleter
from .dispatcher import Dispatcher, Executor
from .failures import first_line
from .handlers import Handler, JobContext, get_handler
from .heartbeat import Heartbeat
from .one_job import OneJobLoop
from .progress import Flusher
from .pruner import Pruner
from .rescuer import Rescuer
from .runner import Runner
from .scheduler import Scheduler
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


class Service(Protocol):
    """A part of the worker process beside the claiming threads, started and stopped by
    :class:`Worker` in one place.

    ``start()`` starts it (usually a daemon thread of its own) and returns; ``stop()`` ends it,
    waiting a bounded time at most (a service with a last thing to do, the heartbeat marking
    its row stopped, does it there). A service that must stop with the claims watches the
    worker's stop signal itself.
    """

    name: str

    def start(self) -> None: ...

    def stop(self) -> None: ...


class Worker:
    """A worker process's threads, its services and its shutdown."""

    def __init__(
        self,
        app: Flask,
        settings: WorkerSettings,
        *,
        ops: OpsSettings | None = None,
        lookup: Callable[[str], Handler | None] = get_handler,
        reconnect_base_seconds: float = RECONNECT_BASE_SECONDS,
        reconnect_max_seconds: float = RECONNECT_MAX_SECONDS,
        duties: bool = True,
        details: dict[str, Any] | None = None,
    ) -> None:
        """``settings``: the worker's (``flask worker`` options applied); ``ops``: the
        operations settings (the app's unless given: metrics port, retention, pooler).
        ``duties``: whether this process runs the process-wide duties, the rescuer, the
        scheduler (if ``settings.schedules``) and the pruner; off in the children of a
        supervisor but its first (``supervisor.Child.duties``). ``details``: what the
        heartbeat adds about the process (a supervisor's child: which one)."""
        self.app = app
        self.settings = settings
        self.ops = ops or settings_of(app).ops
        self.stopping = threading.Event()
        self.doorbell = Doorbell()
        self.flusher = Flusher()
        self.claim_forms = ClaimForms()  # which form the claims take: one answer for all threads

        def runtime(n: int, *, generic_plans: bool = False) -> ThreadRuntime:
            backoff = Backoff(reconnect_base_seconds, reconnect_max_seconds)
            worker_id = make_worker_id(n)
            return ThreadRuntime(
                app,
                settings,
                worker_id,
                self.stopping,
                reconnect=backoff,
                generic_plans=generic_plans,
                listening=self.listening,
                claim_forms=self.claim_forms,
            )

        # The work. Thread numbers: thread-0 the periodic services (the rescuer and the scheduler,
        # each with its own id's random part), thread-1.. the loops or executors;
        # in batch mode two more claim for the executors and record their successes.
        threads = range(1, settings.threads + 1)
        self.dispatcher: Dispatcher | None = None
        self.completer: BatchCompleter | None = None
        self.loops: list[OneJobLoop] | list[Executor]
        if settings.batch_size <= 1:
            generic = pooling.session_settings_ok(app)  # no session SET through a pooler
            self.loops = [
                OneJobLoop(
                    runtime(n, generic_plans=generic),
                    lookup=lookup,
                    doorbell=self.doorbell,
                    flusher=self.flusher,
                )
                for n in threads
            ]
        else:
            dispatcher = Dispatcher(
                runtime(settings.threads + 1), executors=len(threads), doorbell=self.doorbell
            )
            completer_runner = Runner(
                runtime(settings.threads + 2), InlineCompleter(), lookup=lookup, flusher=self.flusher
            )
            completer = BatchCompleter(completer_runner, executors=len(threads), lanes=dispatcher.wants)
            self.loops = [
                Executor(
                    Runner(runtime(n), completer, lookup=lookup, flusher=self.flusher),
                    dispatcher.ready,
                    dispatcher.wants,
                    completer.executor_done,
                )
                for n in threads
            ]
            self.dispatcher, self.completer = dispatcher, completer
        self.runners = [loop.runner for loop in self.loops]  # what hand_back looks at

        # The services, in start order.
        self.rescuer = Rescuer(runtime(0))
        self.listener = self.make_listener()
        self.heartbeat = Heartbeat(app, settings, details=details)
        self.services: list[Service] = [self.flusher]
        if self.ops.worker_metrics_port:
            self.services.append(
                MetricsServer(
                    self.ops.worker_metrics_port,
                    self.ops.worker_metrics_host,
                    listening=self.listening,
                    threads=settings.threads,
                )
            )
        if self.listener is not None:
            self.services.append(self.listener)
        self.scheduler = Scheduler(runtime(0)) if settings.schedules and duties else None
        if duties:
            self.services.append(self.rescuer)
        if self.scheduler is not None:
            self.services.append(self.scheduler)
        if duties:
            self.services.append(Pruner.from_settings(app, self.ops, self.stopping))
        self.services.append(self.heartbeat)

        self.threads: list[threading.Thread] = []
        self._started: list[Service] = []  # the services started, in order
        self._forced_by: int | None = None
        self._give_up_at: float | None = None  # monotonic; set by the first signal

    def make_listener(self) -> Listener | None:
        """The LISTEN service (not started), or ``None`` to poll: ``listen`` off, or behind a
        pooler without ``DATABASE_DIRECT_URL``. Its connection has the pool's TCP options
        (keepalives, ``tcp_user_timeout``)."""
        url = pooling.listen_url(self.app) if self.settings.listen else None  # direct URL behind a pooler
        if url is None:
            return None
        return Listener(
            url,
            self.doorbell,
            self.stopping,
            connect_args=tcp_connect_args(self.ops),
            queues=self.settings.queues,
        )

    def listening(self) -> bool:
        """Whether the LISTEN connection is up (the metrics' scrape-time gauge)."""
        return self.listener is not None and self.listener.connected.is_set()

    def start(self) -> None:
        """Start the services, then the work (daemon threads: after a second signal the
        process exits without waiting for them)."""
        for part in self.services:
            part.start()
            self._started.append(part)
        targets: list[Callable[[], None]] = [loop.run for loop in self.loops]
        if self.dispatcher is not None and self.completer is not None:
            targets += [self.dispatcher.run, self.completer.run]
        # Python thread names follow the worker ids: thread-1.. the loops (then the dispatcher
        # and the completer); batch mode's lanes are numbered after them.
        self.threads = [
            threading.Thread(target=target, name=f"thread-{n}", daemon=True)
            for n, target in enumerate(targets, start=1)
        ]
        for thread in self.threads:
            thread.start()
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
        self.doorbell.ring_all()  # idle loops stop waiting at once

    def stop_services(self) -> None:
        """Stop every service started, the last started first (once: a second call, or one
        before :meth:`start`, does nothing)."""
        started, self._started = self._started, []
        if not started:
            return
        self.stopping.set()
        for part in reversed(started):
            try:
                part.stop()
            except Exception:  # one service's failure must not keep the others running
                log.exception("could not stop the %s", part.name)

    def alive(self) -> bool:
        """Whether a claiming thread still runs."""
        return any(thread.is_alive() for thread in self.threads)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the work to end, then stop the services; ``True`` if it all ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self.threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if self.alive():
            return False
        self.stop_services()
        return True

    def run_until_signalled(self) -> int:
        """Run until SIGINT/SIGTERM; return the process exit status.

        First signal: stop claiming, let running handlers finish, return 0; once
        ``shutdown_timeout_seconds`` have passed, hand back what still runs and return 0. Second signal:
        return ``128 + signal`` at once (130 for SIGINT, 143 for SIGTERM); the caller exits
        and the daemon threads die with the process, their attempts left to the rescuers.
        Must run in the main thread (signal handlers).
        """
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start()
            while self.alive():
                if self._forced_by is not None:
                    log.warning("second signal: exiting now, unfinished jobs are left to the rescuers")
                    return 128 + self._forced_by
                if self._give_up_at is not None and time.monotonic() >= self._give_up_at:
                    self.hand_back()
                    return 0
                time.sleep(0.05)
            log.info("worker stopped")
            return 0
        finally:
            self.stop_services()  # the heartbeat's row says stopped: a clean exit, or a forced one
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def hand_back(self) -> int:
        """The shutdown time is up: requeue every attempt still running here, at once.

        Each is recorded as a failed attempt with no backoff (``retry_scheduled``, or
        ``failed`` on its last attempt, exactly as a rescue would), fenced by owner and
        attempt and written with its event in one statement (``lifecycle.fail_job``): an attempt
        that finished or was rescued meanwhile changes nothing. A handler still running in
        this process is not interrupted; the process exits right after. In batch mode the jobs
        claimed for an executor that has not started them yet are handed back the same way.
        Returns how many attempts were handed back; one that cannot be recorded is left to
        the rescuers.
        """
        limit = self.settings.shutdown_timeout_seconds
        handed = 0
        # Waiting jobs first: one taken by a thread between the two reads is then seen running
        # (and handed back once; the second, fenced try changes nothing), never missed.
        ahead = self.dispatcher.ready.waiting() if self.dispatcher is not None else []
        now = lifecycle.utcnow()
        held = [Held(j.id, j.type, j.locked_by or "", j.attempts, now) for j in ahead]
        held += [Held(c.job_id, c.job_type, c.worker_id, c.attempt, c.started_at) for c in self._running()]
        with self.app.app_context():
            for ctx in held:
                error = (
                    f"WorkerStopped: the worker stopped ({limit:g} s after the signal, "
                    "JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS) before the handler finished; handed back"
                )
                try:
                    back = lifecycle.fail_job(
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
                        "%s: could not hand back job %s (%s); the rescuer will",
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
        return [runner.current for runner in self.runners if runner.current is not None]

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping.is_set():
            self._forced_by = signum
            return
        self.request_stop(f"{signal.Signals(signum).name} received")

    def request_stop(self, why: str) -> bool:
        """Stop as on a first signal: no new claims, running handlers finish within the
        shutdown timeout, then the rest is handed back. Idempotent: once the worker is stopping
        it changes nothing and returns ``False`` (a supervisor's child calls it when its
        supervisor is gone, which may be seen twice). Any thread may call it."""
        if self.stopping.is_set():
            return False
        running = sum(1 for t in self.threads if t.is_alive())
        limit = self.settings.shutdown_timeout_seconds
        if limit > 0:
            self._give_up_at = time.monotonic() + limit
        self.stop()  # before the line below: whoever reads it may rely on no new claims
        log.info(
            "%s: no new claims; waiting %s for running jobs (%d thread(s)) to finish",
            why,
            f"up to {limit:g}s" if limit > 0 else "without limit",
            running,
        )
        return True


def settings_banner(settings: WorkerSettings, job_types: list[str]) -> str:
    """The start banner: every setting in force, and the job types this worker runs."""
    values = ", ".join(f"{name}={value}" for name, value in settings.as_dict().items())
    return f"worker starting (pid {os.getpid()}): {values}; job types: {', '.join(job_types) or 'none'}"
