"""The job-type registry (``@handler("type")``) and the context a handler runs with.

Applications register their own types in an importable module and name it in
``JOB_HANDLER_MODULES``; :func:`load_handler_modules` imports those (and the built-in demo
handlers) at start, in the web process too, so ``/api/config/`` and the create form list
exactly the types a worker will run.

A handler is ``fn(context) -> result``: it reads ``context.payload``, calls
``context.renew()`` while it works longer than a lease, reports ``context.progress(...)``,
and returns a JSON-serialisable result. Raising fails the attempt (retried with backoff while
attempts remain). Delivery is at least once: a handler may run again after a crash, so its
external side effects must be idempotent.
"""

from __future__ import annotations

import importlib
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from flask import current_app, has_app_context
from sqlalchemy import Connection
from sqlalchemy import exc as sa_exc

from ..config.rules import job_type_problem, queue_problem
from ..mount import EXTENSION
from ..store import lifecycle
from ..store.records import JobRecord
from .failures import check_report, first_line, is_connection_error
from .progress import Flusher

log = logging.getLogger(__name__)
T = TypeVar("T")

# A write that met a connection error is tried again at once, then after 0.5 s, 1 s, 2 s ...
# up to 10 s (the worker's outage backoff, ``threads.Backoff``), while the lease lasts.
RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 10.0

Handler = Callable[["JobContext"], Any]  # called with the job's context; returns a JSON-able result

_registry: dict[str, Handler] = {}
_demo: dict[str, Handler] = {}  # the built-in demo handlers, shown only where enabled

BUILTIN_MODULES = ("dashboard.runtime.demo",)


@dataclass(frozen=True, slots=True)
class TypeDefaults:
    """What ``@handler(...)`` declared for a type: the defaults of an enqueue that names none
    (``None``: the queue's own default), and the per-attempt deadline ``timeout`` (seconds)."""

    queue: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    timeout: float | None = None


_defaults: dict[str, TypeDefaults] = {}


def handler(
    job_type: str,
    *,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    timeout: float | None = None,
    demo: bool = False,
) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler of ``job_type`` (the last registration wins).

    ``queue``, ``priority`` and ``max_attempts`` are the type's defaults for an enqueue that
    does not name them (``dashboard.jobs.enqueue``); ``timeout`` (seconds, > 0) is a deadline
    per attempt: the worker fails an attempt still running past it (:func:`defaults_of`).
    Each is checked here, so a bad declaration fails at import with the argument named
    (``ValueError`` naming ``queue`` for a name outside ``limits.QUEUE_NAME_PATTERN``).

    ``demo=True`` (the built-in ``demo.*`` types only): the type exists only in an app whose
    ``JOB_DEMO_HANDLERS`` is on (:func:`demo_enabled`); elsewhere it is not registered, as far
    as :func:`get_handler` and :func:`registered_types` tell.
    """
    if not isinstance(job_type, str):
        raise TypeError(f"job_type must be a string, got {type(job_type).__name__}")
    if problem := job_type_problem(job_type):
        raise ValueError(f"a job type {problem}")
    if queue is not None and (problem := queue_problem(queue)):
        raise ValueError(f"queue {problem}")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise TypeError(f"timeout must be a number of seconds, got {type(timeout).__name__}")
        if not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    declared = TypeDefaults(queue, priority, max_attempts, None if timeout is None else float(timeout))

    def register(fn: Handler) -> Handler:
        _registry[job_type] = fn
        _defaults[job_type] = declared
        if demo:
            _demo[job_type] = fn
        return fn

    return register


def defaults_of(job_type: str) -> TypeDefaults:
    """What ``@handler`` declared for ``job_type`` (all ``None`` for a type without a handler)."""
    return declared_defaults(job_type) if get_handler(job_type) is not None else NO_DEFAULTS


def declared_defaults(job_type: str) -> TypeDefaults:
    """:func:`defaults_of` for a caller that already holds the type's handler (the runner)."""
    return _defaults.get(job_type, NO_DEFAULTS)


