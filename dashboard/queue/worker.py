"""The worker: threads that clean expired leases, claim jobs, run handlers and settle them.

Each thread is a :class:`WorkerLoop` with its own worker id (``host:pid:thread-N:random``)
and its own application context. One :meth:`WorkerLoop.step`:

1. the **cleanup tick**: every ``cleanup_interval_seconds``, recover up to
   ``cleanup_batch_size`` expired leases (any worker's);
2. the **claim**: one short transaction (``FOR UPDATE SKIP LOCKED``) takes the next job;
3. the **run**: the handler executes outside any transaction, with a :class:`JobContext`;
4. the **settle**: ``complete_job`` or ``fail_job``, both fenced by ownership, so an attempt
   whose lease was recovered meanwhile changes nothing. Inside :meth:`WorkerLoop.run` a
   success also claims the thread's next job in the same statement
   (``service.complete_and_claim``), and the next step runs that job instead of claiming.

Nothing a job or the database does ends a thread: handler errors fail the attempt; database
errors are logged and the loop waits (capped exponential backoff) and tries again, on a fresh
connection thanks to ``pool_pre_ping``.

:class:`Worker` owns the threads and shutdown: the first SIGINT/SIGTERM stops claiming and lets
running handlers finish, and any job already claimed with a success (exit 0); a second one exits
at once, leaving unfinished attempts to lease recovery.

Claiming goes through ``service.claim_jobs(limit=...)`` and execution takes the owner from the
claimed row, so a batch mode (one claim for every free thread) can replace the per-thread claim
without touching the run and settle steps.
"""

from __future__ import annotations

import logging
import os
import queue
import secrets
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

from flask import Flask
from sqlalchemy import Connection
from sqlalchemy import exc as sa_exc

from ..config import WorkerSettings
from ..ops import pooling, worker_metrics  # issue 19: metrics, log ids, the pooler
from . import service
from .attempts import PROCESS, RunningAttempts
from .dispatch import Completer, Dispatcher
from .failures import (
    ResultRejected,
    UnknownJobType,
    UnreadablePayload,
    cap_traceback,
    check_result,
    describe,
    first_line,
    is_connection_error,
)
from .handlers import Handler, JobContext, get_handler
from .jsonb import UnreadableJson
from .records import CleanupResult, JobRecord
from .rescuer import Rescuer
from .wakeup import Doorbell, Listener

log = logging.getLogger(__name__)

T = TypeVar("T")

RECONNECT_BASE_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 10.0


def make_worker_id(thread_number: int, *, hostname: str | None = None, pid: int | None = None) -> str:
    """``hostname:pid:thread-N:shortrandom``: unique per thread and per process start."""
    host = hostname or socket.gethostname()
    return f"{host}:{pid or os.getpid()}:thread-{thread_number}:{secrets.token_hex(4)}"


class Backoff:
    """Capped exponential wait between attempts to reach the database again."""

    def __init__(self, base: float = RECONNECT_BASE_SECONDS, cap: float = RECONNECT_MAX_SECONDS) -> None:
        self.base, self.cap, self.failures = base, cap, 0

    def next(self) -> float:
        delay = min(self.base * 2 ** min(self.failures, 32), self.cap)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended, from the worker's side."""

    job_id: Any
    job_type: str
    attempt: int
    status: str  # "succeeded" | "queued" (retry scheduled) | "failed" | "lost" | "abandoned"
    error: str = ""
    seconds: float = 0.0


