"""Enqueueing: one job (``create_job``) or many in one transaction (``create_jobs``), each
described by a :class:`JobSpec` and written with its ``created`` event, deduplicated by
idempotency key.

The doors and the Python API call them here, each with the specs it built from its
validated input; the worker's transitions are in :mod:`.claim`, :mod:`.settle` and
:mod:`.attempt`, the operator's in :mod:`.actions`.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection

from ...config.rules import (
    DEFAULT_QUEUE,
    IDEMPOTENCY_KEY_MAX_LENGTH,
    INT_MAX,
    PRIORITY_MAX,
    PRIORITY_MIN,
    TYPE_MAX_LENGTH,
    instant_problem,
    key_problem,
    queue_problem,
    type_problem,
)
from .. import planner_stats
from ..connection import autocommit, fetch_job, fetch_rows, fetch_rows_while, fetch_rows_within, transaction
from ..records import CreateResult, JobRecord
from ..sql import query
from ..values import aware as _aware
from ..values import utcnow
from . import dependents, unique
from .spec import JobSpec as JobSpec
from .spec import new_record, row_params

CREATE, CREATE_MANY = query("create"), query("create_many")
FIND_BY_IDEMPOTENCY_KEY, FIND_BY_IDEMPOTENCY_KEYS = (
    query("find_by_idempotency_key"),
    query("find_by_idempotency_keys"),
)


def create_job(
    spec: JobSpec,
    *,
    event_data: dict[str, Any] | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
    within: Connection | None = None,
) -> CreateResult:
    """Queue the job ``spec`` describes, or return the job that already holds its
    ``idempotency_key``.

    ``spec.available_at`` defaults to ``now``; ``spec.queue`` ``None``: ``default``
    (``ValueError`` naming ``queue`` for a name outside ``limits.QUEUE_NAME_PATTERN``, and
    naming the field for any other value out of its range).
    ``event_data`` is merged into the ``created`` event (who created it, through which door).
    ``conn``: an autocommit connection (``connection.connect()``), the job committed at once.
    ``within``: instead, the caller's connection in its open transaction: the job, its event
    and the workers' wake-up are written there and exist only if the caller commits
    (:func:`connection.fetch_rows_within`).
    """
    now = _aware(now or utcnow(), "now")
    _check(spec)
    if spec.depends_on:
        return dependents.create_one(spec, event_data=event_data, now=now, conn=conn, within=within)
    if spec.unique_key is not None:
        return unique.create(spec, event_data=event_data or {}, now=now, conn=conn, within=within)
    params = row_params(spec, event_data, now)
    if within is not None:
        return _create_within(within, spec, params)
    with autocommit(conn) as conn:
        if fetch_rows(conn, CREATE, params):
            planner_stats.after_insert(1, conn)
            return CreateResult(job=new_record(params["id"], spec, now), created=True)
        existing = fetch_job(conn, FIND_BY_IDEMPOTENCY_KEY, {"idempotency_key": spec.idempotency_key})
    if existing is None:  # the conflicting row vanished between the two statements
        raise RuntimeError("idempotency key conflict with a job that no longer exists")
    return CreateResult(job=existing, created=False)


def _create_within(conn: Connection, spec: JobSpec, params: dict[str, Any]) -> CreateResult:
    """:func:`create_job`'s two statements in the caller's transaction."""
    if fetch_rows_within(conn, CREATE, params):
        planner_stats.after_insert(1, None)
        return CreateResult(job=new_record(params["id"], spec, params["now"]), created=True)
    found = fetch_rows_within(conn, FIND_BY_IDEMPOTENCY_KEY, {"idempotency_key": params["idempotency_key"]})
    if not found:
        raise RuntimeError("idempotency key conflict with a job that no longer exists")
    return CreateResult(job=JobRecord.from_row(found[0]), created=False)


TRACEPARENT_LENGTH = 55  # version, trace id, span id and flags: 00-{32 hex}-{16 hex}-{2 hex}
CREATE_CHUNK = 250  # jobs per statement of a bulk create (docs/benchmarks.md, "Bulk create in chunks")


def _check(spec: JobSpec) -> None:
    if not spec.type or len(spec.type) > TYPE_MAX_LENGTH:
        raise ValueError(f"type must be 1 to {TYPE_MAX_LENGTH} characters")
    if problem := type_problem(spec.type):
        raise ValueError(f"type {problem}")
    if not PRIORITY_MIN <= spec.priority <= PRIORITY_MAX:
        raise ValueError(f"priority must be between {PRIORITY_MIN} and {PRIORITY_MAX}")
    if not 1 <= spec.max_attempts <= INT_MAX:
        raise ValueError(f"max_attempts must be between 1 and {INT_MAX}")
    key = spec.idempotency_key
    if key is not None and not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX_LENGTH:
        raise ValueError(f"idempotency_key must be 1 to {IDEMPOTENCY_KEY_MAX_LENGTH} characters")
    if key is not None and (problem := key_problem(key)):
        raise ValueError(f"idempotency_key {problem}")
    if spec.available_at is not None:
        _aware(spec.available_at, "available_at")
        if problem := instant_problem(spec.available_at):
            raise ValueError(f"available_at {problem}")
    if spec.queue is not None and (problem := queue_problem(spec.queue)):
        raise ValueError(f"queue {problem}")
    unique.check(spec)
    if spec.traceparent is not None and len(spec.traceparent) != TRACEPARENT_LENGTH:
        raise ValueError(f"traceparent must be a W3C traceparent of {TRACEPARENT_LENGTH} characters")


def create_jobs(
    specs: Sequence[JobSpec],
    *,
    queue: str | None = None,
    event_data: dict[str, Any] | None = None,
    now: datetime | None = None,
    conn: Connection | None = None,
    meanwhile: Callable[[list[JobRecord]], object] | None = None,
    within: Connection | None = None,
) -> list[CreateResult]:
    """Queue many jobs in one transaction; all are checked before any is written.

    ``queue``: the queue of every spec that names none (``None``: ``default``); a spec's own
    ``queue`` wins. ``ValueError`` naming ``queue`` for an invalid name.
    ``within``: the caller's connection in its open transaction, which the jobs join instead
    of a transaction of their own (as :func:`create_job`'s ``within``): the chunks go one after
    the other, not pipelined, and nothing commits here.

    Idempotency keys are honoured per job: a key that exists, or that an earlier job of the
    same batch holds, returns that job with ``created=False``. Results follow ``specs``' order;
    the rows are inserted keyed ones last, by key, so concurrent requests sharing keys cannot
    deadlock.
    A new job's record is built from its spec, which is what its row was written from (the
    database answers only which rows it did not insert): reading every new row back, and
    decoding its payload, cost more than the insert itself. Its ``payload`` is the spec's own
    object. The jobs go in ``CREATE_CHUNK`` at a time, pipelined: each chunk is built while the
    server inserts the one before, and the records while it inserts the last
    (``connection.fetch_rows_while``); the transaction commits after all of them.
    ``meanwhile(records)``: the caller's own work on one record per spec (in ``specs``' order),
    each the job as it is if created, run there too, before the server's answer is known: a
    spec whose key turns out to be taken gets the existing job in the results instead, and
    the create may still be refused and rolled back. An exception in it rolls the whole create
    back. The API renders its answer so (``api/outputs.bulk_results_json``).
    """
    now = _aware(now or utcnow(), "now").astimezone(UTC)
    if queue is not None:
        if problem := queue_problem(queue):
            raise ValueError(f"queue {problem}")
        specs = [spec if spec.queue is not None else spec._replace(queue=queue) for spec in specs]
    for index, spec in enumerate(specs):
        try:
            _check(spec)
            dependents.check(spec, index)
        except ValueError as exc:
            raise ValueError(f"job {index}: {exc}") from None
    if not specs:
        return []
    if any(spec.depends_on for spec in specs):
        return _create_graph(specs, event_data=event_data or {}, now=now, conn=conn, within=within)
    if any(spec.unique_key is not None for spec in specs):
        return _create_unique(specs, event_data or {}, now, conn, within, meanwhile)
    # Insertion order: the jobs without a key as sent, then the keyed ones by key (a repeated
    # key's first job still first). Two requests with keys in common then take those keys in
    # the same order, so one waits for the other instead of both deadlocking.
    order = [n for n, spec in enumerate(specs) if spec.idempotency_key is None]
    keyed = sorted(
        (spec.idempotency_key, n) for n, spec in enumerate(specs) if spec.idempotency_key is not None
    )
    order += [n for _, n in keyed]
    ids: dict[int, uuid.UUID] = {}  # filled chunk by chunk, while the server inserts the one before
    rendered: dict[datetime, str] = {}  # a batch mostly shares one available_at (now)

    def iso(spec: JobSpec) -> str:
        value = now if spec.available_at is None else spec.available_at
        text = rendered.get(value)
        if text is None:
            text = rendered[value] = value.astimezone(UTC).isoformat()
        return text

    def row(position: int, n: int) -> dict[str, Any]:
        spec = specs[n]
        job_id = ids[n] = uuid.uuid4()
        built = {
            "n": position,
            "id": str(job_id),
            "type": spec.type,
            "payload": {} if spec.payload is None else spec.payload,
            "priority": spec.priority,
            "available_at": iso(spec),
            "max_attempts": spec.max_attempts,
            "idempotency_key": spec.idempotency_key,
            "queue": spec.queue or DEFAULT_QUEUE,
            "workflow": spec.workflow,
        }
        if spec.traceparent is not None:  # a key left out reads as NULL
            built["traceparent"] = spec.traceparent
        return built

    shared = {"now": now, "event_data": event_data or {}}

    def chunks() -> Iterator[dict[str, Any]]:
        for first in range(0, len(order), CREATE_CHUNK):
            part = range(first, min(first + CREATE_CHUNK, len(order)))
            yield {"rows": [row(position, order[position]) for position in part], **shared}

    def records() -> list[JobRecord]:
        built = [new_record(ids[n], spec, now) for n, spec in enumerate(specs)]
        if meanwhile is not None:
            meanwhile(built)
        return built

    if within is not None:
        skipped = [row for chunk in chunks() for row in fetch_rows_within(within, CREATE_MANY, chunk)]
        new = records()
        taken = {order[row["n"]] for row in skipped if row["n"] is not None}
        existing = {}
        if taken:
            keys = sorted({new[n].idempotency_key for n in taken})
            found = fetch_rows_within(within, FIND_BY_IDEMPOTENCY_KEYS, {"keys": keys})
            existing = {row["idempotency_key"]: JobRecord.from_row(row) for row in found}
        planner_stats.after_insert(len(specs) - len(taken), None)
        return _results(new, taken, existing)
    with autocommit(conn) as conn:
        # One transaction: the server inserts a chunk while the next is built, then while the
        # records are built (they do not depend on its answer). Into a small table, every
        # statement of it is planned afresh (planner_stats: the events' job check).
        skipped, new = fetch_rows_while(
            conn, CREATE_MANY, chunks(), records, first=planner_stats.CUSTOM_PLANS_WHILE_SMALL
        )
        taken = {order[row["n"]] for row in skipped if row["n"] is not None}  # specs not inserted
        existing = {}
        if taken:
            keys = sorted({new[n].idempotency_key for n in taken})
            found = fetch_rows(conn, FIND_BY_IDEMPOTENCY_KEYS, {"keys": keys})
            existing = {row["idempotency_key"]: JobRecord.from_row(row) for row in found}
        planner_stats.after_insert(len(specs) - len(taken), conn)
    return _results(new, taken, existing)


def _create_graph(
    specs: Sequence[JobSpec],
    *,
    event_data: dict[str, Any],
    now: datetime,
    conn: Connection | None,
    within: Connection | None,
) -> list[CreateResult]:
    """:func:`create_jobs` for specs of which some have parents, in one transaction: the jobs
    without parents in chunks first, then each job with parents in ``specs``' order, so a
    parent named by its index (an earlier spec) exists, or was returned for its key, by then."""
    plain = [n for n, spec in enumerate(specs) if not spec.depends_on]
    results: dict[int, CreateResult] = {}

    def write(tx: Connection, nested: dict[str, Any]) -> list[CreateResult]:
        if plain:
            made = create_jobs([specs[n] for n in plain], event_data=event_data, now=now, **nested)
            results.update(zip(plain, made, strict=True))
        for n, spec in enumerate(specs):
            if n in results:
                continue
            parents = [results[p].job.id if isinstance(p, int) else p for p in spec.depends_on]
            try:
                results[n] = dependents.create_dependent(tx, spec, parents, event_data=event_data, now=now)
            except ValueError as exc:
                raise ValueError(f"job {n}: {exc}") from None
            first = spec.depends_on[0]
            if isinstance(first, int) and results[first].job.workflow is None and spec.workflow is None:
                # lock_parents made the first parent start a workflow named by its id: its record says so
                parent = results[first]
                adopted = dataclasses.replace(parent.job, workflow=str(parent.job.id))
                results[first] = CreateResult(job=adopted, created=parent.created)
        return [results[n] for n in range(len(specs))]

    if within is not None:
        return write(within, {"within": within})
    with autocommit(conn) as conn, transaction(conn):
        return write(conn, {"conn": conn})  # the chunks' own transaction nests (a savepoint)


def _create_unique(
    specs: Sequence[JobSpec],
    event_data: dict[str, Any],
    now: datetime,
    conn: Connection | None,
    within: Connection | None,
    meanwhile: Callable[[list[JobRecord]], object] | None,
) -> list[CreateResult]:
    """:func:`create_jobs` for specs of which some carry a unique key, in one transaction: the
    others in chunks first, then each keyed one (:func:`unique.create`) in key order, so two
    requests sharing keys take them in one order. ``meanwhile`` gets the final records."""
    plain = [n for n, spec in enumerate(specs) if spec.unique_key is None]
    keyed = sorted(
        (n for n, spec in enumerate(specs) if spec.unique_key is not None),
        key=lambda n: (specs[n].unique_key, n),
    )
    results: dict[int, CreateResult] = {}

    def write(nested: dict[str, Any]) -> list[CreateResult]:
        if plain:
            made = create_jobs([specs[n] for n in plain], event_data=event_data, now=now, **nested)
            results.update(zip(plain, made, strict=True))
        for n in keyed:
            results[n] = unique.create(specs[n], event_data=event_data, now=now, **nested)
        ordered = [results[n] for n in range(len(specs))]
        if meanwhile is not None:
            meanwhile([result.job for result in ordered])
        return ordered

    if within is not None:
        return write({"within": within})
    with autocommit(conn) as conn, transaction(conn):
        return write({"conn": conn})


def _results(new: list[JobRecord], taken: set[int], existing: dict[str, JobRecord]) -> list[CreateResult]:
    """One result per spec: its new job, or the existing job that holds its key."""
    return [
        CreateResult(job=existing[str(job.idempotency_key)], created=False)
        if n in taken
        else CreateResult(job=job, created=True)
        for n, job in enumerate(new)
    ]
