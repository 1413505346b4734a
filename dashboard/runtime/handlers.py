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
import math
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from flask import current_app, has_app_context
from sqlalchemy import Connection

from ..limits import TYPE_MAX_LENGTH, type_problem
from ..store import service
from ..store.records import JobRecord
from .progress import flusher

Handler = Callable[["JobContext"], Any]  # called with the job's context; returns a JSON-able result

_registry: dict[str, Handler] = {}
_demo: dict[str, Handler] = {}  # the built-in demo handlers, shown only where enabled

BUILTIN_MODULES = ("dashboard.runtime.demo",)
DEMO_SWITCH = "jobqueue.demo_handlers"  # app.extensions key: JOB_DEMO_HANDLERS of that app


def handler(job_type: str, *, demo: bool = False) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler of ``job_type`` (the last registration wins).

    ``demo=True`` (the built-in ``demo.*`` types only): the type exists only in an app whose
    ``JOB_DEMO_HANDLERS`` is on (:func:`demo_enabled`); elsewhere it is not registered, as far
    as :func:`get_handler` and :func:`registered_types` tell.
    """
    if not job_type or len(job_type) > TYPE_MAX_LENGTH:
        raise ValueError(f"a job type is 1 to {TYPE_MAX_LENGTH} characters")
    if problem := type_problem(job_type):
        raise ValueError(f"a job type {problem}")

    def register(fn: Handler) -> Handler:
        _registry[job_type] = fn
        if demo:
            _demo[job_type] = fn
        return fn

    return register


def demo_enabled() -> bool:
    """``JOB_DEMO_HANDLERS`` of the current app (on outside an app context, as in development)."""
    return not has_app_context() or bool(current_app.extensions.get(DEMO_SWITCH, True))


def _visible(job_type: str, fn: Handler) -> bool:
    return _demo.get(job_type) is not fn or demo_enabled()


def get_handler(job_type: str) -> Handler | None:
    fn = _registry.get(job_type)
    return fn if fn is not None and _visible(job_type, fn) else None


def registered_types() -> list[str]:
    """Every registered job type, sorted (the demo types only where enabled)."""
    return sorted(job_type for job_type, fn in _registry.items() if _visible(job_type, fn))


def load_handler_modules(modules: Iterable[str] = ()) -> None:
    """Import the built-in demo handlers and the application's handler modules."""
    for name in (*BUILTIN_MODULES, *modules):
        importlib.import_module(name)


class JobContext:
    """What a handler knows about its attempt, and its two ways to talk back.

    ``renew()`` and ``progress()`` are guarded like every worker-side transition (this job,
    running, locked by this worker, this attempt). Once a guarded write finds the attempt no
    longer ours (the lease expired and cleanup requeued the job, maybe another worker runs it
    now), :attr:`lost` turns true for good and both return ``False`` without touching the
    database: the handler should stop, since whatever it returns will be discarded.

    Neither costs a round trip every time. ``progress()`` keeps the latest report pending
    (``runtime/progress.py``): the attempt's settle statement writes it before the terminal
    event, or the flusher writes it after ``progress_flush_ms`` if the handler still runs; so
    its return value is the last known ownership, not the answer of a write. ``renew()``
    with more than half of the lease left sends nothing and returns ``True``.

    They need the worker thread's application context; a database error propagates to the
    handler like any other exception.
    """

    def __init__(
        self,
        job: JobRecord,
        *,
        worker_id: str,
        lease_seconds: float,
        stopping: threading.Event | None = None,
        conn: Connection | None = None,
        progress_flush_ms: float = 250.0,
    ) -> None:
        self.job = job
        self.started_at = service.utcnow()  # the attempt's start here: its outcome's run_ms
        self._conn = conn  # the worker thread's connection (connection.connect()), if it has one
        self.worker_id = worker_id
        self.lease_seconds = lease_seconds
        self.locked_until: datetime | None = job.locked_until
        self._stopping = stopping or threading.Event()
        self._lost = False
        self._flush_seconds = progress_flush_ms / 1000
        self._lock = threading.Lock()  # the pending report, between handler, flusher and settle
        self._pending: tuple[datetime, str, dict[str, Any]] | None = None
        self._settled: list[dict[str, Any]] | None = None
        self._scheduled = False  # handed to the flusher at least once: the settle takes it back

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
    def max_attempts(self) -> int:
        return self.job.max_attempts

    @property
    def payload(self) -> Any:
        return self.job.payload

    @property
    def lost(self) -> bool:
        """True once a guarded call found that this worker no longer owns the attempt."""
        return self._lost

    @property
    def stopping(self) -> bool:
        """True once the worker was asked to shut down; the handler may still finish."""
        return self._stopping.is_set()

    @property
    def needs_app(self) -> bool:
        """Whether a write needs an application context (no connection of its own)."""
        return self._conn is None

    def renew(self) -> bool:
        """Extend the lease by ``lease_seconds`` from now; ``False`` if ownership is lost.

        Not sent while more than half of the lease is left (returns ``True``, the last known
        ownership). A pending progress report is written first, so the timeline stays in order.
        """
        if self._lost:
            return False
        if self.locked_until is not None:
            left = (self.locked_until - service.utcnow()).total_seconds()
            if left > self.lease_seconds / 2:
                return True
        self.flush()
        if self._lost:
            return False
        locked_until = service.renew_lease(
            self.job.id, self.worker_id, self.job.attempts, lease_seconds=self.lease_seconds, conn=self._conn
        )
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
        ``False`` once a guarded write found the attempt lost.
        """
        if percent is not None and (
            isinstance(percent, bool)
            or not isinstance(percent, int | float)
            or not math.isfinite(percent)
            or not 0 <= percent <= 100
        ):
            raise ValueError(f"percent must be a number from 0 to 100, got {percent!r}")
        if self._lost:
            return False
        event_data = dict(data or {})
        if percent is not None:
            event_data["percent"] = percent
        with self._lock:
            schedule = self._pending is None and self._settled is None
            if self._settled is None:
                self._pending = (service.utcnow(), message, event_data)
        if schedule:
            self._scheduled = True
            flusher.schedule(self, self._flush_seconds)
        return not self._lost

    def flush(self) -> None:
        """Write the pending report now (fenced ``record_progress``); nothing once settling.

        On an error the report stays pending (unless a newer one replaced it) and the error
        propagates.
        """
        with self._lock:
            pending, self._pending = self._pending, None
            if pending is None or self._settled is not None or self._lost:
                return
            at, message, data = pending
            try:
                event_id = service.record_progress(
                    self.job.id,
                    self.worker_id,
                    self.job.attempts,
                    message=message,
                    data=data,
                    now=at,
                    conn=self._conn,
                )
            except BaseException:
                self._pending = pending
                raise
            if event_id is None:
                self._lost = True

    def settle_progress(self) -> list[dict[str, Any]]:
        """The pending reports for the attempt's settle statement (``progress=``), taken once:
        from then on the flusher leaves this context alone (and forgets it at once, so the
        settled attempts of fast handlers never wake it). Called when the handler is done."""
        with self._lock:
            if self._settled is not None:
                return self._settled
            pending, self._pending = self._pending, None
            self._settled = (
                [] if pending is None else [service.progress_report(pending[1], pending[2], now=pending[0])]
            )
        if self._scheduled:
            flusher.cancel(self)
        return self._settled
