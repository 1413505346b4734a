"""Operator actions on one job or on many at once: retry, cancel, run now, delete.

Each action is one statement (``actions.sql``), the same for one job (:func:`run_one`) and for
each chunk of a bulk action (:func:`run`), and both answer with one :class:`ActionResult`.

- *retry*: failed -> queued, attempts reset, available now (event ``manual_retry``);
- *cancel*: queued -> failed, ``last_error`` "Cancelled by <actor>" (event ``cancelled``);
- *run now*: a queued job waiting for a later ``available_at`` (scheduled, or backing off) gets
  ``available_at = now`` (event ``rescheduled``, with the time it was waiting for);
- *delete*: a finished job (succeeded or failed) is deleted with its events; a row in
  ``jobs_audit`` per job says who did it, since no event of the job is left to.

A cancel sets ``cancelled_at`` and a retry clears it: the job is ``failed`` meanwhile (one of
the four stored states), and a bulk retry leaves cancelled jobs out unless its selection asks
for them (``cancelled=True``, or ``include_cancelled``).

A bulk action selects with the job list's filters (status, type, ``q``) and works in chunks of
:data:`CHUNK` jobs, each chunk one transaction: ``SELECT ... FOR UPDATE SKIP LOCKED`` picks
jobs nobody holds (a worker's claim never waits behind it, and it never waits for a claim), and
one statement changes them, fenced by status, and writes one event per job. :func:`count` is
the dry run: the same selection, counted.

Why an action always ends, whatever the clocks and the workers do:

- a chunk's selection and its statement read the same time (one clock reading per chunk) and
  the same fence, on rows the chunk holds locked, so every job a chunk picks is changed;
- a job with an event newer than the action's start (every change writes one, ours included)
  is never picked: the start is the newest event id, a sequence value, not a clock reading,
  so a job the action changed, or that a worker or an operator changed meanwhile (a retried job
  that fails again, whatever ``updated_at`` its clock wrote), is left alone, and jobs created
  meanwhile too;
- a chunk that changes nothing ends the action.

So each job is changed at most once, and only jobs that existed when the action began: over N
such jobs an action takes at most N chunks, and N / ``chunk`` plus one when no worker holds a
selected row at the instant a chunk picks.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, func, select

from ...extensions import engine
from ..models import JobEvent
from ..reading import reading
from ..reads.columns import jobs
from ..reads.lists import cancelled_clause, capped_count, filters, matching, types_matching
from ..reads.search import Terms
from ..records import JobRecord
from ..sql import query
from ..values import aware, pg_safe, utcnow

CHUNK = 500
# The status each action takes (delete: either finished one, FINISHED): a live job is never deleted.
ACTION_STATUS = {"retry": "failed", "cancel": "queued", "run_now": "queued", "delete": None}
FINISHED = ("succeeded", "failed")

events = JobEvent.__table__
STATEMENTS = {
    "retry": query("retry"),
    "cancel": query("cancel"),
    "run_now": query("run_now"),
    "delete": query("delete"),
}
TYPES_WITH_SQL = query("types_with_status")


@dataclass(frozen=True)
class Selection:
    """The jobs a bulk action is for: the list's filters.

    ``status``: delete only (``succeeded`` or ``failed``; ``None`` both); the other actions have
    their own. ``cancelled``: ``True`` only cancelled jobs, ``False`` none, ``None`` either; a
    retry with ``None`` leaves them out unless ``include_cancelled``.
    """

    type: str | None = None
    queue: str | None = None  # exact
    terms: Terms | None = None
    status: str | None = None
    cancelled: bool | None = None
    include_cancelled: bool = False


@dataclass(frozen=True)
class ActionResult:
    """What an action changed: ``changed`` jobs, in ``chunks`` transactions.

    An action on one job (:func:`run_one`) also says what became of it: ``status``, its status
    now (a deleted job: the status it had; ``None``: there is no such job), and ``job``, the
    job now (``None`` once deleted, or when there is none).
    """

    action: str
    changed: int
    chunks: int = 1
    status: str | None = None
    job: JobRecord | None = None


def _statement(action: str) -> Any:
    if action not in STATEMENTS:
        raise ValueError(f"action must be one of {', '.join(STATEMENTS)}, not {action!r}")
    return STATEMENTS[action]


def _message(action: str, event_data: dict[str, Any]) -> str:
    actor = event_data.get("actor") or "an operator"
    messages = {"retry": "Manual retry", "cancel": f"Cancelled by {actor}", "run_now": f"Run now by {actor}"}
    return messages.get(action, f"Deleted by {actor}")


def _where(conn: Connection, action: str, selection: Selection, now: datetime) -> list[ColumnElement[bool]]:
    # The job list's builders (reads/lists.py, SQLAlchemy Core), keyed by the selection the doors
    # built from a bulk form or request (web/bulk.py, api/bulk.py) and by the action's status.
    status = ACTION_STATUS[action] or (selection.status if selection.status in FINISHED else None)
    types = types_matching(conn, selection.type) if selection.type else None
    where = filters(status, types, selection.queue)
    if action == "delete" and status is None:
        where.append(jobs.c.status.in_(FINISHED))
    if selection.cancelled is not None:
        where.append(cancelled_clause(selection.cancelled))
    elif action == "retry" and not selection.include_cancelled:
        where.append(cancelled_clause(False))
    if action == "run_now":
        where.append(jobs.c.available_at > now)
    if selection.terms is not None:
        ids = matching(
            selection.terms, list(where), status=status, types=None if selection.queue else types
        ).subquery()
        where.append(jobs.c.id.in_(select(ids.c.id)))
    return where


def count(action: str, selection: Selection, *, now: datetime | None = None, cap: int | None = None) -> int:
    """The dry run: how many jobs :func:`run` would change if nothing changed meanwhile.

    ``cap``: count at most ``cap + 1`` of them (a result above ``cap`` reads "more than
    ``cap``"), so the dry run of a selection of millions reads a bounded number of rows."""
    _statement(action)
    now = aware(now or utcnow(), "now")
    with reading() as conn:  # a read: under the caller's statement timeout, if it set one
        where = _where(conn, action, selection, now)
        if cap is None:
            return conn.execute(select(func.count()).select_from(jobs).where(*where)).scalar_one()
        return capped_count(conn, where, cap + 1)


Clock = Callable[[], datetime]


def _clock(now: datetime | Clock | None) -> Clock:
    if now is None:
        return utcnow
    if callable(now):
        return lambda: aware(now(), "now")
    fixed = aware(now, "now")
    return lambda: fixed


def run(
    action: str,
    selection: Selection,
    *,
    event_data: dict[str, Any],
    chunk: int = CHUNK,
    now: datetime | Clock | None = None,
) -> ActionResult:
    """Apply ``action`` to every selected job, ``chunk`` jobs per transaction.

    ``now``: the time of every chunk, or a clock read once per chunk (default: the system's).
    Ends in a bounded number of chunks (see the module's docstring). ``ValueError`` for an
    unknown ``action``.
    """
    statement = _statement(action)
    clock = _clock(now)
    data = {**pg_safe(event_data), "bulk": True}
    message = pg_safe(_message(action, event_data))
    changed = chunks = 0
    with engine().connect() as conn:
        start = conn.execute(select(func.coalesce(func.max(events.c.id), 0))).scalar_one()
    # Per candidate row, its newest event id: one backward probe of job_event_job_id_idx. (A NOT
    # EXISTS anti-join was planned as a merge over that whole index, a longer walk each chunk.)
    latest = select(func.coalesce(func.max(events.c.id), 0)).where(events.c.job_id == jobs.c.id)
    untouched = latest.scalar_subquery() <= start
    while True:
        moment = clock()
        with engine().begin() as conn:
            where = _where(conn, action, selection, moment)
            picked = select(jobs.c.id).where(*where, untouched).limit(chunk).with_for_update(skip_locked=True)
            ids = list(conn.execute(picked).scalars())
            if not ids:
                break
            params = {"ids": ids, "now": moment, "event_data": data, "message": message}
            done = len(conn.execute(statement, params).all())
        chunks += 1
        changed += done
        if not done:
            break
    return ActionResult(action=action, changed=changed, chunks=chunks)


def run_one(
    action: str,
    job_id: uuid.UUID,
    *,
    event_data: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> ActionResult:
    """``action`` on one job, in one transaction with its event (a delete: its audit row),
    fenced by the status the action takes: a job in another status is left as it is
    (``changed`` 0, ``status`` saying which). ``ValueError`` for an unknown ``action``."""
    statement = _statement(action)
    moment = aware(now or utcnow(), "now")
    data = pg_safe(event_data or {})
    params = {"ids": [job_id], "now": moment, "event_data": data, "message": pg_safe(_message(action, data))}
    the_job = select(jobs).where(jobs.c.id == job_id)
    with engine().begin() as conn:
        if action == "delete":  # nothing is left to read after it: the row, read first, locked
            row = conn.execute(the_job.with_for_update()).mappings().first()
            changed = len(conn.execute(statement, params).all())
        else:
            changed = len(conn.execute(statement, params).all())
            row = conn.execute(the_job).mappings().first()
    job = JobRecord.from_row(row) if row is not None else None
    status = job.status if job is not None else None
    return ActionResult(action, changed, status=status, job=None if action == "delete" and changed else job)


def types_with(status: str, selection: Selection, *, limit: int = 50) -> list[str]:
    """The job types (of the selection's ``type`` filter) that have jobs in ``status``: one
    probe of job_type_created_idx per type, at most ``limit`` types. A bulk retry names those
    no live worker has a handler for."""
    with engine().connect() as conn:
        names = types_matching(conn, selection.type or "")[:limit]
        return list(conn.execute(TYPES_WITH_SQL, {"types": names, "status": status}).scalars())
