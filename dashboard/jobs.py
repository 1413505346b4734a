"""The public Python API: enqueue jobs from application code, and declare the types it runs.

This is the one module of ``dashboard`` meant for application code; anything else under
``dashboard`` may change without notice::

    from dashboard.jobs import JobContext, enqueue, enqueue_many, handler, schedule

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
``ctx.job_id``, ``ctx.attempt``; ``ctx.renew()`` extends the lease, ``ctx.progress(percent,
message)`` reports progress. ``ctx.lost`` turns true once the worker learns the attempt is no
longer its own (the lease ran out and the job was requeued, or the attempt passed its
``timeout``): stop then, since the result will be refused. ``ctx.stopping`` turns true when the
worker was asked to shut down: a handler may finish, or stop at a safe point and raise so the
attempt is retried. ``renew()`` and ``progress()`` return ``False`` once the attempt is lost.
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime, time, timedelta
from typing import Any

from flask import current_app, has_app_context
from sqlalchemy import Connection
from sqlalchemy.orm import Session, scoped_session

from .config.rules import (
    IDEMPOTENCY_KEY_MAX_LENGTH,
    INT_MAX,
    LAST_YEAR,
    MAX_JSON_DEPTH,
    PRIORITY_MAX,
    PRIORITY_MIN,
    TYPE_MAX_LENGTH,
    key_problem,
    queue_problem,
    text_kind,
    type_problem,
    year_problem,
)
from .mount import EXTENSION as MOUNTED
from .runtime import handlers as _handlers
from .runtime.handlers import Handler, JobContext
from .runtime.schedules import schedule
from .store.lifecycle import create as _store
from .store.records import CreateResult
from .store.values import utcnow

__all__ = ["EnqueuedJob", "JobContext", "PayloadNotJSON", "enqueue", "enqueue_many", "handler", "schedule"]

SOURCE = "python"  # the door recorded in the created event
ARGUMENTS = ("type", "payload", "queue", "priority", "run_at", "delay", "max_attempts", "idempotency_key")

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
        )
    )
    _require_app(connection)
    within = _connection(connection)
    result = _store.create_job(spec, event_data={"source": SOURCE}, within=within)
    return _enqueued(result)


def enqueue_many(
    jobs: Iterable[Mapping[str, Any]], connection: Connectable | None = None
) -> list[EnqueuedJob]:
    """Queue many jobs in one transaction (the caller's, with ``connection``); returns them in
    order. Each item is a dict of :func:`enqueue`'s argument names (``type`` required). Every
    item is checked before any is written; an error names the item (``jobs[3]: ...``)."""
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
            spec = _spec({name: item.get(name) for name in ARGUMENTS})
        except (TypeError, ValueError) as error:
            raise type(error)(f"jobs[{index}]: {error}") from None
        specs.append(spec)
    _require_app(connection)
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
) -> Callable[[Handler], Handler]:
    """Register the decorated ``fn(ctx: JobContext)`` as the handler of ``type``.

    ``queue``, ``priority`` and ``max_attempts``: the type's defaults when an enqueue names
    none (an enqueue's own value wins). ``timeout`` (seconds or a ``timedelta``): a deadline
    per attempt. The worker fails an attempt still running past it (``last_error`` says so;
    retried while attempts remain), and the handler's late result is refused, like any result
    of an attempt that is no longer the worker's; ``ctx.lost`` is true from then on. Put the
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
    return _handlers.handler(type, queue=queue, priority=priority, max_attempts=max_attempts, timeout=seconds)


# --- checks -------------------------------------------------------------------------------------


def _spec(args: dict[str, Any]) -> _store.JobSpec:
    """The store's spec of one job, every argument checked, the type's defaults applied (its
    ``queue`` ``None``: the store's default)."""
    job_type = args["type"]
    _check_type(job_type)
    defaults = _handlers.defaults_of(job_type)
    payload = args["payload"]
    if payload is not None:
        payload = _json_payload(payload)
    job_queue = args["queue"] if args["queue"] is not None else defaults.queue
    if job_queue is not None:
        _check_queue(job_queue)
    priority = args["priority"] if args["priority"] is not None else defaults.priority
    if priority is not None:
        _check_int("priority", priority, PRIORITY_MIN, PRIORITY_MAX)
    attempts = args["max_attempts"] if args["max_attempts"] is not None else defaults.max_attempts
    if attempts is not None:
        _check_int("max_attempts", attempts, 1, INT_MAX)
    key = args["idempotency_key"]
    if key is not None:
        if not isinstance(key, str):
            raise TypeError(f"idempotency_key must be a string, got {_kind(key)}")
        if not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX_LENGTH:
            raise ValueError(f"idempotency_key must be 1 to {IDEMPOTENCY_KEY_MAX_LENGTH} characters")
        if problem := key_problem(key) or _text_problem(key):  # control and bidi characters, NUL too
            raise ValueError(f"idempotency_key {problem}")
    available_at = _available_at(args["run_at"], args["delay"])
    return _store.JobSpec(
        type=job_type,
        payload=payload,
        **({"priority": priority} if priority is not None else {}),
        available_at=available_at,
        **({"max_attempts": attempts} if attempts is not None else {}),
        idempotency_key=key,
        queue=job_queue,
    )


def _check_type(job_type: Any) -> None:
    if not isinstance(job_type, str):
        raise TypeError(f"type must be a string, got {_kind(job_type)}")
    if not job_type or len(job_type) > TYPE_MAX_LENGTH:
        raise ValueError(f"type must be 1 to {TYPE_MAX_LENGTH} characters")
    if problem := type_problem(job_type) or _text_problem(job_type):
        raise ValueError(f"type {problem}")


def _check_queue(value: Any) -> None:
    if not isinstance(value, str):
        raise TypeError(f"queue must be a string, got {_kind(value)}")
    if problem := queue_problem(value):
        raise ValueError(f"queue {problem}, got {value!r}")


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {_kind(value)}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}, got {value}")


class PayloadNotJSON(TypeError, ValueError):
    """A value in a payload that is not JSON (a ``datetime``, a ``set``, an object): a
    ``TypeError`` (a value of the wrong kind), and a ``ValueError`` as every other payload
    problem is, so that either ``except`` catches it."""


_TEXT_PROBLEMS = {
    "nul": "holds a NUL character",
    "surrogate": "holds a lone surrogate (text PostgreSQL cannot store)",
}
_BIGGEST = 10**4000  # an integer of more digits is no JSON number Python writes (int_max_str_digits)


def _text_problem(text: str) -> str | None:
    kind = text_kind(text)
    return None if kind is None else _TEXT_PROBLEMS[kind]


def _json_payload(payload: Any) -> Any:
    """``payload`` as it is stored, or the first problem, its place named (``payload at a.b[2]``):
    a value that is not JSON (:class:`PayloadNotJSON`), a key that is not a string
    (``TypeError``), a document that contains itself, nests deeper than ``MAX_JSON_DEPTH``,
    holds NUL, a lone surrogate, NaN, Infinity or an integer of over 4,000 digits
    (``ValueError``). A ``uuid.UUID`` (such as ``ctx.job_id``, passed on to the next job) is
    stored as its text and a tuple as a list, in a copy of the containers that hold one; the
    caller's own objects are never changed."""
    inside: set[int] = set()  # the containers on the way down: one met again is a cycle

    def at(where: str) -> str:
        return f"payload at {where}" if where else "payload"

    def walk(node: Any, where: str, depth: int) -> Any:
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"{at(where)} is nested too deep (more than {MAX_JSON_DEPTH} levels)")
        if node is None or isinstance(node, bool):
            return node
        if isinstance(node, str):
            if problem := _text_problem(node):
                raise ValueError(f"{at(where)} {problem}")
            return node
        if isinstance(node, int):
            if not -_BIGGEST < node < _BIGGEST:
                raise ValueError(f"{at(where)} holds an integer of more than 4,000 digits")
            return node
        if isinstance(node, float):
            if not math.isfinite(node):
                raise ValueError(f"{at(where)} holds NaN or Infinity")
            return node
        if isinstance(node, uuid.UUID):
            return str(node)
        if not isinstance(node, dict | list | tuple):
            raise PayloadNotJSON(
                f"{at(where)} must be JSON (dicts, lists, strings, numbers, booleans, None; a UUID is "
                f"stored as its text), got {_kind(node)}"
                + (": pass value.isoformat()" if isinstance(node, date | time) else "")
            )
        if id(node) in inside:
            raise ValueError(f"{at(where)} contains itself (a cycle): JSON cannot hold one")
        inside.add(id(node))
        try:
            if isinstance(node, dict):
                copy = {}
                for key, child in node.items():
                    if not isinstance(key, str):
                        raise TypeError(f"{at(where)} must have string keys, got {_kind(key)}")
                    if problem := _text_problem(key):
                        raise ValueError(f"{at(where)} has a key that {problem}")
                    copy[key] = walk(child, f"{where}.{key}" if where else key, depth + 1)
                changed = any(copy[key] is not child for key, child in node.items())
                return copy if changed else node
            items = [walk(child, f"{where}[{n}]", depth + 1) for n, child in enumerate(node)]
            changed = isinstance(node, tuple) or any(a is not b for a, b in zip(items, node, strict=True))
            return items if changed else node
        finally:
            inside.discard(id(node))

    return walk(payload, "", 1)


def _available_at(run_at: Any, delay: Any) -> datetime | None:
    if run_at is not None and delay is not None:
        raise ValueError("pass run_at or delay, not both")
    if run_at is not None:
        if not isinstance(run_at, datetime):
            raise TypeError(f"run_at must be a datetime, got {_kind(run_at)}")
        if run_at.tzinfo is None or run_at.utcoffset() is None:
            raise ValueError("run_at must be timezone-aware (datetime.now(UTC) + ..., not datetime.now())")
        if problem := year_problem(run_at):
            raise ValueError(f"run_at {problem}, got {run_at.isoformat()}")
        return run_at
    if delay is None:
        return None
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, int | float) and not isinstance(delay, bool):
        seconds = float(delay)
    else:
        raise TypeError(f"delay must be seconds or a timedelta, got {_kind(delay)}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"delay must be zero or more seconds, got {delay!r}")
    try:
        available_at = utcnow() + timedelta(seconds=seconds)
    except OverflowError:
        available_at = None
    if available_at is None or year_problem(available_at):
        raise ValueError(f"delay is too long (past the year {LAST_YEAR}): {delay!r}")
    return available_at


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


def _kind(value: Any) -> str:
    return type(value).__name__


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
    )