NO_DEFAULTS = TypeDefaults()


def demo_enabled() -> bool:
    """``JOB_DEMO_HANDLERS`` of the current app (on outside an app context, as in development)."""
    state = current_app.extensions.get(EXTENSION) if has_app_context() else None
    return state is None or state.settings.worker.demo_handlers


def _visible(job_type: str, fn: Handler) -> bool:
    return _demo.get(job_type) is not fn or demo_enabled()


def get_handler(job_type: str) -> Handler | None:
    fn = _registry.get(job_type)
    return fn if fn is not None and _visible(job_type, fn) else None


def handler_queue(job_type: str) -> str | None:
    """The default queue ``@handler(job_type, queue=...)`` named, or ``None``."""
    return defaults_of(job_type).queue


def registered_types() -> list[str]:
    """Every registered job type, sorted (the demo types only where enabled)."""
    return sorted(job_type for job_type, fn in _registry.items() if _visible(job_type, fn))


def load_handler_modules(modules: Iterable[str] = ()) -> None:
    """Import the built-in demo handlers and the application's handler modules."""
    for name in (*BUILTIN_MODULES, *modules):
        importlib.import_module(name)


class WorkerConnection(Protocol):
    """The worker thread's own connection, as a context writes on it (``ThreadRuntime``): the
    one it holds, and a way to give up a broken one so that the next use connects again."""

    @property
    def connection(self) -> Connection: ...

    def drop_connection(self, broken: Connection | None = None) -> None: ...


class LeaseUnreachable(Exception):
    """A context's write found the database unreachable until the attempt's lease ran out."""


