"""Operator actions on many jobs at once, and on one: retry, cancel, run now, delete.

- *retry*: failed -> queued, attempts reset, available now (event ``manual_retry``, as a single
  retry);
- *cancel*: queued -> failed, ``last_error`` "Cancelled by <actor>" (event ``cancelled``);
- *run now*: a queued job waiting for a later ``available_at`` (scheduled, or backing off) gets
  ``available_at = now`` (event ``rescheduled``, with the time it was waiting for);
- *delete*: a finished job (succeeded or failed) is deleted with its events; a row in
  ``jobs_audit`` per job says who did it, since no event of the job is left to.

A cancel sets ``cancelled_at`` and a retry clears it: the job is ``failed`` meanwhile (the
reference's four states), and a bulk retry leaves cancelled jobs out unless its selection asks
for them (``cancelled=True``, or ``include_cancelled``).

A bulk action selects with the job list's filters (status, type, ``q``) and works in chunks of
:data:`CHUNK` jobs, each chunk one transaction: ``SELECT ... FOR UPDATE SKIP LOCKED`` picks
jobs nobody holds (a worker's claim never waits behind it, and it never waits for a claim), and
one statement changes them, fenced by status, and writes one event per job. Jobs changed since
the action started (``updated_at``) are never picked again, so a retried job that fails again
meanwhile is not retried twice and the action always ends. :func:`count` is the dry run: the
same selection, counted.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Connection, bindparam, func, select, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.types import Uuid

from ..extensions import db
from .read_jobs import cancelled_clause, types_matching
from .search import Terms, filters, jobs, matching
from .values import aware, pg_safe, utcnow

CHUNK = 500
ACTIONS = ("retry", "cancel", "run_now", "delete")
ACTION_STATUS = {"retry": "failed", "cancel": "queued", "run_now": "queued", "delete": None}
FINISHED = ("succeeded", "failed")  # what delete takes: a live job is never deleted

_IDS = bindparam("ids", type_=ARRAY(Uuid))
_DATA = bindparam("event_data", type_=JSONB)
_WAKE = "wake AS (SELECT pg_notify('jobqueue_jobs', '') WHERE EXISTS (SELECT 1 FROM changed))"

STATEMENTS = {
    "retry": text(
        f"""
        WITH changed AS (
            UPDATE jobs_job
            SET status = 'queued', attempts = 0, available_at = :now, locked_by = NULL,
                locked_until = NULL, last_error = '', result = NULL, finished_at = NULL,
                cancelled_at = NULL, updated_at = :now
            WHERE id = ANY(:ids) AND status = 'failed'
            RETURNING id
        ), ev AS (
            INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
            SELECT id, 'manual_retry', 0, NULL, 'Manual retry', :event_data, :now FROM changed
        ), {_WAKE}
        SELECT (SELECT count(*) FROM changed) AS changed, (SELECT count(*) FROM wake) AS woke
        """
    ).bindparams(_IDS, _DATA),
    "cancel": text(
        """
        WITH changed AS (
            UPDATE jobs_job
            SET status = 'failed', finished_at = :now, cancelled_at = :now, last_error = :message,
                updated_at = :now
            WHERE id = ANY(:ids) AND status = 'queued'
            RETURNING id, attempts
        ), ev AS (
            INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
            SELECT id, 'cancelled', attempts, NULL, :message, :event_data, :now FROM changed
        )
        SELECT (SELECT count(*) FROM changed) AS changed, 0 AS woke
        """
    ).bindparams(_IDS, _DATA),
    "run_now": text(
        f"""
        WITH waiting AS (
            SELECT id, available_at FROM jobs_job
            WHERE id = ANY(:ids) AND status = 'queued' AND available_at > :now
        ), changed AS (
            UPDATE jobs_job AS j SET available_at = :now, updated_at = :now
            FROM waiting WHERE j.id = waiting.id
            RETURNING j.id, j.attempts, waiting.available_at AS was
        ), ev AS (
            INSERT INTO jobs_jobevent (job_id, type, attempt, worker_id, message, data, created_at)
            SELECT id, 'rescheduled', attempts, NULL, :message,
                   :event_data || jsonb_build_object('was_available_at', was), :now
            FROM changed
        ), {_WAKE}
        SELECT (SELECT count(*) FROM changed) AS changed, (SELECT count(*) FROM wake) AS woke
        """
    ).bindparams(_IDS, _DATA),
    # The events go with the job (ON DELETE CASCADE); the audit row stays.
    "delete": text(
        """
        WITH changed AS (
            DELETE FROM jobs_job
            WHERE id = ANY(:ids) AND status IN ('succeeded', 'failed')
            RETURNING id, type, status, attempts, created_at, finished_at, cancelled_at
        ), audit AS (
            INSERT INTO jobs_audit (created_at, action, actor, job_id, job_type, job_status, data)
            SELECT :now, 'job_deleted', COALESCE(:event_data ->> 'actor', ''), id, type, status,
                   :event_data || jsonb_build_object('attempts', attempts, 'created_at', created_at,
                                                     'finished_at', finished_at,
                                                     'cancelled', cancelled_at IS NOT NULL)
            FROM changed
        )
        SELECT (SELECT count(*) FROM changed) AS changed, 0 AS woke
        """
    ).bindparams(_IDS, _DATA),
}


@dataclass(frozen=True)
class Selection:
    """The jobs a bulk action is for: the list's filters.

    ``status``: delete only (``succeeded`` or ``failed``; ``None`` both); the other actions have
    their own. ``cancelled``: ``True`` only cancelled jobs, ``False`` none, ``None`` either; a
    retry with ``None`` leaves them out unless ``include_cancelled``.
    """

    type: str | None = None
    terms: Terms | None = None
    status: str | None = None
    cancelled: bool | None = None
    include_cancelled: bool = False


@dataclass(frozen=True)
class BulkOutcome:
    action: str
    changed: int
    chunks: int


def _message(action: str, event_data: dict[str, Any]) -> str:
    actor = event_data.get("actor") or "an operator"
    messages = {"retry": "Manual retry", "cancel": f"Cancelled by {actor}", "run_now": f"Run now by {actor}"}
    return messages.get(action, f"Deleted by {actor}")


def _where(conn: Connection, action: str, selection: Selection, now: datetime) -> list[ColumnElement[bool]]:
    status = ACTION_STATUS[action] or (selection.status if selection.status in FINISHED else None)
    types = types_matching(conn, selection.type) if selection.type else None
    where = filters(status, types)
    if action == "delete" and status is None:
        where.append(jobs.c.status.in_(FINISHED))
    if selection.cancelled is not None:
        where.append(cancelled_clause(selection.cancelled))
    elif action == "retry" and not selection.include_cancelled:
        where.append(cancelled_clause(False))
    if action == "run_now":
        where.append(jobs.c.available_at > now)
    if selection.terms is not None:
        ids = matching(selection.terms, list(where), status=status, types=types).subquery()
        where.append(jobs.c.id.in_(select(ids.c.id)))
    return where


def count(action: str, selection: Selection, *, now: datetime | None = None) -> int:
    """The dry run: how many jobs :func:`run` would change if nothing changed meanwhile."""
    now = aware(now or utcnow(), "now")
    with db.engine.connect() as conn:
        where = _where(conn, action, selection, now)
        return conn.execute(select(func.count()).select_from(jobs).where(*where)).scalar_one()


def run(
    action: str,
    selection: Selection,
    *,
    event_data: dict[str, Any],
    chunk: int = CHUNK,
    now: datetime | None = None,
) -> BulkOutcome:
    """Apply ``action`` to every selected job, ``chunk`` jobs per transaction."""
    started = aware(now or utcnow(), "now")
    data = {**pg_safe(event_data), "bulk": True}
    message = pg_safe(_message(action, event_data))
    changed = chunks = 0
    while True:
        moment = max(aware(now, "now") if now else utcnow(), started + timedelta(microseconds=1))
        with db.engine.begin() as conn:
            where = _where(conn, action, selection, started)
            picked = (
                select(jobs.c.id)
                .where(*where, jobs.c.updated_at <= started)
                .limit(chunk)
                .with_for_update(skip_locked=True)
            )
            ids = list(conn.execute(picked).scalars())
            if not ids:
                break
            params = {"ids": ids, "now": moment, "event_data": data, "message": message}
            changed += conn.execute(STATEMENTS[action], params).mappings().one()["changed"]
            chunks += 1
    return BulkOutcome(action=action, changed=changed, chunks=chunks)


@dataclass(frozen=True)
class OneOutcome:
    changed: bool
    status: str | None  # the job's status now; None: no such job


def run_one(
    action: str, job_id: uuid.UUID, *, event_data: dict[str, Any], now: datetime | None = None
) -> OneOutcome:
    """``action`` on one job, in one transaction with its event (a delete: its audit row); the
    status fences it. A deleted job's outcome has the status it had."""
    moment = aware(now or utcnow(), "now")
    data = pg_safe(event_data)
    params = {"ids": [job_id], "now": moment, "event_data": data, "message": pg_safe(_message(action, data))}
    status_of = select(jobs.c.status).where(jobs.c.id == job_id)
    with db.engine.begin() as conn:
        deleting = action == "delete"
        before = conn.execute(status_of.with_for_update()).scalar_one_or_none() if deleting else None
        changed = conn.execute(STATEMENTS[action], params).mappings().one()["changed"]
        status = before if deleting else conn.execute(status_of).scalar_one_or_none()
    return OneOutcome(changed=bool(changed), status=status)


TYPES_WITH_SQL = text(
    """
    SELECT t FROM unnest(CAST(:types AS text[])) AS t
    WHERE EXISTS (SELECT 1 FROM jobs_job WHERE type = t AND status = :status)
    ORDER BY t
    """
)


def types_with(status: str, selection: Selection, *, limit: int = 50) -> list[str]:
    """The job types (of the selection's ``type`` filter) that have jobs in ``status``: one
    probe of job_type_created_idx per type, at most ``limit`` types. A bulk retry names those
    no live worker has a handler for."""
    with db.engine.connect() as conn:
        names = types_matching(conn, selection.type or "")[:limit]
        return list(conn.execute(TYPES_WITH_SQL, {"types": names, "status": status}).scalars())
