"""The public Python API: enqueue jobs from application code, and declare the types it runs.

This is the one module of ``dashboard`` meant for application code; anything else under
``dashboard`` may change without notice::

    from dashboard.jobs import JobContext, Snooze, enqueue, enqueue_many, handler, schedule

    @handler("mail.send", queue="mail", max_attempts=5, timeout=30)
    def send(ctx: JobContext) -> dict:
        for chunk in parts(ctx.payload):
            if ctx.lost or ctx.stopping:  # the lease is gone, or the worker is shutting down
                return {"stopped": True}  # a lost attempt's result is discarded anyway
            deliver(chunk)
            ctx.renew()  # a handler that runs longer than the lease keeps it
        return {"sent": True}

    with db.session.begin():  # the host's transaction
        db.session.add(order)
        enqueue("mail.send", {"order": order.id}, connection=db.session)

**Transactional enqueue.** With ``connection`` (a SQLAlchemy ``Connection``, an ORM
``Session``, or Flask-SQLAlchemy's ``db.session``), the job and its ``created`` event are
written in that connection's open transaction: the job exists only if the caller commits,
and a rollback leaves nothing. Idle workers are woken by a ``NOTIFY``, which PostgreSQL
delivers at commit, so no worker sees the job before then. Without ``connection``, the job
commits on its own at once.

**Where it works.** Inside a Flask application context of an app that has the queue: a
request, ``flask shell``, a worker's handler, or a script's ``with app.app_context():`` around
an app built by ``dashboard.create_app()`` or one where :class:`dashboard.JobQueue` is set up.

**Bad arguments** raise ``TypeError`` (wrong kind) or ``ValueError`` (out of range), the
argument named, before anything is written; :func:`enqueue_many` names the item too. A
payload's problem names its place (``payload at items[3].when``); a value in it that is not
JSON raises :class:`PayloadNotJSON`, both a ``TypeError`` and a ``ValueError``.

**A handler and its context.** A handler is ``fn(ctx: JobContext) -> result``: ``ctx.payload``,
``ctx.job_id``, ``ctx.attempt``, ``ctx.parent_results`` (a job with ``depends_on``: each parent's
``result`` by its id as a string, read when the attempt starts); ``ctx.renew()`` extends the
lease, ``ctx.progress(percent, message)`` reports progress. ``ctx.lost`` turns true once the
worker learns the attempt is no longer its own (the lease ran out and the job was requeued, or
the attempt passed its ``timeout``): stop then, since the result will be refused.
``ctx.stopping`` turns true when the worker was asked to shut down: a handler may finish, or
stop at a safe point and raise so the attempt is retried. ``renew()`` and ``progress()``
return ``False`` once the attempt is lost. ``raise Snooze(seconds)`` puts the job back to wait
that long without spending an attempt (``ctx.snoozes`` counts them; ``JOB_MAX_SNOOZES`` caps
them).

**Tracing.** With OpenTelemetry set up (``dashboard/tracing.py``), an enqueue inside a span
records its ``traceparent``, which the job's attempts continue.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from flask import current_app, has_app_context
from sqlalchemy import Connection
from sqlalchemy.orm import Session, scoped_session

from .arguments import UNIQUE_DEFAULTS, PayloadNotJSON, _check_int, _check_queue, _check_type, _kind, _spec
from .arguments import unique_defaults as _unique_defaults
from .config.rules import (
    INT_MAX,
    PRIORITY_MAX,
    PRIORITY_MIN,
)
from .mount import EXTENSION as MOUNTED
from .runtime import handlers as _handlers
from .runtime.handlers import Handler, JobContext
from .runtime.schedules import schedule
from .runtime.snooze import Snooze
from .store.lifecycle import create as _store
from .store.records import CreateResult
from .tracing import traceparent as _traceparent

__all__ = [
    "EnqueuedJob",
    "JobContext",
    "PayloadNotJSON",
    "Snooze",
    "enqueue",
    "enqueue_many",
    "handler",
    "schedule",
]

SOURCE = "python"  # the door recorded in the created event
ARGUMENTS = (
    "type",
    "payload",
    "queue",
    "priority",
    "run_at",
    "delay",
    "max_attempts",
    "idempotency_key",
    "depends_on",
    "on_parent_failure",
    "workflow",
    "unique_key",
    "unique_for",
    "unique_while",
    "debounce",
)

Connectable = Connection | Session | scoped_session[Session]


@dataclasses.dataclass(frozen=True, slots=True)
class EnqueuedJob:
    """A job as :func:`enqueue` left it. ``created`` is ``False`` when a job with the same
    ``idempotency_key`` existed: that job is returned, whatever its status."""

    id: uuid.UUID
    type: str
    status: str
    queue: str
    priority: int
    available_at: datetime
    max_attempts: int
    idempotency_key: str | None
    created: bool
    depends_on: tuple[uuid.UUID, ...] = ()  # its parents (workflows)
    workflow: str | None = None
    waiting_on: int = 0  # parents it still waits for; 0 once released (or with none)
    unique_key: str | None = None  # the key it holds (or the job it was returned for holds)


def enqueue(
    type: str,
    payload: Any = None,
    *,
    queue: str | None = None,
    priority: int | None = None,
    run_at: datetime | None = None,
    delay: timedelta | float | None = None,
    max_attempts: int | None = None,
    idempotency_key: str | None = None,
    depends_on: Iterable[uuid.UUID | str | EnqueuedJob] | None = None,
    on_parent_failure: str | None = None,
    workflow: str | None = None,
    unique_key: str | None = None,
    unique_for: timedelta | float | None = None,
    unique_while: str | None = None,
    debounce: timedelta | float | None = None,
    connection: Connectable | None = None,
) -> EnqueuedJob:
    """Queue one job; returns it (:class:`EnqueuedJob`).

    ``payload``: any JSON value (``None``: ``{}``); a ``uuid.UUID`` in it is stored as its text,
    a tuple as a list, and any other value that is not JSON (a ``datetime``, a ``set``, an
    object) is refused, its place named (``payload at order.when``). ``run_at`` (a
    timezone-aware datetime in the years 1900 to 9998) or ``delay`` (seconds, or a
    ``timedelta``), not both: when it may run first (default now).
    ``queue``, ``priority`` (-32768..32767, higher first) and ``max_attempts`` default to the
    type's ``@handler(...)`` declaration, then to ``default``, 50 and 3. ``idempotency_key``:
    a second enqueue with the same key returns the first job (``created=False``).
    ``depends_on``: the jobs (ids, or :class:`EnqueuedJob`) it waits for, at most 100: it is
    queued but not run until every one has succeeded (``ValueError`` naming an unknown one).
    ``on_parent_failure``: ``"cancel"`` (default: a failed parent cancels it), ``"run"`` (it
    runs once every parent has ended, either way) or ``"wait"`` (it waits for a retry of the
    parent to succeed). ``workflow``: an id (1-120 characters) grouping jobs on the pages;
    default, the first parent's. Its handler reads the parents' results as
    ``ctx.parent_results``.
    ``unique_key`` (1-255 characters; Oban's ``unique``, RQ's ``unique``): while a job with
    this key is queued or running (``unique_while="active"``, the default) or only queued
    (``"queued"``), and created less than ``unique_for`` seconds ago (a ``timedelta`` too;
    ``None``: no limit), an enqueue with the key returns that job (``created=False``),
    unchanged, also when enqueues race. ``debounce`` (seconds or a ``timedelta``, needs
    ``unique_key``, not with ``run_at``/``delay``): the job starts ``debounce`` after the last
    enqueue of a burst, with its payload; an enqueue that finds the queued job with the key
    replaces its payload and moves its start (``created=False``); one that finds it claimed
    creates a new job. The type's ``@handler`` may give these as defaults.
    ``connection``: write in that transaction (see the module); without it, commit now.
    """
    spec = _spec(
        dict(
            type=type,
            payload=payload,
            queue=queue,
            priority=priority,
            run_at=run_at,
            delay=delay,
            max_attempts=max_attempts,
            idempotency_key=idempotency_key,
            depends_on=depends_on,
            on_parent_failure=on_parent_failure,
            workflow=workflow,
            unique_key=unique_key,
            unique_for=unique_for,
            unique_while=unique_while,
            debounce=debounce,
        )
    )
    _require_app(connection)
    if (traced := _traceparent()) is not None:
        spec = spec._replace(traceparent=traced)
    within = _connection(connection)
    result = _store.create_job(spec, event_data={"source": SOURCE}, within=within)
    return _enqueued(result)


def enqueue_many(
    jobs: Iterable[Mapping[str, Any]], connection: Connectable | None = None
) -> list[EnqueuedJob]:
    """Queue many jobs in one transaction (the caller's, with ``connection``); returns them in
    order. Each item is a dict of :func:`enqueue`'s argument names (``type`` required). Every
    item is checked before any is written; an error names the item (``jobs[3]: ...``).
    A whole graph in one call: an item's ``depends_on`` may name an earlier item by its index
    (``{"type": "report", "depends_on": [0, 1]}``)."""
    if isinstance(jobs, Mapping | str | bytes) or not isinstance(jobs, Iterable):
        raise TypeError("jobs must be a list of dicts with enqueue's argument names")
    specs = []
    for index, item in enumerate(jobs):
        if not isinstance(item, Mapping):
            raise TypeError(f"jobs[{index}] must be a dict, got {_kind(item)}")
        unknown = sorted(set(item) - set(ARGUMENTS))
        if unknown:
            raise TypeError(f"jobs[{index}]: unknown argument {unknown[0]!r} (known: {', '.join(ARGUMENTS)})")
        if "type" not in item:
            raise TypeError(f"jobs[{index}]: type is required")
        try:
            spec = _spec({name: item.get(name) for name in ARGUMENTS}, index)
        except (TypeError, ValueError) as error:
            raise type(error)(f"jobs[{index}]: {error}") from None
        specs.append(spec)
    _require_app(connection)
    if (traced := _traceparent()) is not None:
        specs = [spec._replace(traceparent=traced) for spec in specs]
    within = _connection(connection)
    results = _store.create_jobs(specs, event_data={"source": SOURCE}, within=within)
    return [_enqueued(result) for result in results]


def handler(
    type: str,
    *,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    timeout: float | timedelta | None = None,
    unique_key: str | Callable[[Any], str] | None = None,
    unique_for: float | timedelta | None = None,
    unique_while: str | None = None,
    debounce: float | timedelta | None = None,
) -> Callable[[Handler], Handler]:
    """Register the decorated ``fn(ctx: JobContext)`` as the handler of ``type``.

    ``queue``, ``priority`` and ``max_attempts``: the type's defaults when an enqueue names
    none (an enqueue's own value wins). ``timeout`` (seconds or a ``timedelta``): a deadline
    per attempt. The worker fails an attempt still running past it (``last_error`` says so;
    retried while attempts remain), and the handler's late result is refused, like any result
    of an attempt that is no longer the worker's; ``ctx.lost`` is true from then on.
    ``unique_key`` (text, or a function of the payload returning it: ``lambda p:
    f"reindex:{p['customer']}"``), ``unique_for``, ``unique_while`` and ``debounce``: the
    unique options of an enqueue of the type that gives none (see :func:`enqueue`); the
    window, states and debounce apply to an enqueue with a key of its own too. Put the
    module in ``JOB_HANDLER_MODULES`` so that every worker imports it.
    """
    _check_type(type)
    if queue is not None:
        _check_queue(queue)
    if priority is not None:
        _check_int("priority", priority, PRIORITY_MIN, PRIORITY_MAX)
    if max_attempts is not None:
        _check_int("max_attempts", max_attempts, 1, INT_MAX)
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    unique = _unique_defaults(unique_key, unique_for, unique_while, debounce)
    if unique is not None:
        UNIQUE_DEFAULTS[type] = unique
    else:
        UNIQUE_DEFAULTS.pop(type, None)
    return _handlers.handler(type, queue=queue, priority=priority, max_attempts=max_attempts, timeout=seconds)


# --- the connection and the app -------------------------------------------------------------


def _connection(connection: Any) -> Connection | None:
    """The SQLAlchemy connection whose transaction the jobs join (``None``: their own)."""
    if connection is None or isinstance(connection, Connection):
        return connection
    session: Session | scoped_session[Session] = connection
    return session.connection()  # a session's connection, in its transaction (begun if none)


def _require_app(connection: Any) -> None:
    """The connection's kind, then the application context, checked before anything is written."""
    if connection is not None and not isinstance(connection, Connection | Session | scoped_session):
        raise TypeError(
            "connection must be a SQLAlchemy Connection, a Session or Flask-SQLAlchemy's db.session, "
            f"got {_kind(connection)}"
        )
    if not has_app_context():
        raise RuntimeError(
            "dashboard.jobs needs a Flask application context: call it inside a request, in "
            "`flask shell`, or within `with app.app_context():`, where app is built by "
            "dashboard.create_app() or has dashboard.JobQueue set up (JobQueue().init_app(app, db=db))"
        )
    if getattr(current_app.extensions.get(MOUNTED), "mount", None) is None:
        raise RuntimeError(
            f"the current Flask app ({current_app.name}) has no job queue: set it up with "
            "dashboard.JobQueue().init_app(app, db=db), or use an app built by dashboard.create_app()"
        )


def _enqueued(result: CreateResult) -> EnqueuedJob:
    job = result.job
    return EnqueuedJob(
        id=job.id,
        type=job.type,
        status=job.status,
        queue=job.queue,
        priority=job.priority,
        available_at=job.available_at,
        max_attempts=job.max_attempts,
        idempotency_key=job.idempotency_key,
        created=result.created,
        depends_on=tuple(job.depends_on or ()),
        workflow=job.workflow,
        waiting_on=job.waiting_on,
        unique_key=job.unique_key,
    )