class JobContext:
    """What a handler knows about its attempt, and its two ways to talk back.

    ``renew()`` and ``progress()`` are guarded like every worker-side transition (this job,
    running, locked by this worker, this attempt). Once a guarded write finds the attempt no
    longer ours (the lease expired and a rescue requeued the job, maybe another worker runs it
    now), :attr:`lost` turns true for good and both return ``False`` without touching the
    database: the handler should stop, since whatever it returns will be discarded.

    Neither costs a round trip every time. ``progress()`` keeps the latest report pending
    (``runtime/progress.py``): the attempt's settle statement writes it before the terminal
    event, or the worker's ``flusher`` writes it after ``progress_flush_ms`` if the handler
    still runs (without a flusher, the next renewal or the settle does); so
    its return value is the last known ownership, not the answer of a write. ``renew()``
    with more than half of the lease left sends nothing and returns ``True``.

    Their writes go on the worker thread's connection (``thread``; without one, on a pooled
    connection, which needs an application context). A write that meets a connection error (a
    reset, a failover, a dead connection found by the TCP timeouts) connects again and is
    retried, at once and then with a capped backoff, while the lease lasts: the write is fenced,
    so repeating it is safe (a report whose first write committed but whose answer was lost
    appears twice on the timeline). If the lease runs out first, ``renew()`` returns ``False`` (the
    attempt must be presumed lost; the rescuer takes it) and a report stays pending. So no
    connection error of the worker's reaches the handler. Any other database error of these
    writes (a refusal, which the worker's own statements should never meet) does, and is
    remembered (:meth:`raised_by_worker`): if it ends the handler, the worker does not count it
    as the handler's failure.
    """

    def __init__(
        self,
        job: JobRecord,
        *,
        worker_id: str,
        lease_seconds: float,
        stopping: threading.Event | None = None,
        thread: WorkerConnection | None = None,
        progress_flush_ms: float = 250.0,
        flusher: Flusher | None = None,
    ) -> None:
        self.job = job
        self._flusher = flusher  # the worker's timer for reports of handlers still running
        self.started_at = lifecycle.utcnow()  # the attempt's start here: its outcome's run_ms
        self._thread = thread  # whose connection the writes use (None: a pooled one each time)
        self.worker_id = worker_id
        self.lease_seconds = lease_seconds
        self.locked_until: datetime | None = job.locked_until
        self._stopping = stopping or threading.Event()
        self._lost = False
        self._flush_seconds = progress_flush_ms / 1000
        self._lock = threading.Lock()  # the pending report, between handler, flusher and settle
        self._writing = threading.Lock()  # held while a report is written (never with _lock held)
        self._pending: tuple[datetime, str, dict[str, Any]] | None = None
        self._settled: list[dict[str, Any]] | None = None
        self._scheduled = False  # handed to the flusher at least once: the settle takes it back
        self._worker_error: BaseException | None = None  # a refusal of one of these writes
        self.parent_results: dict[str, Any] = {}  # parent id -> its result (workflows), read at start

    @property
    def job_id(self) -> uuid.UUID:
        return self.job.id

    @property
    def job_type(self) -> str:
        return self.job.type

    @property
    def attempt(self) -> int:
        return self.job.attempts

    @property
    def max_attempts(self) -> int:  # with the snoozes so far: the attempt number of the last allowed
        return self.job.max_attempts

    @property
    def snoozes(self) -> int:  # the job's attempts that snoozed (Snooze), not counted
        return self.job.snoozes

    @property
    def payload(self) -> Any:
        return self.job.payload

    @property
    def lost(self) -> bool:
        """True once a guarded call found that this worker no longer owns the attempt."""
        return self._lost

    def mark_lost(self) -> None:
        """The attempt is no longer this worker's (its deadline passed and it was failed)."""
        self._lost = True

    @property
    def stopping(self) -> bool:
        """True once the worker was asked to shut down; the handler may still finish."""
        return self._stopping.is_set()

    @property
    def needs_app(self) -> bool:
        """Whether a write needs an application context. Always, since a write may have to
        connect again (the flusher writes in the worker's application context)."""
        return True

    def raised_by_worker(self, error: BaseException) -> bool:
        """Whether ``error`` is a database error that one of this context's own writes raised
        (not the handler's own database use)."""
        return error is self._worker_error

    def lease_left(self) -> float:
        """Seconds until the lease ends, by the worker's clock (0 when unknown)."""
        if self.locked_until is None:
            return 0.0
        return (self.locked_until - lifecycle.utcnow()).total_seconds()

    def renew(self) -> bool:
        """Extend the lease by ``lease_seconds`` from when the renewal takes effect; ``False``
        if ownership is lost, or if the database stayed unreachable until the lease ran out.

        Not sent while more than half of the lease is left (returns ``True``, the last known
        ownership). A pending progress report is written first, so the timeline stays in order.
        Connection errors are retried while the lease lasts (see the class).
        """
        if self._lost:
            return False
        if self.locked_until is not None and self.lease_left() > self.lease_seconds / 2:
            return True
        try:
            self._flush(retry=True)
            if self.lost:  # the flush may have found the attempt lost
                return False
            job, lease = self.job, self.lease_seconds
            locked_until = self._write(
                "renew the lease",
                lambda conn: lifecycle.renew_lease(
                    job.id, self.worker_id, job.attempts, lease_seconds=lease, conn=conn
                ),
                retry=True,
            )
        except LeaseUnreachable:
            return False
        if locked_until is None:
            self._lost = True
            return False
        self.locked_until = locked_until
        return True

    def progress(
        self, percent: float | None = None, message: str = "", data: dict[str, Any] | None = None
    ) -> bool:
        """Report progress (``percent`` 0-100 goes into the event's data).

        The report replaces any still pending and is written with the attempt's settle, or by
        the flusher if the handler runs on (see the class). Returns the last known ownership:
        ``False`` once a guarded write found the attempt lost. A ``message`` that is not text
        or ``data`` that is not a JSON object raises ``TypeError``/``ValueError`` here.
        """
        if percent is not None and (
            isinstance(percent, bool)
            or not isinstance(percent, int | float)
            or not math.isfinite(percent)
            or not 0 <= percent <= 100
        ):
            raise ValueError(f"percent must be a number from 0 to 100, got {percent!r}")
        check_report(message, data)  # refused here, in the handler's own call, not by the database later
        if self._lost:
            return False
        event_data = dict(data or {})
        if percent is not None:
            event_data["percent"] = percent
        with self._lock:
            schedule = self._pending is None and self._settled is None and self._flusher is not None
            if self._settled is None:
                self._pending = (lifecycle.utcnow(), message, event_data)
        if schedule and self._flusher is not None:
            self._scheduled = True
            self._flusher.schedule(self, self._flush_seconds)
        return not self._lost

    def flush(self) -> bool:
        """Write the pending report now (fenced ``record_progress``); nothing once settling.

        One try, for the flusher, which must not wait on one attempt: ``False`` (nothing written,
        try again later) while the handler's own ``renew()`` is writing; on a connection error
        the broken connection is dropped, the report stays pending (unless a newer one replaced
        it) and the error propagates. ``True`` otherwise.
        """
        return self._flush(retry=False, wait=False)

    def _flush(self, *, retry: bool, wait: bool = True) -> bool:
        if not self._writing.acquire(blocking=wait):
            return False
        try:
            with self._lock:
                pending, self._pending = self._pending, None
                if pending is None or self._settled is not None or self._lost:
                    return True
            at, message, data = pending
            try:
                event_id = self._write(
                    "write the progress",
                    lambda conn: lifecycle.record_progress(
                        self.job.id,
                        self.worker_id,
                        self.job.attempts,
                        message=message,
                        data=data,
                        now=at,
                        conn=conn,
                    ),
                    retry=retry,
                )
            except BaseException:
                with self._lock:
                    if self._pending is None and self._settled is None:
                        self._pending = pending
                raise
            if event_id is None:
                self._lost = True
            return True
        finally:
            self._writing.release()

    def _write(self, what: str, call: Callable[[Connection | None], T], *, retry: bool) -> T:
        """``call(connection)`` on the worker's connection; after a connection error, drop the
        connection and (``retry``) try again on a new one while the lease lasts, at once and
        then backing off. Raises :class:`LeaseUnreachable` once the lease is over, and any other
        error as it came (a refusal is remembered for :meth:`raised_by_worker`)."""
        tries = 0
        while True:
            conn: Connection | None = None
            try:
                conn = self._thread.connection if self._thread is not None else None
                return call(conn)
            except sa_exc.SQLAlchemyError as error:
                if not is_connection_error(error):
                    self._worker_error = error
                    raise
                if self._thread is not None and conn is not None:
                    self._thread.drop_connection(conn)
                if not retry:
                    raise
                tries += 1
                left = self.lease_left()
                what_job = f"job {self.job.id} attempt {self.job.attempts}"
                if left <= 0:
                    log.warning(
                        "%s: cannot %s of %s (%s) and its lease is over; leaving it to the rescuer",
                        self.worker_id,
                        what,
                        what_job,
                        first_line(error),
                    )
                    raise LeaseUnreachable(what) from error
                backoff = RETRY_BASE_SECONDS * 2 ** min(tries - 2, 32) if tries > 1 else 0.0
                delay = min(backoff, RETRY_MAX_SECONDS, left)
                log.warning(
                    "%s: cannot %s of %s (%s); connecting again, retrying in %gs",
                    self.worker_id,
                    what,
                    what_job,
                    first_line(error),
                    delay,
                )
                time.sleep(delay)

    def settle_progress(self) -> list[dict[str, Any]]:
        """The pending reports for the attempt's settle statement (``progress=``), taken once:
        from then on the flusher leaves this context alone (and forgets it at once, so the
        settled attempts of fast handlers never wake it). Called when the handler is done; a
        report the flusher is writing right now is waited for, so it precedes the settle."""
        with self._writing, self._lock:
            if self._settled is not None:
                return self._settled
            pending, self._pending = self._pending, None
            self._settled = (
                [] if pending is None else [lifecycle.progress_report(pending[1], pending[2], now=pending[0])]
            )
        if self._scheduled and self._flusher is not None:
            self._flusher.cancel(self)
        return self._settled