class WorkerLoop:
    """One worker thread: cleanup tick, claim, run, settle, and back to the start."""

    def __init__(
        self,
        app: Flask,
        settings: WorkerSettings,
        worker_id: str,
        stopping: threading.Event,
        *,
        lookup: Callable[[str], Handler | None] = get_handler,
        reconnect: Backoff | None = None,
        doorbell: Doorbell | None = None,
        generic_plans: bool = False,
        attempts: RunningAttempts | None = None,
    ) -> None:
        self.app = app
        self.attempts = attempts or PROCESS  # this process's running attempts (anti-capture)
        self.generic_plans = generic_plans  # one-job mode's threads: service.connect_worker
        self.doorbell = doorbell or Doorbell()
        self.inbox: queue.SimpleQueue[JobRecord | None] = queue.SimpleQueue()  # batch mode
        self.completer: Completer | None = None  # batch mode
        self.settings = settings
        self.worker_id = worker_id
        self.stopping = stopping
        self.lookup = lookup
        self.backoff = reconnect or Backoff()
        self._next_cleanup = 0.0  # monotonic time; 0 = clean up on the first step
        self._conn: Connection | None = None
        self._running = False  # inside run(): keep the connection from one step to the next
        self._chaining = False  # inside run(): a success also claims this loop's next job
        self._carried: JobRecord | None = None  # claimed with the last success, not yet run
        self.current: JobContext | None = None  # the attempt this thread runs or settles now

    @property
    def connection(self) -> Connection:
        """This thread's own autocommit connection: one round trip per transition."""
        if self._conn is None:
            self._conn = service.connect_worker() if self.generic_plans else service.connect()
        return self._conn

    def close(self) -> None:
        """Return the connection to the pool (the loop opens another if it is used again)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            service.release_worker(conn)

    def drop_connection(self) -> None:
        """Forget the connection after an error; the next call opens a fresh one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:  # a broken connection may fail to close; it is gone either way
                log.debug("%s: closing a broken connection failed", self.worker_id, exc_info=True)

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        """Loop until the worker stops; survive every error by waiting and trying again."""
        log.debug("%s: started", self.worker_id)
        with self.holding_connection():
            self._chaining = True
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
            self._chaining = False
        log.debug("%s: stopped", self.worker_id)

    def serve(self, idle: queue.SimpleQueue[WorkerLoop]) -> None:
        """Batch mode: run the jobs the dispatcher hands over until it sends ``None``."""
        log.debug("%s: started (batch mode)", self.worker_id)
        with self.holding_connection():
            while True:
                idle.put(self)
                job = self.inbox.get()
                if job is None:
                    break
                try:
                    self.execute(job)
                except Exception:  # execute() settles every handler outcome; this is the database
                    self.drop_connection()
                    log.exception("%s: could not settle job %s; lease recovery will", self.worker_id, job.id)
        if self.completer is not None:
            self.completer.executor_done()
        log.debug("%s: stopped", self.worker_id)

    @contextmanager
    def holding_connection(self) -> Iterator[None]:
        """A thread's whole life: an app context, and this loop's connection kept from one
        call to the next (closed at the end) instead of given back after every step."""
        self._running = True
        with self.app.app_context():
            try:
                yield
            finally:
                self._running = False
                self.close()

    def recover(self, error: Exception) -> None:
        """After an error: forget the (maybe broken) connection and wait, capped exponentially."""
        self.drop_connection()
        self._wait_after(error)

    def _wait_after(self, error: Exception) -> None:
        delay = self.backoff.next()
        if is_connection_error(error):
            log.warning(
                "%s: database unavailable (%s: %s); retrying in %gs",
                self.worker_id,
                type(error).__name__,
                first_line(error),
                delay,
            )
        else:
            log.exception("%s: unexpected error in the worker loop; retrying in %gs", self.worker_id, delay)
        self.stopping.wait(delay)

    def step(self) -> bool:
        """One pass: the cleanup tick if due, then claim and run at most one job.

        The job may already be claimed: inside :meth:`run`, recording a success claims the
        loop's next job in the same statement (``service.complete_and_claim``), and that job
        runs on the next pass, even once the worker is stopping, since it is already ours.
        Returns whether a job was claimed. Needs an application context.
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
            if not self._running:  # a single step from outside run(): give the connection back
                self.close()

    # -- the parts --------------------------------------------------------------------------

    def cleanup(self) -> CleanupResult:
        """Recover expired leases (the cleanup tick); schedules the next tick."""
        self._next_cleanup = time.monotonic() + self.settings.cleanup_interval_seconds
        result = service.cleanup_expired_jobs(
            self.worker_id,
            batch_size=self.settings.cleanup_batch_size,
            backoff_base_seconds=self.settings.backoff_base_seconds,
            backoff_max_seconds=self.settings.backoff_max_seconds,
            conn=self.connection,
        )
        worker_metrics.recovered(result)
        if result.count:
            log.info(
                "%s: cleanup recovered %d expired lease(s): %d requeued, %d failed",
                self.worker_id,
                result.count,
                len(result.requeued),
                len(result.failed),
            )
        else:
            log.debug("%s: cleanup found no expired lease", self.worker_id)
        return result

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
            self._log_claim(job)
        return jobs

    def _log_claim(self, job: JobRecord) -> None:
        log.debug(
            "%s: claimed job %s (%s) attempt %d/%d",
            self.worker_id,
            job.id,
            job.type,
            job.attempts,
            job.max_attempts,
        )

    def execute(self, job: JobRecord) -> Outcome:
        """Run the job's handler outside any transaction and settle the attempt.

        The attempt counts among the process's running attempts meanwhile (:mod:`.attempts`):
        once past its lease, this process's claims skip jobs whose lease expired.
        While it runs, :attr:`current` holds the attempt, so a worker whose shutdown time is
        up can hand it back (:meth:`Worker.hand_back`).
        """
        with worker_metrics.attempt(job, self.worker_id):  # issue 19: counters, busy gauge, log ids
            return self._attempt(job)

    def _attempt(self, job: JobRecord) -> Outcome:
        started = time.monotonic()
        ctx = JobContext(
            job,
            worker_id=job.locked_by or self.worker_id,
            lease_seconds=self.settings.lease_seconds,
            stopping=self.stopping,
            conn=self.connection,
        )
        self.current = ctx
        try:
            with self.attempts.running(ctx):
                return self._execute(ctx, job, started)
        finally:
            self.current = None

    def _execute(self, ctx: JobContext, job: JobRecord, started: float) -> Outcome:
        fn = self.lookup(job.type)
        if fn is None:
            error = UnknownJobType(f"job type {job.type!r}: no handler is registered in this worker")
            return self._fail(ctx, describe(error), {"exception_type": type(error).__name__}, started)
        if isinstance(job.payload, UnreadableJson):  # a handler must never see the stand-in
            error = UnreadablePayload("the payload is JSON nested too deeply to decode; no handler ran")
            return self._fail(ctx, describe(error), {"exception_type": type(error).__name__}, started)
        log.debug("%s: executing job %s (%s) attempt %d", ctx.worker_id, job.id, job.type, job.attempts)
        try:
            result = fn(ctx)
            check_result(result)
        except BaseException as error:  # a handler calling sys.exit() must not end the thread
            data = {
                "exception_type": type(error).__name__,
                "traceback": cap_traceback("".join(traceback.format_exception(error))),
            }
            return self._fail(ctx, describe(error), data, started)
        return self._complete(ctx, result, started)

    def _complete(self, ctx: JobContext, result: Any, started: float) -> Outcome:
        if self.completer is not None:  # batch mode: recorded with other successes in one statement
            self.completer.submit(ctx, result, started)
            return Outcome(ctx.job_id, ctx.job_type, ctx.attempt, "submitted", "", time.monotonic() - started)
        return self.complete_now(ctx, result, started)

    def complete_now(self, ctx: JobContext, result: Any, started: float) -> Outcome:
        """Record one success (fenced), retrying through an outage while the lease lasts.

        Inside :meth:`run` (and until the worker stops) the first try also claims this loop's
        next job, one round trip for both. A retry after an outage only completes: whether
        the first try's claim committed is unknown, and a job claimed but never run is
        left to lease recovery, like any claim whose answer was lost.
        """
        chain = self._chaining and not self.stopping.is_set()

        def call() -> object | None:
            nonlocal chain
            if chain:
                chain = False
                claim_started = time.monotonic()
                completed, self._carried = service.complete_and_claim(
                    ctx.job_id,
                    ctx.worker_id,
                    ctx.attempt,
                    result,
                    lease_seconds=self.settings.lease_seconds,
                    conn=self.connection,
                    avoid_expired=self.attempts.any_overdue(),
                )
                worker_metrics.claimed("complete_and_claim", claim_started)
                if self._carried is not None:
                    self._log_claim(self._carried)
                return completed or None
            return service.complete_job(ctx.job_id, ctx.worker_id, ctx.attempt, result, conn=self.connection)

        try:
            settled = self._settle(ctx, call)
        except sa_exc.SQLAlchemyError as error:  # refused, not unreachable: _settle retries those
            refusal = ResultRejected(f"the database refused the result: {first_line(error)}")
            return self._fail(ctx, describe(refusal), {"exception_type": type(refusal).__name__}, started)
        if settled is _ABANDONED:
            return self.finish(ctx, "abandoned", "", started)
        if settled is None:
            return self.finish(ctx, "lost", "", started)
        return self.finish(ctx, "succeeded", "", started)

    def _fail(self, ctx: JobContext, error: str, data: dict[str, Any], started: float) -> Outcome:
        settings = self.settings

        def call() -> JobRecord | None:
            return service.fail_job(
                ctx.job_id,
                ctx.worker_id,
                ctx.attempt,
                error,
                backoff_base_seconds=settings.backoff_base_seconds,
                backoff_max_seconds=settings.backoff_max_seconds,
                event_data=data,
                conn=self.connection,
            )

        settled = self._settle(ctx, call)
        if settled is _ABANDONED:
            return self.finish(ctx, "abandoned", error, started)
        if settled is None:
            return self.finish(ctx, "lost", error, started)
        return self.finish(ctx, settled.status, error, started, retry_at=settled)

    def _settle(self, ctx: JobContext, call: Callable[[], T]) -> T | object:
        """Record the attempt's end, retrying through a database outage while the lease lasts.

        The call is fenced by ownership, so repeating it is safe: if an earlier try committed
        and only the answer was lost, the repeat matches nothing and reports a lost attempt.
        Once the lease is over (or the worker is forced to stop) the attempt is left to lease
        recovery: :data:`_ABANDONED`.
        """
        backoff = Backoff(self.backoff.base, self.backoff.cap)
        while True:
            try:
                return call()
            except sa_exc.SQLAlchemyError as error:
                if not is_connection_error(error):
                    raise
                self.drop_connection()
                lease_left = (
                    (ctx.locked_until - service.utcnow()).total_seconds() if ctx.locked_until else 0.0
                )
                delay = backoff.next()
                if lease_left <= 0:
                    log.warning(
                        "%s: cannot record the end of job %s attempt %d (%s) and its lease is over; "
                        "leaving it to lease recovery",
                        ctx.worker_id,
                        ctx.job_id,
                        ctx.attempt,
                        first_line(error),
                    )
                    return _ABANDONED
                log.warning(
                    "%s: cannot record the end of job %s attempt %d (%s); retrying in %gs",
                    ctx.worker_id,
                    ctx.job_id,
                    ctx.attempt,
                    first_line(error),
                    min(delay, lease_left),
                )
                time.sleep(min(delay, lease_left))

    def finish(
        self, ctx: JobContext, status: str, error: str, started: float, retry_at: JobRecord | None = None
    ) -> Outcome:
        seconds = time.monotonic() - started
        worker_metrics.finished(ctx.job_type, status, seconds)
        what = f"job {ctx.job_id} ({ctx.job_type}) attempt {ctx.attempt}/{ctx.max_attempts}"
        if status == "succeeded":
            log.info("%s: %s succeeded in %.2fs", ctx.worker_id, what, seconds)
        elif status == "queued" and retry_at is not None:
            delay = (retry_at.available_at - retry_at.updated_at).total_seconds()
            log.info("%s: %s failed in %.2fs, retry in %gs: %s", ctx.worker_id, what, seconds, delay, error)
        elif status == "failed":
            log.info("%s: %s failed for good in %.2fs: %s", ctx.worker_id, what, seconds, error)
        elif status == "lost":
            log.warning(
                "%s: %s ended after %.2fs but the attempt is no longer ours "
                "(lease expired and recovered); nothing recorded",
                ctx.worker_id,
                what,
                seconds,
            )
        else:
            log.warning(
                "%s: %s abandoned after %.2fs; lease recovery will requeue it", ctx.worker_id, what, seconds
            )
        return Outcome(ctx.job_id, ctx.job_type, ctx.attempt, status, error, seconds)


_ABANDONED = object()


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

        def loop(n: int, *, generic_plans: bool = False) -> WorkerLoop:
            backoff = Backoff(reconnect_base_seconds, reconnect_max_seconds)
            return WorkerLoop(
                app,
                settings,
                make_worker_id(n),
                self.stopping,
                lookup=lookup,
                reconnect=backoff,
                doorbell=self.doorbell,
                generic_plans=generic_plans,
            )

        one_job = settings.batch_size <= 1
        one_job = one_job and pooling.session_settings_ok(app)  # no session SET through a pooler
        self.loops = [loop(n, generic_plans=one_job) for n in range(1, settings.threads + 1)]
        # thread-0 recovers expired leases on schedule; in batch mode two more threads claim
        # for the executors and record their successes.
        self.rescuer = Rescuer(loop(0), self.stopping)
        self.dispatcher = None
        self.completer = None
        if settings.batch_size > 1:
            self.dispatcher = Dispatcher(
                settings, loop(settings.threads + 1), self.loops, self.stopping, self.doorbell
            )
            self.completer = Completer(loop(settings.threads + 2), executors=len(self.loops))
            for executor in self.loops:
                executor.completer = self.completer
        self.listener: Listener | None = None
        self.threads: list[threading.Thread] = []
        self._forced_by: int | None = None
        self._give_up_at: float | None = None  # monotonic; set by the first signal

    def start(self) -> None:
        # Daemon threads: after a second signal the process exits without waiting for them.
        if self.dispatcher is None:
            targets = [(loop.run, ()) for loop in self.loops]
        else:
            targets = [(loop.serve, (self.dispatcher.idle,)) for loop in self.loops]
            targets.append((self.dispatcher.run, ()))
            targets.append((self.completer.run, ()))
        targets.append((self.rescuer.run, ()))
        self.threads = [
            threading.Thread(target=target, args=args, name=f"thread-{n}", daemon=True)
            for n, (target, args) in enumerate(targets, start=1)
        ]
        url = pooling.listen_url(self.app) if self.settings.listen else None  # direct URL behind a pooler
        if url is not None:
            self.listener = Listener(url, self.doorbell, self.stopping)
            threading.Thread(target=self.listener.run, name="listener", daemon=True).start()
        for thread in self.threads:
            thread.start()
        for loop in self.loops:
            log.info("started %s", loop.worker_id)
        if self.dispatcher is not None:
            log.info(
                "batch mode: %s claims up to %d jobs at once",
                self.dispatcher.housekeeper.worker_id,
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
        return not self.alive()

    def run_until_signalled(self) -> int:
        """Run until SIGINT/SIGTERM; return the process exit status.

        First signal: stop claiming, let running handlers finish, return 0. Second signal:
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
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def hand_back(self) -> int:
        """The shutdown time is up: requeue every attempt still running here, at once.

        Each is recorded as a failed attempt with no backoff (``retry_scheduled``, or
        ``failed`` on its last attempt, exactly as lease recovery would), fenced by owner and
        attempt and written with its event in one statement (``service.fail_job``): an attempt
        that finished or was recovered meanwhile changes nothing. A handler still running in
        this process is not interrupted; the process exits right after. Returns how many
        attempts were handed back; one that cannot be recorded is left to lease recovery.
        """
        limit = self.settings.shutdown_timeout_seconds
        handed = 0
        with self.app.app_context():
            for ctx in [loop.current for loop in self.loops if loop.current is not None]:
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
